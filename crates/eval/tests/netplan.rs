//! `keepon eval network`: a small network planned by `keepon-plan network` at test time and replayed — within every
//! bound with no gate miss; the same plan with one gate window moved is reported as gate misses naming the switch,
//! port and stream; bad plan directories are refused naming the element.
//!
//! The planner is the Python package in `python/` (its venv, `make py-env`); without it the tests say so and pass.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use keepon_eval::netplan::{self, Params, Realism};
use keepon_eval::netreport::{self, NetOptions};
use keepon_eval::plandir::read_plan;

/// Two talkers, two listeners, two switches (as python/examples/network/small.toml), with a 500 ns guard.
const NETWORK: &str = r#"
version = 1
base_time = 1_000_000_000
guard = "500ns"
[[station]]
name = "t1"
[[station]]
name = "t2"
[[station]]
name = "l1"
[[station]]
name = "l2"
[[switch]]
name = "sw1"
forwarding_delay = "2us"
[[switch]]
name = "sw2"
forwarding_delay = "2us"
[[link]]
a = "t1"
b = "sw1"
rate = "1Gbps"
delay = "50ns"
b_port = "swp1"
[[link]]
a = "t2"
b = "sw1"
rate = "1Gbps"
delay = "50ns"
b_port = "swp2"
[[link]]
a = "sw1"
b = "sw2"
rate = "1Gbps"
delay = "500ns"
a_port = "swp3"
b_port = "swp3"
[[link]]
a = "sw2"
b = "l1"
rate = "1Gbps"
delay = "50ns"
a_port = "swp1"
[[link]]
a = "sw2"
b = "l2"
rate = "1Gbps"
delay = "50ns"
a_port = "swp2"
[[stream]]
name = "ctrl-a"
talker = "t1"
listeners = ["l1"]
period = "250us"
frame_bytes = 128
max_latency = "50us"
max_jitter = "1us"
[[stream]]
name = "ctrl-b"
talker = "t2"
listeners = ["l1", "l2"]
period = "500us"
frame_bytes = 200
max_latency = "50us"
max_jitter = "1us"
"#;

fn planner() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/.venv/bin/keepon-plan");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: no planner at {} (make py-env); the replay tests need a plan", p.display());
        None
    }
}

/// A fresh copy of the planned network in a directory of its own.
fn planned(name: &str) -> Option<PathBuf> {
    let planner = planner()?;
    let dir = std::env::temp_dir().join(format!("keepon-netplan-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let net = dir.join("net.toml");
    fs::write(&net, NETWORK).unwrap();
    let out = Command::new(planner).arg("network").arg(&net).arg("--out").arg(dir.join("plan")).output().unwrap();
    assert!(out.status.success(), "keepon-plan network: {}", String::from_utf8_lossy(&out.stderr));
    Some(dir.join("plan"))
}

fn params() -> Params {
    Params { seed: 3, duration_ns: 20_000_000, realism: Realism::default_chosen() }
}

#[test]
fn a_planned_network_replays_within_its_bounds_with_no_gate_miss() {
    let Some(dir) = planned("good") else { return };
    let plan = read_plan(&dir).unwrap();
    assert_eq!((plan.streams.len(), plan.talkers.len(), plan.switches.len(), plan.guard_ps), (2, 2, 2, 500_000));
    let r = netplan::run(&plan, &params(), &mut |_| {}).unwrap();
    assert!(r.gate_misses.is_empty(), "{:?}", &r.gate_misses[..r.gate_misses.len().min(5)]);
    assert_eq!(r.streams.len(), 3, "ctrl-a to l1, ctrl-b to l1 and l2");
    for s in &r.streams {
        assert_eq!(s.delivered(), s.frames, "{}: every instance arrives", s.stream);
        let period = if s.stream == "ctrl-a" { 250_000 } else { 500_000 };
        assert_eq!(s.frames, 20_000_000 / period, "{}: one instance per period", s.stream);
        assert!(s.pass(), "{} → {}: {:?}", s.stream, s.listener, s.min_median_max());
        assert!(s.within_planned_worst_case(), "{}: within the plan's latency + guard", s.stream);
        // The residual sync error (σ 100 ns) moves every latency by less than the guard around the plan's.
        let [lo, _, hi] = s.min_median_max();
        assert!(lo > s.planned_ns - 500.0 && hi < s.planned_ns + 500.0, "{lo}…{hi} vs {}", s.planned_ns);
    }
    // With exact devices the real stations reproduce the plan to the nanosecond.
    let ideal = netplan::run(&plan, &Params { realism: Realism::ideal(), ..params() }, &mut |_| {}).unwrap();
    for s in &ideal.streams {
        let [lo, _, hi] = s.min_median_max();
        assert!((lo - s.planned_ns).abs() < 1.0 && (hi - s.planned_ns).abs() < 1.0, "{lo} {hi} {}", s.planned_ns);
    }
}

#[test]
fn a_moved_gate_window_is_a_gate_miss_naming_switch_port_and_stream() {
    let Some(dir) = planned("moved") else { return };
    // sw1's port towards sw2: open the first window of traffic class 7 half its length late (the guard is 0.5 µs).
    let path = dir.join("switches/sw1.json");
    let mut doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let entries = doc["ports"][0]["entries"].as_array_mut().unwrap();
    let w = entries.iter().position(|e| e["gate_states"].as_u64().unwrap() & 0x80 != 0).unwrap();
    assert!(w > 0, "the list starts with best effort");
    let before = entries[w - 1]["interval_ns"].as_i64().unwrap();
    let window = entries[w]["interval_ns"].as_i64().unwrap();
    let shift = window / 2;
    assert!(shift > 1_000, "moved by more than twice the guard");
    entries[w - 1]["interval_ns"] = (before + shift).into();
    entries[w]["interval_ns"] = (window - shift).into();
    fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    let plan = read_plan(&dir).unwrap();
    let r = netplan::run(&plan, &params(), &mut |_| {}).unwrap();
    assert!(!r.gate_misses.is_empty(), "the moved window must be missed");
    let m = &r.gate_misses[0];
    assert_eq!((m.switch.as_str(), m.port.as_str()), ("sw1", "swp3"));
    assert!(["ctrl-a", "ctrl-b"].contains(&m.stream.as_str()), "{m:?}");
    // At sw1 only the moved window is missed. The frame then waits for the next window of its class — another
    // stream's — and pushes that stream out of its own windows downstream (at sw2): a missed window cascades.
    assert!(r.gate_misses.iter().filter(|x| x.switch == "sw1").all(|x| x.stream == m.stream), "only that window");
    assert!(r.gate_misses.iter().all(|x| x.switch == "sw1" || x.switch == "sw2"));
    let missed = r.streams.iter().find(|s| s.stream == m.stream).unwrap();
    assert!(!missed.pass() && missed.gate_misses > 0);
    // The report names them too.
    let out = dir.join("../report");
    let summary =
        netreport::run(&dir, &out, &NetOptions { seed: Some(3), duration_ns: Some(5_000_000) }, &mut |_| {}).unwrap();
    assert!(summary.contains(&format!("| sw1 | swp3 | {} |", m.stream)), "{summary}");
    let csv = fs::read_to_string(out.join("gate-misses.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().starts_with(&format!("sw1,swp3,{},", m.stream)), "{csv}");
    for f in ["network.csv", "network-summary.md", "network-sensitivity.csv"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // Every table of the report carries the label column, every row labelled with one of the four words.
    let lines: Vec<&str> = summary.lines().collect();
    let cells = |l: &str| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let mut tables = 0;
    for (i, h) in lines.iter().enumerate() {
        if !lines.get(i + 1).is_some_and(|l| l.starts_with("|-")) {
            continue;
        }
        tables += 1;
        let k = cells(h).iter().position(|c| c.starts_with("how obtained")).expect(h);
        for row in lines[i + 2..].iter().take_while(|l| l.starts_with('|')) {
            let c = cells(row);
            assert_eq!(c.len(), cells(h).len(), "{row}");
            assert!(["*predicted*", "*chosen*", "*fitted*", "*paper*"].iter().any(|w| c[k].starts_with(w)), "{row}");
        }
    }
    assert!(tables >= 5, "summary, streams, gate misses, sweep, seeds: {tables}");
}

#[test]
fn the_seed_moves_every_stochastic_result() {
    let Some(dir) = planned("seeds") else { return };
    let plan = read_plan(&dir).unwrap();
    let a = netplan::run(&plan, &params(), &mut |_| {}).unwrap();
    let again = netplan::run(&plan, &params(), &mut |_| {}).unwrap();
    let b = netplan::run(&plan, &Params { seed: 4, ..params() }, &mut |_| {}).unwrap();
    assert_eq!(a, again, "a run is a pure function of its parameters");
    assert_ne!(a.oscillators, b.oscillators);
    for (x, y) in a.streams.iter().zip(&b.streams) {
        assert_ne!(x.latencies_ns, y.latencies_ns, "{}", x.stream);
    }
}

#[test]
fn bad_plan_directories_are_refused_naming_the_element() {
    let missing = std::env::temp_dir().join("keepon-netplan-no-such-plan");
    let e = read_plan(&missing).unwrap_err().to_string();
    assert!(e.contains("keepon-netplan-no-such-plan") && e.contains("no such plan directory"), "{e}");
    let Some(dir) = planned("bad") else { return };
    let plan_json = fs::read_to_string(dir.join("plan.json")).unwrap();
    // A stream whose talker is not a station of the plan.
    fs::write(dir.join("plan.json"), plan_json.replacen("\"talker\": \"t1\"", "\"talker\": \"ghost\"", 1)).unwrap();
    let e = read_plan(&dir).unwrap_err().to_string();
    assert!(e.contains("plan.json") && e.contains("stream 'ctrl-a'") && e.contains("talker 'ghost'"), "{e}");
    // A hop over a link the plan does not have.
    fs::write(dir.join("plan.json"), plan_json.replacen("t1->sw1", "t1->sw2", 1)).unwrap();
    let e = read_plan(&dir).unwrap_err().to_string();
    assert!(e.contains("stream 'ctrl-a'") && e.contains("t1→sw2"), "{e}");
    // A talker without its runtime config.
    fs::write(dir.join("plan.json"), &plan_json).unwrap();
    fs::remove_file(dir.join("stations/t2.toml")).unwrap();
    let e = read_plan(&dir).unwrap_err().to_string();
    assert!(e.contains("stations/t2.toml"), "{e}");
    // A switch's gate list that does not add up to its cycle.
    let planner_dir = planned("bad-gcl").unwrap();
    let path = planner_dir.join("switches/sw2.json");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replacen("\"interval_ns\": ", "\"interval_ns\": 1", 1)).unwrap();
    let e = read_plan(&planner_dir).unwrap_err().to_string();
    assert!(e.contains("switch 'sw2' port") && e.contains("cycle"), "{e}");
}

/// A frame the plan has wait in a bridge's queue (the byte-clock example: stream `c` waits in sw2's class-6 queue)
/// finds its gate closed by design: with exact devices the replay counts no gate miss and every pair within its
/// bounds, the queued frame starting its hop at the planned start (the replay read only no-wait hop times before).
#[test]
fn a_planned_wait_in_a_queue_is_not_a_gate_miss() {
    let Some(planner) = planner() else { return };
    let dir = std::env::temp_dir().join(format!("keepon-netplan-{}-queued", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/examples/network/byteclock.toml");
    let out = Command::new(planner).arg("network").arg(&example).arg("--out").arg(dir.join("plan")).output().unwrap();
    assert!(out.status.success(), "keepon-plan network: {}", String::from_utf8_lossy(&out.stderr));
    let plan = read_plan(&dir.join("plan")).unwrap();
    let waits: Vec<&str> =
        plan.streams.iter().filter(|s| s.hop_plan.iter().flatten().any(|(_, w)| *w)).map(|s| s.name.as_str()).collect();
    assert!(!waits.is_empty(), "the example plans a wait in a queue");
    let ideal = Params { seed: 3, duration_ns: 12_000_000, realism: Realism::ideal() };
    let r = netplan::run(&plan, &ideal, &mut |_| {}).unwrap();
    assert!(r.gate_misses.is_empty(), "{:?}", &r.gate_misses[..r.gate_misses.len().min(5)]);
    for s in &r.streams {
        assert_eq!(s.delivered(), s.frames, "{}: every instance arrives", s.stream);
        assert!(s.pass(), "{} → {}: {:?}", s.stream, s.listener, s.min_median_max());
        let [lo, _, hi] = s.min_median_max();
        assert!((lo - s.planned_ns).abs() < 1.0 && (hi - s.planned_ns).abs() < 1.0, "{lo} {hi} {}", s.planned_ns);
    }
    let _ = fs::remove_dir_all(&dir);
}
