//! `keepon run` with `[ptp]` on a real interface: the flows leave at the network time they ask for (needs root
//! and `ptp4l`; skips otherwise).
//!
//! ```text
//!   krt-PID: keepon run (afpacket, host-paced,  ── kp0 ── veth ── bridge ── veth ── kp1 ─┬─ krl-PID: ptp4l master
//!            link +3 ms / +50 ppm, PTP slave)                                            └─ krl-PID: keepon listen
//! ```
//!
//! One command does it all: `keepon run` brings the link up, synchronises its EPHC to the ptp4l master, then
//! replays the configuration's cyclic flow in network time. Its link's clock is 3 ms ahead and 50 ppm fast, so
//! a station on its own clock would put every frame 3 ms early (`netns_ptp_listen.rs` has that control); here
//! `keepon listen` next to the master must hear each frame at its txtime on the master's clock (the kernel RX
//! stamp minus the kernel's TAI offset), within the same tolerance as `netns_ptp_listen.rs`.
#![cfg(target_os = "linux")]

#[path = "support/ptp.rs"]
mod ptp;
#[allow(dead_code)] // shared with the other namespace tests
mod support;

use std::process::Command;
use std::time::Duration;

use keepon::record;

use ptp::{connect, keepon_conf, ptp4l_conf, skip_unless_ready, spawn_daemon, spawn_ptp4l, stats, tai_offset_ns, BIN};
use support::{bridged, chmod, Proc, KP0_HOST_PACED};

/// Frames of the flow: one per ring cycle (3.2 ms), a second of them.
const FRAMES: usize = 300;
/// Half a slot (the schedule grid's offset from the host-paced wire) plus 450 µs (late release, residual
/// error, path): as `netns_ptp_listen.rs`.
const TOLERANCE_NS: i64 = 50_000 + 450_000;
/// Frames that may be later than that after a host stall (host pacing is late, never early) or lost to an
/// underrun (reported `underrun`).
const STRAGGLERS_MAX: usize = 6;

#[test]
fn keepon_run_sends_its_flows_at_the_masters_time() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    run_on_network_time(50.0, FRAMES, Via::Run);
}

/// The drift experiment of the schedule on network time: a link 50 ppm fast, then one 50 ppm slow, a strict
/// class owning one ring slot of 32, one frame per 3.2 ms cycle at a fixed network-time phase (computed once,
/// from `base_time`) for a minute. Before the schedule was on network time, the class window slid half a slot in
/// under a second at this error, and every frame after that was rejected `not-owned`; now none is `not-owned`,
/// ≥ 99 % are sent on a host that keeps up (the rest only where the host fell behind: `underrun`, backed by the
/// underruns the run reports, or `late` from the run's own stalled source), and the listener hears them at their
/// txtimes on the master's clock. `KEEPON_PPM=-50` runs one error only.
#[test]
fn a_minute_at_plus_and_minus_50_ppm_keeps_a_one_slot_class_on_network_time() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    let ppms: Vec<f64> = std::env::var("KEEPON_PPM").map_or(vec![50.0, -50.0], |v| vec![v.parse().unwrap()]);
    for ppm in ppms {
        run_on_network_time(ppm, 18_750, Via::Run);
    }
}

/// The drift experiment as an application meets it: a `keepon daemon` slaved to the ptp4l master, its link 50 ppm
/// fast and then 50 ppm slow, and a client (`keepon talk`) that reads the schedule once (`Info`: base time and
/// cycle) and submits one frame per cycle at a fixed network-time phase for a minute. Same bounds as above: ≥ 99 %
/// sent, none `not-owned`, every frame heard at its txtime on the master's clock.
#[test]
fn a_daemon_client_keeps_a_one_slot_class_on_network_time_for_a_minute() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    for ppm in [50.0, -50.0] {
        run_on_network_time(ppm, 18_750, Via::Daemon);
    }
}

/// Who sends the flow: `keepon run` (its own station), or `keepon talk` through a `keepon daemon`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    Run,
    Daemon,
}

/// A station slaved to a ptp4l master, its link `ppm` off, sends `frames` frames of one per cycle; judged by
/// the listener next to the master.
fn run_on_network_time(ppm: f64, frames: usize, via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = bridged("kr");
    let mut ptp4l = spawn_ptp4l(d, &topo.listener, "kp1", true, &ptp4l_conf(d, true));
    // The PTP tests' link, classes and `[ptp]` section, with a flow in class `tc` (ring slot 4) and no
    // `[daemon]` (a run has its own private socket).
    let sock = d.join("keepon.sock");
    let conf = keepon_conf(&sock, "3ms", ppm, "role = \"slave\"\n");
    let conf = match via {
        Via::Run => conf.replace("[daemon]\n", "").replace(&format!("socket = \"{}\"\n", sock.display()), ""),
        Via::Daemon => conf,
    };
    // A client of the daemon submits further ahead than the run's own source: between them lies a socket and
    // another process the host schedules (a stalled client's frame is `late` by its own doing).
    let lead = if via == Via::Daemon { "20ms" } else { "3ms" };
    let flow = format!(
        "[[flow]]\nname = \"cyclic\"\nclass = \"tc\"\nperiod = \"3200us\"\noffset = \"400us\"\nframe_bytes = 128\n\
         count = {frames}\nlead = \"{lead}\"\n"
    );
    let conf = conf.replace("[run]", &format!("{flow}[run]\nstart = \"20ms\""));
    let cfg = d.join("R.toml");
    std::fs::write(&cfg, &conf).unwrap();
    let heard = d.join("heard.csv");
    let mut listen = Proc::spawn(
        "listen",
        d,
        Command::new("ip")
            .args(["netns", "exec", &topo.listener, BIN, "listen", "--iface", "kp1", "--config"])
            .arg(&cfg)
            .args(["--duration", "150s", "--count", &frames.to_string(), "--records"])
            .arg(&heard),
    );
    assert!(support::listening(&listen), "the listener did not start: {}", listen.output());
    let sent = d.join("sent.csv");
    let (out, underruns) = match via {
        Via::Run => {
            let mut run = Proc::spawn(
                "run",
                d,
                Command::new("ip")
                    .args(["netns", "exec", &topo.talker, BIN, "run", "--config"])
                    .arg(&cfg)
                    .args(KP0_HOST_PACED)
                    .args(["--sync-wait", "60s", "--records"])
                    .arg(&sent),
            );
            let out = run.success(Duration::from_secs(200));
            assert!(out.contains("network time") && out.contains(&format!("run: {frames} frames")), "{out}");
            let underruns = run_underruns(&out);
            (out, underruns)
        }
        Via::Daemon => {
            let mut daemon = spawn_daemon(d, &topo.talker, "kp0", &cfg);
            let _ = connect(&sock, &mut daemon);
            let mut talk = Proc::spawn(
                "talk",
                d,
                Command::new(BIN)
                    .args(["talk", "--socket"])
                    .arg(&sock)
                    .arg("--config")
                    .arg(&cfg)
                    .args(["--sync-wait", "60s", "--records"])
                    .arg(&sent),
            );
            let out = talk.success(Duration::from_secs(200));
            assert!(out.contains(&format!("talk: {frames} frames")), "{out}");
            let underruns = daemon_underruns(&sock);
            assert!(daemon.running(), "the daemon died\n{}", daemon.output());
            (format!("{out}\n{}", daemon.output()), underruns)
        }
    };
    assert!(ptp4l.running(), "ptp4l died\n{}", ptp4l.output());
    stop_listener(&mut listen);
    let sent = record::read(&sent).unwrap();
    assert_eq!(sent.len(), frames, "one record per frame");
    let not_owned = sent.iter().filter(|r| r.reason == "not-owned").count();
    assert_eq!(not_owned, 0, "{ppm} ppm: frames rejected not-owned: the class window left its network time");
    // Rejections only for a host that fell behind: `underrun` (the link went idle) or `late` (the run's own
    // source, stalled with it, submitted after the frame's slot was posted) — at most 1 % in all.
    let other: Vec<&str> = sent
        .iter()
        .filter(|r| !r.sent() && r.reason != "underrun" && r.reason != "late")
        .map(|r| r.reason.as_str())
        .collect();
    assert!(other.is_empty(), "{ppm} ppm: rejected other than `underrun` or `late`: {other:?}");
    // The run reports the underruns it saw; host stalls long enough to empty the ring are what costs frames
    // here. On a host that kept up (no underrun) at most 1 % are rejected; where it stalled, each frame lost
    // `underrun` needs an underrun the run reported, and at most 10 % in all (a 2-core CI VM once lost 5.8 % at
    // 3 528 underruns a minute: its stalls, not the schedule, which the `not-owned` count above judges).
    let percent = if underruns == 0 { 1 } else { 10 };
    let rejected = sent.iter().filter(|r| !r.sent()).count();
    let late_ones = sent.iter().filter(|r| r.reason == "late").count();
    assert!(
        rejected * 100 <= frames * percent && rejected - late_ones <= underruns,
        "{ppm} ppm: {rejected} of {frames} rejected ({late_ones} late, the rest underrun; {underruns} underruns)"
    );
    let heard = record::read(&heard).unwrap();
    let tai = tai_offset_ns();
    // RX − txtime on the master's clock, for every frame heard (matched by its header's txtime).
    let mut late = 0;
    let mut errors = Vec::new();
    for r in &heard {
        let (Some(rx), Some(txtime)) = (r.rx_ns, r.txtime_ns) else { continue };
        let e = (rx - tai) - txtime;
        assert!(e > -TOLERANCE_NS, "frame {} arrived {} µs before its txtime on the master's clock", r.seq, -e / 1000);
        if e > TOLERANCE_NS {
            late += 1;
        }
        errors.push(e);
    }
    let lost = sent.iter().filter(|r| !r.sent()).count();
    let s = stats(&errors);
    eprintln!(
        "{via:?} on network time, link {ppm:+} ppm: {} frames, {} sent, {} heard; RX − txtime (master's clock) \
         median {:.1} µs, p99 {:.1} µs, max |·| {:.1} µs; {late} later than {} µs; {underruns} underruns",
        frames,
        frames - lost,
        heard.len(),
        s.median / 1e3,
        s.p99 / 1e3,
        s.max / 1e3,
        TOLERANCE_NS / 1000
    );
    // Every frame sent is heard; a few after a host stall (the short run), and over a minute on a 2-core VM about
    // 1 % (host-paced release delayed by stalls), arrive later than the tolerance: at most 2 % of those heard
    // (docs/measured.md gives the measured figures).
    let sent_ok = frames - lost;
    assert!(heard.len() + STRAGGLERS_MAX >= sent_ok, "heard only {} of {sent_ok} sent\n{out}", heard.len());
    let stragglers = STRAGGLERS_MAX.max(heard.len() * 2 / 100);
    assert!(late <= stragglers, "{late} of {} heard later than the tolerance\n{out}", heard.len());
    eprintln!(
        "{}",
        out.lines()
            .filter(|l| l.starts_with("grid:") || l.starts_with("keepon run:") || l.contains("slot start −"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // On the station's own clock they would have arrived 3 ms early: the median is far from that.
    assert!(s.median.abs() < TOLERANCE_NS as f64, "median {} ns", s.median);
}

/// Two stations with the same plan, their links +50 ppm (3 ms ahead) and −50 ppm (2 ms behind), both slaved to
/// one ptp4l master through a Linux bridge: station A's class window is ring slot 4 of the 32-slot cycle, station
/// B's ring slot 12, and neither station knows of the other. The listener next to the master hears every frame of
/// both at its txtime on the master's clock, and each in its station's window of the one network-wide cycle
/// (`base_time` 0): the windows stay where the plan puts them on network time, for both, however their
/// oscillators run (undisciplined, ±50 ppm would slide them a slot apart within 2 s).
#[test]
fn two_stations_with_one_plan_keep_their_windows_on_network_time() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    two_stations(Via::Run, 2_000, "-2ms"); // 6.4 s each
}

/// The same with two daemons and a client each (`keepon talk`, reading the schedule once), for a minute: station A
/// +50 ppm and 3 ms ahead, station B −50 ppm and 1 ms behind.
#[test]
fn two_daemons_with_one_plan_keep_their_windows_on_network_time_for_a_minute() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    two_stations(Via::Daemon, 18_750, "-1ms");
}

/// Stations A (ring slot 4) and B (ring slot 12) of one plan, `n` frames each, B's link `b_offset` off.
fn two_stations(via: Via, n: usize, b_offset: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = TwoTalkers::new("k2");
    let mut ptp4l = spawn_ptp4l(d, &topo.listener, "kp1", true, &ptp4l_conf(d, true));
    // One plan: flow "a" at 400 µs (ring slot 4, class tc), flow "b" at 1200 µs (ring slot 12, class tc2).
    let station = |name: &str, offset: &str, ppm: f64, flow_at: &str| {
        let sock = d.join(format!("{name}.sock"));
        let conf = keepon_conf(&sock, offset, ppm, "role = \"slave\"\n")
            .replace("name = \"be\"", "name = \"tc2\"\nslots = [12]\n[[class]]\nname = \"be\"");
        let conf = match via {
            Via::Run => conf.replace("[daemon]\n", "").replace(&format!("socket = \"{}\"\n", sock.display()), ""),
            Via::Daemon => conf,
        };
        let class = if name == "a" { "tc" } else { "tc2" };
        let lead = if via == Via::Daemon { "20ms" } else { "3ms" };
        let flow = format!(
            "[[flow]]\nname = \"{name}\"\nclass = \"{class}\"\nperiod = \"3200us\"\noffset = \"{flow_at}\"\n\
             frame_bytes = 128\ncount = {n}\nlead = \"{lead}\"\n"
        );
        let p = d.join(format!("{name}.toml"));
        std::fs::write(&p, conf.replace("[run]", &format!("{flow}[run]\nstart = \"20ms\""))).unwrap();
        p
    };
    let (cfg_a, cfg_b) = (station("a", "3ms", 50.0, "400us"), station("b", b_offset, -50.0, "1200us"));
    let heard = d.join("heard.csv");
    let mut listen = Proc::spawn(
        "listen",
        d,
        Command::new("ip")
            .args(["netns", "exec", &topo.listener, BIN, "listen", "--iface", "kp1", "--config"])
            .arg(&cfg_a)
            .args(["--duration", "150s", "--count", &(2 * n).to_string(), "--records"])
            .arg(&heard),
    );
    assert!(support::listening(&listen), "the listener did not start: {}", listen.output());
    let run = |ns: &str, cfg: &std::path::Path, name: &str| {
        Proc::spawn(
            name,
            d,
            Command::new("ip")
                .args(["netns", "exec", ns, BIN, "run", "--config"])
                .arg(cfg)
                .args(KP0_HOST_PACED)
                .args(["--sync-wait", "60s"]),
        )
    };
    let talk = |cfg: &std::path::Path, name: &str| {
        let sock = d.join(format!("{name}.sock"));
        Proc::spawn(
            name,
            d,
            Command::new(BIN)
                .args(["talk", "--socket"])
                .arg(&sock)
                .arg("--config")
                .arg(cfg)
                .args(["--sync-wait", "60s"]),
        )
    };
    // Per station: its output and the underruns it reports.
    let (out_a, out_b, underruns) = match via {
        Via::Run => {
            let (mut a, mut b) = (run(&topo.a, &cfg_a, "run-a"), run(&topo.b, &cfg_b, "run-b"));
            let (out_a, out_b) = (a.success(Duration::from_secs(200)), b.success(Duration::from_secs(200)));
            let underruns = [run_underruns(&out_a), run_underruns(&out_b)];
            (out_a, out_b, underruns)
        }
        Via::Daemon => {
            let mut da = spawn_daemon(d, &topo.a, "kp0", &cfg_a);
            let mut db = spawn_daemon(d, &topo.b, "kp0", &cfg_b);
            let _ = (connect(&d.join("a.sock"), &mut da), connect(&d.join("b.sock"), &mut db));
            let (mut a, mut b) = (talk(&cfg_a, "a"), talk(&cfg_b, "b"));
            let (out_a, out_b) = (a.success(Duration::from_secs(200)), b.success(Duration::from_secs(200)));
            let underruns = [daemon_underruns(&d.join("a.sock")), daemon_underruns(&d.join("b.sock"))];
            assert!(da.running() && db.running(), "a daemon died\n{}\n{}", da.output(), db.output());
            (out_a, out_b, underruns)
        }
    };
    assert!(ptp4l.running(), "ptp4l died\n{}", ptp4l.output());
    stop_listener(&mut listen);
    let heard = record::read(&heard).unwrap();
    let tai = tai_offset_ns();
    const CYCLE: i64 = 3_200_000;
    // Per station (by its window's phase in the cycle): frames heard, and those later than the tolerance.
    let mut per = std::collections::BTreeMap::<i64, (usize, usize, Vec<i64>)>::new();
    for r in &heard {
        let (Some(rx), Some(txtime)) = (r.rx_ns, r.txtime_ns) else { continue };
        let phase = txtime.rem_euclid(CYCLE);
        assert!(phase == 400_000 || phase == 1_200_000, "a frame outside both windows of the plan: {r:?}");
        let e = (rx - tai) - txtime;
        assert!(e > -TOLERANCE_NS, "frame at phase {phase} arrived {} µs before its txtime", -e / 1000);
        let s = per.entry(phase).or_default();
        s.0 += 1;
        s.1 += usize::from(e > TOLERANCE_NS);
        s.2.push(e);
    }
    for (phase, (heard, late, errors)) in &per {
        let s = stats(errors);
        eprintln!(
            "{via:?} station at phase {} µs: {heard} of {n} heard; RX − txtime (master's clock) median {:.1} µs, p99 \
             {:.1} µs; {late} later than {} µs",
            phase / 1000,
            s.median / 1e3,
            s.p99 / 1e3,
            TOLERANCE_NS / 1000
        );
        assert!(s.median.abs() < TOLERANCE_NS as f64, "phase {phase}: median {} ns", s.median);
    }
    for ((phase, out), underruns) in [(400_000, &out_a), (1_200_000, &out_b)].into_iter().zip(underruns) {
        let (heard, late, _) = per.get(&phase).cloned().unwrap_or_default();
        // As the one-station drift experiment: at most 2 % late or lost, 10 % when the station underran.
        let stragglers = n * if underruns == 0 { 2 } else { 10 } / 100;
        assert!(
            heard + stragglers >= n && late <= stragglers,
            "phase {phase}: {heard} heard, {late} late ({underruns} underruns)\n{out}"
        );
        assert!(!out.contains("not-owned"), "a frame left its window\n{out}");
    }
}

/// The listener stops when it has heard every frame. A frame a run could not send (an `underrun` after a host
/// stall) never comes: then a SIGINT stops it after a grace period, and it still writes its records.
fn stop_listener(listen: &mut Proc) {
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while listen.running() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    if listen.running() {
        // SAFETY: kill(2) on the listener this test started (`ip netns exec` execs into keepon).
        assert_eq!(unsafe { libc::kill(listen.pid() as libc::pid_t, libc::SIGINT) }, 0);
    }
    let _ = listen.success(Duration::from_secs(30));
}

/// The underruns the daemon behind `sock` has counted (`keepon status --json`).
fn daemon_underruns(sock: &std::path::Path) -> usize {
    let status = Command::new(BIN).args(["status", "--json", "--socket"]).arg(sock).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|e| panic!("keepon status --json: {e}\n{}", String::from_utf8_lossy(&status.stdout)));
    status["underruns"].as_u64().unwrap_or_else(|| panic!("no underruns in {status}")) as usize
}

/// The underruns a `keepon run` on network time reports in its summary.
fn run_underruns(out: &str) -> usize {
    out.lines()
        .find_map(|l| l.strip_prefix("keepon run: ")?.strip_suffix(" underruns")?.parse().ok())
        .unwrap_or_else(|| panic!("no underrun count in the run's summary\n{out}"))
}

/// `a` (interface `kp0`) and `b` (interface `kp0`) ─veth─ `bridge` (`br0`) ─veth─ `listener` (`kp1`).
struct TwoTalkers {
    a: String,
    b: String,
    listener: String,
    _guard: support::Namespaces,
}

impl TwoTalkers {
    fn new(prefix: &str) -> TwoTalkers {
        let id = std::process::id();
        let [a, b, br, l] = ["a", "b", "br", "l"].map(|n| format!("{prefix}{n}-{id}"));
        let guard = support::Namespaces::new(vec![a.clone(), b.clone(), br.clone(), l.clone()]);
        for n in [&a, &b, &br, &l] {
            support::ip(&["netns", "add", n]);
        }
        support::ip(&["-n", &br, "link", "add", "name", "br0", "type", "bridge", "stp_state", "0"]);
        let ports = [("pa", "kp0", &a), ("pb", "kp0", &b), ("pl", "kp1", &l)];
        for (port, end, ns) in ports {
            support::ip(&["-n", &br, "link", "add", "name", port, "type", "veth", "peer", "name", end, "netns", ns]);
            support::ip(&["-n", &br, "link", "set", "dev", port, "master", "br0"]);
        }
        let devs = [(&br, "br0"), (&br, "pa"), (&br, "pb"), (&br, "pl"), (&a, "kp0"), (&b, "kp0"), (&l, "kp1")];
        for (ns, dev) in devs {
            support::ip(&["-n", ns, "link", "set", "dev", dev, "addrgenmode", "none"]);
            support::ip(&["-n", ns, "link", "set", "dev", dev, "up"]);
        }
        let shows = |args: &[&str], want: &str| {
            Command::new(args[0])
                .args(&args[1..])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(want))
        };
        let ready = support::wait_until(Duration::from_secs(10), || {
            devs.iter().all(|(ns, dev)| shows(&["ip", "-n", ns, "link", "show", "dev", dev], "state UP"))
                && ["pa", "pb", "pl"]
                    .iter()
                    .all(|p| shows(&["bridge", "-n", &br, "link", "show", "dev", p], "state forwarding"))
        });
        assert!(ready, "the two-talker topology did not come up within 10 s");
        TwoTalkers { a, b, listener: l, _guard: guard }
    }
}
