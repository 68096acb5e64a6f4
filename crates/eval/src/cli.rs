//! `keepon eval NAME --out DIR`: run one experiment, write its raw per-frame CSV and its summary table (next to
//! the paper's values) into `DIR`. Plots are drawn from the CSV by `python -m keepon_plan.evalplot`.

use std::fs;
use std::io::BufWriter;
use std::path::Path;

use crate::provenance::Sens;
use crate::{casestudy, fig15, fig16, fig17, fig18, fig19, robustness, table3};

/// The experiments `keepon eval` knows.
pub const EXPERIMENTS: [&str; 8] = ["fig15", "fig16", "fig17", "fig18", "fig19", "table3", "casestudy", "robustness"];

/// Run an experiment that streams its raw rows into `out/NAME.csv` and returns its summary, written to
/// `out/NAME-summary.md`.
fn with_csv(
    out: &Path,
    name: &str,
    body: impl FnOnce(&mut dyn std::io::Write) -> Result<String, String>,
) -> Result<String, String> {
    let csv_path = out.join(format!("{name}.csv"));
    let file = fs::File::create(&csv_path).map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
    let mut w = BufWriter::new(file);
    let summary = body(&mut w)?;
    std::io::Write::flush(&mut w).map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
    let sum_path = out.join(format!("{name}-summary.md"));
    fs::write(&sum_path, &summary).map_err(|e| format!("cannot write {}: {e}", sum_path.display()))?;
    Ok(summary)
}

/// Append the sensitivity section to the summary at `out/NAME-summary.md` and write the raw rows to
/// `out/NAME-sensitivity.csv`; returns the whole summary.
fn with_sensitivity(out: &Path, name: &str, summary: String, sens: &Sens, extra: &str) -> Result<String, String> {
    let csv_path = out.join(format!("{name}-sensitivity.csv"));
    fs::write(&csv_path, sens.csv()).map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
    let mut all = summary;
    all.push_str(extra);
    if extra.is_empty() {
        all.push_str(&sens.render());
    }
    let sum_path = out.join(format!("{name}-summary.md"));
    fs::write(&sum_path, &all).map_err(|e| format!("cannot write {}: {e}", sum_path.display()))?;
    Ok(all)
}

/// `--seed` given to an experiment without random draws: refused, not silently ignored.
fn no_seed(name: &str, seed: Option<u64>) -> Result<(), String> {
    match seed {
        Some(s) => Err(format!(
            "--seed {s}: {name} has no random draws (its host model has no jitter and its clock is exact), so a \
             seed would change nothing; run it without --seed"
        )),
        None => Ok(()),
    }
}

/// Largest `--frames` accepted (10⁷ frames at 1 ms are almost three simulated hours per cell).
pub const MAX_FRAMES: u64 = 10_000_000;

/// Largest case study (hyperperiods; every frame's delay is kept in memory).
pub const MAX_HYPERPERIODS: u64 = 1_000_000;

/// Options common to the experiments.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Frames per cell (fig15, fig16), ring cycles per point (fig17, fig18), ms per cell (fig19, table3) or hyperperiods (casestudy); `None` = the
    /// experiment's default.
    pub frames: Option<u64>,
    /// Seed; `None` = 1. Stochastic results are also reported over [`crate::provenance::SEEDS`] seeds from it
    /// on. fig19 and table3 have no random draws and refuse a seed.
    pub seed: Option<u64>,
}

/// Run experiment `name` into `out`; returns the summary (also written to `out/NAME-summary.md`).
pub fn run(name: &str, out: &Path, opts: &EvalOptions) -> Result<String, String> {
    if let Some(f) = opts.frames {
        if !(2..=MAX_FRAMES).contains(&f) {
            return Err(format!("--frames {f}: must be within 2..={MAX_FRAMES}"));
        }
    }
    fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut progress = |line: &str| eprintln!("{line}");
    match name {
        "fig15" => {
            let mut p = fig15::Params::paper(opts.frames.unwrap_or(20_000));
            p.seed = opts.seed.unwrap_or(1);
            let summary = with_csv(out, "fig15", |w| Ok(fig15::render(&p, &fig15::run(&p, w, &mut progress)?)))?;
            let sens = fig15::sensitivity(&p, &mut progress)?;
            with_sensitivity(out, "fig15", summary, &sens, "")
        }
        "fig16" => {
            let mut p = fig16::Params::paper(opts.frames.unwrap_or(5_000));
            p.seed = opts.seed.unwrap_or(1);
            let summary = with_csv(out, "fig16", |w| Ok(fig16::render(&p, &fig16::run(&p, w, &mut progress)?)))?;
            let sens = fig16::sensitivity(&p, &mut progress)?;
            with_sensitivity(out, "fig16", summary, &sens, "")
        }
        "fig17" => {
            let mut p = fig17::Params::paper(opts.frames.unwrap_or(2_000));
            p.seed = opts.seed.unwrap_or(1);
            let summary = with_csv(out, "fig17", |w| Ok(fig17::render(&p, &fig17::run(&p, w, &mut progress)?)))?;
            let sens = fig17::sensitivity(&p, &mut progress)?;
            with_sensitivity(out, "fig17", summary, &sens, "")
        }
        "fig18" => {
            let mut p = fig18::Params::paper(opts.frames.unwrap_or(2_000));
            p.seed = opts.seed.unwrap_or(1);
            let summary = with_csv(out, "fig18", |w| Ok(fig18::render(&p, &fig18::run(&p, w, &mut progress)?)))?;
            let sens = fig18::sensitivity(&p, &mut progress)?;
            with_sensitivity(out, "fig18", summary, &sens, "")
        }
        "fig19" => {
            let span_ms = opts.frames.unwrap_or(50) as i64;
            if span_ms > table3::MAX_SPAN_MS {
                return Err(format!("--frames {span_ms}: fig19 takes ms per point, at most {}", table3::MAX_SPAN_MS));
            }
            no_seed("fig19", opts.seed)?;
            let p = fig19::Params::paper(span_ms);
            let summary = with_csv(out, "fig19", |w| Ok(fig19::render(&p, &fig19::run(&p, w, &mut progress)?)))?;
            let sens = fig19::sensitivity(&p, &mut progress)?;
            with_sensitivity(out, "fig19", summary, &sens, "")
        }
        "table3" => {
            no_seed("table3", opts.seed)?;
            let span_ms = opts.frames.unwrap_or(100) as i64;
            if span_ms > table3::MAX_SPAN_MS {
                return Err(format!("--frames {span_ms}: table3 takes ms per cell, at most {}", table3::MAX_SPAN_MS));
            }
            let model = table3::default_model();
            let span = keepon_core::time::Nanos::from_ms(span_ms);
            let cells = table3::table(model, span)?;
            let mut csv = String::from("batch,poll_period_us,busy_ppm,underruns,paper_pct\n");
            for (i, b) in table3::BATCHES.iter().enumerate() {
                for (j, p) in table3::PERIODS_US.iter().enumerate() {
                    csv.push_str(&format!("{b},{p},{},{},{}\n", cells[i][j].0, cells[i][j].1, table3::PAPER[i][j]));
                }
            }
            let csv_path = out.join("table3.csv");
            fs::write(&csv_path, csv).map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
            progress("table3: host model sweep");
            let (sens, ranges) = table3::sensitivity(model, span)?;
            let summary = table3::render(model, span, &cells, Some(&ranges));
            with_sensitivity(out, "table3", summary, &sens, "")
        }
        "casestudy" => {
            if opts.frames.is_some_and(|f| f > MAX_HYPERPERIODS) {
                return Err(format!("--frames: the case study takes at most {MAX_HYPERPERIODS} hyperperiods"));
            }
            let mut p = casestudy::Params::new(opts.frames.unwrap_or(10_000));
            p.seed = opts.seed.unwrap_or(1);
            let csv_path = out.join("casestudy.csv");
            let file = fs::File::create(&csv_path).map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
            let mut w = BufWriter::new(file);
            let (sched, all) = casestudy::run(&p, &mut w, &mut progress)?;
            std::io::Write::flush(&mut w).map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
            let gcl_path = out.join("gcl.txt");
            fs::write(&gcl_path, sched.taprio(p.net.period))
                .map_err(|e| format!("cannot write {}: {e}", gcl_path.display()))?;
            let summary = casestudy::render(&p, &sched, &all);
            let (sens, md) = casestudy::sensitivity(&p, &mut progress)?;
            with_sensitivity(out, "casestudy", summary, &sens, &md)
        }
        "robustness" => {
            let mut p = robustness::Params::new(opts.frames.unwrap_or(1_000));
            p.seed = opts.seed.unwrap_or(1);
            let mut rows = Vec::new();
            let summary = with_csv(out, "robustness", |w| {
                rows = robustness::run(&p, w, &mut progress)?;
                Ok(robustness::render(&p, &rows))
            })?;
            let sens = robustness::sensitivity(&p, &rows, &mut progress)?;
            with_sensitivity(out, "robustness", summary, &sens, "")
        }
        _ => Err(format!("unknown experiment `{name}`; known: {}", EXPERIMENTS.join(", "))),
    }
}
