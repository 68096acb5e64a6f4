//! TX throughput of the Linux backends driven by the keepon station loop, against bare TX loops.
//!
//! ```text
//!   sudo cargo run --release -p keepon-nic --example txbench [-- ROUNDS [SECONDS_PER_ROUND]]
//! ```
//!
//! Creates a network namespace with a veth pair (deleted on exit), enters it, and for each backend
//! (AF_PACKET `sendmmsg`, AF_PACKET `TX_RING`, AF_XDP copy) and slot size (64 B, 304 B) measures slots per
//! second, alternating keepon and bare runs (default 7 rounds of 0.3 s each) and reporting medians:
//!
//! - **keepon**: the station loop (`Driver::step` + busy `wait(0)`) over the backend, fillers only, line-rate
//!   mode (unpaced), so the kernel is the bottleneck; batch 64.
//! - **bare**: the same socket driven directly through its TX path (`TxPath::send` of 64 fillers, then
//!   `completed`), no station, no engine.
//! - **raw sendmmsg**: for reference, a plain `libc::sendmmsg` loop of 64 identical frames on an AF_PACKET
//!   socket with qdisc bypass, written without any keepon code.
//!
//! Each run reports slots per wall-clock second and per CPU second of the loop's thread (Mpps per CPU): on a
//! shared machine the second is the steadier measure of keepon's own overhead.
//!
//! veth completes instantly, so "consumed" means accepted and freed by the kernel. Numbers are for the
//! machine at hand; run it on an idle machine (and pin it, e.g. `taskset -c 1`) for stable figures.

use keepon_nic::driver::NoFrames;
use std::process::Command;
use std::time::{Duration, Instant};

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassSpec, Ownership};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::linux::afpacket::AfPacketNic;
use keepon_nic::linux::afxdp::AfXdpNic;
use keepon_nic::linux::{self, Backend, FillerMode, LinuxNicConfig, Pacing, TxFrame, TxPath};
use keepon_nic::Nic;

const IFACE: &str = "kb0";
const BATCH: usize = 64;

struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

/// CPU time of the calling thread, seconds (user + system, including softirq work done on its behalf).
fn thread_cpu() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Slots per wall-clock second and per CPU second of the loop's thread.
#[derive(Clone, Copy)]
struct Rate {
    wall: f64,
    cpu: f64,
}

fn config(backend: Backend, slot: u32) -> Result<LinuxNicConfig, String> {
    let geometry =
        SlotGeometry::new(LinkRate::from_mbps(10_000).map_err(|e| e.to_string())?, slot).map_err(|e| e.to_string())?;
    Ok(LinuxNicConfig {
        backend,
        filler: FillerMode::reserved(),
        pacing: Pacing::LineRate,
        ..LinuxNicConfig::new(IFACE, geometry)
    })
}

/// Slots per second through the station loop.
fn keepon(backend: Backend, slot: u32, secs: f64) -> Result<(Rate, u64), String> {
    let cfg = config(backend, slot)?;
    let nic = linux::open(&cfg).map_err(|e| e.to_string())?;
    let ownership =
        Ownership::new(128, &[ClassSpec { name: "be".into(), slots: vec![] }]).map_err(|e| e.to_string())?;
    let station = StationConfig {
        geometry: cfg.geometry,
        ownership,
        batch: BATCH as u32,
        policy: Policy::Strict,
        max_pending: 16,
        max_advance: Nanos::from_ms(1),
        post_latency: Nanos(0),
        base_time: Tai(0),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    };
    let loop_cfg = LoopConfig { poll_period: Nanos(0), max_duration: Nanos::from_ms(60_000) };
    let mut d = Driver::new(nic, station, loop_cfg).map_err(|e| e.to_string())?;
    let mut src = NoFrames;
    let mut underruns = 0u64;
    let mut sink = |e: Event| {
        if let Event::Underrun(_) = e {
            underruns += 1;
        }
    };
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(50) {
        d.step(&mut src, &mut sink).map_err(|e| e.to_string())?;
        d.nic.wait(Nanos(0));
    }
    let c0 = d.station.counters().fillers_sent;
    let t0 = Instant::now();
    let cpu0 = thread_cpu();
    while t0.elapsed().as_secs_f64() < secs {
        d.step(&mut src, &mut sink).map_err(|e| e.to_string())?;
        d.nic.wait(Nanos(0));
    }
    let n = (d.station.counters().fillers_sent - c0) as f64;
    let rate = Rate { wall: n / t0.elapsed().as_secs_f64(), cpu: n / (thread_cpu() - cpu0) };
    Ok((rate, d.station.counters().underruns))
}

/// Slots per second through the bare TX path of the same socket.
fn bare_path<P: TxPath>(mut path: P, slot: u32, secs: f64) -> Result<Rate, String> {
    let frames = [TxFrame::Filler(slot as usize - 4); BATCH];
    let mut done = 0u64;
    let mut run = |until: Duration| -> Result<(u64, f64, f64), String> {
        let start_done = path.completed().map_err(|e| e.to_string())?;
        let t = Instant::now();
        let cpu0 = thread_cpu();
        let mut accepted = 0u64;
        while t.elapsed() < until {
            accepted += path.send(&frames).map_err(|e| e.to_string())? as u64;
            path.flush().map_err(|e| e.to_string())?;
            done = path.completed().map_err(|e| e.to_string())?;
        }
        let _ = accepted;
        Ok((done - start_done, t.elapsed().as_secs_f64(), thread_cpu() - cpu0))
    };
    run(Duration::from_millis(50))?;
    let (n, el, cpu) = run(Duration::from_secs_f64(secs))?;
    Ok(Rate { wall: n as f64 / el, cpu: n as f64 / cpu })
}

fn bare(backend: Backend, slot: u32, secs: f64) -> Result<Rate, String> {
    let cfg = config(backend, slot)?;
    match backend {
        Backend::AfXdp => bare_path(AfXdpNic::open(&cfg).map_err(|e| e.to_string())?.into_path(), slot, secs),
        _ => bare_path(AfPacketNic::open(&cfg).map_err(|e| e.to_string())?.into_path(), slot, secs),
    }
}

/// A plain sendmmsg loop with no keepon code at all.
fn raw_sendmmsg(slot: u32, secs: f64) -> Result<f64, String> {
    let ifindex = {
        let name = std::ffi::CString::new(IFACE).map_err(|e| e.to_string())?;
        // SAFETY: `name` is a valid C string.
        unsafe { libc::if_nametoindex(name.as_ptr()) }
    };
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    if fd < 0 || ifindex == 0 {
        return Err(format!("raw socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: sockaddr_ll is plain data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    let one: libc::c_int = 1;
    // SAFETY: valid pointers and lengths for bind and setsockopt(PACKET_QDISC_BYPASS = 20).
    unsafe {
        libc::bind(fd, (&sll as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32);
        libc::setsockopt(fd, 263, 20, (&one as *const libc::c_int).cast(), 4);
    }
    let mut frame = vec![0u8; slot as usize - 4];
    frame[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0, 0, 0x04]);
    frame[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    let mut iov: Vec<libc::iovec> =
        (0..BATCH).map(|_| libc::iovec { iov_base: frame.as_mut_ptr().cast(), iov_len: frame.len() }).collect();
    let mut hdrs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|i| {
            // SAFETY: msghdr is plain data.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            libc::mmsghdr { msg_hdr: h, msg_len: 0 }
        })
        .collect();
    let mut run = |until: Duration| -> (u64, f64) {
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < until {
            // SAFETY: `hdrs` points at `iov`, which points at `frame`; all outlive the call.
            let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), BATCH as u32, 0) };
            if r > 0 {
                n += r as u64;
            }
        }
        (n, t.elapsed().as_secs_f64())
    };
    run(Duration::from_millis(50));
    let (n, el) = run(Duration::from_secs_f64(secs));
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    Ok(n as f64 / el)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    let secs: f64 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(0.3);
    if !linux::is_root() {
        return Err("txbench needs root (it creates a network namespace)".into());
    }
    let ns = Namespace(format!("kpbench-{}", std::process::id()));
    ip(&["netns", "add", &ns.0])?;
    ip(&["-n", &ns.0, "link", "add", "name", IFACE, "type", "veth", "peer", "name", "kb0p"])?;
    for dev in [IFACE, "kb0p"] {
        ip(&["-n", &ns.0, "link", "set", "dev", dev, "addrgenmode", "none"])?;
        ip(&["-n", &ns.0, "link", "set", "dev", dev, "up"])?;
    }
    linux::enter_netns(&ns.0).map_err(|e| e.to_string())?;

    println!(
        "txbench: veth {IFACE} in namespace {}, fillers only, batch {BATCH}; {rounds} alternating rounds of {secs} s, \
         medians",
        ns.0
    );
    println!(
        "{:<22} {:>6} {:>12} {:>12} {:>7} {:>12} {:>12} {:>7} {:>12}",
        "path", "slot B", "keepon Mpps", "bare Mpps", "ratio", "keepon /CPU", "bare /CPU", "ratio", "underruns/s"
    );
    for slot in [64u32, 304] {
        for (name, b) in [
            ("af_packet sendmmsg", Backend::AfPacket),
            ("af_packet tx_ring", Backend::AfPacketRing),
            ("af_xdp copy", Backend::AfXdp),
        ] {
            let (mut k, mut r, mut kc, mut rc, mut u) = (vec![], vec![], vec![], vec![], vec![]);
            for _ in 0..rounds {
                let (rate, underruns) = keepon(b, slot, secs)?;
                k.push(rate.wall);
                kc.push(rate.cpu);
                u.push(underruns as f64 / secs);
                let rate = bare(b, slot, secs)?;
                r.push(rate.wall);
                rc.push(rate.cpu);
            }
            let (k, r, kc, rc) = (median(k), median(r), median(kc), median(rc));
            println!(
                "{name:<22} {slot:>6} {:>12.3} {:>12.3} {:>6.2}x {:>12.3} {:>12.3} {:>6.2}x {:>12.0}",
                k / 1e6,
                r / 1e6,
                k / r,
                kc / 1e6,
                rc / 1e6,
                kc / rc,
                median(u)
            );
        }
        let raw: Result<Vec<f64>, String> = (0..rounds).map(|_| raw_sendmmsg(slot, secs)).collect();
        println!("{:<22} {slot:>6} {:>12} {:>12.3}", "raw libc sendmmsg", "-", median(raw?) / 1e6);
    }
    Ok(())
}
