//! Two stations back to back on the simulated NIC (simulated time), each a `keepon-nic` driver with the PTP node
//! that ships (`keepon_ptp::node::PtpNode`), on either timing: the one two-station harness of `link.rs` (slots)
//! and `bytes_link.rs` (the byte clock). What it adds to the node is the link (a one-way delay, frames handed to
//! the peer's receiver) and the receiver's timestamps ([`Rx`]); what it records is judged against ground truth:
//! each PTP frame's `Sent` time (EPHC) against its true wire start.

use std::collections::{HashMap, VecDeque};

use keepon_core::face::StationFace;
use keepon_core::outcome::{FrameId, Reason};
use keepon_core::time::{Nanos, Tai};
use keepon_nic::driver::{Driver, Event, NoFrames};
use keepon_nic::sim::SimNic;
use keepon_nic::Nic;
use keepon_ptp::node::{NodeEvent, PtpNode};
use keepon_ptp::wire::Transport;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The poll loop's period.
pub const POLL: Nanos = Nanos(20_000);
/// The one-way link delay, ns.
pub const DELAY: i64 = 2_000;
/// Largest RX loss of the dual clock's receiver, slots.
const MAX_LOST: u64 = 8;

/// How a node timestamps received PTP event messages.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(dead_code)] // (each test file uses some: the slot station's software and dual, the byte clock's ideal)
pub enum Rx {
    /// In software: the kernel stamps the arrival on the host clock with a jitter U[0, 2 µs]; it is converted to
    /// EPHC time through the (host, EPHC) pair of the poll — the EPHC at the count just observed, which leads the
    /// wire by 1.5 slots on average on the simulated NIC (fetch-ahead 1); the port subtracts its calibrated
    /// latency.
    Software,
    /// The true arrival (an ideal master whose EPHC is the true time).
    Exact,
    /// Ideal hardware stamps: the receiving station's EPHC at the true arrival (from the true start and EPHC
    /// time of its own latest descriptor).
    Ideal,
    /// The dual clock (`keepon_ptp::dualrx`): the receiver hands in every one of the master's slots of `period`
    /// ns (see [`dual_receiver`]); PTP messages carry software stamps until the dual clock takes over. `loss` is
    /// the probability per poll that the receiver loses `U[1, 8]` slots for good.
    Dual { loss: f64, period: i64 },
}

/// A station, its PTP node, its receiver and what was seen of it.
pub struct Node<S: StationFace> {
    pub d: Driver<SimNic, S>,
    pub node: PtpNode,
    pub rng: ChaCha8Rng,
    pub rx: Rx,
    /// Frames in flight to this node: (when its receiver has it, its true arrival, bytes, the peer's slot).
    pub inbox: VecDeque<(Tai, Tai, Vec<u8>, u64)>,
    /// With [`Rx::Dual`]: the peer's next slot to hand in, and its latest slot known to have started arriving.
    next_slot: Option<u64>,
    latest: Option<(u64, Tai)>,
    /// With [`Rx::Dual`]: the peer's slots the receiver lost.
    pub lost: u64,
    /// Everything the node reported.
    pub events: Vec<NodeEvent>,
    /// PTP frames a clock step took away (dual clock only: its servo steps while it acquires).
    pub stepped_away: u64,
    /// This node's latest descriptor starts: (true, EPHC) — for [`Rx::Ideal`].
    starts: VecDeque<(Tai, Tai)>,
    /// Every PTP frame's `Sent` time.
    pub sent: HashMap<FrameId, Tai>,
    /// `Sent` times of the PTP frames still to judge (sent at or after the judging start).
    judged: HashMap<FrameId, Tai>,
    /// `Sent` time − true wire start of the judged frames.
    pub errors: Vec<i64>,
    /// Every PTP frame on the wire: id, frame length (without FCS), message.
    pub wire: Vec<(FrameId, usize, Vec<u8>)>,
    /// Every other frame it put on the wire (IGMP reports over UDPv4), with the time it started.
    pub other: Vec<(Tai, Vec<u8>)>,
    pub transport: Transport,
}

impl<S: StationFace> Node<S> {
    /// A node on driver `d` (up), with its PTP node.
    pub fn new(d: Driver<SimNic, S>, node: PtpNode, rx: Rx, seed: u64, transport: Transport) -> Node<S> {
        Node {
            d,
            node,
            rng: ChaCha8Rng::seed_from_u64(seed),
            rx,
            inbox: VecDeque::new(),
            next_slot: None,
            latest: None,
            lost: 0,
            events: Vec::new(),
            stepped_away: 0,
            starts: VecDeque::new(),
            sent: HashMap::new(),
            judged: HashMap::new(),
            errors: Vec::new(),
            wire: Vec::new(),
            other: Vec::new(),
            transport,
        }
    }

    /// Messages on its wire with messageType `t`.
    pub fn count(&self, t: u8) -> usize {
        self.wire.iter().filter(|(_, _, m)| m[0] & 0x0F == t).count()
    }

    /// Its EPHC at true time `t`: from its latest descriptor that started by then (`None` before any).
    fn ephc_at_true(&self, t: Tai) -> Option<Tai> {
        let &(start, ephc) = self.starts.iter().rev().find(|(s, _)| *s <= t)?;
        Some(ephc + (t - start))
    }

    /// A software receive stamp of a frame that arrived at `arrival` (see [`Rx::Software`]).
    fn software_stamp(&mut self, arrival: Tai, now: Tai) -> Tai {
        let stamp = arrival + Nanos(self.rng.gen_range(0..=2_000));
        let st = &self.d.station;
        st.ephc().time_of(st.wire_position(st.ring().consumed())) - (now - stamp)
    }
}

/// Run a pair until `end` (simulated), judging frames sent from `judge_from`: whichever node's clock is behind
/// takes its next poll.
pub fn run<S: StationFace>(mut nodes: [Node<S>; 2], end: Tai, judge_from: Tai) -> [Node<S>; 2] {
    loop {
        let i = if nodes[0].d.nic.now() <= nodes[1].d.nic.now() { 0 } else { 1 };
        if nodes[i].d.nic.now() > end {
            return nodes;
        }
        step(&mut nodes, i, judge_from);
    }
}

/// One poll-loop iteration of node `i`: fire timers, run the station, hand in what arrived, route outcomes and
/// wire events.
fn step<S: StationFace>(nodes: &mut [Node<S>; 2], i: usize, judge_from: Tai) {
    let now = nodes[i].d.nic.now();
    // With the peer counting this node's slots, the period it counts them at.
    let counted = match nodes[1 - i].rx {
        Rx::Dual { period, .. } => Some(period),
        _ => None,
    };
    // What a counting receiver has of the peer's wire that the peer's driver has not reported yet.
    let tapped: Vec<(u64, Tai, Vec<u8>)> = match nodes[i].rx {
        Rx::Dual { .. } => nodes[1 - i]
            .d
            .nic
            .finished_unreported(now - Nanos(DELAY))
            .map(|(k, start, b)| (k, start + Nanos(DELAY), b.map_or_else(Vec::new, <[u8]>::to_vec)))
            .collect(),
        _ => Vec::new(),
    };
    let n = &mut nodes[i];
    let unfinished = n.d.nic.unfinished();
    n.node.poll(&mut n.d.station, now, unfinished);
    n.events.extend(n.node.take_events());
    let mut events = Vec::new();
    n.d.step(&mut NoFrames, &mut |e| events.push(e)).unwrap();
    if let Rx::Dual { loss, period } = n.rx {
        dual_receiver(n, now, loss, period, tapped);
    } else {
        while n.inbox.front().is_some_and(|(t, ..)| *t <= now) {
            let Some((_, arrival, frame, _)) = n.inbox.pop_front() else { break };
            let stamp = match n.rx {
                Rx::Exact => arrival,
                Rx::Ideal => match n.ephc_at_true(arrival) {
                    Some(t) => t,
                    None => continue,
                },
                _ => n.software_stamp(arrival, now),
            };
            n.node.on_frame(&frame, stamp, &mut n.d.station, now);
        }
    }
    let mut wire = Vec::new();
    for e in events {
        match e {
            Event::Outcome(o) => {
                assert!(n.node.on_outcome(&o, &mut n.d.station, now), "only PTP frames here");
                let sent = match o.result {
                    Ok(sent) => sent,
                    // The dual clock's servo steps at every Sync while it acquires: a step takes the frames in
                    // flight with it (the port sends the next message as usual).
                    Err(Reason::ClockStep) if n.node.dual().is_some() => {
                        n.stepped_away += 1;
                        continue;
                    }
                    Err(r) => panic!("node {i}: a PTP frame rejected: {r:?}"),
                };
                n.sent.insert(o.id, sent.time);
                if sent.time >= judge_from {
                    n.judged.insert(o.id, sent.time);
                }
            }
            Event::Wire(w) => {
                let Some(start) = w.start else { continue };
                if let Some(ephc) = w.ephc {
                    n.starts.push_back((start, ephc));
                    if n.starts.len() > 4096 {
                        n.starts.pop_front();
                    }
                }
                let arrival = start + Nanos(DELAY);
                let (Some(bytes), Some(id)) = (w.bytes, w.frame) else { continue };
                if let Some(t) = n.judged.remove(&id) {
                    n.errors.push((t - start).0);
                }
                match n.transport.parse(&bytes) {
                    Ok((msg, _)) => n.wire.push((id, bytes.len(), msg.to_vec())),
                    Err(_) => n.other.push((start, bytes.clone())),
                }
                // (A counting receiver hands a frame in once its last byte is in.)
                let handed_in = counted.map_or(arrival, |p| arrival + Nanos(p));
                wire.push((handed_in, arrival, bytes, w.nic_slot));
            }
            Event::Underrun(u) => panic!("node {i} underran: {u:?}"),
        }
    }
    // Frames that are not PTP (the peer's IGMP reports) are only counted, as the daemon does; a PTP frame a step
    // took away is the port's problem too, reported at the node's next poll, as the daemon's status line does.
    let (problems, last) = n.node.problems();
    assert!(problems <= n.stepped_away, "node {i}: {problems} problems, the last {last:?}");
    n.d.nic.wait(POLL);
    nodes[1 - i].inbox.extend(wire);
}

/// The receiver of a dual-clock slave: it hands in every one of the master's slots, in wire order, once its last
/// byte is in — the master's PTP frames with a software stamp, every other slot as an empty frame (a filler:
/// counted, not parsed). The master's driver reports its slots only at its polls, after they left, so the slots
/// arrived by now are counted by the line rate from the latest report (the master streams back to back and its
/// oscillator is exact), and those not reported yet are read from its NIC directly (`tapped`:
/// `SimNic::finished_unreported`). On `loss` of polls the receiver loses `U[1, 8]` slots for good.
fn dual_receiver<S: StationFace>(n: &mut Node<S>, now: Tai, loss: f64, period: i64, tapped: Vec<(u64, Tai, Vec<u8>)>) {
    let mut reported = Vec::new();
    while n.inbox.front().is_some_and(|(t, ..)| *t <= now) {
        let Some((_, arrival, frame, slot)) = n.inbox.pop_front() else { break };
        n.latest = Some((slot, arrival));
        reported.push((slot, arrival, frame));
    }
    if let Some((slot, arrival, _)) = tapped.last() {
        n.latest = Some((*slot, *arrival));
    }
    let Some((latest, latest_arrival)) = n.latest else { return };
    let mut next = *n.next_slot.get_or_insert(latest);
    if loss > 0.0 && n.rng.gen_bool(loss) {
        let k = n.rng.gen_range(1..=MAX_LOST);
        next += k;
        n.lost += k;
    }
    // Slots fully arrived by now: those before the one arriving now.
    let arrived =
        u64::try_from(i128::from(latest) + i128::from((now - latest_arrival).0.div_euclid(period))).unwrap_or(0);
    let mut known: VecDeque<_> = reported.into_iter().chain(tapped).filter(|(k, ..)| *k >= next).collect();
    for k in next..arrived {
        while known.front().is_some_and(|(s, ..)| *s < k) {
            known.pop_front();
        }
        match known.front() {
            Some((s, arrival, frame)) if *s == k && !frame.is_empty() => {
                let (arrival, frame) = (*arrival, frame.clone());
                let stamp = n.software_stamp(arrival, now);
                n.node.on_frame(&frame, stamp, &mut n.d.station, now);
            }
            _ => n.node.on_frame(&[], now, &mut n.d.station, now),
        }
    }
    n.next_slot = Some(next.max(arrived));
}
