//! The report of `keepon eval network --plan DIR`: per stream latency and jitter against the plan's bounds, every
//! gate miss, the headline results over seeds and the synchronisation error swept — markdown and CSV.
//!
//! Files written into the output directory: `network-summary.md`, `network.csv` (one row per stream and
//! listener), `gate-misses.csv` (one row per miss) and `network-sensitivity.csv` (the sweeps, as every report's).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use crate::netplan::{self, Params, Realism, Replay};
use crate::plandir::{self, Plan};
use crate::provenance::{label, num, Basis, Sens, LEGEND, SEEDS};

/// Network time replayed by default, ns.
pub const DEFAULT_DURATION_NS: i64 = 200_000_000;

/// Longest replay accepted, ns (every instance's latency is kept in memory).
pub const MAX_DURATION_NS: i64 = 60_000_000_000;

/// Options of `keepon eval network`.
#[derive(Clone, Debug, Default)]
pub struct NetOptions {
    /// Seed of the main run; the seed sweep starts at it. `None` = 1.
    pub seed: Option<u64>,
    /// Network time replayed, ns; `None` = [`DEFAULT_DURATION_NS`].
    pub duration_ns: Option<i64>,
}

/// How the replayed latencies and jitters were obtained: the weakest of their constants (the devices' errors).
fn how_measured() -> String {
    label(Basis::Chosen, "oscillators and sync errors assumed")
}

/// The headline numbers of one replay.
struct Headline {
    passing: usize,
    /// Pairs whose every instance arrived within the plan's latency + guard.
    within_plan: usize,
    rows: usize,
    gate_misses: usize,
    /// Largest (latency − planned latency) of any instance, ns.
    over_plan_ns: f64,
    /// Largest jitter of any (stream, listener), ns.
    jitter_ns: f64,
    /// Smallest (max_latency − largest latency) of any (stream, listener), ns.
    margin_ns: f64,
}

fn headline(r: &Replay) -> Headline {
    let mut h = Headline {
        passing: r.streams.iter().filter(|s| s.pass()).count(),
        within_plan: r.streams.iter().filter(|s| s.within_planned_worst_case()).count(),
        rows: r.streams.len(),
        gate_misses: r.gate_misses.len(),
        over_plan_ns: f64::NEG_INFINITY,
        jitter_ns: 0.0,
        margin_ns: f64::INFINITY,
    };
    for s in &r.streams {
        let [_, _, hi] = s.min_median_max();
        h.over_plan_ns = h.over_plan_ns.max(hi - s.planned_ns);
        h.jitter_ns = h.jitter_ns.max(s.jitter_ns());
        h.margin_ns = h.margin_ns.min(s.max_latency_ns as f64 - hi);
    }
    h
}

/// The per-(stream, listener) rows as CSV.
pub fn csv(r: &Replay, how: &str) -> String {
    let mut s = String::from(
        "stream,talker,listener,switches,frames,delivered,rejected,lat_min_ns,lat_median_ns,lat_max_ns,jitter_ns,\
         planned_latency_ns,guard_ns,max_latency_ns,max_jitter_ns,queued,gate_misses,pass,how_obtained\n",
    );
    for x in &r.streams {
        let [lo, med, hi] = x.min_median_max();
        let rejected: u64 = x.rejected.values().sum();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{rejected},{lo:.3},{med:.3},{hi:.3},{:.3},{:.3},{:.3},{},{},{},{},{},\"{}\"",
            x.stream,
            x.talker,
            x.listener,
            x.switches,
            x.frames,
            x.delivered(),
            x.jitter_ns(),
            x.planned_ns,
            x.guard_ns,
            x.max_latency_ns,
            x.max_jitter_ns,
            x.queued,
            x.gate_misses,
            if x.pass() { "yes" } else { "no" },
            how.replace('"', "'")
        );
    }
    s
}

/// Every gate miss as CSV.
pub fn misses_csv(r: &Replay) -> String {
    let mut s = String::from("switch,port,stream,seq,ready_vs_window_open_ns,why\n");
    for m in &r.gate_misses {
        let _ = writeln!(s, "{},{},{},{},{:.3},{}", m.switch, m.port, m.stream, m.seq, m.ready_vs_plan_ns, m.why);
    }
    s
}

/// The markdown report.
fn render(plan: &Plan, p: &Params, r: &Replay, ideal: &Replay, sens: &Sens) -> String {
    let mut s = String::new();
    let name = plan.dir.file_name().map_or_else(|| plan.dir.display().to_string(), |n| n.to_string_lossy().into());
    let _ = writeln!(s, "# Network replay of plan `{name}` (SIMULATED)\n");
    let _ = writeln!(
        s,
        "{} streams ({} stream–listener pairs), {} keepon talkers, {} switches, guard {} ns; {} ms of network time \
         replayed, seed {}. Talkers: keepon's real station and loop on the simulated NIC with their planned runtime \
         configs, oscillators drawn in ±{} ppm (wander {} ppm/√s) given their exact frequency every ms, plus a \
         residual sync error (AR(1), σ {} ns, τ {} s); switches: 802.1Qbv with the plan's gate lists on clocks off \
         by AR(1) σ {} ns. Latency: last bit received − planned first bit.\n",
        plan.streams.len(),
        r.streams.len(),
        plan.talkers.len(),
        plan.switches.len(),
        plan.guard_ps as f64 / 1e3,
        p.duration_ns / 1_000_000,
        p.seed,
        p.realism.oscillator_ppm,
        p.realism.wander,
        p.realism.talker_sync_sd,
        p.realism.sync_tau / 1e9,
        p.realism.switch_sync_sd,
    );
    let ppm: Vec<f64> = r.oscillators.values().copied().collect();
    if let (Some(lo), Some(hi)) = (ppm.iter().copied().reduce(f64::min), ppm.iter().copied().reduce(f64::max)) {
        let _ = writeln!(s, "Talker oscillators drawn (seed {}): {lo:+.1} … {hi:+.1} ppm.\n", p.seed);
    }
    let h = headline(r);
    let hi = headline(ideal);
    let how = how_measured();
    let _ = writeln!(s, "| result | value | how obtained |");
    let _ = writeln!(s, "|---|---|---|");
    let _ = writeln!(s, "| stream–listener pairs within every bound | {} of {} | {how} |", h.passing, h.rows);
    let _ = writeln!(
        s,
        "| stream–listener pairs within their planned worst case (plan latency + guard) | {} of {} | {how} |",
        h.within_plan, h.rows
    );
    let _ = writeln!(s, "| gate misses | {} | {how} |", h.gate_misses);
    let _ = writeln!(s, "| largest latency − planned latency, ns | {} | {how} |", num(h.over_plan_ns));
    let _ = writeln!(s, "| smallest margin to max_latency, ns | {} | {how} |", num(h.margin_ns));
    let _ = writeln!(s, "| largest jitter, ns | {} | {how} |", num(h.jitter_ns));
    let _ = writeln!(s, "| talker underruns | {} | {how} |", r.underruns);
    let _ = writeln!(
        s,
        "| largest deviation of a wire start from its txtime on a talker NIC (before the sync error), ns | {} | {} |",
        num(r.grid_error_ns),
        label(Basis::Chosen, "oscillators assumed")
    );
    let _ = writeln!(
        s,
        "| ideal devices (exact oscillators, no sync error): pairs within bounds; gate misses; largest latency − \
         planned, ns; largest jitter, ns | {} of {}; {}; {}; {} | {} |",
        hi.passing,
        hi.rows,
        hi.gate_misses,
        num(hi.over_plan_ns),
        num(hi.jitter_ns),
        label(Basis::Predicted, "exact devices")
    );
    let _ = writeln!(s, "\n## Per stream and listener\n");
    let _ = writeln!(
        s,
        "| stream | talker → listener | switches | frames | delivered | latency min / median / max ns | jitter ns \
         | planned latency ns | max_latency ns | max_jitter ns | queued | gate misses | pass | how obtained |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|");
    let plan_how = label(Basis::Chosen, "oscillators and sync errors assumed; plan and bounds from the plan");
    for x in &r.streams {
        let [lo, med, hi] = x.min_median_max();
        let rejected = if x.rejected.is_empty() {
            String::new()
        } else {
            format!(
                " ({} rejected: {})",
                x.rejected.values().sum::<u64>(),
                x.rejected.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
            )
        };
        let _ = writeln!(
            s,
            "| {} | {} → {} | {} | {} | {}{rejected} | {:.1} / {:.1} / {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} |",
            x.stream,
            x.talker,
            x.listener,
            x.switches,
            x.frames,
            x.delivered(),
            lo,
            med,
            hi,
            x.jitter_ns(),
            x.planned_ns,
            x.max_latency_ns,
            x.max_jitter_ns,
            x.queued,
            x.gate_misses,
            if x.pass() { "yes" } else { "**no**" },
            plan_how
        );
    }
    let _ = writeln!(s, "\n## Gate misses\n");
    if r.gate_misses.is_empty() {
        let _ = writeln!(s, "None: every frame found its class's gate open for its whole transmission at every port.");
    } else {
        let _ = writeln!(
            s,
            "{} frames found their gate closed or closing (all in `gate-misses.csv`; the first 50 here):\n",
            r.gate_misses.len()
        );
        let _ = writeln!(s, "| switch | port | stream | instance | ready − window opening, ns | gate | how obtained |");
        let _ = writeln!(s, "|---|---|---|---:|---:|---|---|");
        for m in r.gate_misses.iter().take(50) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.1} | {} | {how} |",
                m.switch, m.port, m.stream, m.seq, m.ready_vs_plan_ns, m.why
            );
        }
    }
    let _ = writeln!(s, "\n{LEGEND}");
    let _ = writeln!(s, "\n## Sensitivity and seeds");
    s.push_str(&sens.render());
    s
}

fn record(sens: &mut Sens, constant: Option<(&str, &str, &str)>, seed: u64, r: &Replay) {
    let h = headline(r);
    let metrics = [
        ("gate misses", h.gate_misses as f64),
        ("pairs failing a bound", (h.rows - h.passing) as f64),
        ("pairs beyond plan latency + guard", (h.rows - h.within_plan) as f64),
        ("largest jitter ns", h.jitter_ns),
        ("largest latency − planned ns", h.over_plan_ns),
    ];
    for (m, v) in metrics {
        match constant {
            None => sens.seed(Basis::Chosen, seed, m, v, ""),
            Some((c, default, value)) => sens.point(c, Basis::Chosen, default, value, m, v, ""),
        }
    }
}

/// `keepon eval network --plan DIR --out OUT`: replay, write the report files, return the summary.
pub fn run(plan_dir: &Path, out: &Path, opts: &NetOptions, progress: &mut dyn FnMut(&str)) -> Result<String, String> {
    let duration_ns = opts.duration_ns.unwrap_or(DEFAULT_DURATION_NS);
    if !(1..=MAX_DURATION_NS).contains(&duration_ns) {
        return Err(format!(
            "--duration {duration_ns} ns: must be within 1 ns..={} s",
            MAX_DURATION_NS / 1_000_000_000
        ));
    }
    let plan = plandir::read_plan(plan_dir).map_err(|e| e.to_string())?;
    fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let seed = opts.seed.unwrap_or(1);
    let p = Params { seed, duration_ns, realism: Realism::default_chosen() };
    let main = netplan::run(&plan, &p, progress)?;
    // The ideal replay, the seeds and the sweep replay a shorter span (at least two of the longest periods).
    let longest = plan.streams.iter().map(|s| s.period_ns).max().unwrap_or(1);
    let short = Params { duration_ns: (duration_ns / 4).max(2 * longest).min(duration_ns), ..p };
    progress("network: the same plan with ideal devices");
    let ideal = netplan::run(&plan, &Params { realism: Realism::ideal(), ..short }, &mut |_| {})?;
    let mut sens = Sens::default();
    for k in 0..SEEDS {
        progress(&format!("network: seed {} of {SEEDS}", k + 1));
        let r = netplan::run(&plan, &Params { seed: seed + k, ..short }, &mut |_| {})?;
        record(&mut sens, None, seed + k, &r);
    }
    let default = format!("{} ns", p.realism.talker_sync_sd);
    for sd in [50.0, 100.0, 200.0, 400.0] {
        progress(&format!("network: talker sync error σ {sd} ns"));
        let realism = Realism { talker_sync_sd: sd, ..p.realism };
        let r = netplan::run(&plan, &Params { realism, ..short }, &mut |_| {})?;
        record(&mut sens, Some(("talker sync error σ", &default, &format!("{sd} ns"))), seed, &r);
    }
    let how = how_measured();
    let write = |file: &str, text: &str| {
        let path = out.join(file);
        fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write("network.csv", &csv(&main, &how))?;
    write("gate-misses.csv", &misses_csv(&main))?;
    write("network-sensitivity.csv", &sens.csv())?;
    let mut summary = render(&plan, &p, &main, &ideal, &sens);
    let _ = writeln!(
        summary,
        "\nThe ideal replay, the seeds and the sweep replay {} ms each (the main run {} ms). Regenerate: `keepon eval network --plan {} \
         --out DIR --seed {seed} --duration {}ms`.",
        short.duration_ns / 1_000_000,
        duration_ns / 1_000_000,
        plan_dir.display(),
        duration_ns / 1_000_000
    );
    write("network-summary.md", &summary)?;
    Ok(summary)
}
