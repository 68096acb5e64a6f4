//! The paper's §7 case study: the 12 flows of Table 4 across four TSN switches, the gateway flows (F2–F4,
//! F7–F8) sent by keepon, by the stock driver + ETF, or by LaunchTime, every other flow by a TSN NIC
//! (LaunchTime); Table 1 (schedule-to-delivery delay) and Fig 26 (the cascade) from the per-frame records.
//!
//! **Topology (an assumption: the paper's Fig 20(b) is not in its text).** A chain SW3 — SW2 — SW1 — SW4.
//! SW1: RT simulator. SW2: power load, gateway RPi-C (thermocouple). SW3: gateways RPi-A (power supply,
//! power amplifier) and RPi-B (PV simulator, pressure sensor). SW4: structural sensor, GPU workstation. So
//! F2–F4 and F7 cross three switches, F1 and F8 two, F11–F12 one — the paper's delays (12.4, 8.5–8.8, 5.2 µs)
//! have that shape. All flows: 180-byte frames (200 bytes on the wire with preamble and gap, the paper's
//! "200-byte packets and slots": δ = 1.6 µs, 625 slots per ms), 1 ms period, one 1 ms hyperperiod.
//!
//! **End stations.** Software stations (keepon, stock driver) keep network time through PTP with a residual
//! error, AR(1) σ = 100 ns, τ = 1 s (assumption, the same for both). keepon: the real station and loop on the
//! simulated NIC, one station per gateway, each flow its own class owning the ring slot of its offset. Stock
//! driver: the [`StockEtf`] model with `delta` set to its median path latency (the operator's calibration, so
//! frames leave centred on their txtime). LaunchTime (TSN NICs, and the third gateway variant): the
//! [`LaunchTime`] model with its own PHC error. Delay = receiver timestamp (8 ns) − scheduled txtime.

use std::fmt::Write as _;

use crate::baseline::{LaunchTime, StockEtf};
use crate::dist::{Ar1, Draw};
use crate::keepon::{self, KeeponSetup};
use crate::model::{Background, Stream, TxRecord};
use crate::network::{forward, schedule, schedule_in_order, NetSpec, Route, Schedule};
use crate::provenance::{label, num, Basis, Sens, Spread, LEGEND, SEEDS};
use crate::realism::OscillatorSpec;

/// Frame size (L2 incl. FCS): 200 bytes on the wire.
pub const FRAME_BYTES: u32 = 180;
/// keepon's slot period for it, ns (the schedule's grid).
pub const GRID: f64 = 1_600.0;
/// The flows Table 1 reports.
pub const TABLE1_FLOWS: [usize; 7] = [1, 2, 3, 4, 7, 8, 12];
/// The gateway flows (sent by the station under test).
pub const GATEWAY_FLOWS: [usize; 5] = [2, 3, 4, 7, 8];
/// The station under test at the gateways.
pub const SCENARIOS: [&str; 3] = ["keepon", "stock-etf", "launchtime"];
/// The paper's Table 1, µs: flow, GENET (mean, P99, max), KeepON (mean, P99, max).
pub const PAPER_TABLE1: [(usize, [f64; 3], [f64; 3]); 7] = [
    (1, [8.8, 8.8, 8.8], [8.8, 8.8, 12.7]),
    (2, [15.5, 15.6, 19.7], [12.4, 12.4, 16.5]),
    (3, [29.2, 1008.8, 1008.8], [12.4, 12.4, 12.4]),
    (4, [936.7, 1010.5, 1010.5], [12.1, 12.1, 12.1]),
    (7, [980.6, 1009.2, 1009.2], [12.4, 12.4, 12.4]),
    (8, [10.3, 10.5, 12.4], [8.5, 8.5, 8.6]),
    (12, [5.2, 5.2, 5.2], [5.2, 5.2, 5.2]),
];

/// The flows the paper's stock driver displaced (Table 1): F3, F4 and F7, and no other.
pub const PAPER_DISPLACED: [usize; 3] = [3, 4, 7];

/// The end stations, in a fixed order (their PTP error streams are numbered by it).
pub const NODES: [&str; 7] = ["power-load", "rpi-a", "rpi-b", "rpi-c", "rt-sim", "struct-sensor", "gpu"];

/// Table 4's flows as routes (index 0 = F1), on the assumed chain.
pub fn routes() -> Vec<Route> {
    routes_on("SW3", "SW2")
}

/// Table 4's flows with gateway RPi-B behind switch `b` (SW3 with RPi-A, or SW5, a second leaf under SW2) and the
/// power load and RPi-C on switch `near` (SW2, or SW6, a leaf of SW1): every such topology keeps the paper's hop
/// counts (F2–F4 and F7 cross three switches, F1 and F8 two, F12 one) and changes which flows share a port.
pub fn routes_on(b: &'static str, near: &'static str) -> Vec<Route> {
    let r = |n: &[&'static str]| Route { nodes: n.to_vec() };
    vec![
        r(&["power-load", near, "SW1", "rt-sim"]),
        r(&["rpi-a", "SW3", "SW2", "SW1", "rt-sim"]),
        r(&["rpi-a", "SW3", "SW2", "SW1", "rt-sim"]),
        r(&["rpi-b", b, "SW2", "SW1", "rt-sim"]),
        r(&["rt-sim", "SW1", near, "power-load"]),
        r(&["rt-sim", "SW1", "SW2", "SW3", "rpi-a"]),
        r(&["rpi-b", b, "SW2", "SW1", "rt-sim"]),
        r(&["rpi-c", near, "SW1", "rt-sim"]),
        r(&["rt-sim", "SW1", near, "rpi-c"]),
        r(&["rt-sim", "SW1", "SW2", b, "rpi-b"]),
        r(&["struct-sensor", "SW4", "gpu"]),
        r(&["gpu", "SW4", "struct-sensor"]),
    ]
}

/// The topologies the paper's text allows that [`topology_sweep`] tries: (name, RPi-B's switch, the power load's
/// and RPi-C's switch).
pub const TOPOLOGIES: [(&str, &str, &str); 4] = [
    ("chain (the report's)", "SW3", "SW2"),
    ("RPi-B on its own leaf", "SW5", "SW2"),
    ("power load + RPi-C on a leaf of SW1", "SW3", "SW6"),
    ("both", "SW5", "SW6"),
];

/// Parameters of the case study.
#[derive(Clone, Debug)]
pub struct Params {
    /// Hyperperiods simulated.
    pub hyperperiods: u64,
    /// Seed.
    pub seed: u64,
    /// Network timing.
    pub net: NetSpec,
    /// Residual PTP error of the software stations, σ ns (AR(1), τ 1 s).
    pub sw_sync_sd: f64,
    /// Application advance, ns.
    pub advance: i64,
    /// LaunchTime model.
    pub launchtime: LaunchTime,
    /// Stock driver model.
    pub stock: StockEtf,
}

impl Params {
    /// The defaults for `hyperperiods`.
    pub fn new(hyperperiods: u64) -> Params {
        Params {
            hyperperiods,
            seed: 1,
            net: NetSpec { propagation: 10.0, switching: 2_600.0, guard: 500.0, frame_bytes: FRAME_BYTES, period: 1e6 },
            sw_sync_sd: 100.0,
            advance: 100_000,
            launchtime: LaunchTime::default(),
            stock: StockEtf::default(),
        }
    }
}

/// Every scenario's frames, by scenario name.
pub type Scenarios = Vec<(&'static str, Vec<FrameDelay>)>;

/// One delivered (or lost) frame of one scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameDelay {
    /// Flow number (1-based, as in the paper).
    pub flow: usize,
    /// Instance.
    pub seq: u64,
    /// Receiver timestamp − scheduled txtime, ns; `None` if the frame never arrived.
    pub delay: Option<f64>,
}

/// Mean, P99 and max of a flow's delays, ns.
pub fn delay_stats(v: &[f64]) -> [f64; 3] {
    if v.is_empty() {
        return [f64::NAN; 3];
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let p99 = s[((s.len() as f64 * 0.99).ceil() as usize).clamp(1, s.len()) - 1];
    [s.iter().sum::<f64>() / s.len() as f64, p99, s[s.len() - 1]]
}

/// Network-time departures of one station model's records (txtime shifted onto the flow's offset).
fn shift(recs: &[TxRecord], offset: f64, period: f64, base: impl Fn(u64) -> f64) -> Vec<(u64, f64)> {
    recs.iter().filter_map(|r| r.wire.map(|w| (r.seq, w - base(r.seq) + offset + r.seq as f64 * period))).collect()
}

/// Run one scenario (the station under test at the gateways); frames in flow, seq order.
pub fn run_scenario(
    p: &Params,
    scenario: &str,
    sched: &Schedule,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<FrameDelay>, String> {
    run_scenario_on(p, scenario, &routes(), sched, progress)
}

/// [`run_scenario`] on other `routes` (the same flows and end stations).
pub fn run_scenario_on(
    p: &Params,
    scenario: &str,
    routes: &[Route],
    sched: &Schedule,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<FrameDelay>, String> {
    let period = p.net.period;
    let n = p.hyperperiods;
    let exact = OscillatorSpec { offset_ns: 0.0, ppm: 0.0, adev_1s: 0.0 };
    let stream = Stream { period: period as i64, advance: p.advance, frame_bytes: FRAME_BYTES, count: n };
    let mut sent: Vec<Vec<(u64, f64)>> = vec![Vec::new(); routes.len()];
    // Software stations' PTP error, one process per talker.
    let sw_error = |talker: usize, times: &mut Vec<(u64, f64)>| {
        let mut d = Draw::new(p.seed, 500 + talker as u64);
        let mut e = Ar1::new(p.sw_sync_sd, 1e9, &mut d);
        for (_, t) in times.iter_mut() {
            *t += e.step(period, &mut d);
        }
    };
    let gateway = |f: usize| GATEWAY_FLOWS.contains(&(f + 1));
    let talker_id = |f: usize| NODES.iter().position(|n| *n == routes[f].nodes[0]).unwrap_or(NODES.len());
    // keepon: one real station per gateway node.
    if scenario == "keepon" {
        let mut talkers: Vec<&str> = GATEWAY_FLOWS.iter().map(|&f| routes[f - 1].nodes[0]).collect();
        talkers.dedup();
        for t in &talkers {
            let flows: Vec<usize> = (0..routes.len()).filter(|&f| gateway(f) && routes[f].nodes[0] == *t).collect();
            let setup = KeeponSetup {
                stream,
                offsets: flows.iter().map(|&f| sched.offsets[f].round() as i64).collect(),
                background: Background::IDLE,
                reserved: Vec::new(),
                slot_bytes: FRAME_BYTES,
                batch: 32,
                host: keepon::Host::example(),
                seed: p.seed.wrapping_mul(100).wrapping_add(flows[0] as u64),
            };
            progress(&format!(
                "casestudy keepon station {t}: flows {:?}",
                flows.iter().map(|f| f + 1).collect::<Vec<_>>()
            ));
            let run = keepon::run(&setup, &mut |_| {})?;
            for (i, &f) in flows.iter().enumerate() {
                let mut v: Vec<(u64, f64)> = run.records[i].iter().filter_map(|r| r.wire.map(|w| (r.seq, w))).collect();
                sw_error(talker_id(f), &mut v);
                sent[f] = v;
            }
        }
    }
    for (f, slot) in sent.iter_mut().enumerate() {
        let seed = p.seed.wrapping_mul(100).wrapping_add(f as u64);
        let off = sched.offsets[f];
        let base = |seq: u64| (seq + 1) as f64 * period;
        if gateway(f) && scenario == "keepon" {
            continue;
        }
        if gateway(f) && scenario == "stock-etf" {
            let recs = p.stock.run(&stream, &Background::IDLE, seed);
            // The operator's calibration: delta = the median path latency, so frames leave centred on txtime.
            let mut lat: Vec<f64> = recs.iter().filter_map(|r| r.wire.map(|w| w - r.txtime)).collect();
            lat.sort_by(f64::total_cmp);
            let median = lat.get(lat.len() / 2).copied().unwrap_or(0.0);
            let mut v = shift(&recs, off - median, period, base);
            sw_error(talker_id(f), &mut v);
            *slot = v;
        } else {
            let recs = p.launchtime.run(&stream, &Background::IDLE, &exact, seed);
            *slot = shift(&recs, off, period, base);
        }
    }
    let delivered = forward(&p.net, routes, sched, &sent);
    let mut got = vec![vec![None; n as usize]; routes.len()];
    for d in delivered {
        if let Some(slot) = got[d.flow].get_mut(d.seq as usize) {
            let rx = (d.arrival / 8.0).floor() * 8.0;
            *slot = Some(rx - (sched.offsets[d.flow] + d.seq as f64 * period));
        }
    }
    Ok(got
        .into_iter()
        .enumerate()
        .flat_map(|(f, v)| {
            v.into_iter().enumerate().map(move |(seq, delay)| FrameDelay { flow: f + 1, seq: seq as u64, delay })
        })
        .collect())
}

/// Every scenario: the schedule, and per scenario its frames. Rows go to `csv`
/// (`scenario,flow,seq,delay_ns`, empty delay for a frame that never arrived).
pub fn run(
    p: &Params,
    csv: &mut dyn std::io::Write,
    progress: &mut dyn FnMut(&str),
) -> Result<(Schedule, Scenarios), String> {
    let sched = schedule(&p.net, &routes(), GRID)?;
    writeln!(csv, "scenario,flow,seq,delay_ns").map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    for s in SCENARIOS {
        progress(&format!("casestudy: gateways run {s}, {} hyperperiods", p.hyperperiods));
        let frames = run_scenario(p, s, &sched, progress)?;
        for f in &frames {
            let d = f.delay.map_or(String::new(), |d| format!("{d:.0}"));
            writeln!(csv, "{s},{},{},{d}", f.flow, f.seq).map_err(|e| e.to_string())?;
        }
        all.push((s, frames));
    }
    Ok((sched, all))
}

/// Per-scenario, per-flow delay statistics (µs) for the flows of Table 1.
pub fn table(all: &[(&'static str, Vec<FrameDelay>)]) -> Vec<(&'static str, usize, [f64; 3], u64)> {
    let mut out = Vec::new();
    for (s, frames) in all {
        for f in TABLE1_FLOWS {
            let v: Vec<f64> = frames.iter().filter(|x| x.flow == f).filter_map(|x| x.delay).map(|d| d / 1e3).collect();
            let lost = frames.iter().filter(|x| x.flow == f && x.delay.is_none()).count() as u64;
            out.push((*s, f, delay_stats(&v), lost));
        }
    }
    out
}

/// Table 1 next to the paper's.
pub fn render(p: &Params, sched: &Schedule, all: &[(&'static str, Vec<FrameDelay>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Case study (§7) — schedule-to-delivery delay (SIMULATED), {} hyperperiods of 1 ms, seed {}",
        p.hyperperiods, p.seed
    );
    let _ = writeln!(
        s,
        "switching {} ns, guard {} ns, frames {} B (200 B on the wire); talker offsets (µs): {}\n",
        p.net.switching,
        p.net.guard,
        FRAME_BYTES,
        sched
            .offsets
            .iter()
            .enumerate()
            .map(|(i, o)| format!("F{}={:.1}", i + 1, o / 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let t = table(all);
    let _ = writeln!(s, "| flow | switches | stock-etf mean / P99 / max µs | paper GENET (*paper*) | keepon mean / P99 / max µs | paper KeepON (*paper*) | launchtime mean / P99 / max µs | how obtained |");
    let _ = writeln!(s, "|---:|---:|---|---|---|---|---|---|");
    let routes = routes();
    for (f, genet, kp) in PAPER_TABLE1 {
        let get = |sc: &str| t.iter().find(|x| x.0 == sc && x.1 == f).map(|x| (x.2, x.3));
        let fmt = |x: Option<([f64; 3], u64)>| {
            x.map_or("—".into(), |(v, lost)| {
                let l = if lost > 0 { format!(" ({lost} lost)") } else { String::new() };
                format!("{:.1} / {:.1} / {:.1}{l}", v[0], v[1], v[2])
            })
        };
        let _ = writeln!(
            s,
            "| {f} | {} | {} | {:.1} / {:.1} / {:.1} | {} | {:.1} / {:.1} / {:.1} | {} | {} |",
            routes[f - 1].switches(),
            fmt(get("stock-etf")),
            genet[0],
            genet[1],
            genet[2],
            fmt(get("keepon")),
            kp[0],
            kp[1],
            kp[2],
            fmt(get("launchtime")),
            how(f)
        );
    }
    let _ = writeln!(s, "\n{LEGEND}");
    s
}

/// How a flow's delays were obtained.
pub fn how(flow: usize) -> String {
    let path =
        label(Basis::Fitted, "path delay: switching 2.6 µs tuned so that three switches give the paper's 12.4 µs");
    let topo = label(Basis::Chosen, "topology and window order assumed (Fig 20(b) is not in the text)");
    if GATEWAY_FLOWS.contains(&flow) {
        format!(
            "{path}; keepon's spread {}; stock: which flows are displaced depends on the seed (below) — {topo}",
            label(Basis::Chosen, "PTP error σ 100 ns")
        )
    } else {
        format!("{path}; {topo}; sent by a TSN NIC (LaunchTime model) in every scenario")
    }
}

/// A flow is *displaced* in a run when at least 1 % of its frames arrive half a period or more late (its P99
/// reaches into the next hyperperiod), as the paper's F3, F4 and F7 are.
pub fn displaced(frames: &[FrameDelay], period: f64) -> Vec<usize> {
    let mut out = Vec::new();
    for f in 1..=routes().len() {
        let v: Vec<f64> = frames.iter().filter(|x| x.flow == f).filter_map(|x| x.delay).collect();
        if !v.is_empty() && delay_stats(&v)[1] >= period / 2.0 {
            out.push(f);
        }
    }
    out
}

/// `F3 F4 F7`, or `none`.
fn flows_text(v: &[usize]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter().map(|f| format!("F{f}")).collect::<Vec<_>>().join(" ")
    }
}

/// The paper's KeepON column of Table 1 for `flow`, reduced by `f` (mean, P99, max → one number), as text.
fn paper_kp(flow: usize, f: impl Fn([f64; 3]) -> f64) -> String {
    PAPER_TABLE1.iter().find(|x| x.0 == flow).map_or(String::new(), |x| format!("{:.1}", f(x.2)))
}

/// Hyperperiods per run of the seed and constant sweeps (at most the run's own).
pub const SWEEP_HYPERPERIODS: u64 = 2_000;

/// The case study over [`SEEDS`] seeds (median and range per flow, displaced flows per seed) and with the
/// fitted switching delay and the chosen PTP error swept. Returns the raw rows and the markdown.
pub fn sensitivity(p: &Params, progress: &mut dyn FnMut(&str)) -> Result<(Sens, String), String> {
    let n = p.hyperperiods.min(SWEEP_HYPERPERIODS);
    let mut sens = Sens::default();
    let mut md = String::new();
    let mut per_seed: Vec<(u64, Vec<usize>, Vec<usize>)> = Vec::new();
    for k in 0..SEEDS {
        let mut q = p.clone();
        q.hyperperiods = n;
        q.seed = p.seed.wrapping_add(k);
        let (_, all) = run(&q, &mut std::io::sink(), &mut |_| {})?;
        for (sc, frames) in &all {
            for f in TABLE1_FLOWS {
                let v: Vec<f64> =
                    frames.iter().filter(|x| x.flow == f).filter_map(|x| x.delay).map(|d| d / 1e3).collect();
                let st = delay_stats(&v);
                for (i, what) in ["mean", "P99", "max"].iter().enumerate() {
                    sens.seed(Basis::Chosen, q.seed, &format!("{sc} F{f} {what} µs"), st[i], "");
                }
            }
        }
        let d = |sc: &str| all.iter().find(|x| x.0 == sc).map_or(Vec::new(), |x| displaced(&x.1, p.net.period));
        per_seed.push((q.seed, d("stock-etf"), d("keepon")));
        progress(&format!("casestudy seed {}: stock displaced {}", q.seed, flows_text(&d("stock-etf"))));
    }
    let _ = writeln!(md, "\n### Over {SEEDS} seeds ({} hyperperiods each): median (min–max) per flow, µs\n", n);
    let _ = writeln!(md, "| flow | stock-etf mean | stock-etf P99 | paper GENET mean / P99 (*paper*) | keepon mean | keepon P99 | keepon max | paper KeepON mean / P99 / max (*paper*) | launchtime mean | how obtained |");
    let _ = writeln!(md, "|---:|---|---|---|---|---|---|---|---|---|");
    for (f, genet, kp) in PAPER_TABLE1 {
        let cell = |sc: &str, what: &str| {
            let v: Vec<f64> = sens
                .rows
                .iter()
                .filter(|r| r.constant == "seed" && r.metric == format!("{sc} F{f} {what} µs"))
                .map(|r| r.result)
                .collect();
            Spread::of(&v).map_or("—".into(), |s| format!("{} ({}–{})", num(s.median), num(s.min), num(s.max)))
        };
        let _ = writeln!(
            md,
            "| {f} | {} | {} | {} / {} | {} | {} | {} | {} / {} / {} | {} | {} |",
            cell("stock-etf", "mean"),
            cell("stock-etf", "P99"),
            genet[0],
            genet[1],
            cell("keepon", "mean"),
            cell("keepon", "P99"),
            cell("keepon", "max"),
            kp[0],
            kp[1],
            kp[2],
            cell("launchtime", "mean"),
            label(Basis::Chosen, "seeds; path delay fitted, topology chosen (as above)")
        );
    }
    let _ = writeln!(md, "\n### Displaced flows per seed (P99 ≥ half a period)\n");
    let _ = writeln!(md, "| seed | stock-etf displaced | keepon displaced | how obtained |");
    let _ = writeln!(md, "|---:|---|---|---|");
    for (sd, st, kp) in &per_seed {
        let _ = writeln!(
            md,
            "| {sd} | {} | {} | {} |",
            flows_text(st),
            flows_text(kp),
            label(Basis::Chosen, "topology and window order assumed")
        );
    }
    let _ = writeln!(md, "| paper | F3 F4 F7 (not F1, F8) | none | {} |", label(Basis::Paper, "Table 1"));
    let mut count = std::collections::BTreeMap::new();
    for (_, st, _) in &per_seed {
        for f in st {
            *count.entry(*f).or_insert(0) += 1;
        }
    }
    let _ = writeln!(
        md,
        "\nstock-etf: displaced in how many of the {SEEDS} seeds: {}. Seeds whose displaced set is the paper's (F3, F4, F7): {}.",
        if count.is_empty() {
            "none".to_string()
        } else {
            count.iter().map(|(f, c)| format!("F{f} {c}")).collect::<Vec<_>>().join(", ")
        },
        per_seed.iter().filter(|x| x.1 == PAPER_DISPLACED).count()
    );
    // The fitted switching delay and the chosen PTP error, swept (stock and keepon only; seeds 0..3 of the run).
    let mut sweeps = Sens::default();
    let m = n.min(1_000);
    let mut displaced_text = String::new();
    let variants: Vec<(&str, Basis, &str, String, Params)> = [1_000.0, 1_600.0, 2_000.0, 2_600.0, 3_200.0, 4_000.0]
        .iter()
        .map(|&sw| {
            let mut q = p.clone();
            q.net.switching = sw;
            ("switching delay, ns", Basis::Fitted, "2600", format!("{sw}"), q)
        })
        .chain([10.0, 100.0, 300.0, 1_000.0].iter().map(|&sd| {
            let mut q = p.clone();
            q.sw_sync_sd = sd;
            ("PTP error σ of software stations, ns", Basis::Chosen, "100", format!("{sd}"), q)
        }))
        .collect();
    for (constant, basis, default, value, mut q) in variants {
        q.hyperperiods = m;
        let sched = schedule(&q.net, &routes(), GRID)?;
        let kp = run_scenario(&q, "keepon", &sched, &mut |_| {})?;
        let stat = |frames: &[FrameDelay], f: usize| {
            let v: Vec<f64> = frames.iter().filter(|x| x.flow == f).filter_map(|x| x.delay).map(|d| d / 1e3).collect();
            delay_stats(&v)
        };
        let f2 = stat(&kp, 2);
        sweeps.point(constant, basis, default, &value, "keepon F2 (3 switches) mean µs", f2[0], &paper_kp(2, |k| k[0]));
        sweeps.point(
            constant,
            basis,
            default,
            &value,
            "keepon F8 (2 switches) mean µs",
            stat(&kp, 8)[0],
            &paper_kp(8, |k| k[0]),
        );
        sweeps.point(
            constant,
            basis,
            default,
            &value,
            "keepon F12 (1 switch) mean µs",
            stat(&kp, 12)[0],
            &paper_kp(12, |k| k[0]),
        );
        sweeps.point(
            constant,
            basis,
            default,
            &value,
            "keepon F2 max − mean, µs",
            f2[2] - f2[0],
            &paper_kp(2, |k| k[2] - k[0]),
        );
        let mut shown = Vec::new();
        let mut paper_like = 0;
        for k in 0..3 {
            q.seed = p.seed.wrapping_add(k);
            let st = run_scenario(&q, "stock-etf", &sched, &mut |_| {})?;
            let d = displaced(&st, q.net.period);
            if d == PAPER_DISPLACED {
                paper_like += 1;
            }
            shown.push(flows_text(&d));
        }
        sweeps.point(
            constant,
            basis,
            default,
            &value,
            "stock-etf seeds (of 3) displacing exactly F3 F4 F7",
            f64::from(paper_like),
            "F3 F4 F7",
        );
        let _ = writeln!(
            displaced_text,
            "| {constant} | {value} | {} | {} |",
            shown.join(" · "),
            label(Basis::Chosen, "topology and window order assumed; this constant swept")
        );
        progress(&format!("casestudy sweep {constant} = {value}"));
    }
    sens.rows.extend(sweeps.rows.iter().cloned());
    md.push_str(&sweeps.render());
    md.push_str(&topology_sweep(p, &mut sens, progress)?);
    let _ = writeln!(
        md,
        "\nstock-etf displaced flows under each swept value (seeds {}, {}, {}; {m} hyperperiods):\n",
        p.seed,
        p.seed.wrapping_add(1),
        p.seed.wrapping_add(2)
    );
    let _ = writeln!(md, "| constant | value | displaced (per seed) | how obtained |");
    let _ = writeln!(md, "|---|---|---|---|");
    md.push_str(&displaced_text);
    Ok((sens, md))
}

/// Window orders [`topology_sweep`] tries: the flows' own order, its reverse and this many seeded shuffles.
pub const SHUFFLED_ORDERS: u64 = 8;

/// The window orders of [`topology_sweep`] for `n` flows.
pub fn window_orders(n: usize) -> Vec<Vec<usize>> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let own: Vec<usize> = (0..n).collect();
    let mut v = vec![own.clone(), own.iter().rev().copied().collect()];
    for k in 0..SHUFFLED_ORDERS {
        let mut o = own.clone();
        o.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(k + 1));
        v.push(o);
    }
    v
}

/// Every topology of [`TOPOLOGIES`] under every order of [`window_orders`], the stock driver at the gateways, two
/// seeds each: which flows end up displaced, and in how many runs exactly the paper's F3, F4, F7. Rows go to
/// `sens`; returns the report's section.
fn topology_sweep(p: &Params, sens: &mut Sens, progress: &mut dyn FnMut(&str)) -> Result<String, String> {
    let n = p.hyperperiods.min(1_000);
    let seeds = [p.seed, p.seed.wrapping_add(1)];
    let mut md = format!(
        "\n### Topologies and window orders (stock-etf at the gateways; {n} hyperperiods; seeds {} and {})\n\n\
         Each topology keeps the paper's hop counts; the window orders are the order in which the greedy scheduler \
         places the flows: F1…F12, its reverse, and {SHUFFLED_ORDERS} seeded shuffles. A run reproduces the paper \
         when exactly F3, F4 and F7 are displaced.\n\n\
         | topology | runs | displaced exactly F3 F4 F7 | displaced sets (runs) | how obtained |\n|---|---:|---:|---|---|\n",
        seeds[0], seeds[1]
    );
    for (name, b, near) in TOPOLOGIES {
        let routes = routes_on(b, near);
        let mut sets: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
        let (mut runs, mut paper_like) = (0u32, 0u32);
        for order in window_orders(routes.len()) {
            let sched = schedule_in_order(&p.net, &routes, GRID, &order)?;
            for &seed in &seeds {
                let q = Params { hyperperiods: n, seed, ..p.clone() };
                let st = run_scenario_on(&q, "stock-etf", &routes, &sched, &mut |_| {})?;
                let d = displaced(&st, q.net.period);
                paper_like += u32::from(d == PAPER_DISPLACED);
                runs += 1;
                *sets.entry(flows_text(&d)).or_insert(0) += 1;
            }
        }
        let mut by_count: Vec<(String, u32)> = sets.into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shown: Vec<String> = by_count.iter().map(|(set, c)| format!("{set} ({c})")).collect();
        let _ = writeln!(
            md,
            "| {name} | {runs} | {paper_like} | {} | {} |",
            shown.join(", "),
            label(Basis::Chosen, "topologies the text allows, window orders tried; switching delay fitted")
        );
        sens.point(
            "topology (window orders and seeds as in the table)",
            Basis::Chosen,
            "chain (the report's)",
            name,
            "stock-etf runs displacing exactly F3 F4 F7",
            f64::from(paper_like),
            "F3 F4 F7",
        );
        progress(&format!("casestudy topology {name}: {paper_like} of {runs} runs displace exactly F3 F4 F7"));
    }
    Ok(md)
}
