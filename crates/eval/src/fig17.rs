//! The paper's Fig 17: the cost of padding — UDP throughput of 100 B and 500 B payloads across slot sizes.
//!
//! keepon is the real station on the simulated NIC, every slot open to best effort, offered twice what the
//! slots can carry (the excess is refused `queue-full`), so the result is the slots' capacity as the real
//! station delivers it. A packet of `b` payload bytes is a `b + 46`-byte frame, padded to the slot. The ring
//! has 64 slots and the batch covers at least 40 µs of wire (so the example host loop never underruns: this
//! experiment isolates padding, not the poll loop). Throughput = UDP payload bits that left / simulated time;
//! the bound is one packet per slot, `b / (slot + 20)` Gb/s. Beside each point, the same packets on the byte clock
//! (`link.timing = "bytes"`: no slots, no padding; each packet as long as it is, back to back with fillers only
//! where nothing waits), offered the same way over the same span: its throughput does not depend on the slot size
//! and its bound is the line's, `b / (b + 46 + 20)` Gb/s. CSV rows (one per point):
//! `payload_bytes,slot_bytes,sent,refused,throughput_mbps,bound_mbps,bytes_mbps`.

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
    /// The same packets on the byte clock, Mb/s.
    pub bytes: f64,
}

/// The paper's quoted points: (payload, slot, Mb/s).
pub const PAPER: [(u32, u32, f64); 4] = [(100, 200, 218.0), (100, 1500, 73.3), (500, 600, 895.0), (500, 1500, 367.0)];

/// Run the sweeps.
pub fn run(p: &Params, csv: &mut dyn std::io::Write, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>, String> {
    writeln!(csv, "payload_bytes,slot_bytes,sent,refused,throughput_mbps,bound_mbps,bytes_mbps")
        .map_err(|e| e.to_string())?;
    let mut pts = Vec::new();
    for (b, slots) in &p.sweeps {
        let b = *b;
        // The byte clock, once per payload, over the span of the longest slots' run.
        let bytes = byte_clock(b, p.cycles, p.seed)?;
        progress(&format!("fig17 {b} B on the byte clock: {bytes:.1} Mb/s"));
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
            writeln!(
                csv,
                "{b},{slot},{},{},{throughput:.3},{bound:.3},{bytes:.3}",
                run.background_sent, run.background_rejected
            )
            .map_err(|e| e.to_string())?;
            pts.push(Point {
                payload: b,
                slot,
                sent: run.background_sent,
                refused: run.background_rejected,
                throughput,
                bound,
                bytes,
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
        "| UDP payload B | slot B | throughput Mb/s | one packet per slot Mb/s | byte clock Mb/s (any slot) | paper Mb/s (*paper*) | how obtained |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---|---|");
    for pt in pts {
        let paper = PAPER
            .iter()
            .find(|(b, sl, _)| *b == pt.payload && sl.abs_diff(pt.slot) <= 20)
            .map_or(String::new(), |x| format!("{} (slot {} B)", x.2, x.1));
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {paper} | {} |",
            pt.payload,
            pt.slot,
            pt.throughput,
            pt.bound,
            pt.bytes,
            label(Basis::Predicted, "the real station, one packet per slot; no constant tuned")
        );
    }
    let _ = writeln!(s, "\n{LEGEND}");
    s
}

/// UDP payload throughput (Mb/s) of `b`-byte payloads on the byte clock at 1 Gb/s: every moment open to best
/// effort (one class, no windows), offered twice what the line can carry, for as long as `cycles` ring cycles of
/// the longest (1518 B) slots; the host loop as in the slot points (batch covering ≥ 40 µs: a 40 µs lead).
fn byte_clock(b: u32, cycles: u64, seed: u64) -> Result<f64, String> {
    use keepon_core::bytes::windows::{ClassWindows, Windows};
    use keepon_core::bytes::ByteConfig;
    use keepon_core::isolation::ClassId;
    use keepon_core::outcome::{Frame, FrameId};
    use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
    use keepon_nic::driver::{Driver, Event, LoopConfig, Source};
    use keepon_nic::sim::{SimConfig, SimNic};
    use keepon_nic::Nic;

    /// One best-effort packet every `every` ns from `from`, `n` of them.
    struct Offered {
        from: Tai,
        every: i64,
        i: u64,
        n: u64,
        len: usize,
    }
    impl Source for Offered {
        fn next_due(&self) -> Option<Tai> {
            (self.i < self.n).then(|| self.from + Nanos(self.i as i64 * self.every))
        }
        fn take(&mut self) -> Option<Frame<Vec<u8>>> {
            self.i += 1;
            Some(Frame { id: FrameId(self.i - 1), class: ClassId(0), txtime: None, data: vec![0; self.len] })
        }
    }

    let rate = LinkRate::from_mbps(1000).map_err(|e| e.to_string())?;
    let t0 = Tai(1_700_000_000_000_000_000);
    let host = Host::example();
    let mut sim = SimConfig::new(SlotGeometry::new(rate, 1518).map_err(|e| e.to_string())?, t0);
    sim.seed = seed;
    sim.host = host.model;
    let classes = [ClassWindows { name: "be".into(), windows: vec![] }];
    let cfg = ByteConfig {
        rate,
        windows: Windows::new(t0, Nanos::from_us(100), &classes, rate).map_err(|e| e.to_string())?,
        ring: 1024,
        max_frame: 1518,
        lead: Nanos::from_us(40),
        max_pending: 256,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos(0),
        policy: keepon_core::insert::Policy::Strict,
    };
    let span = cycles as i64 * i64::from(RING) * (1518 + 20) * 8;
    let frame = b + 46;
    let every = (i64::from(frame + 20) * 8 / 2).max(1);
    let loop_cfg = LoopConfig { poll_period: host.poll_period, max_duration: Nanos(span + 100_000_000) };
    let mut d = Driver::bytes(SimNic::new(sim), cfg, loop_cfg).map_err(|e| e.to_string())?;
    d.bring_up(&mut |_| {}).map_err(|e| e.to_string())?;
    let from = d.nic.now() + Nanos::from_ms(1);
    let mut src = Offered { from, every, i: 0, n: (span / every) as u64, len: frame as usize - 4 };
    let mut sent = 0u64;
    d.run(&mut src, &mut |e| {
        if let Event::Wire(w) = e {
            if let (Some(_), Some(start)) = (w.frame, w.start) {
                // Only the offered span counts (not the drain of the backlog after it).
                sent += u64::from((start - from).0 < span);
            }
        }
    })
    .map_err(|e| e.to_string())?;
    Ok(sent as f64 * f64::from(b) * 8.0 / span as f64 * 1e3)
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
