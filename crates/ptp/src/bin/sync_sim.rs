//! `keepon-sync-sim --out DIR [--rounds N] [--seed S]`: the paper's A.9 sweep and the single- vs dual-clock
//! comparison of §4.2 (simulated time).
//!
//! Writes `DIR/a9_rounds.csv` (every exchange of every point: raw) and `DIR/a9_summary.csv` (per point: medians,
//! maxima, the Eq. 4/Eq. 6 bounds); `DIR/dual_samples.csv` (every clock sample of the first seed, both modes:
//! raw), `DIR/dual_summary.csv` (per mode and seed) and `DIR/dual_convergence.csv` (per mode, seed and second:
//! the median |sync error|, Fig. 22). Plot A.9 with `python -m keepon_plan.plots_sync DIR`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use keepon_core::time::{LinkRate, SlotGeometry};
use keepon_ptp::a9::{run, summarise, A9Config};
use keepon_ptp::dualsim::{self, abs_stats, DualSimConfig};

/// Granularities swept (ns) at the default jitter, and jitters swept (ns) at the default granularity.
const GRANULARITIES: [f64; 6] = [800.0, 1600.0, 3200.0, 6400.0, 9600.0, 12_000.0];
const JITTERS: [f64; 8] = [0.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 3000.0, 5000.0];
/// The other parameter's value during each sweep (the paper does not state it; see validation/a9-sync.md).
const DEFAULT_JITTER: f64 = 1000.0;
const DEFAULT_GRANULARITY: f64 = 100.0;
/// Exchanges ignored at the start (the filter filling up).
const SETTLE: u32 = 50;

struct Args {
    out: PathBuf,
    rounds: u32,
    seed: u64,
}

fn parse() -> Result<Args, String> {
    let mut out = None;
    let mut rounds = 3000;
    let mut seed = 1;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--out" => out = Some(PathBuf::from(val("--out")?)),
            "--rounds" => rounds = val("--rounds")?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--seed" => seed = val("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let out = out.ok_or("--out DIR is required")?;
    if rounds <= SETTLE {
        return Err(format!("--rounds must exceed {SETTLE}"));
    }
    Ok(Args { out, rounds, seed })
}

fn main() -> ExitCode {
    match parse().and_then(|a| sweep(&a).and_then(|()| dual(&a)).map_err(|e| e.to_string())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("keepon-sync-sim: {e}");
            }
            eprintln!("usage: keepon-sync-sim --out DIR [--rounds N (3000)] [--seed S (1)]");
            ExitCode::FAILURE
        }
    }
}

fn sweep(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&a.out)?;
    let mut rounds = BufWriter::new(File::create(a.out.join("a9_rounds.csv"))?);
    let mut summary = BufWriter::new(File::create(a.out.join("a9_summary.csv"))?);
    writeln!(rounds, "sweep,granularity_ns,jitter_ns,window,n,offset_error_ns,drift_ns,freq_ppm,residual_ppm")?;
    writeln!(
        summary,
        "sweep,granularity_ns,jitter_ns,window,rounds,offset_median_ns,offset_max_ns,eq4_bound_ns,drift_mean_ns,drift_median_ns,drift_max_ns,eq6_bound_ns"
    )?;
    let points = GRANULARITIES
        .iter()
        .map(|&g| ("granularity", g, DEFAULT_JITTER))
        .chain(JITTERS.iter().map(|&j| ("jitter", DEFAULT_GRANULARITY, j)));
    for (i, (sweep, g, j)) in points.enumerate() {
        for window in [1usize, 10] {
            let c = A9Config::paper(g, j, window, a.rounds, a.seed.wrapping_mul(1000).wrapping_add(i as u64));
            let r = run(&c).map_err(|e| format!("{c:?}: {e}"))?;
            for x in &r {
                let drift = x.drift.map_or(String::new(), |d| format!("{d:.3}"));
                writeln!(
                    rounds,
                    "{sweep},{g},{j},{window},{},{:.3},{drift},{:.6},{:.6}",
                    x.n, x.offset_error, x.freq_ppm, x.residual_ppm
                )?;
            }
            let s = summarise(&r, SETTLE);
            writeln!(
                summary,
                "{sweep},{g},{j},{window},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1}",
                a.rounds,
                s.offset_median,
                s.offset_max,
                c.eq4_bound(),
                s.drift_mean,
                s.drift_median,
                s.drift_max,
                c.eq6_bound()
            )?;
        }
    }
    rounds.flush()?;
    summary.flush()?;
    println!("wrote {} and {}", a.out.join("a9_rounds.csv").display(), a.out.join("a9_summary.csv").display());
    Ok(())
}

/// Seeds of the dual-clock comparison.
const DUAL_SEEDS: u64 = 5;

fn dual(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let rate = LinkRate::from_mbps(1000).map_err(|e| e.to_string())?;
    let g = SlotGeometry::new(rate, 300).map_err(|e| e.to_string())?;
    let mut samples = BufWriter::new(File::create(a.out.join("dual_samples.csv"))?);
    let mut summary = BufWriter::new(File::create(a.out.join("dual_summary.csv"))?);
    let mut convergence = BufWriter::new(File::create(a.out.join("dual_convergence.csv"))?);
    writeln!(samples, "mode,i,sync_error_ns,stability_ns")?;
    writeln!(
        summary,
        "mode,seed,samples,sync_mean_abs_ns,sync_rms_ns,sync_p99_ns,sync_max_ns,stability_mean_abs_ns,stability_p99_ns,agreed,tx_lagging,rx_lagging,converged_s"
    )?;
    writeln!(convergence, "mode,seed,second,median_abs_sync_error_ns")?;
    for seed in 0..DUAL_SEEDS {
        for is_dual in [false, true] {
            let mode = if is_dual { "dual" } else { "single" };
            let c = DualSimConfig::defaults(g.period(), is_dual, a.seed.wrapping_mul(100).wrapping_add(seed));
            let r = dualsim::run(&c).map_err(|e| format!("{c:?}: {e}"))?;
            if seed == 0 {
                for (i, (s, st)) in r.sync_error.iter().zip(&r.stability).enumerate() {
                    writeln!(samples, "{mode},{i},{s:.1},{st:.1}")?;
                }
            }
            let (sm, sp) = abs_stats(&r.sync_error, 99.0);
            let (_, smax) = abs_stats(&r.sync_error, 100.0);
            let rms = (r.sync_error.iter().map(|x| x * x).sum::<f64>() / r.sync_error.len().max(1) as f64).sqrt();
            let (tm, tp) = abs_stats(&r.stability, 99.0);
            // Convergence (Fig. 22): per second of the whole run, the median |sync error|; converged from the
            // first second within twice the typical median of the last third (the steady state).
            let per_s = (1_000_000_000 / c.sample.0.max(1)) as usize;
            let medians = dualsim::window_medians(&r.from_start, per_s);
            let conv = dualsim::converged(&medians, medians.len() * 2 / 3).map_or(String::new(), |s| s.to_string());
            for (second, m) in medians.iter().enumerate() {
                writeln!(convergence, "{mode},{},{second},{m:.1}", c.seed)?;
            }
            writeln!(
                summary,
                "{mode},{},{},{sm:.1},{rms:.1},{sp:.1},{smax:.1},{tm:.1},{tp:.1},{},{},{},{conv}",
                c.seed,
                r.sync_error.len(),
                r.merges.agreed,
                r.merges.tx_lagging,
                r.merges.rx_lagging
            )?;
        }
    }
    samples.flush()?;
    summary.flush()?;
    convergence.flush()?;
    println!(
        "wrote {}, {} and {}",
        a.out.join("dual_samples.csv").display(),
        a.out.join("dual_summary.csv").display(),
        a.out.join("dual_convergence.csv").display()
    );
    Ok(())
}
