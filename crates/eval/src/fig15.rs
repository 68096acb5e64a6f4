//! The paper's Fig 15: TX inter-arrival jitter at a 1 ms period, against frame size, with an idle and a busy
//! background — keepon (the real station on the simulated NIC), the i210-like LaunchTime model and the stock
//! driver + ETF model, side by side in one run, each through the same [`Wire`] model to the same receiver
//! model (an i210: 8 ns timestamps, its own clock).
//!
//! Per frame, the run writes one CSV row: `model,background,frame_bytes,seq,txtime_ns,outcome,tx_true_ns,rx_ns`
//! (`txtime_ns` on the station's own timescale since the stream's epoch, `tx_true_ns` the true time the frame
//! left the PHY, `rx_ns` the receiver's timestamp; the last two empty for a frame that never left).

use std::fmt::Write as _;

use crate::baseline::{LaunchTime, StockEtf};
use crate::keepon::{self, KeeponSetup, SLOT_BYTES};
use crate::model::{Background, Stream, TxRecord};
use crate::provenance::{label, Basis, Sens, LEGEND, SEEDS};
use crate::realism::{RealismSpec, Wire};
use crate::stats::Jitter;

/// The three station models, in report order.
pub const MODELS: [&str; 3] = ["keepon", "launchtime", "stock-etf"];

/// The paper's idle-background jitter (§6.2), ns, in [`MODELS`] order. The busy values are only in the
/// figure ("similar trends"), not in the text.
pub const PAPER_IDLE_NS: [f64; 3] = [3.7, 7.7, 480.1];

/// Parameters of the experiment.
#[derive(Clone, Debug)]
pub struct Params {
    /// Frames per cell (the paper: 10⁶).
    pub frames: u64,
    /// Real-time frame sizes (L2 incl. FCS), bytes; each at most [`SLOT_BYTES`].
    pub sizes: Vec<u32>,
    /// Period, ns (the paper: 1 ms).
    pub period: i64,
    /// Advance of the application, ns (the paper: 100 µs).
    pub advance: i64,
    /// Seed of every draw.
    pub seed: u64,
    /// Shared wire and receiver realism.
    pub realism: RealismSpec,
    /// The LaunchTime model.
    pub launchtime: LaunchTime,
    /// The stock driver model.
    pub stock: StockEtf,
}

impl Params {
    /// The paper's setup with `frames` per cell.
    pub fn paper(frames: u64) -> Params {
        Params {
            frames,
            sizes: vec![64, 256, 512, 1024, 1230],
            period: 1_000_000,
            advance: 100_000,
            seed: 1,
            realism: RealismSpec::default(),
            launchtime: LaunchTime::default(),
            stock: StockEtf::default(),
        }
    }
}

/// One model × background × frame size.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Station model.
    pub model: &'static str,
    /// `idle` or `busy`.
    pub background: &'static str,
    /// Frame size, bytes.
    pub frame_bytes: u32,
    /// Frames that left on time.
    pub sent: u64,
    /// Frames that left, but after their schedule could be kept.
    pub late: u64,
    /// Frames that never left (rejected; the reason is in the CSV).
    pub lost: u64,
    /// Inter-arrival statistics at the receiver.
    pub rx: Jitter,
    /// Inter-arrival statistics of the true PHY times (no receiver quantisation), for comparison.
    pub tx: Jitter,
    /// Background frames that really left (keepon runs real best-effort frames through its ring; the
    /// baselines' background is the blocking model of [`Background::blocking`], `None`).
    pub background_sent: Option<u64>,
}

/// Run every cell. Per-frame rows go to `csv` (`std::io::sink()` to drop them); `progress` gets one line per cell.
pub fn run(p: &Params, csv: &mut dyn std::io::Write, progress: &mut dyn FnMut(&str)) -> Result<Vec<Cell>, String> {
    for &b in &p.sizes {
        if !(64..=SLOT_BYTES).contains(&b) {
            return Err(format!("frame size {b} B: must be within 64..={SLOT_BYTES} (the benchmark's slot size)"));
        }
    }
    writeln!(csv, "model,background,frame_bytes,seq,txtime_ns,outcome,tx_true_ns,rx_ns").map_err(|e| e.to_string())?;
    let mut cells = Vec::new();
    let backgrounds = [("idle", Background::IDLE), ("busy", Background::BUSY)];
    for (bi, (bg_name, bg)) in backgrounds.iter().enumerate() {
        for (si, &bytes) in p.sizes.iter().enumerate() {
            let stream = Stream { period: p.period, advance: p.advance, frame_bytes: bytes, count: p.frames };
            let cell_seed = p.seed.wrapping_mul(1_000).wrapping_add((bi * 100 + si) as u64);
            for (mi, model) in MODELS.iter().enumerate() {
                let mut background_sent = None;
                let recs = match mi {
                    0 => {
                        let setup = KeeponSetup {
                            stream,
                            offsets: vec![0],
                            background: *bg,
                            reserved: Vec::new(),
                            slot_bytes: SLOT_BYTES,
                            batch: 8,
                            host: keepon::Host::example(),
                            seed: cell_seed,
                        };
                        let r = keepon::run(&setup, &mut |f| {
                            progress(&format!("  {model} {bg_name} {bytes} B: {:.0} %", f * 100.0))
                        })?;
                        background_sent = Some(r.background_sent);
                        r.records.into_iter().next().unwrap_or_default()
                    }
                    1 => p.launchtime.run(&stream, bg, &p.realism.tx, cell_seed),
                    _ => p.stock.run(&stream, bg, cell_seed),
                };
                let mut wire = Wire::new(p.realism, cell_seed, 10 * mi as u64);
                let mut cell = measure(model, bg_name, bytes, &recs, &mut wire, csv)?;
                cell.background_sent = background_sent;
                progress(&format!(
                    "fig15 {model:<10} {bg_name} {bytes:>4} B: jitter {:.2} ns ({} sent, {} late, {} lost)",
                    cell.rx.sd, cell.sent, cell.late, cell.lost
                ));
                cells.push(cell);
            }
        }
    }
    Ok(cells)
}

/// Deliver one model's records through its wire and measure them.
fn measure(
    model: &'static str,
    background: &'static str,
    frame_bytes: u32,
    recs: &[TxRecord],
    wire: &mut Wire,
    csv: &mut dyn std::io::Write,
) -> Result<Cell, String> {
    let m = crate::measure::deliver(recs, wire, &format!("{model},{background},{frame_bytes}"), csv)?;
    Ok(Cell {
        model,
        background,
        frame_bytes,
        sent: m.sent,
        late: m.late,
        lost: m.lost,
        rx: m.rx,
        tx: m.tx,
        background_sent: None,
    })
}

/// Jitter averaged over frame sizes, per model and background (the paper quotes one number per model).
pub fn mean_jitter(cells: &[Cell], model: &str, background: &str) -> f64 {
    let v: Vec<f64> =
        cells.iter().filter(|c| c.model == model && c.background == background).map(|c| c.rx.sd).collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The summary table, next to the paper's values.
pub fn render(p: &Params, cells: &[Cell]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Fig 15 — TX inter-arrival jitter (SIMULATED), period {} µs, advance {} µs, {} frames per cell, seed {}",
        p.period / 1000,
        p.advance / 1000,
        p.frames,
        p.seed
    );
    let _ = writeln!(
        s,
        "jitter = standard deviation of consecutive inter-arrival times at an i210-like receiver (8 ns timestamps)\n"
    );
    let _ = writeln!(s, "| model | background | frame B | sent | late | lost | jitter ns (rx) | jitter ns (PHY, unquantised) | min..max inter-arrival − period ns | how obtained |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---|---|");
    for c in cells {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.0}..{:.0} | {} |",
            c.model,
            c.background,
            c.frame_bytes,
            c.sent,
            c.late,
            c.lost,
            c.rx.sd,
            c.tx.sd,
            c.rx.min - p.period as f64,
            c.rx.max - p.period as f64,
            how(c.model, c.background)
        );
    }
    let _ = writeln!(s, "\n| model | idle: ours (mean over sizes) | idle: paper (*paper*, §6.2) | ours/paper | busy: ours | busy: paper | how obtained (idle) | how obtained (busy) |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---|---|---|");
    for (m, paper) in MODELS.iter().zip(PAPER_IDLE_NS) {
        let idle = mean_jitter(cells, m, "idle");
        let busy = mean_jitter(cells, m, "busy");
        let _ = writeln!(
            s,
            "| {m} | {idle:.2} | {paper} | {:.2} | {busy:.2} | figure only (\"similar trends\"), no number in its text | {} | {} |",
            idle / paper,
            how(m, "idle"),
            how(m, "busy")
        );
    }
    let _ = writeln!(s, "\n{LEGEND}");
    s
}

/// How a model's jitter in this experiment was obtained.
pub fn how(model: &str, background: &str) -> String {
    let base = match model {
        "keepon" => label(
            Basis::Chosen,
            "exact slot grid (mechanism), measured through the receiver's 8 ns quantisation of a chosen crystal pair (+12/−2.5 ppm)",
        ),
        "launchtime" => label(Basis::Fitted, "PHC error correlation time 12 ms tuned to 7.7 ns"),
        _ => label(Basis::Fitted, "timer latency log-normal shape 1.0 (median 150 ns) tuned to 480.1 ns"),
    };
    if background == "busy" {
        format!("{base}; {}", label(Basis::Chosen, "busy load 50 % in 1230 B frames"))
    } else {
        base
    }
}

/// Frames per point of the sensitivity sweeps (at most the run's own).
pub const SWEEP_FRAMES: u64 = 5_000;

/// Idle jitter of one model at 1230 B with `frames` frames, seed `seed`, realism `r`, models `lt`/`st`.
fn idle_jitter(model: usize, p: &Params, frames: u64, seed: u64, bg: Background) -> Result<f64, String> {
    let bytes = *p.sizes.last().unwrap_or(&SLOT_BYTES);
    let stream = Stream { period: p.period, advance: p.advance, frame_bytes: bytes, count: frames };
    let recs = match model {
        0 => keepon_records(&stream, bg, seed)?,
        1 => p.launchtime.run(&stream, &bg, &p.realism.tx, seed),
        _ => p.stock.run(&stream, &bg, seed),
    };
    let mut wire = Wire::new(p.realism, seed, 10 * model as u64);
    Ok(crate::measure::deliver(&recs, &mut wire, "", &mut std::io::sink())?.rx.sd)
}

/// keepon's records for one stream (Fig 15's setup).
fn keepon_records(stream: &Stream, bg: Background, seed: u64) -> Result<Vec<TxRecord>, String> {
    let setup = KeeponSetup {
        stream: *stream,
        offsets: vec![0],
        background: bg,
        reserved: Vec::new(),
        slot_bytes: SLOT_BYTES,
        batch: 8,
        host: keepon::Host::example(),
        seed,
    };
    Ok(keepon::run(&setup, &mut |_| {})?.records.into_iter().next().unwrap_or_default())
}

/// Sweep every fitted or chosen constant of Fig 15 and the seed (idle background, the largest frame size,
/// at most [`SWEEP_FRAMES`] frames per point).
pub fn sensitivity(p: &Params, progress: &mut dyn FnMut(&str)) -> Result<Sens, String> {
    let frames = p.frames.min(SWEEP_FRAMES);
    let bytes = *p.sizes.last().unwrap_or(&SLOT_BYTES);
    let mut sens = Sens::default();
    let seed = p.seed.wrapping_mul(1_000).wrapping_add(999);
    // keepon: the receiver's crystal (the transmitter stays at +12 ppm). keepon's frames do not depend on it.
    let stream = Stream { period: p.period, advance: p.advance, frame_bytes: bytes, count: frames };
    let recs = keepon_records(&stream, Background::IDLE, seed)?;
    for rx_ppm in [-20.0, -15.0, -10.0, -7.5, -5.0, -2.5, 0.0, 2.5, 5.0, 10.0, 15.0, 20.0] {
        let mut r = p.realism;
        r.rx.ppm = rx_ppm;
        let mut wire = Wire::new(r, seed, 0);
        let j = crate::measure::deliver(&recs, &mut wire, "", &mut std::io::sink())?.rx.sd;
        sens.point(
            "receiver crystal, ppm (transmitter +12)",
            Basis::Chosen,
            "−2.5",
            &format!("{rx_ppm}"),
            "keepon idle jitter ns",
            j,
            "3.7",
        );
    }
    progress("fig15 sensitivity: crystal pair");
    for (name, tau) in [("1 ms", 1e6), ("3 ms", 3e6), ("12 ms", 12e6), ("30 ms", 30e6), ("100 ms", 1e8), ("1 s", 1e9)] {
        let mut q = p.clone();
        q.launchtime.sync_tau = tau;
        let j = idle_jitter(1, &q, frames, seed, Background::IDLE)?;
        sens.point("i210 PHC error correlation time", Basis::Fitted, "12 ms", name, "i210 idle jitter ns", j, "7.7");
    }
    for sigma in [0.5, 0.75, 1.0, 1.25, 1.5] {
        let mut q = p.clone();
        q.stock.timer_sigma = sigma;
        let j = idle_jitter(2, &q, frames, seed, Background::IDLE)?;
        sens.point(
            "stock timer latency shape σ",
            Basis::Fitted,
            "1.0",
            &format!("{sigma}"),
            "stock idle jitter ns",
            j,
            "480.1",
        );
    }
    for median in [50.0, 150.0, 450.0] {
        let mut q = p.clone();
        q.stock.timer_median = median;
        let j = idle_jitter(2, &q, frames, seed, Background::IDLE)?;
        sens.point(
            "stock timer latency median, ns",
            Basis::Fitted,
            "150",
            &format!("{median}"),
            "stock idle jitter ns",
            j,
            "480.1",
        );
    }
    progress("fig15 sensitivity: baselines' fitted constants");
    for load in [0.1, 0.25, 0.5, 0.75] {
        let bg = Background { load, frame_bytes: 1230 };
        for (mi, m) in MODELS.iter().enumerate() {
            let j = idle_jitter(mi, p, frames, seed, bg)?;
            sens.point(
                "busy background load",
                Basis::Chosen,
                "0.5",
                &format!("{load}"),
                &format!("{m} busy jitter ns"),
                j,
                "\"similar trends\" (figure only)",
            );
        }
    }
    progress("fig15 sensitivity: busy load");
    for k in 0..SEEDS {
        let sd = p.seed.wrapping_add(k);
        let cell_seed = sd.wrapping_mul(1_000).wrapping_add(4);
        for (mi, (m, paper)) in MODELS.iter().zip(PAPER_IDLE_NS).enumerate() {
            let j = idle_jitter(mi, p, frames, cell_seed, Background::IDLE)?;
            let basis = if mi == 0 { Basis::Chosen } else { Basis::Fitted };
            sens.seed(basis, sd, &format!("{m} idle jitter ns ({bytes} B, {frames} frames)"), j, &paper.to_string());
        }
        let j = idle_jitter(1, p, frames, cell_seed, Background::BUSY)?;
        sens.seed(Basis::Chosen, sd, &format!("launchtime busy jitter ns ({bytes} B, {frames} frames)"), j, "");
    }
    progress("fig15 sensitivity: seeds");
    Ok(sens)
}
