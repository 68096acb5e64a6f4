//! keepon with `[ptp] profile = "gptp"` (IEEE 802.1AS) next to Debian's ptp4l running linuxptp's **unmodified**
//! `configs/gPTP.cfg`, judged on ground truth (needs root, `ptp4l` and `pmc`; skips otherwise).
//!
//! ```text
//!   kga-PID: keepon daemon (afpacket, host-paced, emulated clock error) ── kp0 ══ veth ══ kp1 ── kgb-PID: ptp4l (gPTP.cfg)
//!        ▲ UNIX socket: this test's client reads `Time`             pmc ▶ ptp4l's management socket: asCapable, offset
//! ```
//!
//! ptp4l's configuration is gPTP.cfg key for key ([`GPTP_CFG`]; checked against the installed copy when there is
//! one) plus software time stamping, `free_running 1` (no ptp4l steers the clock all namespaces share) and, for
//! `pmc` on a shared host, its own management socket path. The link is a direct veth: 802.1AS is peer to peer,
//! every message to 01:80:C2:00:00:0E, which no bridge forwards.
//!
//! **The 800 ns threshold on veth.** With software stamps a veth's neighbour delay is the kernel's latency between
//! a TX stamp and the peer's RX stamp: on this 2-core host ptp4l measured keepon at 0.9–1.3 µs, and ptp4l at
//! 0.15–1.7 µs (docs/measured.md). Above gPTP.cfg's `neighborPropDelayThresh 800` ptp4l's port is not asCapable,
//! and an 802.1AS port that is not asCapable sends no Sync. The first test runs gPTP.cfg unmodified and judges what
//! does not depend on the threshold (both sides answer each other, ptp4l measures keepon within 1 µs of how it
//! measures ptp4l); the synchronisation tests raise that one key, on both sides, to [`VETH_THRESH_NS`].
//!
//! Ground truth as in `netns_ptp_p2p.rs`: the keepon link runs with a deliberate clock error, and its true error is
//! `EPHC − (CLOCK_TAI − the kernel's TAI offset)`. ptp4l's port must reach asCapable (its measured neighbour delay
//! of keepon within its 800 ns) and keep it; a ptp4l slave's `master_offset` is read through pmc.
#![cfg(target_os = "linux")]

#[path = "support/ptp.rs"]
mod ptp;
#[allow(dead_code)] // shared with the other namespace tests
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keepon::api::SyncState;

use ptp::{
    complaints, connect, fit, keepon_conf_profile, monotonic_s, skip_unless_ready, spawn_daemon, spawn_ptp4l, stats,
    tai_offset_ns, wait_synchronised,
};
use support::{chmod, direct, Proc};

/// linuxptp's `configs/gPTP.cfg` (linuxptp 3.1.1), its settings as they are.
const GPTP_CFG: &[(&str, &str)] = &[
    ("gmCapable", "1"),
    ("priority1", "248"),
    ("priority2", "248"),
    ("logAnnounceInterval", "0"),
    ("logSyncInterval", "-3"),
    ("syncReceiptTimeout", "3"),
    ("neighborPropDelayThresh", "800"),
    ("min_neighbor_prop_delay", "-20000000"),
    ("assume_two_step", "1"),
    ("path_trace_enabled", "1"),
    ("follow_up_info", "1"),
    ("transportSpecific", "0x1"),
    ("ptp_dst_mac", "01:80:C2:00:00:0E"),
    ("network_transport", "L2"),
    ("delay_mechanism", "P2P"),
];

/// linuxptp's `configs/automotive-master.cfg`: gPTP.cfg without `logAnnounceInterval`, plus these.
const AUTOMOTIVE_MASTER_EXTRA: &[(&str, &str)] = &[
    ("BMCA", "noop"),
    ("masterOnly", "1"),
    ("inhibit_announce", "1"),
    ("asCapable", "true"),
    ("inhibit_delay_req", "1"),
];

/// linuxptp's `configs/automotive-slave.cfg`: gPTP.cfg without `logAnnounceInterval`, plus these.
const AUTOMOTIVE_SLAVE_EXTRA: &[(&str, &str)] = &[
    ("BMCA", "noop"),
    ("slaveOnly", "1"),
    ("inhibit_announce", "1"),
    ("asCapable", "true"),
    ("ignore_source_id", "1"),
    ("step_threshold", "1"),
    ("operLogSyncInterval", "0"),
    ("operLogPdelayReqInterval", "2"),
    ("msg_interval_request", "1"),
    ("servo_offset_threshold", "30"),
    ("servo_num_offset_values", "10"),
];

/// One of linuxptp's configurations, by its file name in `configs/`.
fn linuxptp_cfg(file: &str) -> Vec<(&'static str, &'static str)> {
    let automotive = |extra: &[(&'static str, &'static str)]| {
        GPTP_CFG.iter().copied().filter(|(k, _)| *k != "logAnnounceInterval").chain(extra.iter().copied()).collect()
    };
    match file {
        "gPTP.cfg" => GPTP_CFG.to_vec(),
        "automotive-master.cfg" => automotive(AUTOMOTIVE_MASTER_EXTRA),
        "automotive-slave.cfg" => automotive(AUTOMOTIVE_SLAVE_EXTRA),
        f => panic!("no linuxptp configuration {f} here"),
    }
}

/// Where Debian installs linuxptp's configurations.
const INSTALLED: &str = "/usr/share/doc/linuxptp/configs";

/// ptp4l's configuration: linuxptp's `file` key for key (checked against the installed copy when there is one),
/// software stamps, free-running, its own management socket (`name`.uds); `thresh`: `neighborPropDelayThresh`
/// raised to this many ns (the one change, for veth's software stamps).
fn ptp4l_cfg(dir: &Path, file: &str, name: &str, thresh: Option<u32>) -> PathBuf {
    let keys = linuxptp_cfg(file);
    if let Ok(text) = std::fs::read_to_string(Path::new(INSTALLED).join(file)) {
        let installed: Vec<(String, String)> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim_start().starts_with('[') && !l.trim().is_empty())
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.to_string(), w.next()?.to_string()))
            })
            .collect();
        let ours: Vec<(String, String)> = keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(installed, ours, "{INSTALLED}/{file} differs from the one these tests write");
    }
    let mut text = String::from("[global]\n");
    for (k, v) in keys {
        match thresh {
            Some(t) if k == "neighborPropDelayThresh" => text.push_str(&format!("{k}\t{t}\n")),
            _ => text.push_str(&format!("{k}\t{v}\n")),
        }
    }
    text.push_str(&format!("time_stamping software\nfree_running 1\nuds_address {}\n", uds(dir, name).display()));
    let p = dir.join(format!("{name}.cfg"));
    std::fs::write(&p, text).unwrap();
    p
}

/// [`ptp4l_cfg`] of gPTP.cfg.
fn ptp4l_gptp(dir: &Path, name: &str, thresh: Option<u32>) -> PathBuf {
    ptp4l_cfg(dir, "gPTP.cfg", name, thresh)
}

fn uds(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.uds"))
}

/// The ptp4l of these tests, on `kp1`.
const PTP4L: &str = "ptp4l";

/// One management query through `pmc` (transportSpecific 1, as the gPTP port expects) in namespace `ns`: the
/// named fields' values, and the CLOCK_MONOTONIC midpoint of the call (s). `None` if it does not answer in 3 s.
fn pmc(ns: &str, dir: &Path, what: &str, fields: &[&str]) -> Option<(f64, Vec<String>)> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let client = dir.join(format!("pmc.{n}"));
    let m0 = monotonic_s();
    let out = Command::new("timeout")
        .args(["3", "ip", "netns", "exec", ns, "pmc", "-u", "-b", "0", "-t", "1", "-s"])
        .arg(uds(dir, PTP4L))
        .arg("-i")
        .arg(&client)
        .arg(format!("GET {what}"))
        .output()
        .ok()?;
    let m1 = monotonic_s();
    let _ = std::fs::remove_file(&client);
    let text = String::from_utf8_lossy(&out.stdout);
    let values = fields
        .iter()
        .map(|f| {
            text.lines().find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some(*f)).then(|| w.next().map(str::to_string)).flatten()
            })
        })
        .collect::<Option<Vec<String>>>()?;
    Some(((m0 + m1) / 2.0, values))
}

/// ptp4l's asCapable and its neighbour delay of keepon (`peerMeanPathDelay`, ns).
fn ptp4l_port(ns: &str, dir: &Path) -> Option<(bool, i64)> {
    let (_, v) = pmc(ns, dir, "PORT_DATA_SET_NP", &["asCapable"])?;
    let (_, d) = pmc(ns, dir, "PORT_DATA_SET", &["peerMeanPathDelay"])?;
    Some((v[0] == "1", d[0].parse().ok()?))
}

/// What ptp4l's port said while it was watched.
struct Watched {
    /// (asCapable, neighbour delay in ns) per answer.
    answers: Vec<(bool, i64)>,
}

impl Watched {
    fn capable_from_first(&self) -> Option<usize> {
        self.answers.iter().position(|(c, _)| *c)
    }

    /// Answers after the first asCapable one that were not.
    fn dropped(&self) -> usize {
        self.capable_from_first().map_or(0, |i| self.answers[i..].iter().filter(|(c, _)| !c).count())
    }

    fn summary(&self) -> String {
        let d: Vec<i64> = self.answers.iter().map(|(_, d)| *d).collect();
        let s = stats(&d);
        format!(
            "{} answers, asCapable from answer {:?}, {} not asCapable after; its neighbour delay median {:.0} \
             ns, max |{:.0}| ns",
            self.answers.len(),
            self.capable_from_first(),
            self.dropped(),
            s.median,
            s.max
        )
    }
}

/// ptp4l must be asCapable within `within` of its start (its first peer-delay exchanges take seconds).
fn wait_as_capable(ns: &str, dir: &Path, within: Duration, procs: &[&Proc]) -> Watched {
    let mut w = Watched { answers: Vec::new() };
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(a) = ptp4l_port(ns, dir) {
            w.answers.push(a);
            if a.0 {
                return w;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let out: Vec<String> = procs.iter().map(|p| p.output()).collect();
    panic!("ptp4l's port not asCapable within {within:?}: {}\n{}", w.summary(), out.join("\n"));
}

/// The daemon's last status line.
fn last_status(daemon: &Proc) -> String {
    daemon.output().lines().rev().find(|l| l.contains("ptp: ") && l.contains("servo")).unwrap_or("").to_string()
}

/// The threshold both sides judge asCapable against in the synchronisation tests: veth's software stamps
/// measure about a microsecond of stack latency as neighbour delay (see
/// [`unmodified_gptp_cfg_measures_keepon_as_it_measures_ptp4l`]), above gPTP.cfg's 800 ns.
const VETH_THRESH_NS: u32 = 10_000;

/// The keepon `[ptp]` lines of the synchronisation tests.
fn keepon_ptp(role: &str) -> String {
    format!("role = \"{role}\"\nneighbor_prop_delay_thresh = \"{VETH_THRESH_NS}ns\"\n")
}

/// gPTP.cfg unmodified against keepon (gPTP, slave, default 800 ns), after ptp4l against ptp4l on the same veth:
/// each side answers the other's Pdelay_Req (ptp4l accepts keepon's transportSpecific-1 messages and keepon
/// ptp4l's), ptp4l complains about nothing, and the neighbour delay ptp4l measures of keepon is what keepon
/// measures of ptp4l, within 1 µs (software stamps on a shared host wander by about that), and below the
/// [`VETH_THRESH_NS`] the synchronisation tests rely on. How it compares with ptp4l against ptp4l (within 1 µs in
/// three runs on the development VM, 1.2 µs more on CI's: 1 414 against 225 ns) and whether anyone is asCapable at
/// 800 ns are the host's software stamps' verdict: printed, the issue's open point, not asserted.
#[test]
fn unmodified_gptp_cfg_measures_keepon_as_it_measures_ptp4l() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    let started = Instant::now();
    let tag = "gu";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = direct(tag);
    let conf = ptp4l_gptp(d, PTP4L, None);
    let mut ptp4l = spawn_ptp4l(d, &topo.b, "kp1", true, &conf);
    // ptp4l against ptp4l: the baseline of this host's veth.
    let peer_conf = ptp4l_gptp(d, "peer", None);
    let peer_dir = d.join("peer");
    std::fs::create_dir(&peer_dir).unwrap();
    let mut peer = spawn_ptp4l(&peer_dir, &topo.a, "kp0", true, &peer_conf);
    let mut base = Watched { answers: Vec::new() };
    let from = Instant::now();
    while from.elapsed() < Duration::from_secs(12) {
        base.answers.extend(ptp4l_port(&topo.b, d).filter(|(_, delay)| *delay != 0));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(peer.running(), "{tag}: the baseline ptp4l died\n{}", peer.output());
    assert!(base.answers.len() >= 5, "{tag}: no ptp4l↔ptp4l baseline: {}\n{}", base.summary(), peer.output());
    drop(peer); // killed by its pid
    let sock = d.join("keepon.sock");
    let cfg = d.join("K.toml");
    std::fs::write(&cfg, keepon_conf_profile(&sock, "3ms", 50.0, "gptp", "role = \"slave\"\n")).unwrap();
    let mut daemon = spawn_daemon(d, &topo.a, "kp0", &cfg);
    let _c = connect(&sock, &mut daemon);
    // ptp4l's peer delay filter forgets the baseline within its window: judge the last answers only.
    let mut watched = Watched { answers: Vec::new() };
    let from = Instant::now();
    while from.elapsed() < Duration::from_secs(20) {
        watched.answers.extend(ptp4l_port(&topo.b, d));
        std::thread::sleep(Duration::from_millis(500));
    }
    let last: Vec<i64> = watched.answers.iter().rev().take(10).map(|(_, d)| *d).collect();
    let theirs = stats(&last).median;
    let baseline = stats(&base.answers.iter().map(|(_, d)| *d).collect::<Vec<_>>()).median;
    let status = last_status(&daemon);
    let ours: f64 = status
        .split("neighbour delay ")
        .nth(1)
        .and_then(|r| r.split(" ns").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    let exchanges: u64 =
        status.split(" exchanges").next().and_then(|r| r.rsplit(", ").next()).and_then(|v| v.parse().ok()).unwrap_or(0);
    eprintln!(
        "{tag}: gPTP.cfg unmodified, direct veth, software stamps: ptp4l↔ptp4l neighbour delay median {baseline:.0} ns \
         ({}); then ptp4l's of keepon median {theirs:.0} ns over its last {} answers ({}), keepon's of ptp4l {ours:.0} \
         ns ({exchanges} exchanges); test ran {:.0} s\n{tag}: last daemon status: {status}",
        base.summary(),
        last.len(),
        watched.summary(),
        started.elapsed().as_secs_f64()
    );
    assert!(daemon.running(), "{tag}: daemon died\n{}", daemon.output());
    assert!(ptp4l.running(), "{tag}: ptp4l died\n{}", ptp4l.output());
    assert!(exchanges >= 10, "{tag}: ptp4l answered {exchanges} of keepon's Pdelay_Req\n{}", daemon.output());
    assert!(last.len() >= 10 && last.iter().all(|d| *d != 0), "{tag}: ptp4l measured no delay of keepon");
    assert!(theirs < f64::from(VETH_THRESH_NS), "{tag}: ptp4l measures keepon {theirs:.0} ns, ptp4l {baseline:.0} ns");
    assert!((theirs - ours).abs() < 1_000.0, "{tag}: ptp4l measures keepon {theirs:.0} ns, keepon ptp4l {ours:.0} ns");
    let log = ptp4l.stdout();
    let bad = complaints(&log);
    assert!(bad.is_empty(), "{tag}: ptp4l complained about keepon's messages: {bad:?}\n{}", ptp4l.output());
}

/// keepon slave ← ptp4l grandmaster (gPTP.cfg, [`VETH_THRESH_NS`]), the link 3 ms ahead and 50 ppm fast: ptp4l's
/// port becomes and stays asCapable, keepon's too, the station synchronises within 30 s and its true error is
/// judged.
#[test]
fn keepon_gptp_slave_follows_ptp4l_running_gptp_cfg() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    slave_of_ptp4l("gs", "gptp", "gPTP.cfg", Some(VETH_THRESH_NS));
}

/// keepon slave (automotive: static role, no Announce) ← ptp4l with linuxptp's `automotive-master.cfg` unmodified
/// (asCapable forced on both sides, so the 800 ns threshold does not apply): keepon follows the Syncs of a master
/// that sends no Announce, the link 3 ms ahead and 50 ppm fast.
#[test]
fn keepon_automotive_slave_follows_ptp4l_running_automotive_master_cfg() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    slave_of_ptp4l("as", "automotive", "automotive-master.cfg", None);
}

/// keepon grandmaster (gPTP, 3 ms ahead, 50 ppm fast) → a free-running ptp4l slave (gPTP.cfg,
/// [`VETH_THRESH_NS`]): ptp4l's port becomes and stays asCapable, ptp4l takes keepon as grandmaster (its priority1
/// 248 loses to keepon's 128), and the offsets it reports through pmc are the keepon master's true error, drift
/// included.
#[test]
fn ptp4l_running_gptp_cfg_follows_a_keepon_gptp_grandmaster() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    master_for_ptp4l("gm", "gptp", "gPTP.cfg", Some(VETH_THRESH_NS));
}

/// keepon master (automotive: no Announce) → ptp4l with linuxptp's `automotive-slave.cfg` unmodified: ptp4l follows
/// keepon's Syncs and its offsets are the keepon master's true error, drift included.
#[test]
fn ptp4l_running_automotive_slave_cfg_follows_a_keepon_automotive_master() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    master_for_ptp4l("am", "automotive", "automotive-master.cfg", None);
}

/// keepon (`profile`, slave) ← ptp4l (linuxptp's `file`, `thresh`): judged as described at the tests.
fn slave_of_ptp4l(tag: &str, profile: &str, file: &str, thresh: Option<u32>) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = direct(tag);
    let conf = ptp4l_cfg(d, file, PTP4L, thresh);
    let mut ptp4l = spawn_ptp4l(d, &topo.b, "kp1", true, &conf);
    let sock = d.join("keepon.sock");
    let cfg = d.join("K.toml");
    std::fs::write(&cfg, keepon_conf_profile(&sock, "3ms", 50.0, profile, &keepon_ptp("slave"))).unwrap();
    let mut daemon = spawn_daemon(d, &topo.a, "kp0", &cfg);
    let mut c = connect(&sock, &mut daemon);
    let tai = tai_offset_ns();
    let mut watched = wait_as_capable(&topo.b, d, Duration::from_secs(20), &[&daemon, &ptp4l]);
    let lock = wait_synchronised(&mut c, tag, &[&daemon, &ptp4l]);
    // Measure from 20 s after lock (the Kalman filter still converges on 50 ppm before), over 20 s.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_secs(20) {
        watched.answers.extend(ptp4l_port(&topo.b, d));
        std::thread::sleep(Duration::from_secs(1));
    }
    let (mut errors, mut unsynced) = (Vec::new(), 0);
    let from = Instant::now();
    let mut next_pmc = from;
    while from.elapsed() < Duration::from_secs(20) {
        let t = c.time().unwrap();
        errors.push(t.ephc_now - (t.host_now - tai));
        unsynced += usize::from(t.sync != SyncState::Synchronised);
        if Instant::now() >= next_pmc {
            watched.answers.extend(ptp4l_port(&topo.b, d));
            next_pmc += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = stats(&errors);
    let status = last_status(&daemon);
    eprintln!(
        "{tag}: {profile} slave of ptp4l ({file}), synchronised after {:.1} s; from 20 s later, over 20 s ({} reads, \
         {unsynced} not synchronised): true error {s}; ptp4l's port: {}; test ran {:.0} s\n{tag}: last daemon \
         status: {status}",
        lock.as_secs_f64(),
        s.n,
        watched.summary(),
        started.elapsed().as_secs_f64()
    );
    assert!(daemon.running(), "{tag}: daemon died\n{}", daemon.output());
    assert!(ptp4l.running(), "{tag}: ptp4l died\n{}", ptp4l.output());
    assert_eq!(watched.dropped(), 0, "{tag}: ptp4l's port lost asCapable: {}\n{}", watched.summary(), ptp4l.output());
    assert!(status.contains(&format!("profile {profile}: asCapable true")), "{tag}: keepon's port: {status}");
    assert_eq!(unsynced, 0, "{tag}: the station lost synchronisation\n{}", daemon.output());
    // Software stamps on a shared host's veth: microseconds (the daemon's own threshold is 20 µs); the injected 3 ms
    // are gone.
    assert!(s.median.abs() < 20_000.0 && s.p99 < 50_000.0, "{tag}: true error {s}\n{}", daemon.output());
    let log = ptp4l.stdout();
    let bad = complaints(&log);
    assert!(bad.is_empty(), "{tag}: ptp4l complained about keepon's messages: {bad:?}\n{}", ptp4l.output());
}

/// keepon (`profile`, master, 3 ms ahead, 50 ppm fast) → a free-running ptp4l slave (linuxptp's `file`, `thresh`):
/// judged as described at the tests.
fn master_for_ptp4l(tag: &str, profile: &str, file: &str, thresh: Option<u32>) {
    let started = Instant::now();
    let ppm = 50.0;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = direct(tag);
    let sock = d.join("keepon.sock");
    let cfg = d.join("K.toml");
    std::fs::write(&cfg, keepon_conf_profile(&sock, "3ms", ppm, profile, &keepon_ptp("master"))).unwrap();
    let mut daemon = spawn_daemon(d, &topo.a, "kp0", &cfg);
    let slave_file = file.replace("master", "slave");
    let conf = ptp4l_cfg(d, &slave_file, PTP4L, thresh);
    let mut ptp4l = spawn_ptp4l(d, &topo.b, "kp1", true, &conf);
    let mut c = connect(&sock, &mut daemon);
    let mut watched = wait_as_capable(&topo.b, d, Duration::from_secs(20), &[&daemon, &ptp4l]);
    // ptp4l follows keepon once it has its Announce (gPTP) or Syncs (automotive): UNCALIBRATED (a free-running
    // servo that is not locked never calls itself SLAVE, and a 37 s offset keeps it so) or SLAVE.
    // Then it has an offset once its first Sync/Follow_Up pair was taken (`master_offset` reads 0 before).
    let slave = support::wait_until(Duration::from_secs(30), || {
        pmc(&topo.b, d, "PORT_DATA_SET", &["portState"]).is_some_and(|(_, v)| v[0] == "SLAVE" || v[0] == "UNCALIBRATED")
            && pmc(&topo.b, d, "TIME_STATUS_NP", &["master_offset"]).is_some_and(|(_, v)| v[0] != "0")
    });
    assert!(slave, "{tag}: ptp4l never became slave\n{}\n{}", daemon.output(), ptp4l.output());
    // 40 s: ptp4l's master_offset and keepon's true error, both on CLOCK_MONOTONIC.
    let (mut seen, mut truth) = (Vec::new(), Vec::new());
    let from = Instant::now();
    while from.elapsed() < Duration::from_secs(40) {
        let m0 = monotonic_s();
        let t = c.time().unwrap();
        let m1 = monotonic_s();
        truth.push(((m0 + m1) / 2.0, (t.ephc_now - t.host_now) as f64));
        if let Some((at, v)) = pmc(&topo.b, d, "TIME_STATUS_NP", &["master_offset", "gmIdentity"]) {
            seen.push((at, v[0].parse::<f64>().unwrap_or(f64::NAN), v[1].clone()));
        }
        watched.answers.extend(ptp4l_port(&topo.b, d));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(seen.len() >= 30, "{tag}: only {} answers from pmc\n{}", seen.len(), ptp4l.output());
    // ptp4l on CLOCK_REALTIME takes a PTP-timescale master's time less a UTC offset (its default 37 s, keepon
    // announcing none): whole seconds, taken out here; what remains is the offset against keepon's true error.
    let (slope, cept) = fit(&truth);
    let r: Vec<f64> = seen.iter().map(|(t, o, _)| o + (slope * t + cept)).collect();
    let whole = (r.iter().sum::<f64>() / r.len() as f64 / 1e9).round() * 1e9;
    let resid: Vec<f64> = r.iter().map(|v| v - whole).collect();
    let mean = resid.iter().sum::<f64>() / resid.len() as f64;
    let max = resid.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let rms = (resid.iter().map(|v| v * v).sum::<f64>() / resid.len() as f64).sqrt();
    let drift_ppm = -fit(&seen.iter().map(|(t, o, _)| (*t, *o)).collect::<Vec<_>>()).0 * 1e-3;
    let ours = last_status(&daemon);
    eprintln!(
        "{tag}: ptp4l ({slave_file}, free-running) slave of a keepon {profile} master over 40 s, {} offsets: offset \
         vs the master's true error (less {:.0} s): mean {mean:.0} ns, rms {rms:.0} ns, max {max:.0} ns; drift \
         {drift_ppm:+.4} ppm for an injected {ppm:+.3} ppm; ptp4l's grandmaster {}; ptp4l's port: {}; test ran {:.0} \
         s\n{tag}: last daemon status: {ours}",
        seen.len(),
        whole / 1e9,
        seen.last().map_or("-", |s| s.2.as_str()),
        watched.summary(),
        started.elapsed().as_secs_f64()
    );
    assert!(daemon.running(), "{tag}: daemon died\n{}", daemon.output());
    assert!(ptp4l.running(), "{tag}: ptp4l died\n{}", ptp4l.output());
    assert_eq!(watched.dropped(), 0, "{tag}: ptp4l's port lost asCapable: {}\n{}", watched.summary(), ptp4l.output());
    // keepon's metrics (what `keepon status` shows): the profile, asCapable, and its own clock as grandmaster.
    let metrics = c.stats().unwrap();
    assert!(metrics.contains("\nkeepon_ptp_as_capable 1\n"), "{tag}: keepon's metrics:\n{metrics}");
    assert!(metrics.contains(&format!("keepon_ptp_profile{{profile=\"{profile}\"}} 1")), "{tag}:\n{metrics}");
    let gm: String = metrics
        .split("keepon_ptp_grandmaster{identity=\"")
        .nth(1)
        .unwrap_or("")
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    // `keepon status` says so too, for people and for scripts.
    let out = Command::new(ptp::BIN).args(["status", "--socket"]).arg(&sock).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!("ptp: profile {profile}, asCapable true, neighbour delay ");
    assert!(text.contains(&line) && text.contains(&format!("grandmaster {gm}")), "{tag}: keepon status:\n{text}");
    let out = Command::new(ptp::BIN).args(["status", "--json", "--socket"]).arg(&sock).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sync"]["ptp"]["profile"], profile, "{tag}: {json}");
    assert_eq!(json["sync"]["ptp"]["as_capable"], true, "{tag}: {json}");
    // The neighbour rate ratio: ptp4l's clock (the host's) over keepon's EPHC, which runs `ppm` fast — to within
    // 5 ppm of the injected 50: software stamps on a loaded VM are tens of µs off (CI once saw 115 µs), and the
    // ratio is measured over a few Pdelay intervals (a 2 ppm bound failed once by 0.14 ppm).
    let want = 1.0 / (1.0 + ppm * 1e-6);
    let ratio = json["sync"]["ptp"]["neighbor_rate_ratio"].as_f64();
    assert!(ratio.is_some_and(|r| (r - want).abs() < 5e-6), "{tag}: rate ratio {ratio:?}, want {want:.9}");
    // With Announce (gPTP), ptp4l names keepon's clock (EUI-64 from kp0's MAC) as grandmaster, in its own notation.
    if profile == "gptp" {
        let theirs = seen.last().map_or(String::new(), |s| s.2.replace('.', ""));
        assert!(
            gm.len() == 16 && theirs == gm,
            "{tag}: ptp4l's grandmaster {theirs} is not keepon's {gm}\n{}",
            ptp4l.output()
        );
    }
    assert!(
        ((drift_ppm - ppm) / ppm).abs() < 0.005,
        "{tag}: ptp4l measured {drift_ppm:+.4} ppm for {ppm:+.3} ppm; offset vs true error: {:?}\n{}",
        resid.iter().map(|r| *r as i64).collect::<Vec<_>>(),
        ptp4l.output()
    );
    assert!(mean.abs() < 50_000.0, "{tag}: ptp4l's offset is {mean:.0} ns off the master's true error");
    let log = ptp4l.stdout();
    let bad = complaints(&log);
    assert!(bad.is_empty(), "{tag}: ptp4l complained about keepon's messages: {bad:?}\n{}", ptp4l.output());
}
