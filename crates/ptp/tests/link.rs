//! PTP over keepon's own link, end to end on the simulated NIC (simulated time): two stations, each a
//! `keepon-nic` driver with a `keepon_ptp::port::PtpPort`. Event and general messages are L2 frames scheduled through the
//! normal insertion path in a class of their own; an event message's TX time is its `Sent` outcome's slot time
//! (exact, known at insertion). RX timestamps are software ones: the receiving station's EPHC at the poll that
//! sees the frame (a kernel stamp converted through the poll's host/EPHC pair), less a calibrated latency. The
//! servo is statime's Kalman filter (the PI servo's hardware gains pass the software jitter through). The
//! slave's NIC oscillator runs 20 ppm fast and its clock starts 300 µs off; every servo adjustment goes through `Station::adjust_clock`, so the schedule's grid
//! moves with the EPHC. Judged on ground truth: the slave's `Sent` times against the true wire starts (the
//! master's NIC is exact and its EPHC is the true time).

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
use keepon_ptp::engine::EngineConfig;
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
}

fn node(osc: Oscillator, prio: u8, seed: u64) -> Node {
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
        log_delay_req: -4,
        servo: ServoKind::Kalman,
    };
    let cfg = PortConfig {
        engine,
        transport: Transport::L2,
        mac: [2, 0, 0, 0, 0, prio],
        class: ClassId(0),
        lead: LEAD,
        tx_constant: Nanos::ZERO,
        rx_latency: rx_latency(),
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
                if sent.time >= judge_from {
                    n.sent.insert(o.id, sent.time);
                }
            }
            Event::Wire(w) => {
                let (Some(start), Some(bytes), Some(id)) = (w.start, w.bytes, w.frame) else { continue };
                if let Some(t) = n.sent.remove(&id) {
                    n.errors.push((t - start).0);
                }
                wire.push((start + Nanos(DELAY), bytes));
            }
            Event::Underrun(u) => panic!("node {i} underran: {u:?}"),
        }
    }
    assert_eq!(n.port.take_errors(), vec![], "node {i}: port errors");
    n.d.nic.wait(POLL);
    nodes[1 - i].inbox.extend(wire);
}

#[test]
fn a_slave_locks_to_a_master_over_the_keepon_link() {
    let master = node(Oscillator::default(), 10, 1);
    let mut slave = node(Oscillator { ppm: 20.0, wander: 0.0 }, 200, 2);
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
    assert!(nodes[0].port.engine().is_master(), "the priority-10 station is master");
    assert!(nodes[1].port.engine().is_steering(), "the other is a steering slave");
    let st = nodes[1].port.servo_status();
    assert_eq!(st.state, ServoState::Locked, "{st:?}");
    let errs = &nodes[1].errors;
    assert!(errs.len() > 100, "slave frames judged: {}", errs.len());
    let max = errs.iter().map(|e| e.abs()).max().unwrap();
    let mean = errs.iter().sum::<i64>() as f64 / errs.len() as f64;
    // It started 300 µs off with a 20 ppm fast oscillator; software RX timestamps (2 µs kernel jitter, the
    // count's ±½-slot lead over the wire) are what remains, filtered by the Kalman servo.
    assert!(max < 3_000 && mean.abs() < 1_000.0, "slave true error: mean {mean:.0} ns, max {max} ns");
    let f = nodes[1].d.station.ephc().rate_ppt() as f64 / 1e6;
    assert!((f + 20.0).abs() < 0.5, "slave frequency {f} ppm for a 20 ppm fast oscillator");
    assert!(st.mean_delay.is_some_and(|d| (d.0 - DELAY).abs() < 1_000), "path delay {st:?}");
    // The master's own frames leave exactly at their EPHC times (its clock is the reference).
    assert!(nodes[0].errors.iter().all(|e| e.abs() <= 1), "{:?}", &nodes[0].errors[..5.min(nodes[0].errors.len())]);
    // The schedule's grid moved with the slave's EPHC.
    let k = nodes[1].d.station.ring().posted() + 1000;
    assert_eq!(nodes[1].d.station.schedule().time_of(k), nodes[1].d.station.ephc().time_of(k));
}
