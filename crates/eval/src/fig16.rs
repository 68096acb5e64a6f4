//! The paper's Fig 16: TX latency — how close to its txtime an application can hand a frame over and still be
//! sent on time, keepon against the i210-like LaunchTime model (the paper's two curves).
//!
//! (a) period 1 ms, advance 5…50 µs (and 3 µs, below the paper's range, to show where keepon's bound is); (b) advance 100 µs, period 20…100 µs. Same wire and receiver as Fig 15.
//! keepon here runs like the paper's short-advance setting: a busy-polling core ([`Host::busy_poll`]),
//! 230-byte slots (δ = 2 µs, a whole fraction of every period swept), batch 1 (the producer keeps one 2 µs
//! slot posted), a ring of one period whose slot 0 the real-time class owns. A frame keepon cannot place in
//! its slot any more is rejected `late` (it never leaves off-schedule); a LaunchTime frame that misses its
//! launch leaves late. Rows of the CSV: `sweep,x_us,model,seq,txtime_ns,outcome,tx_true_ns,rx_ns`.

use std::fmt::Write as _;

use crate::baseline::LaunchTime;
use crate::keepon::{self, Host, KeeponSetup};
use crate::measure::{deliver, Measured};
use crate::model::{Background, Stream};
use crate::realism::{RealismSpec, Wire};

/// Slot size (L2 incl. FCS) of keepon in this experiment: δ = 2 µs.
pub const SLOT_BYTES: u32 = 230;
/// Real-time frame size.
pub const FRAME_BYTES: u32 = 128;
/// The two models the paper compares.
pub const MODELS: [&str; 2] = ["keepon", "launchtime"];

/// Parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Frames per point of sweep (a).
    pub frames_advance: u64,
    /// Frames per point of sweep (b).
    pub frames_period: u64,
    /// Advances of sweep (a), µs.
    pub advances_us: Vec<i64>,
    /// Periods of sweep (b), µs.
    pub periods_us: Vec<i64>,
    /// keepon's batch.
    pub batch: u32,
    /// Seed.
    pub seed: u64,
    /// Wire and receiver.
    pub realism: RealismSpec,
    /// The LaunchTime model.
    pub launchtime: LaunchTime,
}

impl Params {
    /// The paper's sweeps with `frames` per point.
    pub fn paper(frames: u64) -> Params {
        Params {
            frames_advance: frames,
            frames_period: frames,
            advances_us: vec![3, 5, 10, 20, 30, 40, 50],
            periods_us: vec![20, 40, 60, 80, 100],
            batch: 1,
            seed: 1,
            realism: RealismSpec::default(),
            launchtime: LaunchTime::default(),
        }
    }
}

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// `advance` or `period`.
    pub sweep: &'static str,
    /// The swept value, µs.
    pub x_us: i64,
    /// Model.
    pub model: &'static str,
    /// What the receiver saw.
    pub m: Measured,
}

/// Run both sweeps.
pub fn run(p: &Params, csv: &mut dyn std::io::Write, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>, String> {
    writeln!(csv, "sweep,x_us,model,seq,txtime_ns,outcome,tx_true_ns,rx_ns").map_err(|e| e.to_string())?;
    let mut points = Vec::new();
    let a = p.advances_us.iter().map(|&x| {
        (
            "advance",
            x,
            Stream { period: 1_000_000, advance: x * 1_000, frame_bytes: FRAME_BYTES, count: p.frames_advance },
        )
    });
    let b = p.periods_us.iter().map(|&x| {
        ("period", x, Stream { period: x * 1_000, advance: 100_000, frame_bytes: FRAME_BYTES, count: p.frames_period })
    });
    for (i, (sweep, x, stream)) in a.chain(b).enumerate() {
        if stream.advance <= 0 || stream.period <= 0 {
            return Err(format!("{sweep} {x} µs: must be positive"));
        }
        let seed = p.seed.wrapping_mul(1_000).wrapping_add(i as u64);
        for (mi, model) in MODELS.iter().enumerate() {
            let recs = if mi == 0 {
                let setup = KeeponSetup {
                    stream,
                    offsets: vec![0],
                    background: Background::IDLE,
                    reserved: Vec::new(),
                    slot_bytes: SLOT_BYTES,
                    batch: p.batch,
                    host: Host::busy_poll(),
                    seed,
                };
                let r = keepon::run(&setup, &mut |_| {})?;
                r.records.into_iter().next().unwrap_or_default()
            } else {
                p.launchtime.run(&stream, &Background::IDLE, &p.realism.tx, seed)
            };
            let mut wire = Wire::new(p.realism, seed, 10 * mi as u64);
            let m = deliver(&recs, &mut wire, &format!("{sweep},{x},{model}"), csv)?;
            progress(&format!(
                "fig16 {sweep} {x:>3} µs {model:<10}: jitter {:.2} ns ({} on time, {} late, {} rejected)",
                m.rx.sd, m.sent, m.late, m.lost
            ));
            points.push(Point { sweep, x_us: x, model, m });
        }
    }
    Ok(points)
}

/// The summary table.
pub fn render(p: &Params, points: &[Point]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Fig 16 — TX latency (SIMULATED): (a) period 1 ms, {} frames per point; (b) advance 100 µs, {} frames per point; seed {}", p.frames_advance, p.frames_period, p.seed);
    let _ = writeln!(s, "keepon: busy poll, {SLOT_BYTES} B slots (δ = 2 µs), batch {}; jitter = std dev of inter-arrival at the 8 ns receiver, frames that arrived\n", p.batch);
    let _ = writeln!(s, "| sweep | µs | model | on time | left late | rejected | jitter ns | paper |");
    let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|---|");
    for pt in points {
        let paper = match (pt.sweep, pt.model) {
            ("advance", "keepon") => "≤ 10 ns down to 5 µs",
            ("advance", _) => "needs ≥ 30 µs; ≥ 0.3 µs jitter",
            ("period", "keepon") => "< 10 ns down to 20 µs",
            _ => "fails at every period ≤ 100 µs",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {paper} |",
            pt.sweep, pt.x_us, pt.model, pt.m.sent, pt.m.late, pt.m.lost, pt.m.rx.sd
        );
    }
    s
}
