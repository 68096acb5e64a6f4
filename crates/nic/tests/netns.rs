//! The Linux backends against real kernel components, in network namespaces the tests make themselves:
//!
//! ```text
//!   kpt-… (talker)          kpb-… (bridge, STP off)            kpl-… (listener)
//!   kp0 ──── veth ──── bt ─┤ br0 ├─ bl ──── veth ──── kp1
//! ```
//!
//! The talker thread enters its namespace with `setns` and drives the station loop over a backend in
//! reserved-address filler mode, host-paced at 100 Mb/s with 300 B slots; the listener thread captures with
//! `linux::rx::Receiver`. Needs root (skips otherwise); every run is bounded to a few seconds, and the
//! namespaces are deleted by a guard even when an assertion fails.
#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Outcome, Reason};
use keepon_core::station::StationConfig;
use keepon_core::testframe::TestHeader;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::linux::frame::RESERVED_DST;
use keepon_nic::linux::rx::{Receiver, TimestampKind};
use keepon_nic::linux::{self, Backend, FillerMode, LinuxNicConfig, Pacing};
use keepon_nic::source::{split_id, FlowSource, FlowSpec, Pattern};
use keepon_nic::{Nic, NicError, Timing, WireEvent};

fn root_or_skip() -> bool {
    if linux::is_root() {
        return true;
    }
    println!("skipping: needs root (network namespaces)");
    false
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("iproute2 `ip` must be installed");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Namespaces that are deleted when the guard goes out of scope (also on panic).
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

struct Topology {
    talker: String,
    listener: String,
    _guard: Namespaces,
}

/// talker ─veth─ bridge ─veth─ listener, all links up, no IPv6 autoconfiguration noise.
fn bridged(tag: &str) -> Topology {
    let id = format!("{}-{tag}", std::process::id());
    let (t, b, l) = (format!("kpt-{id}"), format!("kpb-{id}"), format!("kpl-{id}"));
    let guard = Namespaces(vec![t.clone(), b.clone(), l.clone()]);
    for n in [&t, &b, &l] {
        ip(&["netns", "add", n]);
    }
    ip(&["-n", &b, "link", "add", "name", "br0", "type", "bridge", "stp_state", "0"]);
    ip(&["-n", &b, "link", "add", "name", "bt", "type", "veth", "peer", "name", "kp0", "netns", &t]);
    ip(&["-n", &b, "link", "add", "name", "bl", "type", "veth", "peer", "name", "kp1", "netns", &l]);
    for (ns, dev) in [(&b, "br0"), (&b, "bt"), (&b, "bl"), (&t, "kp0"), (&l, "kp1")] {
        ip(&["-n", ns, "link", "set", "dev", dev, "addrgenmode", "none"]);
    }
    ip(&["-n", &b, "link", "set", "dev", "bt", "master", "br0"]);
    ip(&["-n", &b, "link", "set", "dev", "bl", "master", "br0"]);
    for (ns, dev) in [(&b, "br0"), (&b, "bt"), (&b, "bl"), (&t, "kp0"), (&l, "kp1")] {
        ip(&["-n", ns, "link", "set", "dev", dev, "up"]);
    }
    // Carrier comes up asynchronously; until both bridge ports forward, the bridge drops what they receive.
    let forwarding = |port: &str| {
        Command::new("bridge")
            .args(["-n", &b, "link", "show", "dev", port])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("state forwarding"))
    };
    let end = Instant::now() + Duration::from_secs(10);
    while !(forwarding("bt") && forwarding("bl")) {
        assert!(Instant::now() < end, "the bridge's ports did not forward within 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    Topology { talker: t, listener: l, _guard: guard }
}

/// One namespace with a veth pair `kp0`/`kp0p`, both up.
fn single(tag: &str) -> (String, Namespaces) {
    let n = format!("kps-{}-{tag}", std::process::id());
    let guard = Namespaces(vec![n.clone()]);
    ip(&["netns", "add", &n]);
    ip(&["-n", &n, "link", "add", "name", "kp0", "type", "veth", "peer", "name", "kp0p"]);
    for dev in ["kp0", "kp0p"] {
        ip(&["-n", &n, "link", "set", "dev", dev, "addrgenmode", "none"]);
        ip(&["-n", &n, "link", "set", "dev", dev, "up"]);
    }
    (n, guard)
}

fn geometry() -> SlotGeometry {
    SlotGeometry::new(LinkRate::from_mbps(100).unwrap(), 300).unwrap()
}

fn config(backend: Backend) -> LinuxNicConfig {
    LinuxNicConfig {
        backend,
        filler: FillerMode::reserved(),
        pacing: Pacing::HostPaced,
        src_mac: Some([0x02, 0, 0, 0, 0, 0x01]),
        ..LinuxNicConfig::new("kp0", geometry())
    }
}

fn station() -> StationConfig {
    let ring = 256;
    let ownership = Ownership::new(ring, &[ClassSpec { name: "tc".into(), slots: (0..ring).collect() }]).unwrap();
    StationConfig {
        geometry: geometry(),
        ownership,
        batch: 160,
        policy: Policy::Strict,
        max_pending: 1024,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos(0),
        base_time: Tai(0),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    }
}

const GOOD: u16 = 1;
const OVERSIZE: u16 = 2;
const GOOD_COUNT: u64 = 250;

fn flows() -> Vec<FlowSpec> {
    let f = |flow, frame_bytes, period_us, count| FlowSpec {
        flow,
        class: ClassId(0),
        pattern: Pattern::Periodic { offset: Nanos::from_us(137), period: Nanos::from_us(period_us) },
        frame_bytes,
        count,
        lead: Nanos::from_ms(8),
        dst: [0x02, 0, 0, 0, 0, 0x02],
        src: [0x02, 0, 0, 0, 0, 0x01],
        rtag: false,
    };
    // 250 good frames every 800 µs (0.2 s), and frames too big for a 300 B slot every 20 ms.
    vec![f(GOOD, 200, 800, GOOD_COUNT), f(OVERSIZE, 400, 20_000, 10)]
}

struct TalkerRun {
    describe: String,
    timing: Timing,
    outcomes: Vec<Outcome>,
    wire: Vec<WireEvent>,
    underruns: u64,
    fillers_sent: u64,
}

fn talk(ns: &str, cfg: LinuxNicConfig) -> Result<TalkerRun, String> {
    linux::enter_netns(ns).map_err(|e| e.to_string())?;
    // Other work on the host (builds, tests) must not stall the loop for longer than the posted slots last.
    if let Err(e) = linux::set_realtime_priority(50) {
        println!("  (no SCHED_FIFO, running at normal priority: {e})");
    }
    let nic = linux::open(&cfg).map_err(|e| e.to_string())?;
    let (describe, timing) = (nic.describe(), nic.timing());
    let loop_cfg = LoopConfig { poll_period: Nanos::from_us(100), max_duration: Nanos::from_ms(5_000) };
    let mut d = Driver::new(nic, station(), loop_cfg).map_err(|e| e.to_string())?;
    let epoch = d.nic.now() + Nanos::from_ms(20);
    let mut source = FlowSource::new(flows(), epoch);
    let (mut outcomes, mut wire, mut underruns) = (Vec::new(), Vec::new(), 0);
    d.run(&mut source, &mut |e| match e {
        Event::Outcome(o) => outcomes.push(o),
        Event::Wire(w) => wire.push(w),
        Event::Underrun(_) => underruns += 1,
    })
    .map_err(|e| e.to_string())?;
    Ok(TalkerRun { describe, timing, outcomes, wire, underruns, fillers_sent: d.station.counters().fillers_sent })
}

struct Heard {
    frames: Vec<(Vec<u8>, Tai, TimestampKind)>,
    drops: u64,
}

fn listen(ns: &str, ready: mpsc::Sender<()>, done: Arc<AtomicBool>) -> Result<Heard, String> {
    linux::enter_netns(ns).map_err(|e| e.to_string())?;
    let mut rx = Receiver::open("kp1").map_err(|e| e.to_string())?;
    let _ = ready.send(());
    let mut frames = Vec::new();
    let start = Instant::now();
    let mut quiet_since = None;
    while start.elapsed() < Duration::from_secs(15) {
        match rx.recv(Duration::from_millis(50)).map_err(|e| e.to_string())? {
            Some(f) => {
                frames.push(f);
                quiet_since = None;
            }
            None if done.load(Ordering::Acquire) => {
                let q = *quiet_since.get_or_insert_with(Instant::now);
                if q.elapsed() > Duration::from_millis(300) {
                    break;
                }
            }
            None => {}
        }
    }
    let drops = rx.stats().map_err(|e| e.to_string())?.drops;
    Ok(Heard { frames, drops })
}

/// Run the flows through the bridge with `backend` and check what crossed it.
fn through_the_bridge(backend: Backend, tag: &str) {
    let topo = bridged(tag);
    let (ready_tx, ready_rx) = mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let l_ns = topo.listener.clone();
    let l_done = done.clone();
    let listener = std::thread::spawn(move || listen(&l_ns, ready_tx, l_done));
    ready_rx.recv_timeout(Duration::from_secs(5)).expect("listener did not start");
    let t_ns = topo.talker.clone();
    let talker = std::thread::spawn(move || talk(&t_ns, config(backend)));
    let run = talker.join().expect("talker thread panicked");
    done.store(true, Ordering::Release);
    let heard = listener.join().expect("listener thread panicked").expect("listener failed");
    let run = run.unwrap_or_else(|e| panic!("{backend:?} talker failed: {e}"));
    println!("{backend:?}: {} — {}", run.describe, run.timing);
    assert_eq!(run.timing, Timing::HostPaced);
    assert!(run.describe.contains("reserved-address"), "{}", run.describe);

    // Every frame has one outcome; oversize frames are rejected, good ones sent (allowing a few losses to
    // underruns on a loaded machine, which must then be reported as such).
    let mut sent = Vec::new();
    let mut rejected: HashMap<Reason, u64> = HashMap::new();
    for o in &run.outcomes {
        let (flow, seq) = split_id(o.id);
        match (flow, o.result) {
            (GOOD, Ok(s)) => sent.push((s.slot, seq, s.time)),
            (OVERSIZE, Ok(_)) => panic!("oversize frame {seq} was sent"),
            (OVERSIZE, Err(r)) => assert_eq!(r, Reason::Oversize),
            (_, Err(r)) => *rejected.entry(r).or_default() += 1,
            (f, Ok(_)) => panic!("unknown flow {f}"),
        }
    }
    assert_eq!(run.outcomes.len() as u64, GOOD_COUNT + 10, "one outcome per frame");
    println!(
        "  sent {} of {GOOD_COUNT}, rejected {rejected:?}, underruns {}, fillers {}",
        sent.len(),
        run.underruns,
        run.fillers_sent
    );
    for r in rejected.keys() {
        assert!(matches!(r, Reason::Underrun | Reason::Late), "unexpected rejection {r:?}");
    }
    assert!(sent.len() as u64 >= GOOD_COUNT * 9 / 10, "too few frames sent: {}", sent.len());
    assert!(run.fillers_sent > 1_000, "the link was not kept saturated with fillers");
    sent.sort();
    let wire: HashMap<_, _> = run.wire.iter().filter_map(|w| w.frame.map(|id| (split_id(id).1, w))).collect();
    assert_eq!(wire.len(), sent.len(), "every sent frame is reported on the wire once");

    // What crossed the bridge: every sent frame, in slot order, nothing else of ours, no filler.
    let mut got = Vec::new();
    let mut lag = Vec::new();
    for (bytes, at, kind) in &heard.frames {
        assert_ne!(bytes[..6], RESERVED_DST, "a filler crossed the bridge");
        let Ok(h) = TestHeader::parse(bytes) else { continue };
        assert_eq!(h.flow, GOOD, "frame of flow {} crossed the bridge", h.flow);
        assert_eq!(*kind, TimestampKind::Software);
        got.push(h.seq);
        if let Some((_, _, t)) = sent.iter().find(|s| s.1 == h.seq) {
            lag.push((*at - *t).0);
            assert_eq!(wire[&h.seq].bytes.as_deref(), Some(&bytes[..wire[&h.seq].bytes.as_ref().unwrap().len()]));
        }
    }
    let want: Vec<u64> = sent.iter().map(|s| s.1).collect();
    assert_eq!(heard.drops, 0, "the listener socket dropped frames");
    assert_eq!(got, want, "received sequence differs from the sent one in slot order");
    lag.sort_unstable();
    let median = lag.get(lag.len() / 2).copied().unwrap_or(0);
    println!(
        "  received {} frames; rx − EPHC slot time: min {} µs, median {} µs, max {} µs",
        got.len(),
        lag.first().unwrap_or(&0) / 1_000,
        median / 1_000,
        lag.last().unwrap_or(&0) / 1_000
    );
    // Host pacing never releases a slot before its EPHC time; late is possible (a stalled host catches up).
    assert!(lag.iter().all(|l| *l >= 0), "a frame arrived before its slot time: {lag:?}");
    assert!(median < 5_000_000, "EPHC does not track real time: median lag {median} ns");
}

#[test]
fn af_packet_sendmmsg_frames_cross_the_bridge_and_fillers_do_not() {
    if root_or_skip() {
        through_the_bridge(Backend::AfPacket, "mm");
    }
}

#[test]
fn af_packet_tx_ring_frames_cross_the_bridge_and_fillers_do_not() {
    if root_or_skip() {
        through_the_bridge(Backend::AfPacketRing, "rg");
    }
}

#[test]
fn af_xdp_copy_frames_cross_the_bridge_and_fillers_do_not() {
    if root_or_skip() {
        through_the_bridge(Backend::AfXdp, "xd");
    }
}

fn open_in(ns: &str, cfg: LinuxNicConfig) -> Result<String, NicError> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        linux::enter_netns(&ns)?;
        linux::open(&cfg).map(|n| n.describe())
    })
    .join()
    .expect("thread panicked")
}

#[test]
fn bad_fcs_is_refused_on_veth_with_a_clear_message() {
    if !root_or_skip() {
        return;
    }
    let (ns, _guard) = single("fcs");
    let cfg = LinuxNicConfig { filler: FillerMode::BadFcs, ..config(Backend::AfPacket) };
    let e = open_in(&ns, cfg).expect_err("bad-FCS fillers must be refused on veth").to_string();
    assert!(e.contains("does not support SO_NOFCS (IFF_SUPP_NOFCS)"), "{e}");
    assert!(e.contains("veth"), "{e}");
    for b in [Backend::AfPacketRing, Backend::AfXdp] {
        let cfg = LinuxNicConfig { filler: FillerMode::BadFcs, ..config(b) };
        let e = open_in(&ns, cfg).expect_err("bad-FCS needs sendmmsg").to_string();
        assert!(e.contains("sendmmsg"), "{e}");
    }
}

#[test]
fn auto_modes_on_veth_pick_reserved_address_and_host_pacing_and_say_why() {
    if !root_or_skip() {
        return;
    }
    let (ns, _guard) = single("auto");
    let cfg = LinuxNicConfig { filler: FillerMode::Auto, pacing: Pacing::Auto, ..config(Backend::AfPacket) };
    let d = open_in(&ns, cfg).expect("auto mode opens on veth");
    assert!(d.contains("reserved-address") && d.contains("veth lacks IFF_SUPP_NOFCS"), "{d}");
    assert!(d.contains("host-paced") && d.contains("no wire clock"), "{d}");
}

#[test]
fn errors_name_the_problem() {
    let cfg = LinuxNicConfig::new("kp-no-such0", geometry());
    let e = linux::open(&cfg).err().expect("no such interface").to_string();
    assert!(e.contains("no such interface"), "{e}");
    if !root_or_skip() {
        return;
    }
    let (ns, _guard) = single("err");
    let big = SlotGeometry::new(LinkRate::from_mbps(100).unwrap(), 2000).unwrap();
    let e = open_in(&ns, LinuxNicConfig { geometry: big, ..config(Backend::AfPacket) }).unwrap_err().to_string();
    assert!(e.contains("MTU"), "{e}");
    let e = open_in(&ns, LinuxNicConfig { queue: 7, ..config(Backend::AfXdp) }).unwrap_err().to_string();
    assert!(e.contains("queue 7"), "{e}");
    match open_in(&ns, LinuxNicConfig { zero_copy: true, ..config(Backend::AfXdp) }) {
        Err(e) => {
            println!("zero-copy on veth: {e}");
            assert!(e.to_string().contains("zero-copy"), "{e}")
        }
        Ok(d) => assert!(d.contains("af_xdp zero-copy"), "{d}"),
    }
    let down = LinuxNicConfig { iface: "kp0p".into(), ..config(Backend::AfPacket) };
    ip(&["-n", &ns, "link", "set", "dev", "kp0p", "down"]);
    let e = open_in(&ns, down).unwrap_err().to_string();
    assert!(e.contains("is down"), "{e}");
}

/// The peer is down, so veth refuses every frame: the run must end in an error naming it, never carry on
/// counting slots that did not leave.
fn refusing_link_is_an_error(backend: Backend, tag: &str) {
    let (ns, _guard) = single(tag);
    ip(&["-n", &ns, "link", "set", "dev", "kp0p", "down"]);
    let ns2 = ns.clone();
    let r = std::thread::spawn(move || {
        linux::enter_netns(&ns2).map_err(|e| e.to_string())?;
        let nic = linux::open(&config(backend)).map_err(|e| e.to_string())?;
        let loop_cfg = LoopConfig { poll_period: Nanos::from_us(100), max_duration: Nanos::from_ms(3_000) };
        let mut d = Driver::new(nic, station(), loop_cfg).map_err(|e| e.to_string())?;
        let mut source = FlowSource::new(flows(), d.nic.now() + Nanos::from_ms(20));
        let t = Instant::now();
        let r = d.run(&mut source, &mut |_| {});
        Ok::<_, String>((r.map_err(|e| e.to_string()), t.elapsed()))
    })
    .join()
    .expect("talker panicked");
    let (r, took) = r.unwrap_or_else(|e| panic!("{backend:?}: {e}"));
    let e = r.expect_err("a link that sends nothing must not look healthy");
    println!("{backend:?}: {e} (after {took:?})");
    assert!(e.contains("refused") || e.contains("dropped"), "{backend:?}: {e}");
    assert!(!e.contains("did not finish"), "{backend:?}: the failure must be seen before the run's time bound: {e}");
}

#[test]
fn a_link_that_refuses_frames_ends_the_run_with_an_error() {
    if root_or_skip() {
        refusing_link_is_an_error(Backend::AfPacket, "dmm");
        refusing_link_is_an_error(Backend::AfPacketRing, "drg");
        refusing_link_is_an_error(Backend::AfXdp, "dxd");
    }
}
