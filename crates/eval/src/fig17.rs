//! The paper's Fig 17: the cost of padding — UDP throughput of 100 B and 500 B payloads across slot sizes.
//!
//! keepon is the real station on the simulated NIC, every slot open to best effort, offered twice what the
//! slots can carry (the excess is refused `queue-full`), so the result is the slots' capacity as the real
//! station delivers it. A packet of `b` payload bytes is a `b + 46`-byte frame, padded to the slot. The ring
//! has 64 slots and the batch covers at least 40 µs of wire (so the example host loop never underruns: this
//! experiment isolates padding, not the poll loop). Throughput = UDP payload bits that left / simulated time;
//! the bound is one packet per slot, `b / (slot + 20)` Gb/s. CSV rows (one per point):
//! `payload_bytes,slot_bytes,sent,refused,throughput_mbps,bound_mbps`.

use std::fmt::Write as _;

use crate::keepon::{self, Host, KeeponSetup};
use crate::model::{Background, Stream};
use crate::provenance::{label, Basis, Sens, LEGEND, SEEDS};

/// Ring size.
pub const RING: u32 = 64;

/// Parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Ring cycles per point.
    pub cycles: u64,
    /// UDP payloads, bytes, each with its slot sizes (L2 incl. FCS).
    pub sweeps: Vec<(u32, Vec<u32>)>,
    /// Seed.
    pub seed: u64,
}

impl Params {
    /// The paper's payloads over slot sizes from the packet's frame to 1518 B.
    pub fn paper(cycles: u64) -> Params {
        Params {
            cycles,
            sweeps: vec![
                (100, vec![146, 200, 300, 400, 600, 800, 1000, 1200, 1518]),
                (500, vec![546, 600, 800, 1000, 1200, 1518]),
            ],
            seed: 1,
        }
    }
}

/// One point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// UDP payload, bytes.
    pub payload: u32,
    /// Slot size, bytes.
    pub slot: u32,
    /// Packets that left.
    pub sent: u64,
    /// Packets refused.
    pub refused: u64,
    /// UDP payload throughput, Mb/s.
    pub throughput: f64,
    /// One packet per slot, Mb/s.
    pub bound: f64,
}

/// The paper's quoted points: (payload, slot, Mb/s).
pub const PAPER: [(u32, u32, f64); 4] = [(100, 200, 218.0), (100, 1500, 73.3), (500, 600, 895.0), (500, 1500, 367.0)];

/// Run the sweeps.
pub fn run(p: &Params, csv: &mut dyn std::io::Write, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>, String> {
    writeln!(csv, "payload_bytes,slot_bytes,sent,refused,throughput_mbps,bound_mbps").map_err(|e| e.to_string())?;
    let mut pts = Vec::new();
    for (b, slots) in &p.sweeps {
        let b = *b;
        for &slot in slots {
            if b + 46 > slot || slot > 1518 {
                return Err(format!(
                    "slot {slot} B for {b} B payloads: must hold the {} B frame and be ≤ 1518",
                    b + 46
                ));
            }
            let slot_ns = i64::from(slot + 20) * 8;
            let batch = (40_000 / slot_ns + 1).min(i64::from(RING) - 1) as u32;
            let bound = f64::from(b) * 8.0 / slot_ns as f64 * 1e3;
            // Offer twice the slots' capacity: load is a fraction of the line in frame wire time.
            let load = 2.0 * f64::from(b + 66) / f64::from(slot + 20);
            let setup = KeeponSetup {
                stream: Stream { period: slot_ns * i64::from(RING), advance: 0, frame_bytes: 64, count: p.cycles },
                offsets: Vec::new(),
                background: Background { load, frame_bytes: b + 46 },
                reserved: Vec::new(),
                slot_bytes: slot,
                batch,
                host: Host::example(),
                seed: p.seed,
            };
            let run = keepon::run(&setup, &mut |_| {})?;
            let span_ns = p.cycles as f64 * (slot_ns * i64::from(RING)) as f64;
            let throughput = run.background_sent as f64 * f64::from(b) * 8.0 / span_ns * 1e3;
            progress(&format!("fig17 {b} B in {slot} B slots: {throughput:.1} Mb/s (bound {bound:.1})"));
            writeln!(csv, "{b},{slot},{},{},{throughput:.3},{bound:.3}", run.background_sent, run.background_rejected)
                .map_err(|e| e.to_string())?;
            pts.push(Point {
                payload: b,
                slot,
                sent: run.background_sent,
                refused: run.background_rejected,
                throughput,
                bound,
            });
        }
    }
    Ok(pts)
}

/// The summary table.
pub fn render(p: &Params, pts: &[Point]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Fig 17 — padding: UDP throughput vs slot size (SIMULATED), {} ring cycles of {RING} slots per point, seed {}\n", p.cycles, p.seed);
    let _ = writeln!(
        s,
        "| UDP payload B | slot B | throughput Mb/s | one packet per slot Mb/s | paper Mb/s (*paper*) | how obtained |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---|---|");
    for pt in pts {
        let paper = PAPER
            .iter()
            .find(|(b, sl, _)| *b == pt.payload && sl.abs_diff(pt.slot) <= 20)
            .map_or(String::new(), |x| format!("{} (slot {} B)", x.2, x.1));
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.1} | {paper} | {} |",
            pt.payload,
            pt.slot,
            pt.throughput,
            pt.bound,
            label(Basis::Predicted, "the real station, one packet per slot; no constant tuned")
        );
    }
    let _ = writeln!(s, "\n{LEGEND}");
    s
}

/// One point's throughput (Mb/s) with `cycles` ring cycles, seed `seed` and the host's sleep `poll`.
fn throughput(b: u32, slot: u32, cycles: u64, seed: u64, poll: i64) -> Result<f64, String> {
    let slot_ns = i64::from(slot + 20) * 8;
    let batch = (40_000 / slot_ns + 1).min(i64::from(RING) - 1) as u32;
    let load = 2.0 * f64::from(b + 66) / f64::from(slot + 20);
    let mut host = Host::example();
    host.poll_period = keepon_core::time::Nanos(poll);
    let setup = KeeponSetup {
        stream: Stream { period: slot_ns * i64::from(RING), advance: 0, frame_bytes: 64, count: cycles },
        offsets: Vec::new(),
        background: Background { load, frame_bytes: b + 46 },
        reserved: Vec::new(),
        slot_bytes: slot,
        batch,
        host,
        seed,
    };
    let run = keepon::run(&setup, &mut |_| {})?;
    Ok(run.background_sent as f64 * f64::from(b) * 8.0 / (cycles as f64 * (slot_ns * i64::from(RING)) as f64) * 1e3)
}

/// The chosen host loop swept, and the seed (at most 500 ring cycles per point).
pub fn sensitivity(p: &Params, progress: &mut dyn FnMut(&str)) -> Result<Sens, String> {
    let cycles = p.cycles.min(500);
    let mut sens = Sens::default();
    for poll in [5_000, 10_000, 20_000, 30_000] {
        let t = throughput(100, 200, cycles, p.seed, poll)?;
        sens.point(
            "host loop sleep, µs (batch covers ≥ 40 µs)",
            Basis::Chosen,
            "20",
            &(poll / 1000).to_string(),
            "100 B in 200 B slots, Mb/s",
            t,
            "218",
        );
    }
    for k in 0..SEEDS {
        let sd = p.seed.wrapping_add(k);
        sens.seed(Basis::Predicted, sd, "100 B in 200 B slots, Mb/s", throughput(100, 200, cycles, sd, 20_000)?, "218");
        sens.seed(Basis::Predicted, sd, "500 B in 600 B slots, Mb/s", throughput(500, 600, cycles, sd, 20_000)?, "895");
    }
    progress("fig17 sensitivity: host loop, seeds");
    Ok(sens)
}
