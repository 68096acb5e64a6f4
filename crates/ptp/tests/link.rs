//! PTP over keepon's own link, end to end on the simulated NIC (simulated time): two stations, each a
//! `keepon-nic` driver with a `keepon_ptp::port::PtpPort`. Event and general messages are L2 frames scheduled through the
//! normal insertion path in a class of their own; an event message's TX time is its `Sent` outcome's slot time
//! (exact, known at insertion). RX timestamps are software ones: the receiving station's EPHC at the poll that
//! sees the frame (a kernel stamp converted through the poll's host/EPHC pair), less a calibrated latency. The
//! servo is statime's Kalman filter (the PI servo's hardware gains pass the software jitter through). The
//! slave's NIC oscillator runs 20 ppm fast and its clock starts 300 µs off; every servo adjustment goes through `Station::adjust_clock`, so the schedule's grid
//! moves with the EPHC. Judged on ground truth: the slave's `Sent` times against the true wire starts (the
//! master's NIC is exact and its EPHC is the true time). The same with the peer-delay mechanism, and with a
//! one-step master whose Syncs are checked on the wire.

use keepon_nic::driver::NoFrames;
use std::collections::{HashMap, VecDeque};

use keepon_core::ephc::ClockAdjust;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::FrameId;
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::sim::{Oscillator, SimConfig, SimNic};
use keepon_nic::Nic;
use keepon_ptp::engine::{DelayMechanism, EngineConfig};
use keepon_ptp::port::{PortConfig, PtpPort};
use keepon_ptp::servo::{ServoKind, ServoState};
use keepon_ptp::wire::Transport;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const POLL: Nanos = Nanos(20_000);
const DELAY: i64 = 2_000; // one-way link delay, ns
const LEAD: Nanos = Nanos(200_000); // PTP frames are scheduled this far ahead

fn geometry() -> SlotGeometry {
    SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1518).unwrap() // δ = 12.304 µs
}

/// The calibrated software RX latency (see `step`): the observed count's lead over the wire, and the mean
/// kernel stamping jitter.
fn rx_latency() -> Nanos {
    Nanos((geometry().period().floor_mul(3) / 2) as i64 + 1_000)
}

struct Node {
    d: Driver<SimNic>,
    port: PtpPort,
    rng: ChaCha8Rng,
    /// Frames in flight to this node: (true arrival, bytes).
    inbox: VecDeque<(Tai, Vec<u8>)>,
    /// EPHC times of this node's sent PTP frames (judged ones).
    sent: HashMap<FrameId, Tai>,
    /// EPHC time − true wire start of this node's judged frames.
    errors: Vec<i64>,
    /// The `Sent` time (the slot's EPHC time) of every PTP frame of this node.
    slot_times: HashMap<FrameId, Tai>,
    /// Every PTP message this node put on the wire, with its frame id.
    wire: Vec<(FrameId, Vec<u8>)>,
}

/// How a node runs PTP.
#[derive(Clone, Copy)]
struct Opts {
    delay: DelayMechanism,
    one_step: bool,
    tx_constant: Nanos,
}

const E2E: Opts = Opts { delay: DelayMechanism::E2E { log_interval: -4 }, one_step: false, tx_constant: Nanos::ZERO };

fn node(osc: Oscillator, prio: u8, seed: u64, opts: Opts) -> Node {
    let g = geometry();
    let mut sim = SimConfig::new(g, Tai(1_700_000_000_000_000_000));
    sim.oscillator = osc;
    sim.seed = seed;
    let st = StationConfig {
        geometry: g,
        ownership: Ownership::new(16, &[ClassSpec { name: "ptp".into(), slots: (0..16).collect() }]).unwrap(),
        batch: 6,
        policy: Policy::Strict,
        max_pending: 64,
        max_advance: Nanos::from_ms(10),
        post_latency: Nanos::ZERO,
    };
    let mut d =
        Driver::new(SimNic::new(sim), st, LoopConfig { poll_period: POLL, max_duration: Nanos::from_ms(1) }).unwrap();
    d.bring_up(&mut |_| {}).unwrap();
    let engine = EngineConfig {
        domain: 0,
        identity: [2, 0, 0, 0xff, 0xfe, 0, 0, prio],
        priority1: prio,
        slave_only: false,
        master_only: false,
        log_sync: -4,
        log_announce: -1,
        delay: opts.delay,
        servo: ServoKind::Kalman,
    };
    let cfg = PortConfig {
        engine,
        transport: Transport::L2,
        mac: [2, 0, 0, 0, 0, prio],
        class: ClassId(0),
        lead: LEAD,
        tx_constant: opts.tx_constant,
        rx_latency: rx_latency(),
        one_step: opts.one_step,
    };
    let now = d.nic.now();
    let port = PtpPort::new(cfg, &mut d.station, now, seed);
    Node {
        d,
        port,
        rng: ChaCha8Rng::seed_from_u64(seed),
        inbox: VecDeque::new(),
        sent: HashMap::new(),
        errors: Vec::new(),
        slot_times: HashMap::new(),
        wire: Vec::new(),
    }
}

/// One poll-loop iteration of node `i`: deliver what arrived, fire timers, run the station, route outcomes and
/// wire events.
fn step(nodes: &mut [Node; 2], i: usize, judge_from: Tai) {
    let now = nodes[i].d.nic.now();
    let n = &mut nodes[i];
    n.port.poll(&mut n.d.station, now);
    let mut events = Vec::new();
    n.d.step(&mut NoFrames, &mut |e| events.push(e)).unwrap();
    // RX: frames that arrived since the last poll. A software timestamp: the kernel stamps the arrival on the
    // host clock with a jitter U[0, 2 µs]; the driver converts it to EPHC time through the (host, EPHC) pair
    // of this poll — the EPHC at the count just observed, which leads the wire by 1.5 slots on average on the
    // simulated NIC (fetch-ahead 1); the port subtracts the calibrated mean latency.
    while n.inbox.front().is_some_and(|(t, _)| *t <= now) {
        let Some((arrival, frame)) = n.inbox.pop_front() else { break };
        let stamp = arrival + Nanos(n.rng.gen_range(0..=2_000));
        let rx = n.d.station.ephc().time_of(n.d.station.ring().consumed()) - (now - stamp);
        n.port.on_rx(&frame, rx, &mut n.d.station, now);
    }
    let mut wire = Vec::new();
    for e in events {
        match e {
            Event::Outcome(o) => {
                let sent = o.result.expect("every PTP frame is sent");
                assert!(n.port.on_outcome(&o, &mut n.d.station, now), "only PTP frames here");
                n.slot_times.insert(o.id, sent.time);
                if sent.time >= judge_from {
                    n.sent.insert(o.id, sent.time);
                }
            }
            Event::Wire(w) => {
                let (Some(start), Some(bytes), Some(id)) = (w.start, w.bytes, w.frame) else { continue };
                if let Some(t) = n.sent.remove(&id) {
                    n.errors.push((t - start).0);
                }
                let (msg, _) = Transport::L2.parse(&bytes).expect("only PTP frames on this link");
                n.wire.push((id, msg.to_vec()));
                wire.push((start + Nanos(DELAY), bytes));
            }
            Event::Underrun(u) => panic!("node {i} underran: {u:?}"),
        }
    }
    assert_eq!(n.port.take_errors(), vec![], "node {i}: port errors");
    n.d.nic.wait(POLL);
    nodes[1 - i].inbox.extend(wire);
}

/// Run a master (exact oscillator) and a slave (20 ppm fast, 300 µs off) for 40 s; judge the slave from 25 s.
fn run_pair(master: Opts, slave: Opts) -> [Node; 2] {
    let master = node(Oscillator::default(), 10, 1, master);
    let mut slave = node(Oscillator { ppm: 20.0, wander: 0.0 }, 200, 2, slave);
    slave.d.station.adjust_clock(ClockAdjust::Step(Nanos::from_us(300))).unwrap();
    let mut nodes = [master, slave];
    let start = nodes[0].d.nic.now();
    let end = start + Nanos::from_ms(40_000);
    let judge_from = start + Nanos::from_ms(25_000);
    loop {
        let i = if nodes[0].d.nic.now() <= nodes[1].d.nic.now() { 0 } else { 1 };
        if nodes[i].d.nic.now() > end {
            break;
        }
        step(&mut nodes, i, judge_from);
    }
    nodes
}

/// The slave of `run_pair` is locked: roles, servo state, true error, frequency, path delay, the master's exact
/// TX times and the slave's schedule grid.
fn assert_locked(nodes: &[Node; 2], what: &str) {
    assert!(nodes[0].port.engine().is_master(), "{what}: the priority-10 station is master");
    assert!(nodes[1].port.engine().is_steering(), "{what}: the other is a steering slave");
    let st = nodes[1].port.servo_status();
    assert_eq!(st.state, ServoState::Locked, "{what}: {st:?}");
    let errs = &nodes[1].errors;
    assert!(errs.len() > 100, "{what}: slave frames judged: {}", errs.len());
    let max = errs.iter().map(|e| e.abs()).max().unwrap();
    let mean = errs.iter().sum::<i64>() as f64 / errs.len() as f64;
    // It started 300 µs off with a 20 ppm fast oscillator; software RX timestamps (2 µs kernel jitter, the
    // count's ±½-slot lead over the wire) are what remains, filtered by the Kalman servo.
    assert!(max < 3_000 && mean.abs() < 1_000.0, "{what}: slave true error: mean {mean:.0} ns, max {max} ns");
    let f = nodes[1].d.station.ephc().rate_ppt() as f64 / 1e6;
    assert!((f + 20.0).abs() < 0.5, "{what}: slave frequency {f} ppm for a 20 ppm fast oscillator");
    assert!(st.mean_delay.is_some_and(|d| (d.0 - DELAY).abs() < 1_000), "{what}: path delay {st:?}");
    eprintln!("{what}: slave true error mean {mean:.0} ns, max {max} ns; frequency {f:+.3} ppm; path delay {st:?}");
    // The master's own frames leave exactly at their EPHC times (its clock is the reference).
    let m = &nodes[0].errors;
    assert!(m.iter().all(|e| e.abs() <= 1), "{what}: {:?}", &m[..5.min(m.len())]);
    // The schedule's grid moved with the slave's EPHC.
    let k = nodes[1].d.station.ring().posted() + 1000;
    assert_eq!(nodes[1].d.station.schedule().time_of(k), nodes[1].d.station.ephc().time_of(k), "{what}");
}

/// Messages of `n` on the wire with messageType `t`.
fn count(n: &Node, t: u8) -> usize {
    n.wire.iter().filter(|(_, m)| m[0] & 0x0F == t).count()
}

#[test]
fn a_slave_locks_to_a_master_over_the_keepon_link() {
    let nodes = run_pair(E2E, E2E);
    assert_locked(&nodes, "E2E");
}

/// P2P: both stations measure their link with Pdelay_Req (event messages through their slots, exact TX times)
/// and answer each other; no Delay_Req is sent; the slave locks and its link delay is the simulated one.
#[test]
fn a_slave_locks_to_a_master_with_peer_delay() {
    let p2p = Opts { delay: DelayMechanism::P2P { log_interval: -3 }, ..E2E };
    let nodes = run_pair(p2p, p2p);
    assert_locked(&nodes, "P2P");
    let m = nodes[0].port.servo_status();
    assert!(m.mean_delay.is_some_and(|d| (d.0 - DELAY).abs() < 1_000), "the master measured its link: {m:?}");
    for (i, n) in nodes.iter().enumerate() {
        let other = &nodes[1 - i];
        // 40 s of Pdelay_Req every 0..2 × 125 ms, each answered with Pdelay_Resp and its Follow_Up.
        assert!(count(n, 0x2) > 200, "node {i}: {} Pdelay_Req", count(n, 0x2));
        assert!(count(other, 0x3) + 2 >= count(n, 0x2), "node {i}'s requests answered");
        assert_eq!(count(other, 0xA), count(other, 0x3), "every Pdelay_Resp has its Follow_Up");
        assert_eq!((count(n, 0x1), count(n, 0x9)), (0, 0), "node {i}: no Delay_Req/Delay_Resp");
    }
}

/// A one-step master: every Sync on the wire has twoStepFlag = 0 and carries its slot's EPHC time plus the TX
/// constant; no Follow_Up is sent; the slave (two-step capable, E2E) locks.
#[test]
fn a_one_step_master_locks_a_slave_and_its_syncs_carry_their_slot_time() {
    const TX: Nanos = Nanos(96);
    let nodes = run_pair(Opts { one_step: true, tx_constant: TX, ..E2E }, Opts { tx_constant: TX, ..E2E });
    assert_locked(&nodes, "one-step");
    let m = &nodes[0];
    let syncs: Vec<&(FrameId, Vec<u8>)> = m.wire.iter().filter(|(_, msg)| msg[0] & 0x0F == 0x0).collect();
    assert!(syncs.len() > 500, "{} Syncs", syncs.len());
    for (id, msg) in syncs {
        assert_eq!(msg.len(), 44, "a bare Sync");
        assert_eq!(msg[6] & 0x02, 0, "twoStepFlag cleared");
        let secs = u64::from_be_bytes([0, 0, msg[34], msg[35], msg[36], msg[37], msg[38], msg[39]]);
        let ns = u32::from_be_bytes([msg[40], msg[41], msg[42], msg[43]]);
        let origin = Tai(secs as i64 * 1_000_000_000 + i64::from(ns));
        assert!(origin.0 > 0);
        assert_eq!(origin, m.slot_times[id] + TX, "originTimestamp = slot time + TX constant");
    }
    assert_eq!(count(m, 0x8), 0, "no Follow_Up from a one-step master");
}

/// A one-step port cannot take its TX times from the host's release (host-paced links): refused, with the reason.
#[test]
fn a_one_step_port_refuses_tx_times_from_release() {
    let mut one = node(Oscillator::default(), 10, 1, Opts { one_step: true, ..E2E });
    let e = one.port.tx_on_release().unwrap_err();
    assert!(e.to_string().contains("host-paced"), "{e}");
    let mut two = node(Oscillator::default(), 10, 1, E2E);
    assert_eq!(two.port.tx_on_release(), Ok(()));
}
