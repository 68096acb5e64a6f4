//! `keepon-sync-sim --out DIR [--rounds N] [--seed S]`: the paper's A.9 sweep and the single- vs dual-clock
//! comparison of §4.2 (simulated time).
//!
//! Writes `DIR/a9_rounds.csv` (every exchange of every point: raw) and `DIR/a9_summary.csv` (per point: medians,
//! maxima, the Eq. 4/Eq. 6 bounds); `DIR/dual_samples.csv` (every clock sample of the first seed, both modes:
//! raw), `DIR/dual_summary.csv` (per mode and seed) and `DIR/dual_convergence.csv` (per mode, seed and second:
//! the median |sync error|, Fig. 22); `DIR/fig12.csv` (PTP accuracy by stamping kind and role, every seed and
//! software jitter) and `DIR/fig12-summary.md` (Fig. 12 next to the paper, with the jitter's sensitivity). Plot A.9
//! with `python -m keepon_plan.plots_sync DIR`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use keepon_core::time::{LinkRate, SlotGeometry};
use keepon_ptp::a9::{run, summarise, A9Config};
use keepon_ptp::dualsim::{self, abs_stats, DualSimConfig};
use keepon_ptp::fig12::{self, Kind};

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
    match parse().and_then(|a| sweep(&a).and_then(|()| dual(&a)).and_then(|()| fig12(&a)).map_err(|e| e.to_string())) {
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

/// Seeds of Fig. 12 (from `--seed` on).
const FIG12_SEEDS: u64 = 10;

/// Median and range of `v`.
fn median_range(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (med, v[0], v[n - 1])
}

fn us(ns: f64) -> String {
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else {
        format!("{:.2} µs", ns / 1_000.0)
    }
}

/// Fig. 12's runs: (station, as master, J) and per seed (mean |offset|, mean |true offset|).
type Fig12Runs = Vec<((Kind, bool, f64), Vec<(f64, f64)>)>;

fn fig12(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut csv = BufWriter::new(File::create(a.out.join("fig12.csv"))?);
    writeln!(csv, "kind,role,jitter_ns,seed,offset_mean_ns,true_mean_ns")?;
    // (kind, role, J) → per seed (offset, true)
    let mut runs: Fig12Runs = Vec::new();
    for kind in Kind::ALL {
        for as_master in [true, false] {
            for j in fig12::JITTERS {
                let mut per = Vec::new();
                for i in 0..FIG12_SEEDS {
                    let seed = a.seed.wrapping_mul(1_000).wrapping_add(i);
                    let r = fig12::run(kind, as_master, j, seed).map_err(|e| format!("fig12 {kind:?}: {e}"))?;
                    let role = if as_master { "master" } else { "slave" };
                    writeln!(csv, "{},{role},{j},{seed},{:.1},{:.1}", kind.name(), r.offset_mean, r.true_mean)?;
                    per.push((r.offset_mean, r.true_mean));
                }
                runs.push(((kind, as_master, j), per));
            }
        }
    }
    csv.flush()?;
    let mut md = String::from(
        "# Fig 12: PTP accuracy by stamping and role (simulated)\n\n\
         Generated by `keepon-sync-sim` (`crates/ptp/src/fig12.rs`, the A.9 exchange model with each node's own \
         stamping); see README.md. The station under test against a hardware-stamping peer; Sync + Delay_Req every \
         100 ms, 10 µs path, moving-average servo, 1 000 exchanges (the first 50 left out), 10 seeds: median \
         (min–max).\n\n",
    );
    md.push_str(&format!(
        "## At software jitter J = {} (*chosen*)\n\n\
         | station | role | mean \\|offset\\| the slave reports | mean \\|true offset\\| | paper | how obtained |\n\
         |---|---|---|---|---|---|\n",
        us(fig12::JITTER)
    ));
    for ((kind, as_master, j), per) in &runs {
        if *j != fig12::JITTER {
            continue;
        }
        let (mut o, mut t): (Vec<f64>, Vec<f64>) = per.iter().copied().unzip();
        let ((om, olo, ohi), (tm, tlo, thi)) = (median_range(&mut o), median_range(&mut t));
        let paper = if *as_master { kind.paper_us().0 } else { kind.paper_us().1 };
        let how = match kind {
            Kind::Hardware => "*chosen*: an 8 ns PHC period, no jitter",
            Kind::Software => "*chosen*: J on every stamp",
            Kind::Keepon => "*predicted* exact TX (the slot's time); *chosen*: J on RX stamps",
        };
        md.push_str(&format!(
            "| {} | {} | {} ({}–{}) | {} ({}–{}) | {} µs | {how} |\n",
            kind.name(),
            if *as_master { "master" } else { "slave" },
            us(om),
            us(olo),
            us(ohi),
            us(tm),
            us(tlo),
            us(thi),
            paper
        ));
    }
    md.push_str(
        "\n## Sensitivity: the software jitter J (the only chosen constant that moves the result)\n\n\
         | station | role | mean \\|offset\\| (median of 10 seeds) for J = 0.5, 1, 2, 5, 10 µs | paper | how obtained |\n\
         |---|---|---|---|---|\n",
    );
    for kind in Kind::ALL {
        for as_master in [true, false] {
            let cells: Vec<String> = runs
                .iter_mut()
                .filter(|((k, m, _), _)| *k == kind && *m == as_master)
                .map(|(_, per)| {
                    let mut o: Vec<f64> = per.iter().map(|p| p.0).collect();
                    us(median_range(&mut o).0)
                })
                .collect();
            let paper = if as_master { kind.paper_us().0 } else { kind.paper_us().1 };
            md.push_str(&format!(
                "| {} | {} | {} | {paper} µs | *chosen*: J swept |\n",
                kind.name(),
                if as_master { "master" } else { "slave" },
                cells.join(", ")
            ));
        }
    }
    // The one number J does not set: how much exact TX stamps take off the software error (both scale with J).
    md.push_str(
        "\n## keepon ÷ software (J cancels: a prediction of the model)\n\n\
         | role | keepon ÷ software, mean \\|offset\\| (per J: 0.5, 1, 2, 5, 10 µs) | paper | how obtained |\n\
         |---|---|---|---|\n",
    );
    for as_master in [true, false] {
        let median_of = |kind: Kind, j: f64| {
            let per = &runs.iter().find(|((k, m, jj), _)| *k == kind && *m == as_master && *jj == j).expect("run").1;
            let mut o: Vec<f64> = per.iter().map(|p| p.0).collect();
            median_range(&mut o).0
        };
        let ratios: Vec<String> = fig12::JITTERS
            .iter()
            .map(|&j| format!("{:.2}", median_of(Kind::Keepon, j) / median_of(Kind::Software, j)))
            .collect();
        let (k, w) = (Kind::Keepon.paper_us(), Kind::Software.paper_us());
        let paper = if as_master { k.0 / w.0 } else { k.1 / w.1 };
        md.push_str(&format!(
            "| {} | {} | {paper:.2} | *predicted*: the same RX jitter on both, TX exact on keepon |\n",
            if as_master { "master" } else { "slave" },
            ratios.join(", ")
        ));
    }
    std::fs::write(a.out.join("fig12-summary.md"), md)?;
    println!("wrote {} and {}", a.out.join("fig12.csv").display(), a.out.join("fig12-summary.md").display());
    Ok(())
}
