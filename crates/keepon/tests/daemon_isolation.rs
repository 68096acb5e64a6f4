//! The daemon against another user (needs root: the flooding clients are threads that drop to uid/gid
//! 65534 with the raw `setresuid` system call, which changes only the calling thread's credentials, so the
//! daemon sees them as `nobody` through `SO_PEERCRED`). The simulated NIC is held to the wall clock.
//!
//! Issue 12, points 10 and 11: a best-effort flood from another uid leaves the real-time class's outcomes
//! unchanged, and non-reading connections flooding `Info` do not grow the daemon's memory without bound.

#[allow(dead_code)] // shared with the namespace tests; this test uses the daemon configuration
mod support;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::{as_uid, is_root};

use keepon::api::{frame_message, Client, Delivery, Request, Response};
use keepon::backend::{self, BackendOptions};
use keepon::config::Config;
use keepon::daemon::{serve, DaemonConfig, DaemonStats};
use keepon_core::outcome::Reason;
use keepon_core::testframe::TestHeader;

const CYCLE: i64 = 3_200_000;
const NOBODY: u32 = 65534;

/// The two tests measure the process's memory and load the host: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn frame(len: usize, seq: u64, txtime: i64) -> Vec<u8> {
    let mut b = vec![0u8; len];
    TestHeader { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], flow: 0, seq, txtime }.emit(&mut b[..38]);
    b
}

/// Run `f` on a new thread whose credentials are uid/gid 65534.
fn as_nobody<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    as_uid(NOBODY, f)
}

struct Daemon {
    _dir: tempfile::TempDir,
    sock: PathBuf,
    stop: Arc<AtomicBool>,
    server: JoinHandle<Result<DaemonStats, String>>,
}

/// A daemon where root may use every class and nobody only best effort (`tc-2`).
fn start(run: &str, daemon: &str) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sock = dir.path().join("keepon.sock");
    let rules = format!(
        r#"{daemon}
[[daemon.allow]]
uid = 0
classes = ["tc-0", "tc-1", "tc-2"]
[[daemon.allow]]
uid = {NOBODY}
classes = ["tc-2"]"#
    );
    let text = support::daemon_config(&sock, "20us", run, &rules);
    let cfg = Config::parse(&text).unwrap();
    let dcfg = DaemonConfig::from_config(&cfg).unwrap();
    let (nic, _) = backend::open(&cfg, &BackendOptions::default(), true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || serve(&cfg, &dcfg, nic, &stop2, None));
    let deadline = Instant::now() + Duration::from_secs(5);
    while Client::connect(&sock).and_then(|mut c| c.info()).is_err() {
        assert!(Instant::now() < deadline && !server.is_finished(), "daemon did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
    Daemon { _dir: dir, sock, stop, server }
}

impl Daemon {
    fn finish(self) -> DaemonStats {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.server.is_finished() {
            assert!(Instant::now() < deadline, "the daemon did not return within 30 s of its stop flag");
            std::thread::sleep(Duration::from_millis(10));
        }
        self.server.join().unwrap().unwrap()
    }
}

/// Submit `n` real-time frames on ring slot 0 of upcoming cycles and collect their outcomes.
fn real_time_round(sock: &Path, n: u64) -> Vec<Delivery> {
    let mut c = Client::connect(sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(20))).unwrap();
    let info = c.info().unwrap();
    let first = info.cycle_start + 20 * CYCLE;
    for i in 0..n {
        let t = first + i as i64 * CYCLE;
        c.send(&Request::Submit { tag: i, class: "tc-0".into(), txtime: Some(t), frame: frame(100, i, t) }).unwrap();
    }
    let mut out = vec![None; n as usize];
    for _ in 0..n {
        match c.recv().unwrap() {
            Some(Response::Outcome { tag, delivery }) => {
                assert!(out[tag as usize].replace(delivery).is_none(), "two outcomes for {tag}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    out.into_iter().map(Option::unwrap).collect()
}

/// Every real-time frame is sent; only when the host stalled the simulated link (reported underruns) may a
/// frame be rejected for it. Never `queue-full`.
fn assert_real_time_intact(rt: &[Delivery], stats: &DaemonStats) {
    for (i, d) in rt.iter().enumerate() {
        match d {
            Delivery::Sent { ring_slot: 0, .. } => {}
            Delivery::Rejected(Reason::Underrun | Reason::Late) if stats.underruns > 0 => {}
            other => panic!("real-time frame {i}: {other:?} ({stats:?})"),
        }
    }
}

fn vm_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Point 10: nobody keeps 8 connections submitting best-effort frames as fast as they can (reading the
/// replies), far more than the station's `max_pending` (512 here) could hold; root's 100 real-time frames
/// are all sent, none `queue-full`, as in a round without the flood.
#[test]
fn best_effort_flood_from_another_uid_leaves_real_time_intact() {
    if !is_root() {
        println!("skipping: needs root (threads acting as uid 65534)");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = start("max_pending = 512", "");
    let quiet = real_time_round(&d.sock, 100);
    let flooded = Arc::new(AtomicU64::new(0));
    let mut flood = Vec::new();
    for n in 0..8u64 {
        let sock = d.sock.clone();
        let flooded = flooded.clone();
        flood.push(as_nobody(move || {
            let mut s = UnixStream::connect(&sock).unwrap();
            // Replies are read and thrown away, so the flood never stalls on its own backlog.
            let mut r = s.try_clone().unwrap();
            let reader = std::thread::spawn(move || {
                let mut sink = [0u8; 64 << 10];
                while matches!(std::io::Read::read(&mut r, &mut sink), Ok(n) if n > 0) {}
            });
            let mut batch = Vec::new();
            for i in 0..64u64 {
                let tag = n << 32 | i;
                let req = Request::Submit { tag, class: "tc-2".into(), txtime: None, frame: frame(100, tag, 0) };
                frame_message(&req.emit(), &mut batch);
            }
            // Blocking writes: stops when the daemon stops reading (its shutdown).
            while s.write_all(&batch).is_ok() {
                flooded.fetch_add(64, Ordering::Relaxed);
            }
            reader.join().unwrap();
        }));
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = flooded.load(Ordering::Relaxed);
    let rt = real_time_round(&d.sock, 100);
    let during = flooded.load(Ordering::Relaxed) - before;
    let stats = d.finish();
    for f in flood {
        f.join().unwrap();
    }
    let sent = |r: &[Delivery]| r.iter().filter(|d| matches!(d, Delivery::Sent { .. })).count();
    println!(
        "flood: {before} frames written before the real-time round, {during} during it; real-time sent {}/100 \
         without the flood, {}/100 with it; {stats:?}",
        sent(&quiet),
        sent(&rt)
    );
    assert_real_time_intact(&quiet, &stats);
    assert!(before >= 4096, "the flood did not get going: {before} frames");
    assert_real_time_intact(&rt, &stats);
}

/// Point 11: 48 connections of nobody send `Info` requests without reading any reply. The daemon refuses
/// connections beyond `max_connections_per_uid`, stops reading a connection whose replies pile up, and its
/// memory stays bounded (peak of the process's VmRSS, and the daemon's own count of buffered bytes), while
/// root's real-time frames keep their outcomes.
#[test]
fn non_reading_info_flood_stays_bounded() {
    if !is_root() {
        println!("skipping: needs root (threads acting as uid 65534)");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = start("", "max_connections_per_uid = 16");
    let rss0 = vm_rss_kib();
    let peak = Arc::new(AtomicU64::new(rss0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(vm_rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let written = Arc::new(AtomicU64::new(0));
    let mut flood = Vec::new();
    for _ in 0..48 {
        let sock = d.sock.clone();
        let written = written.clone();
        flood.push(as_nobody(move || {
            let Ok(mut s) = UnixStream::connect(&sock) else { return };
            let mut batch = Vec::new();
            for _ in 0..1024 {
                frame_message(&Request::Info.emit(), &mut batch);
            }
            while s.write_all(&batch).is_ok() {
                written.fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let rt = real_time_round(&d.sock, 50);
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let stats = d.finish();
    for f in flood {
        f.join().unwrap();
    }
    let grew_mib = (peak.load(Ordering::Relaxed) - rss0) / 1024;
    println!(
        "info flood: {} MiB of requests written; RSS grew by {grew_mib} MiB (peak); real-time sent {}/50; {stats:?}",
        written.load(Ordering::Relaxed) >> 20,
        rt.iter().filter(|d| matches!(d, Delivery::Sent { .. })).count()
    );
    assert!(written.load(Ordering::Relaxed) >= 1 << 20, "the flood did not get going");
    assert!(stats.refused >= 32, "connections beyond the per-uid limit must be refused: {stats:?}");
    // Per connection at most read_buffer + reply_backlog + one reply (defaults 64 KiB + 64 KiB).
    assert!(stats.peak_buffered <= 17 * (128 << 10) + (64 << 10), "{stats:?}");
    assert!(grew_mib < 64, "RSS grew by {grew_mib} MiB");
    assert_real_time_intact(&rt, &stats);
}

/// Issue 23 point 3: four uids with no allow rule, then eight best-effort-only uids, each open as many idle
/// connections as the daemon takes (the default limits: 256 in all, 32 per uid) and hold them. Users with no rule
/// share at most 8, and the last 32 connections stay reserved for users of a real-time class: root still
/// connects and every one of its real-time frames is sent.
#[test]
fn idle_connections_of_other_users_leave_the_real_time_user_room() {
    if !is_root() {
        println!("skipping: needs root (threads acting as other uids)");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let best_effort: Vec<u32> = std::iter::once(NOBODY).chain(60_001..60_008).collect();
    let unlisted: Vec<u32> = (61_001..61_005).collect();
    let rules: String =
        best_effort[1..].iter().map(|u| format!("[[daemon.allow]]\nuid = {u}\nclasses = [\"tc-2\"]\n")).collect();
    let d = start("", &rules);
    let release = Arc::new(AtomicBool::new(false));
    let hold = |uids: &[u32]| -> Vec<JoinHandle<usize>> {
        uids.iter()
            .map(|&uid| {
                let (sock, release) = (d.sock.clone(), release.clone());
                as_uid(uid, move || {
                    // A connection is held if the daemon answers on it (a refused one gets an error, then EOF).
                    let mut held = Vec::new();
                    for _ in 0..40 {
                        let Ok(mut c) = Client::connect(&sock) else { break };
                        c.set_timeout(Some(Duration::from_secs(5))).unwrap();
                        if c.info().is_ok() {
                            held.push(c);
                        }
                    }
                    let n = held.len();
                    while !release.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    n
                })
            })
            .collect()
    };
    let first = hold(&unlisted);
    std::thread::sleep(Duration::from_millis(1000));
    let second = hold(&best_effort);
    std::thread::sleep(Duration::from_millis(1500));
    let rt = real_time_round(&d.sock, 50);
    release.store(true, Ordering::Relaxed);
    let held_unlisted: usize = first.into_iter().map(|h| h.join().unwrap()).sum();
    let held_be: usize = second.into_iter().map(|h| h.join().unwrap()).sum();
    let stats = d.finish();
    let sent = rt.iter().filter(|d| matches!(d, Delivery::Sent { .. })).count();
    println!("held: {held_unlisted} by users without a rule, {held_be} by best-effort users; real-time {sent}/50");
    assert_eq!(held_unlisted, 8, "users without a rule share daemon.max_connections_unlisted");
    assert_eq!(held_unlisted + held_be, 256 - 32, "all but the reserve (daemon.reserved_connections)");
    assert!(stats.refused > 0, "{stats:?}");
    assert_real_time_intact(&rt, &stats);
}
