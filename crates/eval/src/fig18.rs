//! The paper's Fig 18: best-effort throughput under traffic isolation — keepon with 25, 50 and 100 % of a
//! 32-slot ring open to best effort (the rest owned by an idle real-time class, so it carries fillers), UDP
//! packets of 200, 400, 600 and 1400 bytes offered at 100…1000 Mb/s, against the stock driver's line-rate
//! bound.
//!
//! keepon is the real station on the simulated NIC, the example loop, slots the size of the packet's frame (the
//! paper's advice, §6.4; with one large slot size small packets would lose to padding — that is Fig 17). A UDP
//! packet of `b` payload bytes is an Ethernet frame of `b + 46` bytes (14 header, 20 IP, 8 UDP, 4 FCS); offered
//! beyond its share, the station's best-effort queue fills and refuses the excess (`queue-full`), as a UDP
//! sender would lose it. Throughput = UDP payload bits that left / simulated time. **The stock driver**
//! (GENET) is the wire's bound only, `min(offered, line rate × b / (b + 66))`: the paper's lower saturation for
//! small packets comes from per-packet CPU cost on the Pi, which is not modelled. CSV rows (one per point, the
//! frames' counts): `packet_bytes,share_pct,offered_mbps,model,sent,refused,throughput_mbps`.

use std::fmt::Write as _;

use crate::keepon::{self, Host, KeeponSetup};
use crate::model::{Background, Stream};
use crate::provenance::{label, Basis, Sens, LEGEND, SEEDS};

/// keepon's slot size for `b`-byte UDP payloads (L2 incl. FCS): the packet's frame.
pub fn slot_bytes(b: u32) -> u32 {
    (b + 46).max(64)
}
/// Ring size (the paper: 32 slots).
pub const RING: u32 = 32;

/// Parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Ring cycles simulated per point (one cycle: 32 slots).
    pub cycles: u64,
    /// UDP payload sizes, bytes.
    pub packets: Vec<u32>,
    /// Best-effort shares of the ring, % (25 = 8 of 32 slots).
    pub shares: Vec<u32>,
    /// Offered UDP payload rates, Mb/s.
    pub offered_mbps: Vec<u32>,
    /// Seed.
    pub seed: u64,
}

impl Params {
    /// The paper's grid with `cycles` ring cycles per point.
    pub fn paper(cycles: u64) -> Params {
        Params {
            cycles,
            packets: vec![200, 400, 600, 1400],
            shares: vec![25, 50, 100],
            offered_mbps: vec![100, 200, 400, 600, 800, 1000],
            seed: 1,
        }
    }
}

/// One point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// UDP payload bytes.
    pub packet: u32,
    /// Best-effort share, % (100 for the stock driver).
    pub share: u32,
    /// Offered rate, Mb/s.
    pub offered: u32,
    /// `keepon` or `stock`.
    pub model: &'static str,
    /// Packets that left.
    pub sent: u64,
    /// Packets refused.
    pub refused: u64,
    /// UDP payload throughput, Mb/s.
    pub throughput: f64,
}

/// What the wire allows for `b`-byte UDP payloads, Mb/s (1 Gb/s, 66 bytes of headers, FCS, preamble, gap).
pub fn line_bound(b: u32) -> f64 {
    1000.0 * f64::from(b) / f64::from(b + 66)
}

/// keepon's best-effort capacity with `share` % of the ring (rounded up to whole slots), Mb/s: one packet
/// per open slot.
pub fn share_bound(b: u32, share: u32) -> f64 {
    let slot_ns = f64::from(slot_bytes(b) + 20) * 8.0;
    let open = (u64::from(RING) * u64::from(share)).div_ceil(100) as f64 / f64::from(RING);
    open * f64::from(b) * 8.0 / slot_ns * 1e3
}

/// Run the grid.
pub fn run(p: &Params, csv: &mut dyn std::io::Write, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>, String> {
    writeln!(csv, "packet_bytes,share_pct,offered_mbps,model,sent,refused,throughput_mbps")
        .map_err(|e| e.to_string())?;
    let mut pts = Vec::new();
    for &b in &p.packets {
        if !(1..=1472).contains(&b) {
            return Err(format!("UDP payload {b} B: must be within 1..=1472 (a standard Ethernet frame)"));
        }
        let slot_ns = i64::from(slot_bytes(b) + 20) * 8;
        let cycle = slot_ns * i64::from(RING);
        let span_ns = (p.cycles as f64) * cycle as f64;
        for &share in &p.shares {
            if !(1..=100).contains(&share) {
                return Err(format!("share {share} %: must be within 1..=100"));
            }
            let open = (u64::from(RING) * u64::from(share)).div_ceil(100) as u32;
            for &r in &p.offered_mbps {
                // Wire fraction of the offered rate: packets/s × wire time per packet.
                let load = f64::from(r) * f64::from(b + 66) / (f64::from(b) * 1000.0);
                let setup = KeeponSetup {
                    stream: Stream { period: cycle, advance: 0, frame_bytes: 64, count: p.cycles },
                    offsets: Vec::new(),
                    background: Background { load, frame_bytes: b + 46 },
                    reserved: (open..RING).collect(),
                    slot_bytes: slot_bytes(b),
                    batch: 8,
                    host: Host::example(),
                    seed: p.seed,
                };
                let run = keepon::run(&setup, &mut |_| {})?;
                let sent = run.background_sent;
                let throughput = sent as f64 * f64::from(b) * 8.0 / span_ns * 1e3;
                let pt = Point {
                    packet: b,
                    share,
                    offered: r,
                    model: "keepon",
                    sent,
                    refused: run.background_rejected,
                    throughput,
                };
                progress(&format!("fig18 {b:>4} B keepon-{share:>3}% offered {r:>4} Mb/s: {throughput:.1} Mb/s"));
                pts.push(pt);
            }
        }
        for &r in &p.offered_mbps {
            let t = f64::from(r).min(line_bound(b));
            let span_ns = p.cycles as f64 * f64::from(RING) * f64::from(slot_bytes(b) + 20) * 8.0;
            let pkts = (t * 1e6 / (f64::from(b) * 8.0) * span_ns / 1e9).round() as u64;
            pts.push(Point {
                packet: b,
                share: 100,
                offered: r,
                model: "stock",
                sent: pkts,
                refused: 0,
                throughput: t,
            });
        }
    }
    for pt in &pts {
        writeln!(
            csv,
            "{},{},{},{},{},{},{:.3}",
            pt.packet, pt.share, pt.offered, pt.model, pt.sent, pt.refused, pt.throughput
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(pts)
}

/// The summary table: keepon's throughput at each point next to its share's bound.
pub fn render(p: &Params, pts: &[Point]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Fig 18 — best-effort UDP throughput under isolation (SIMULATED), {} ring cycles per point ({} slots, each the packet's frame size), seed {}", p.cycles, RING, p.seed);
    let _ = writeln!(s, "paper: best effort follows the configured share (25/50/100 %); keepon-100 % matches GENET\n");
    let _ = writeln!(
        s,
        "| UDP payload B | model | offered Mb/s | throughput Mb/s | bound Mb/s (share or line) | refused | how obtained |"
    );
    let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---|");
    for pt in pts {
        let (name, bound) = if pt.model == "keepon" {
            (
                format!("keepon-{}%", pt.share),
                share_bound(pt.packet, pt.share).min(line_bound(pt.packet)).min(f64::from(pt.offered)),
            )
        } else {
            ("stock (line bound)".to_string(), line_bound(pt.packet).min(f64::from(pt.offered)))
        };
        let _ = writeln!(
            s,
            "| {} | {name} | {} | {:.1} | {:.1} | {} | {} |",
            pt.packet,
            pt.offered,
            pt.throughput,
            bound,
            pt.refused,
            how(pt)
        );
    }
    let _ = writeln!(s, "\n{LEGEND}");
    s
}

/// How a point's throughput was obtained.
fn how(pt: &Point) -> String {
    if pt.model != "keepon" {
        label(Basis::Chosen, "the wire's bound only (no CPU model of the stock driver)")
    } else if pt.throughput
        < 0.98 * share_bound(pt.packet, pt.share).min(line_bound(pt.packet)).min(f64::from(pt.offered))
    {
        label(
            Basis::Chosen,
            "the real station; the shortfall comes from the chosen host loop (20 µs sleeps) against batch × slot",
        )
    } else {
        label(Basis::Predicted, "the real station: its share of the slots")
    }
}

/// keepon's throughput (Mb/s) at one point with `cycles` ring cycles, seed `seed`, host sleep `poll` ns.
fn keepon_point(b: u32, share: u32, offered: u32, cycles: u64, seed: u64, poll: i64) -> Result<f64, String> {
    let slot_ns = i64::from(slot_bytes(b) + 20) * 8;
    let cycle = slot_ns * i64::from(RING);
    let open = (u64::from(RING) * u64::from(share)).div_ceil(100) as u32;
    let load = f64::from(offered) * f64::from(b + 66) / (f64::from(b) * 1000.0);
    let mut host = Host::example();
    host.poll_period = keepon_core::time::Nanos(poll);
    let setup = KeeponSetup {
        stream: Stream { period: cycle, advance: 0, frame_bytes: 64, count: cycles },
        offsets: Vec::new(),
        background: Background { load, frame_bytes: b + 46 },
        reserved: (open..RING).collect(),
        slot_bytes: slot_bytes(b),
        batch: 8,
        host,
        seed,
    };
    let run = keepon::run(&setup, &mut |_| {})?;
    Ok(run.background_sent as f64 * f64::from(b) * 8.0 / (cycles as f64 * cycle as f64) * 1e3)
}

/// The chosen host loop swept, and the seed (at most 1000 ring cycles per point).
pub fn sensitivity(p: &Params, progress: &mut dyn FnMut(&str)) -> Result<Sens, String> {
    let cycles = p.cycles.min(1_000);
    let mut sens = Sens::default();
    for poll in [5_000, 10_000, 15_000, 20_000, 30_000] {
        let t = keepon_point(200, 100, 1000, cycles, p.seed, poll)?;
        sens.point(
            "host loop sleep, µs",
            Basis::Chosen,
            "20",
            &(poll / 1000).to_string(),
            "200 B, keepon-100 %, offered 1000 Mb/s: Mb/s",
            t,
            "below GENET (CPU-bound), no number",
        );
    }
    for k in 0..SEEDS {
        let sd = p.seed.wrapping_add(k);
        sens.seed(
            Basis::Chosen,
            sd,
            "200 B, keepon-100 %, offered 1000: Mb/s",
            keepon_point(200, 100, 1000, cycles, sd, 20_000)?,
            "",
        );
        sens.seed(
            Basis::Predicted,
            sd,
            "600 B, keepon-50 %, offered 1000: Mb/s",
            keepon_point(600, 50, 1000, cycles, sd, 20_000)?,
            "",
        );
    }
    progress("fig18 sensitivity: host loop, seeds");
    Ok(sens)
}
