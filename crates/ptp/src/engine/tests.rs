//! Two engines in virtual time: a master and a slave with an oscillator error, exact TX times (slot starts),
//! RX times read on the receiver's EPHC (its slot granularity). statime's BMCA elects the master; the slave
//! locks with each servo, with either delay mechanism.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use keepon_core::ephc::Ephc;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};

use super::*;
use crate::clock::EphcClock;
use crate::servo::floor::FloorConfig;
use crate::servo::ServoState;
use crate::sim::{Oscillator, EPOCH};

struct Node {
    engine: PtpEngine<EphcClock>,
    clock: Rc<RefCell<EphcClock>>,
    osc: Oscillator,
    timers: HashMap<Timer, i64>,
}

enum Ev {
    Timer(usize, Timer),
    Event(usize, Vec<u8>),
    General(usize, Vec<u8>),
}

struct World {
    nodes: Vec<Node>,
    /// Carry messages in frames of this transport (and check each arrives in its class), or bare.
    transport: Option<crate::wire::Transport>,
    queue: BTreeMap<(i64, u64), Ev>,
    seq: u64,
    delay: i64,
    /// Messages from this node are lost (it went away).
    mute: Option<usize>,
    /// Messages sent, by sender and messageType.
    sent: HashMap<(usize, u8), usize>,
    /// This node sends one-step Sync.
    one_step: Option<usize>,
}

impl World {
    fn push(&mut self, at: i64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn clock_at(&mut self, i: usize, t: i64) -> Tai {
        let n = &mut self.nodes[i];
        let k = n.osc.slot_at(t as f64);
        n.clock.borrow_mut().advance_to(k);
        n.clock.borrow().now()
    }

    fn frame(&self, i: usize, data: Vec<u8>) -> Vec<u8> {
        match self.transport {
            Some(tr) => tr.emit([2, 0, 0, 0, 0, i as u8], &data).unwrap(),
            None => data,
        }
    }

    fn unframe(&self, data: &[u8], want: crate::wire::Class) -> Vec<u8> {
        match self.transport {
            Some(tr) => {
                let mut padded = data.to_vec();
                padded.resize(padded.len().max(300), 0); // the station pads every frame to its slot
                let (msg, class) = tr.parse(&padded).unwrap();
                assert_eq!(class, want);
                msg.to_vec()
            }
            None => data.to_vec(),
        }
    }

    fn handle(&mut self, i: usize, t: i64, outs: Vec<Output>) {
        for o in outs {
            if let Output::SendEvent { data, .. } | Output::SendGeneral { data } = &o {
                // logMessageInterval as configured (statime 0.4.0 alone writes 0): Sync and Follow_Up −3,
                // Announce 0, Delay_Req 0x7F.
                let want = match data[0] & 0x0F {
                    0x0 | 0x8 => Some(-3),
                    0xB => Some(0),
                    0x1 => Some(0x7F),
                    _ => None,
                };
                assert_eq!(want.map(|w| w as u8), want.map(|_| data[33]), "message type {:#x}", data[0] & 0x0F);
            }
            let muted = self.mute == Some(i);
            match o {
                Output::SetTimer { timer, after } => {
                    self.nodes[i].timers.insert(timer, t + after.0);
                    self.push(t + after.0, Ev::Timer(i, timer));
                }
                Output::SendGeneral { data } => {
                    *self.sent.entry((i, data[0] & 0x0F)).or_default() += 1;
                    if data[0] & 0x0F == 0xA {
                        assert_eq!(data[33], 0x7F, "Pdelay_Resp_Follow_Up's logMessageInterval");
                    }
                    let f = self.frame(i, data);
                    if !muted {
                        self.push(t + self.delay, Ev::General(1 - i, f))
                    }
                }
                Output::SendEvent { mut data, token } => {
                    *self.sent.entry((i, data[0] & 0x0F)).or_default() += 1;
                    if matches!(data[0] & 0x0F, 0x2 | 0x3) {
                        assert_eq!(data[33], 0x7F, "Pdelay_Req/Resp's logMessageInterval (IEEE 1588-2019 Table 42)");
                    }
                    // Into the sender's next slot: its TX time is that slot's EPHC time, exactly.
                    let k = self.nodes[i].osc.slot_at(t as f64) + 1;
                    let tx = self.nodes[i].clock.borrow().ephc().time_of(k);
                    let leaves = self.nodes[i].osc.start_of(k).ceil() as i64;
                    let one_step = self.one_step == Some(i) && data[0] & 0x0F == 0;
                    if one_step {
                        crate::wire::make_one_step(&mut data, tx).unwrap();
                    }
                    let seq = crate::wire::sequence_id(&data).unwrap();
                    let f = self.frame(i, data);
                    if !muted {
                        self.push(leaves + self.delay, Ev::Event(1 - i, f));
                    }
                    let more = if one_step {
                        self.nodes[i].engine.on_one_step_sent(token, seq, tx)
                    } else {
                        self.nodes[i].engine.on_tx_time(token, tx)
                    };
                    self.handle(i, t, more);
                }
            }
        }
    }

    /// Run until `end`; returns the slave's true error (its EPHC at its current slot − master time then) at
    /// every event after `from`.
    fn run(&mut self, end: i64, from: i64, slave: usize) -> Vec<i64> {
        let mut errors = Vec::new();
        while self.queue.first_key_value().is_some_and(|((t, _), _)| *t <= end) {
            let Some(((t, _), ev)) = self.queue.pop_first() else { break };
            for n in &mut self.nodes {
                n.osc.wander_to(t as f64);
            }
            let (i, outs) = match ev {
                Ev::Timer(i, timer) => {
                    if self.nodes[i].timers.get(&timer) != Some(&t) {
                        continue; // re-armed since
                    }
                    self.clock_at(i, t);
                    (i, self.nodes[i].engine.on_timer(timer))
                }
                Ev::Event(i, data) => {
                    let rx = self.clock_at(i, t);
                    let msg = self.unframe(&data, crate::wire::Class::Event);
                    (i, self.nodes[i].engine.on_event(&msg, rx))
                }
                Ev::General(i, data) => {
                    self.clock_at(i, t);
                    let msg = self.unframe(&data, crate::wire::Class::General);
                    (i, self.nodes[i].engine.on_general(&msg))
                }
            };
            self.handle(i, t, outs);
            if t >= from {
                let k = self.nodes[slave].osc.slot_at(t as f64);
                let ephc = self.nodes[slave].clock.borrow().ephc().time_of(k);
                errors.push((ephc.0 - EPOCH.0) - self.nodes[slave].osc.start_of(k).round() as i64);
            }
        }
        errors
    }
}

const E2E: DelayMechanism = DelayMechanism::E2E { log_interval: -3 };

fn world(servo: ServoKind, ppm: f64, offset: Nanos) -> World {
    world_over(servo, ppm, offset, None, E2E, false)
}

/// Node 0 (priority 10) and node 1 (priority 200, `ppm` fast, `offset` off; slave-only if `slave_only`).
fn world_over(
    servo: ServoKind,
    ppm: f64,
    offset: Nanos,
    transport: Option<crate::wire::Transport>,
    delay: DelayMechanism,
    slave_only: bool,
) -> World {
    let g = SlotGeometry::new(LinkRate::from_mbps(10_000).unwrap(), 64).unwrap(); // δ = 67.2 ns
    let mut w = World {
        nodes: Vec::new(),
        transport,
        queue: BTreeMap::new(),
        seq: 0,
        delay: 5_000,
        mute: None,
        sent: HashMap::new(),
        one_step: None,
    };
    for (i, (ppm, offset, prio)) in [(0.0, Nanos::ZERO, 10u8), (ppm, offset, 200u8)].into_iter().enumerate() {
        let clock = Rc::new(RefCell::new(EphcClock::new(Ephc::new(g.period(), 0, EPOCH + offset), 0)));
        let cfg = EngineConfig {
            domain: 0,
            identity: [2, 0, 0, 0xff, 0xfe, 0, 0, i as u8 + 1],
            priority1: prio,
            slave_only: slave_only && i == 1,
            master_only: false,
            log_sync: -3,
            log_announce: 0,
            delay,
            servo,
            floor: FloorConfig::default(),
            profile: Profile::Default,
        };
        let (engine, outs) = PtpEngine::new(cfg, clock.clone(), 7 + i as u64);
        w.nodes.push(Node {
            engine,
            clock,
            osc: Oscillator::new(g.period(), ppm, 0.0, 3 + i as u64),
            timers: HashMap::new(),
        });
        w.handle(i, 0, outs);
    }
    w
}

#[test]
fn bmca_elects_the_master_and_every_servo_locks_the_slave() {
    for servo in [ServoKind::Pi, ServoKind::Kalman, ServoKind::MovingAverage] {
        let mut w = world(servo, 40.0, Nanos::from_us(300));
        let early = w.run(1_000_000_000, 0, 1);
        assert!(early.iter().any(|e| e.abs() > 250_000), "{servo:?}: the slave starts 300 µs off");
        let errors = w.run(60_000_000_000, 40_000_000_000, 1);
        assert!(errors.len() > 400, "{servo:?}: {} events in the last 20 s", errors.len());
        assert!(w.nodes[0].engine.is_master(), "{servo:?}: node 0 (priority 10) is master");
        assert!(w.nodes[1].engine.is_steering(), "{servo:?}: node 1 is a steering slave");
        let st = w.nodes[1].engine.servo_status();
        assert_eq!(st.state, ServoState::Locked, "{servo:?}: {st:?}");
        assert!(st.mean_delay.is_some_and(|d| (d.0 - 5_000).abs() < 200), "{servo:?}: path delay {st:?}");
        let max = errors.iter().map(|e| e.abs()).max().unwrap();
        // RX times are floored to 67.2 ns slots: the slave settles within a slot of the master.
        assert!(max < 200, "{servo:?}: max |true error| {max} ns over the last 20 s");
        let f = w.nodes[1].clock.borrow().freq_ppt() as f64 / 1e6;
        assert!((f + 40.0).abs() < 0.2, "{servo:?}: frequency {f} ppm for a 40 ppm fast oscillator");
        assert_eq!(w.nodes[1].engine.utc_offset(), None, "the master announces no UTC offset");
    }
}

#[test]
fn engines_synchronise_through_l2_and_udp_frames() {
    use crate::wire::Transport;
    for tr in [Transport::L2, Transport::UdpV4 { src: [10, 0, 0, 2] }] {
        let mut w = world_over(ServoKind::Pi, -25.0, Nanos::from_us(-80), Some(tr), E2E, false);
        let errors = w.run(40_000_000_000, 25_000_000_000, 1);
        assert!(w.nodes[1].engine.is_steering(), "{tr:?}");
        let max = errors.iter().map(|e| e.abs()).max().unwrap();
        assert!(max < 200, "{tr:?}: max |true error| {max} ns");
    }
}

/// A slave-only port whose master goes away falls back to listening — never master, never a panic (statime
/// 0.4.0 debug-asserts on this legal path; the workspace turns its debug assertions off, see Cargo.toml) —
/// and locks again when the master returns.
#[test]
fn a_slave_only_port_that_loses_its_master_listens_and_relocks() {
    let mut w = world_over(ServoKind::Pi, 10.0, Nanos::from_us(50), None, E2E, true);
    w.run(20_000_000_000, 0, 1);
    assert!(w.nodes[1].engine.is_steering(), "node 1 follows node 0");
    w.mute = Some(0);
    w.run(30_000_000_000, 0, 1);
    assert!(!w.nodes[1].engine.is_master() && !w.nodes[1].engine.is_steering(), "master lost: listening");
    w.mute = None;
    let errors = w.run(60_000_000_000, 50_000_000_000, 1);
    assert!(w.nodes[1].engine.is_steering(), "node 1 follows node 0 again");
    let max = errors.iter().map(|e| e.abs()).max().unwrap();
    assert!(max < 200, "max |true error| {max} ns after the master returned");
}

/// P2P: both engines measure the link with Pdelay_Req/Resp/Resp_Follow_Up (the master too), no Delay_Req is
/// sent, and the slave locks with each servo; the link delay estimate is the simulated delay.
#[test]
fn with_peer_delay_every_servo_locks_and_both_ends_measure_the_link() {
    use crate::wire::Transport;
    for (servo, tr) in [
        (ServoKind::Kalman, None),
        (ServoKind::Pi, Some(Transport::L2)),
        (ServoKind::MovingAverage, Some(Transport::UdpV4 { src: [10, 0, 0, 2] })),
    ] {
        let mut w = world_over(servo, 40.0, Nanos::from_us(300), tr, DelayMechanism::P2P { log_interval: -2 }, false);
        let errors = w.run(60_000_000_000, 40_000_000_000, 1);
        assert!(w.nodes[0].engine.is_master(), "{servo:?}");
        assert!(w.nodes[1].engine.is_steering(), "{servo:?}");
        let st = w.nodes[1].engine.servo_status();
        assert_eq!(st.state, ServoState::Locked, "{servo:?}: {st:?}");
        assert!(st.mean_delay.is_some_and(|d| (d.0 - 5_000).abs() < 200), "{servo:?}: slave's link delay {st:?}");
        let m = w.nodes[0].engine.servo_status();
        assert!(m.mean_delay.is_some_and(|d| (d.0 - 5_000).abs() < 200), "{servo:?}: master's link delay {m:?}");
        let max = errors.iter().map(|e| e.abs()).max().unwrap();
        assert!(max < 200, "{servo:?}: max |true error| {max} ns over the last 20 s");
        let f = w.nodes[1].clock.borrow().freq_ppt() as f64 / 1e6;
        eprintln!(
            "{servo:?}: max |true error| {max} ns, frequency {f:+.3} ppm, link delay {:?} / {:?}",
            st.mean_delay, m.mean_delay
        );
        // The PI servo's frequency right after a sample carries kp·o/I: 0.38 ppm for an offset of one 67.2 ns slot
        // over a 125 ms interval.
        assert!((f + 40.0).abs() < 0.5, "{servo:?}: frequency {f} ppm for a 40 ppm fast oscillator");
        for i in 0..2 {
            let n = |t: u8| w.sent.get(&(i, t)).copied().unwrap_or(0);
            // 60 s of Pdelay_Req every 0..2 × 250 ms from each end, each answered by the other.
            let answers = |j: usize, t: u8| w.sent.get(&(1 - j, t)).copied().unwrap_or(0);
            assert!(n(0x2) > 150, "{servo:?}: node {i} measured its link: {:?}", w.sent);
            assert!(answers(i, 0x3) + 1 >= n(0x2) && answers(i, 0xA) == answers(i, 0x3), "{servo:?}: {:?}", w.sent);
            assert_eq!((n(0x1), n(0x9)), (0, 0), "{servo:?}: no Delay_Req/Delay_Resp with P2P: {:?}", w.sent);
        }
    }
}

/// The master's Sync made one-step with its exact TX time: the slave locks as with two-step, and the Follow_Up
/// statime makes for the Sync is never sent.
#[test]
fn one_step_sync_locks_the_slave_and_no_follow_up_is_sent() {
    let mut w = world_over(ServoKind::Kalman, -30.0, Nanos::from_us(200), Some(crate::wire::Transport::L2), E2E, false);
    w.one_step = Some(0);
    let errors = w.run(40_000_000_000, 25_000_000_000, 1);
    assert!(w.nodes[0].engine.is_master() && w.nodes[1].engine.is_steering());
    assert_eq!(w.nodes[1].engine.servo_status().state, ServoState::Locked);
    let max = errors.iter().map(|e| e.abs()).max().unwrap();
    assert!(max < 200, "max |true error| {max} ns");
    let syncs = w.sent.get(&(0, 0x0)).copied().unwrap_or(0);
    assert!(syncs > 250, "{:?}", w.sent);
    assert_eq!(w.sent.get(&(0, 0x8)), None, "the one-step master sent Follow_Up: {:?}", w.sent);
}

/// Every measurement the slave's servo got is handed out once, with its raw differences, what reached the servo
/// and the servo's state after it; the master measures nothing.
#[test]
fn the_slave_hands_out_each_measurement_once() {
    let mut w = world(ServoKind::Kalman, 20.0, Nanos::from_us(300));
    let _ = w.run(20_000_000_000, 10_000_000_000, 1);
    assert!(w.nodes[0].engine.take_measurements().is_empty(), "the master measured");
    let m = w.nodes[1].engine.take_measurements();
    assert!(m.len() > 100, "{} measurements", m.len());
    assert!(m.len() <= MAX_KEPT_MEASUREMENTS);
    assert!(m.iter().any(|r| r.raw.sync_raw.is_some()) && m.iter().any(|r| r.raw.delay_raw.is_some()));
    let last = m.last().unwrap();
    assert_eq!(last.servo.state, ServoState::Locked);
    // The slave's oscillator is 20 ppm fast: the clock is slowed by about as much.
    assert!((last.freq_ppt as f64 / 1e6 + 20.0).abs() < 1.0, "{} ppt", last.freq_ppt);
    assert!(m.iter().filter(|r| r.used.is_some()).count() * 10 >= m.len() * 9, "most measurements reach the servo");
    assert!(w.nodes[1].engine.take_measurements().is_empty(), "handed out twice");
}
