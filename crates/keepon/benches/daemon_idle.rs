//! Benchmark: what idle client connections cost the daemon's poll loop.
//!
//! Run: `cargo bench -p keepon --bench daemon_idle` (or `make bench`).
//!
//! The daemon serves on the simulated NIC held to the wall clock (100 Mb/s, 1230 B slots, 50 µs poll period) on
//! a thread of this process; its CPU time is read from that thread's own CPU clock (`pthread_getcpuclockid`).
//! Measured alternately, in one run: the loop with no client, then with 256 connections that connect and send
//! nothing. With readiness from epoll an idle connection costs no system call per poll; the goal is that 256 of
//! them cost less than 2 % of a core beside the poll loop.

use std::os::unix::net::UnixStream;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keepon::backend::{self, BackendOptions};
use keepon::config::Config;
use keepon::daemon::{serve, DaemonConfig};

const IDLE: usize = 256;
const WINDOW: Duration = Duration::from_secs(4);

fn config(sock: &std::path::Path) -> String {
    format!(
        r#"
[link]
rate = "100Mbps"
[ring]
slot_bytes = 1230
slots = 32
batch = 8
slot_masks = "0x01,0"
[run]
poll_period = "50us"
[daemon]
socket = "{}"
max_connections = 512
max_connections_per_uid = 512
"#,
        sock.display()
    )
}

/// CPU time of the thread behind `clock`, ns.
fn cpu_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `clock` is a valid thread CPU clock while the thread runs; `ts` is valid for writes.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime on the daemon thread's CPU clock");
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Share of a core the daemon thread used over `WINDOW`, percent.
fn load(clock: libc::clockid_t) -> f64 {
    let (c0, t0) = (cpu_ns(clock), Instant::now());
    std::thread::sleep(WINDOW);
    let (c1, dt) = (cpu_ns(clock), t0.elapsed());
    (c1 - c0) as f64 / dt.as_nanos() as f64 * 100.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("keepon-idle-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("keepon.sock");
    let cfg = Config::parse(&config(&sock)).unwrap();
    let dcfg = DaemonConfig::from_config(&cfg).unwrap();
    let (nic, _) = backend::open(&cfg, &BackendOptions::default(), true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || serve(&cfg, &dcfg, nic, &stop2, None));
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is running (joined only below); `clock` is valid for writes.
    let rc = unsafe { libc::pthread_getcpuclockid(server.as_pthread_t(), &mut clock) };
    assert_eq!(rc, 0, "pthread_getcpuclockid");
    let up = Instant::now();
    while UnixStream::connect(&sock).is_err() {
        assert!(up.elapsed() < Duration::from_secs(10), "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));

    println!("daemon poll loop (simulated NIC held to the wall clock, 50 µs poll period), CPU of its thread:");
    let mut rounds = Vec::new();
    for round in 0..3 {
        let alone = load(clock);
        let conns: Vec<UnixStream> = (0..IDLE).map(|_| UnixStream::connect(&sock).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200)); // accepted
        let idle = load(clock);
        drop(conns);
        std::thread::sleep(Duration::from_millis(200)); // closed
        println!(
            "  round {round}: {alone:.2} % of a core alone, {idle:.2} % with {IDLE} idle connections: +{:.2} % ({:.3}×)",
            idle - alone,
            idle / alone
        );
        rounds.push(idle - alone);
    }
    rounds.sort_by(f64::total_cmp);
    println!("  median cost of {IDLE} idle connections: {:+.2} % of a core (goal: < 2 %)", rounds[1]);
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap().unwrap();
    println!("  ({} connections accepted in all)", stats.connections);
    let _ = std::fs::remove_dir_all(&dir);
}
