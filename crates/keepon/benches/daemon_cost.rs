//! Benchmark: what the daemon costs the host when idle, and what one client gets through it — the `keepon daemon`
//! binary at Example 2's link (1 Gb/s, 1230 B slots, ring 32, poll period 20 µs) with Example 2's batch 8 (a lead of
//! 80 µs) and with batch 16 (160 µs), on the simulated NIC held to the wall clock, under its default `[realtime]`
//! (`SCHED_FIFO` where the host allows it).
//!
//! Run: `cargo bench -p keepon --bench daemon_cost` (or `make bench`). With `KEEPON_COMPARE=/path/to/keepon` (an
//! older build) both binaries are measured alternately in one run, so the figures are comparable.
//!
//! - **Idle**: CPU of the daemon process (utime + stime from `/proc/PID/stat`) over 4 s with no client, as a share of
//!   one core; the poll loop's wake-ups per second (from its metrics, where it reports them); underruns.
//! - **One client, 64 frames in flight**: best-effort frames (class `tc-2`, the 29 unowned ring slots of 32, so the
//!   link carries at most 90 625 of them per second), a new one submitted as each outcome arrives, for 3 s: frames
//!   per second as a share of that, and the latency from submit to outcome (p50, p99).
//! - **1, 2 and 8 clients**, 64 frames in flight in all, each client on its own connection and thread: the same
//!   figures summed over the clients (this build, batch 16).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keepon::api::{Client, Delivery, Request, Response};

const LINK_BE_PER_S: f64 = 1e9 / (1250.0 * 8.0) * 29.0 / 32.0;

fn config(sock: &Path, batch: u32, pause: bool) -> String {
    format!(
        r#"
[link]
rate = "1Gbps"
[ring]
slot_bytes = 1230
slots = 32
batch = {batch}
slot_masks = "0x01,0x20002,0"
[run]
poll_period = "20us"
[daemon]
socket = "{}"
{}
"#,
        sock.display(),
        if pause { "idle_pause = true" } else { "" }
    )
}

struct Daemon {
    child: Child,
    sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child this benchmark started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn start(bin: &Path, batch: u32, pause: bool) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keepon.sock");
    let cfg = dir.path().join("d.toml");
    std::fs::write(&cfg, config(&sock, batch, pause)).unwrap();
    let child = Command::new(bin)
        .args(["daemon", "--backend", "sim", "--duration", "60s", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while Client::connect(&sock).and_then(|mut c| c.info()).is_err() {
        assert!(t.elapsed() < Duration::from_secs(10), "{} did not come up", bin.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, sock, _dir: dir }
}

/// utime + stime of a process, clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn metric(sock: &Path, name: &str) -> Option<f64> {
    let mut c = Client::connect(sock).ok()?;
    c.set_timeout(Some(Duration::from_secs(5))).ok()?;
    let text = c.stats().ok()?;
    let line = text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))?;
    line.rsplit(' ').next()?.parse().ok()
}

/// Share of a core over `window`, wake-ups per second, underruns during it.
fn idle(d: &Daemon, window: Duration) -> (f64, Option<f64>, f64) {
    let hz = 100.0; // USER_HZ on Linux
    let u0 = metric(&d.sock, "keepon_underruns_total").unwrap_or(0.0);
    let (c0, t0) = (cpu_ticks(d.child.id()), Instant::now());
    std::thread::sleep(window);
    let (c1, dt) = (cpu_ticks(d.child.id()), t0.elapsed());
    let wake = metric(&d.sock, "keepon_poll_wakeups_per_second");
    let u1 = metric(&d.sock, "keepon_underruns_total").unwrap_or(0.0);
    ((c1 - c0) as f64 / hz / dt.as_secs_f64() * 100.0, wake, u1 - u0)
}

/// Frames per second and latency quantiles (µs) of `clients` clients, each on its own connection and thread keeping
/// `depth` frames in flight for `window`; and the frames refused.
fn load(d: &Daemon, clients: u64, depth: u64, window: Duration) -> (f64, f64, f64, u64) {
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let sock = d.sock.clone();
            std::thread::spawn(move || one_client(&sock, i, depth, window))
        })
        .collect();
    let (mut done, mut rejected, mut lat, mut secs) = (0u64, 0u64, Vec::new(), 0.0f64);
    for t in threads {
        let (n, r, l, s) = t.join().expect("client thread");
        (done, rejected, secs) = (done + n, rejected + r, secs.max(s));
        lat.extend(l);
    }
    lat.sort_unstable();
    let q = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)] as f64 / 1e3;
    (done as f64 / secs, q(50), q(99), rejected)
}

/// One client keeping `depth` frames in flight for `window`: frames sent, refused, latencies (ns), seconds.
fn one_client(sock: &Path, id: u64, depth: u64, window: Duration) -> (u64, u64, Vec<u64>, f64) {
    let mut c = Client::connect(sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let frame = |tag: u64| {
        let mut b = vec![0u8; 100];
        b[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        b[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        b[14..22].copy_from_slice(&tag.to_le_bytes());
        b[22..30].copy_from_slice(&id.to_le_bytes());
        b
    };
    let mut sent_at: HashMap<u64, Instant> = HashMap::new();
    let mut tag = 0;
    for _ in 0..depth {
        c.send(&Request::Submit { tag, class: "tc-2".into(), txtime: None, frame: frame(tag) }).unwrap();
        sent_at.insert(tag, Instant::now());
        tag += 1;
    }
    let (start, mut done, mut rejected, mut lat) = (Instant::now(), 0u64, 0u64, Vec::new());
    while start.elapsed() < window {
        match c.recv().unwrap() {
            Some(Response::Outcome { tag: t, delivery }) => {
                lat.push(sent_at.remove(&t).unwrap().elapsed().as_nanos() as u64);
                match delivery {
                    Delivery::Sent { .. } => done += 1,
                    Delivery::Rejected(_) => rejected += 1,
                }
                c.send(&Request::Submit { tag, class: "tc-2".into(), txtime: None, frame: frame(tag) }).unwrap();
                sent_at.insert(tag, Instant::now());
                tag += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    (done, rejected, lat, start.elapsed().as_secs_f64())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_keepon"));
    let mut bins = vec![("this build", ours)];
    if let Ok(p) = std::env::var("KEEPON_COMPARE") {
        bins.push(("KEEPON_COMPARE", PathBuf::from(p)));
    }
    println!(
        "keepon daemon on the simulated NIC (Example 2's link, poll period 20 µs, default [realtime]); {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for round in 0..3 {
        let runs = bins.iter().flat_map(|b| [8, 16].map(|batch| (b, batch, false)));
        // The pause is this build's (an older one refuses the key): at batch 16, where the lead leaves room.
        let runs = runs.chain(std::iter::once((&bins[0], 16, true)));
        for ((name, bin), batch, pause) in runs {
            let d = start(bin, batch, pause);
            std::thread::sleep(Duration::from_millis(500));
            let (cpu, wake, under) = idle(&d, Duration::from_secs(4));
            let (rate, p50, p99, rej) = load(&d, 1, 64, Duration::from_secs(3));
            println!(
                "  round {round}, batch {batch:>2}{}, {name:>14}: idle {cpu:5.1} % of a core, {} wake-ups/s, {under} underruns; one client \
                 (64 in flight): {:.1} k frames/s = {:.2}× the link's best effort, latency p50 {p50:.0} µs, p99 \
                 {p99:.0} µs, {rej} rejected",
                if pause { " + idle_pause" } else { "" },
                wake.map_or("(not reported)".into(), |w| format!("{w:.0}")),
                rate / 1e3,
                rate / LINK_BE_PER_S
            );
        }
    }
    // 64 frames in flight in all, from 1, 2 and 8 clients (issue 33), this build at batch 16.
    for round in 0..2 {
        for clients in [1u64, 2, 8] {
            let d = start(&bins[0].1, 16, false);
            std::thread::sleep(Duration::from_millis(500));
            let (rate, p50, p99, rej) = load(&d, clients, 64 / clients, Duration::from_secs(3));
            println!(
                "  round {round}, batch 16, this build: {clients} client(s), {} in flight each: {:.1} k frames/s = \
                 {:.2}× the link's best effort, latency p50 {p50:.0} µs, p99 {p99:.0} µs, {rej} rejected",
                64 / clients,
                rate / 1e3,
                rate / LINK_BE_PER_S
            );
        }
    }
}
