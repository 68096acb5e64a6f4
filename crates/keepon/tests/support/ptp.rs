//! Shared by the PTP namespace tests: ptp4l and keepon configurations, the daemon and ptp4l processes, the
//! kernel's TAI offset, statistics of true errors and ptp4l's log.
#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keepon::api::{Client, SyncState, TimeInfo};

use super::support::Proc;

/// The keepon binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_keepon");

pub fn have_ptp4l() -> bool {
    Command::new("ptp4l").arg("-v").output().is_ok_and(|o| o.status.success())
}

/// ptp4l's configuration: never steer the host clock; fast Sync for quick lock.
pub fn ptp4l_conf(dir: &Path, master: bool) -> PathBuf {
    let p = dir.join(if master { "ptp4l-master.conf" } else { "ptp4l-slave.conf" });
    // The slave's utc_offset is the kernel's TAI offset, so its offsets read CLOCK_TAI − EPHC (keepon announces
    // the PTP timescale without a valid UTC offset, and ptp4l then applies its configured one).
    let role = if master {
        "masterOnly 1\npriority1 10\nsummary_interval 0\n".to_string()
    } else {
        // A free-running slave prints an offset per frequency estimate (every 2^0 s) when its summary interval
        // is the Sync interval.
        format!(
            "slaveOnly 1\nutc_offset {}\nfreq_est_interval 0\nsummary_interval -4\n",
            tai_offset_ns() / 1_000_000_000
        )
    };
    // Its own management sockets: the default /var/run/ptp4l would clash with any other ptp4l on the host.
    let uds = dir.join(if master { "ptp4l-master" } else { "ptp4l-slave" });
    std::fs::write(
        &p,
        format!(
            "[global]\nfree_running 1\n{role}logSyncInterval -4\nlogAnnounceInterval -2\nlogMinDelayReqInterval -4\n\
             time_stamping software\nuds_address {0}.uds\n",
            uds.display()
        ),
    )
    .unwrap();
    p
}

/// [`ptp4l_conf`] with the peer-to-peer delay mechanism (Pdelay_Req at 4 Hz).
pub fn ptp4l_conf_p2p(dir: &Path, master: bool) -> PathBuf {
    let p = ptp4l_conf(dir, master);
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("delay_mechanism P2P\nlogMinPdelayReqInterval -2\n");
    std::fs::write(&p, text).unwrap();
    p
}

/// The intervals of the default-profile tests: Sync at 16 Hz, Announce at 4 Hz.
const FAST: &str = "log_sync_interval = -4\nlog_announce_interval = -2\n";

pub fn keepon_conf(sock: &Path, offset: &str, ppm: f64, ptp: &str) -> String {
    keepon_conf_with(sock, offset, ppm, &format!("{FAST}log_delay_req_interval = -4"), ptp)
}

/// [`keepon_conf`] measuring the path delay peer to peer (Pdelay_Req at 4 Hz, as [`ptp4l_conf_p2p`]).
pub fn keepon_conf_p2p(sock: &Path, offset: &str, ppm: f64, ptp: &str) -> String {
    keepon_conf_with(sock, offset, ppm, &format!("{FAST}delay_mechanism = \"p2p\"\nlog_pdelay_req_interval = -2"), ptp)
}

/// [`keepon_conf`] with `ptp.profile = profile` at that profile's own intervals (no interval key set).
pub fn keepon_conf_profile(sock: &Path, offset: &str, ppm: f64, profile: &str, ptp: &str) -> String {
    keepon_conf_with(sock, offset, ppm, &format!("profile = \"{profile}\""), ptp)
}

fn keepon_conf_with(sock: &Path, offset: &str, ppm: f64, delay: &str, ptp: &str) -> String {
    format!(
        r#"
[link]
rate = "100Mbps"
emulated_offset = "{offset}"
emulated_ppm = {ppm:.3}
[ring]
slot_bytes = 1230      # δ = 100 µs
slots = 32
batch = 8
[[class]]
name = "ptp"
slots = [0, 8, 16, 24]
[[class]]
name = "tc"
slots = [4]
[[class]]
name = "be"
[run]
poll_period = "50us"
[daemon]
socket = "{}"
[ptp]
class = "ptp"
{delay}
sync_threshold = "20us"
{ptp}
"#,
        sock.display()
    )
}

pub use super::support::tai_offset_ns;

/// Statistics of true errors (ns).
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub rms: f64,
    pub p99: f64,
    pub max: f64,
}

/// "median … ns, mean … ns, rms … ns, p99 … ns, max … ns".
impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {:.0} ns, mean {:.0} ns, rms {:.0} ns, p99 {:.0} ns, max {:.0} ns",
            self.median, self.mean, self.rms, self.p99, self.max
        )
    }
}

pub fn stats(errors: &[i64]) -> Stats {
    let n = errors.len().max(1);
    let mean = errors.iter().map(|&e| e as f64).sum::<f64>() / n as f64;
    let rms = (errors.iter().map(|&e| (e as f64).powi(2)).sum::<f64>() / n as f64).sqrt();
    let mut abs: Vec<f64> = errors.iter().map(|&e| (e as f64).abs()).collect();
    abs.sort_by(|a, b| a.total_cmp(b));
    let p99 = abs.get((abs.len() * 99 / 100).min(abs.len().saturating_sub(1))).copied().unwrap_or(0.0);
    let mut sorted: Vec<i64> = errors.to_vec();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0) as f64;
    Stats { n: errors.len(), median, mean, rms, p99, max: abs.last().copied().unwrap_or(0.0) }
}

/// One `master offset` line of `ptp4l -m`: (its CLOCK_MONOTONIC time in s, the offset in ns).
pub fn ptp4l_offsets(out: &str) -> Vec<(f64, f64)> {
    out.lines()
        .filter_map(|l| {
            let t = l.strip_prefix("ptp4l[")?.split(']').next()?.parse::<f64>().ok()?;
            let mut w = l.split_whitespace().skip_while(|w| *w != "offset");
            w.next()?;
            Some((t, w.next()?.parse::<f64>().ok()?))
        })
        .collect()
}

pub fn monotonic_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Least-squares line through (x, y): (slope, intercept).
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = sxy / sxx;
    (slope, my - slope * mx)
}

/// `KEEPON_PTP_PIN=CPU`: run the daemons and ptp4l on that CPU (`taskset`), so that every software timestamp
/// of both directions is taken on one core.
fn pinned() -> Vec<String> {
    match std::env::var("KEEPON_PTP_PIN") {
        Ok(cpu) if !cpu.is_empty() => vec!["taskset".into(), "-c".into(), cpu],
        _ => Vec::new(),
    }
}

/// Start ptp4l (software time stamping, `-m`) on `kp1`-like interface `iface` in namespace `ns`.
pub fn spawn_ptp4l(dir: &Path, ns: &str, iface: &str, l2: bool, conf: &Path) -> Proc {
    Proc::spawn(
        "ptp4l",
        dir,
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(pinned())
            .args(["ptp4l", "-i", iface, "-S", "-m", if l2 { "-2" } else { "-4" }, "-f"])
            .arg(conf),
    )
}

/// Start `keepon daemon` (AF_PACKET, host-paced, reserved-address fillers) on `iface` in namespace `ns`.
pub fn spawn_daemon(dir: &Path, ns: &str, iface: &str, cfg: &Path) -> Proc {
    Proc::spawn(
        "daemon",
        dir,
        Command::new("ip").args(["netns", "exec", ns]).args(pinned()).args([BIN, "daemon", "--config"]).arg(cfg).args(
            [
                "--backend",
                "afpacket",
                "--iface",
                iface,
                "--pacing",
                "host",
                "--filler",
                "reserved-address",
                "--duration",
                "900s",
            ],
        ),
    )
}

/// Connect to the daemon's socket (it must come up within 10 s), with a 5 s read timeout.
pub fn connect(sock: &Path, daemon: &mut Proc) -> Client {
    let up = Instant::now();
    let c = loop {
        if let Ok(c) = Client::connect(sock) {
            break c;
        }
        assert!(daemon.running() && up.elapsed() < Duration::from_secs(10), "daemon not up\n{}", daemon.output());
        std::thread::sleep(Duration::from_millis(10));
    };
    c.set_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

/// One PTP scenario at a time: each measures timing on a shared 2-core host, and two at once would judge each
/// other's load. Hold the guard for the whole test.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `Some(guard)` to run (root and ptp4l are there; the guard serialises the PTP scenarios of this test file),
/// or `None` to skip (with a message).
pub fn skip_unless_ready() -> Option<std::sync::MutexGuard<'static, ()>> {
    if !super::support::is_root() || !have_ptp4l() {
        println!("skipping: needs root (network namespaces) and ptp4l (linuxptp)");
        return None;
    }
    Some(exclusive())
}

/// Wait (at most 30 s) until the daemon behind `c` reports synchronised; returns how long it took. On timeout,
/// fails with the processes' output.
pub fn wait_synchronised(c: &mut Client, tag: &str, procs: &[&Proc]) -> Duration {
    let start = Instant::now();
    loop {
        let t = c.time().unwrap();
        if t.sync == SyncState::Synchronised {
            return start.elapsed();
        }
        if start.elapsed() >= Duration::from_secs(30) {
            let out: Vec<String> = procs.iter().map(|p| p.output()).collect();
            panic!("{tag}: not synchronised after 30 s: {t:?}\n{}", out.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Read `Time` every 100 ms for `window`: each reply with the midpoint of the CLOCK_MONOTONIC readings around it
/// (the axis of ptp4l's log), in seconds.
pub fn sample_time(c: &mut Client, window: Duration) -> Vec<(f64, TimeInfo)> {
    let mut out = Vec::new();
    let from = Instant::now();
    while from.elapsed() < window {
        let m0 = monotonic_s();
        let t = c.time().unwrap();
        let m1 = monotonic_s();
        out.push(((m0 + m1) / 2.0, t));
        std::thread::sleep(Duration::from_millis(100));
    }
    out
}

/// ptp4l's complaints about a peer's messages (any one fails a test).
const COMPLAINTS: [&str; 8] = [
    "bad message",
    "timeout",
    "rogue peer delay response",
    "multiple peer responses",
    "unexpected peer port id",
    "pdelay_req on E2E port",
    "timed out while polling for tx timestamp",
    "FAULTY",
];

/// The lines of ptp4l's log that complain about a peer's messages.
pub fn complaints(out: &str) -> Vec<&str> {
    out.lines().filter(|l| COMPLAINTS.iter().any(|c| l.contains(c))).collect()
}

/// What a free-running ptp4l slave made of a keepon master over 80 s (see [`judge_master`]).
pub struct MasterSeen {
    /// The master's `Time` replies over the window, on the monotonic axis ptp4l's log uses.
    pub replies: Vec<(f64, TimeInfo)>,
    /// ptp4l's log.
    pub log: String,
    /// The window, s.
    pub window: f64,
    /// ptp4l's offsets in the window.
    pub offsets: usize,
    /// The drift of its offsets, ppm of the master's clock.
    pub drift_ppm: f64,
    /// Its offsets against the master's true error at the same instants: mean and largest, ns.
    pub offset_mean: f64,
    /// See `offset_mean`.
    pub offset_max: f64,
}

/// Judge a free-running ptp4l slave of a keepon master whose link runs `ppm` off: it reports offsets within
/// 30 s; over 80 s their drift is the injected one within 0.5 % (the veth path's asymmetry wanders by µs over
/// tens of seconds, so a shorter window judges the wander, not the drift), their mean is the master's true error
/// (`EPHC − CLOCK_TAI` from its `Time` replies) within 50 µs, it complains about nothing, and both processes
/// still run.
pub fn judge_master(tag: &str, ppm: f64, c: &mut Client, daemon: &mut Proc, ptp4l: &mut Proc) -> MasterSeen {
    assert!(
        super::support::wait_until(Duration::from_secs(30), || ptp4l_offsets(&ptp4l.stdout()).len() >= 2),
        "{tag}: ptp4l reports no offsets from the keepon master\n{}\n{}",
        daemon.output(),
        ptp4l.output()
    );
    let replies = sample_time(c, Duration::from_secs(80));
    let truth: Vec<(f64, f64)> = replies.iter().map(|(m, t)| (*m, (t.ephc_now - t.host_now) as f64)).collect();
    let (t0, t1) = (truth[0].0, truth[truth.len() - 1].0);
    let log = ptp4l.stdout();
    let seen: Vec<(f64, f64)> = ptp4l_offsets(&log).into_iter().filter(|(t, _)| *t >= t0 && *t <= t1).collect();
    assert!(seen.len() >= 60, "{tag}: only {} offsets in the window\n{}", seen.len(), ptp4l.output());
    // ns per s → ppm; the slave sees CLOCK_TAI − EPHC.
    let drift_ppm = -fit(&seen).0 * 1e-3;
    // Its offsets against minus the master's true error at the same instants.
    let (tslope, tcept) = fit(&truth);
    let resid: Vec<f64> = seen.iter().map(|(t, o)| o + (tslope * t + tcept)).collect();
    let offset_mean = resid.iter().sum::<f64>() / resid.len() as f64;
    let offset_max = resid.iter().fold(0.0f64, |m, r| m.max(r.abs()));
    assert!(daemon.running(), "{tag}: daemon died\n{}", daemon.output());
    assert!(ptp4l.running(), "{tag}: ptp4l died\n{}", ptp4l.output());
    let bad = complaints(&log);
    assert!(bad.is_empty(), "{tag}: ptp4l complained about keepon's messages: {bad:?}\n{log}");
    assert!(
        ((drift_ppm - ppm) / ppm).abs() < 0.005,
        "{tag}: the slave measured {drift_ppm:+.4} ppm for an injected {ppm:+.3} ppm\n{log}"
    );
    // Software stamps on veth: a few µs of bias and jitter; the injected offset is milliseconds or more.
    assert!(
        offset_mean.abs() < 50_000.0,
        "{tag}: the slave's offset is {offset_mean:.0} ns off the master's true error"
    );
    MasterSeen { replies, log, window: t1 - t0, offsets: seen.len(), drift_ppm, offset_mean, offset_max }
}

/// Make the test bridge `br0` in namespace `ns` an IGMP querier with short timers: a General Query every 2 s
/// (1 s to answer), and a membership not reported for 5 s expires. Snooping then forwards a group only to the
/// ports that answer (a querier is present, so unregistered groups are no longer flooded either): PTP over UDPv4
/// reaches a station only while it keeps itself a member.
pub fn igmp_querier(ns: &str) {
    super::support::ip(&[
        "-n",
        ns,
        "link",
        "set",
        "dev",
        "br0",
        "type",
        "bridge",
        "mcast_snooping",
        "1",
        "mcast_querier",
        "1",
        "mcast_query_interval",
        "200",
        "mcast_query_response_interval",
        "100",
        "mcast_startup_query_interval",
        "100",
        "mcast_membership_interval",
        "500",
    ]);
}

/// The bridge ports in namespace `ns` that `bridge mdb` lists as members of PTP's group 224.0.1.129.
pub fn ptp_group_ports(ns: &str) -> Vec<String> {
    let out = Command::new("bridge").args(["-n", ns, "mdb", "show"]).output().expect("iproute2 `bridge`");
    let text = String::from_utf8_lossy(&out.stdout);
    // Lines like "dev br0 port bt grp 224.0.1.129 temp".
    let mut ports: Vec<String> = text
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "224.0.1.129"))
        .filter_map(|l| l.split_whitespace().skip_while(|w| *w != "port").nth(1).map(str::to_string))
        .collect();
    ports.sort();
    ports.dedup();
    ports
}
