//! The station loop: one thread, one NIC queue, one station.
//!
//! ```text
//!   loop {
//!       obs  = nic.observe()                    consumed count, host time, gap
//!       for frame due by obs.now: station.submit(frame, its submit time)
//!       poll = station.poll(obs)                observe → reclaim → place → post
//!       nic.post(poll.post)                     the lazy doorbell
//!       hand outcomes, wire events, underruns to the sink
//!       nic.wait(poll_period)
//!   }
//! ```
//!
//! When the source is exhausted and every frame has an outcome, the station shuts down, the NIC drains its
//! posted slots, and the loop ends.
//!
//! **Wire times.** A backend that knows when a slot started on the wire (the simulator) reports it in
//! [`WireEvent::start`]; real backends only count completions, so they leave it `None` and the loop fills in
//! the station's EPHC slot time: for a real frame the time its `Sent` outcome reported (remembered by
//! [`FrameId`] for the few slots between consumption and the wire event), for a filler the slot's time on
//! the current clock. How exact that is, is the backend's [`Nic::timing`](crate::Nic::timing).
//!
//! **Bounded shutdown.** A run that exceeds `max_duration` shuts the station down (frames not yet posted are
//! rejected `shutdown`) and waits for the NIC to finish the posted slots — but at most [`DRAIN_GRACE`] plus
//! one ring of slot periods. A NIC that has not completed them by then is reported: each real frame still
//! posted gets the outcome `link-fault` (it may or may not have left; the link never said), and the run
//! returns [`DriverError::Timeout`]. Every frame handed in thus ends with exactly one outcome, and the loop
//! always ends.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use keepon_core::bytes::{ByteConfig, ByteConfigError, ByteStation};
use keepon_core::outcome::{Counters, Frame, FrameId, Outcome, Reason};
use keepon_core::ring::{RingError, SlotKind};
use keepon_core::station::{Observation, Station, StationConfig, StationError, Underrun};
use keepon_core::time::{Nanos, Tai};

use crate::{Nic, NicError, WireEvent};
use keepon_core::face::StationFace;

/// Frames an application hands to the station over time.
pub trait Source {
    /// The next frame's submission time, or `None` when there are no more.
    fn next_due(&self) -> Option<Tai>;
    /// Take the next frame (whose submission time is [`Source::next_due`]).
    fn take(&mut self) -> Option<Frame<Vec<u8>>>;
}

/// What the loop reports as it runs.
#[derive(Debug)]
pub enum Event {
    /// A frame's single outcome.
    Outcome(Outcome),
    /// A slot that left the wire (real frames; fillers if the backend keeps them).
    Wire(WireEvent),
    /// An underrun the station detected.
    Underrun(Underrun),
}

/// Why the loop stopped early.
#[derive(Debug)]
pub enum DriverError {
    /// The station configuration is invalid.
    Station(StationError),
    /// The byte-clock configuration is invalid.
    Bytes(ByteConfigError),
    /// The backend broke the ring protocol.
    Ring(RingError),
    /// The backend failed.
    Nic(NicError),
    /// The run exceeded its time bound.
    Timeout(Nanos),
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Station(e) => write!(f, "station: {e}"),
            DriverError::Bytes(e) => write!(f, "byte clock: {e}"),
            DriverError::Ring(e) => write!(f, "ring: {e}"),
            DriverError::Nic(e) => write!(f, "{e}"),
            DriverError::Timeout(d) => write!(f, "run did not finish within {} ms", d.0 / 1_000_000),
        }
    }
}

impl std::error::Error for DriverError {}

impl From<RingError> for DriverError {
    fn from(e: RingError) -> Self {
        DriverError::Ring(e)
    }
}
impl From<NicError> for DriverError {
    fn from(e: NicError) -> Self {
        DriverError::Nic(e)
    }
}

/// Loop settings.
#[derive(Clone, Copy, Debug)]
pub struct LoopConfig {
    /// Requested time between polls.
    pub poll_period: Nanos,
    /// Longest run allowed (host time), after which the loop stops with [`DriverError::Timeout`].
    pub max_duration: Nanos,
}

/// How long a timed-out run waits for the NIC to finish its posted slots, beyond one ring of slot periods.
pub const DRAIN_GRACE: Nanos = Nanos::from_ms(1_000);

/// A station bound to a NIC: the slot station by default, or the byte clock ([`Driver::bytes`]).
pub struct Driver<N: Nic, S: StationFace = Station<Vec<u8>>> {
    /// The backend.
    pub nic: N,
    /// The driver model.
    pub station: S,
    cfg: LoopConfig,
    wire: Vec<WireEvent>,
    /// Times of recent `Sent` outcomes, in slot order, for wire events without a start time.
    sent: VecDeque<(u64, FrameId, Tai)>,
    /// Frames given up on (`link-fault`) after a timed-out drain: any later outcome of theirs is dropped.
    abandoned: HashSet<FrameId>,
    /// Frames the backend reported refused by the kernel after they were posted (see [`Nic::drain_refused`]).
    refused: HashMap<FrameId, Reason>,
    refused_buf: Vec<(FrameId, Reason)>,
    /// Of those, how many the station had counted sent, by reason.
    refused_counts: [u64; Reason::COUNT],
}

impl<N: Nic> Driver<N> {
    /// Bind a station to a NIC; the station's slot 0 is expected when the first post lands.
    pub fn new(nic: N, station: StationConfig, cfg: LoopConfig) -> Result<Self, DriverError> {
        let mut station = station;
        station.post_latency = nic.post_latency();
        // Fillers as long as the backend can send (at least the slot size): the discipline's room to lengthen.
        station.max_filler = station.max_filler.min(nic.max_frame_bytes()).max(station.geometry.slot_bytes());
        let t0 = nic.now() + nic.post_latency();
        let station = Station::new(station, t0).map_err(DriverError::Station)?;
        Ok(Driver::with_station(nic, station, cfg))
    }
}

impl<N: Nic> Driver<N, ByteStation<Vec<u8>>> {
    /// Bind a byte-clock station to a NIC: its post latency and longest frame are the backend's.
    pub fn bytes(nic: N, mut cfg: ByteConfig, loop_cfg: LoopConfig) -> Result<Self, DriverError> {
        cfg.post_latency = nic.post_latency();
        cfg.max_frame = cfg.max_frame.min(nic.max_frame_bytes());
        let t0 = nic.now() + nic.post_latency();
        let station = ByteStation::new(cfg, t0).map_err(DriverError::Bytes)?;
        Ok(Driver::with_station(nic, station, loop_cfg))
    }
}

impl<N: Nic, S: StationFace> Driver<N, S> {
    /// A built station bound to `nic`, nothing in flight yet (for a station built elsewhere, or wrapped: the
    /// byte benchmark times the station's calls apart from the simulated NIC's).
    pub fn with_station(nic: N, station: S, cfg: LoopConfig) -> Self {
        Driver {
            nic,
            station,
            cfg,
            wire: Vec::new(),
            sent: VecDeque::new(),
            abandoned: HashSet::new(),
            refused: HashMap::new(),
            refused_buf: Vec::new(),
            refused_counts: [0; Reason::COUNT],
        }
    }

    /// Bring the link up before any frame is handed in: poll (posting fillers) until the station's schedule grid
    /// is final — the backend has reported when the link really came up, or slots have left without such a
    /// report. Times derived from the grid (flow epochs, a daemon's cycle start) must be read only after this.
    /// Bounded: fails with [`DriverError::Timeout`] if the link does not come up within [`DRAIN_GRACE`] plus one
    /// ring of slot periods.
    pub fn bring_up(&mut self, sink: &mut dyn FnMut(Event)) -> Result<(), DriverError> {
        let limit = DRAIN_GRACE + self.ring_span();
        let start = self.nic.now();
        let mut nothing = NoFrames;
        loop {
            self.step(&mut nothing, sink)?;
            if self.station.schedule_settled() {
                return Ok(());
            }
            if self.nic.now() - start > limit {
                return Err(DriverError::Timeout(limit));
            }
            self.nic.wait(self.cfg.poll_period);
        }
    }

    /// One poll-loop iteration, submitting what is due first.
    pub fn step(&mut self, source: &mut dyn Source, sink: &mut dyn FnMut(Event)) -> Result<(), DriverError> {
        let obs = self.nic.observe()?;
        self.nic.drain_refused(&mut self.refused_buf);
        self.refused.extend(self.refused_buf.drain(..));
        while let Some(due) = source.next_due() {
            if due > obs.now {
                break;
            }
            if let Some(frame) = source.take() {
                let _ = self.station.submit(frame, due);
            }
        }
        let poll = self.station.poll(Observation { consumed: obs.consumed, now: obs.now, gaps: &obs.gaps })?;
        let station = &self.station;
        self.nic.post(&mut poll.post.clone().map(|k| station.view(k)))?;
        for u in poll.underruns {
            sink(Event::Underrun(u));
        }
        for mut o in self.station.drain_outcomes() {
            if !self.abandoned.is_empty() && self.abandoned.contains(&o.id) {
                continue;
            }
            if o.result.is_ok() && !self.refused.is_empty() {
                if let Some(r) = self.refused.remove(&o.id) {
                    o.result = Err(r);
                    self.refused_counts[r.index()] += 1;
                }
            }
            if let Ok(s) = o.result {
                self.sent.push_back((s.slot, o.id, s.time));
            }
            sink(Event::Outcome(o));
        }
        // Wire events lag consumption by at most a ring; older entries belong to frames whose backend reported
        // no wire event.
        let keep = 2 * self.station.ring().len() as usize + 64;
        if self.sent.len() > keep {
            self.sent.drain(..self.sent.len() - keep);
        }
        self.nic.drain_wire(&mut self.wire);
        let mut wire = std::mem::take(&mut self.wire);
        for mut w in wire.drain(..) {
            let start = self.wire_time(&w);
            w.start.get_or_insert(start);
            w.ephc = Some(start);
            let grid = self.station.carried_time(w.nic_slot);
            w.grid = grid.map(|g| g.0);
            w.locked = grid.is_some_and(|g| g.1);
            w.released_ephc = w.released.map(|t| self.station.ephc_at(t));
            sink(Event::Wire(w));
        }
        self.wire = wire;
        Ok(())
    }

    /// The EPHC time of a wire event's slot: its frame's `Sent` time, or (fillers) the slot's time on the
    /// current clock. Forgets remembered times up to this slot.
    fn wire_time(&mut self, w: &WireEvent) -> Tai {
        while self.sent.front().is_some_and(|(k, _, _)| *k < w.nic_slot) {
            self.sent.pop_front();
        }
        match (w.frame, self.sent.front()) {
            (Some(id), Some(&(k, sid, t))) if k == w.nic_slot && sid == id => {
                self.sent.pop_front();
                t
            }
            _ => self.station.slot_time(w.nic_slot),
        }
    }

    /// Give up on the real frames still posted to the NIC: each gets the outcome `link-fault`.
    pub fn abandon_posted(&mut self, sink: &mut dyn FnMut(Event)) {
        let ring = self.station.ring();
        for k in ring.consumed()..ring.posted() {
            if let SlotKind::Real { id, class, .. } = ring.kind(k) {
                if self.abandoned.insert(id) {
                    sink(Event::Outcome(Outcome { id, class, result: Err(Reason::LinkFault) }));
                }
            }
        }
    }

    /// Run until the source is exhausted and every frame has left or been rejected. A run that exceeds
    /// `max_duration` stops taking frames, shuts the station down, drains it for at most [`DRAIN_GRACE`] plus
    /// one ring of slot periods (frames the NIC still has not completed then get `link-fault`), so that every
    /// frame handed in gets its outcome, and returns [`DriverError::Timeout`]. The driver is spent after a
    /// timeout: step it no more.
    pub fn run(&mut self, source: &mut dyn Source, sink: &mut dyn FnMut(Event)) -> Result<(), DriverError> {
        self.run_until(source, sink, &AtomicBool::new(false))
    }

    /// [`Driver::run`], ending early when `stop` is set (a signal): the source is not read any more, frames not
    /// yet posted are rejected `shutdown`, the posted ones leave and get their outcomes.
    pub fn run_until(
        &mut self,
        source: &mut dyn Source,
        sink: &mut dyn FnMut(Event),
        stop: &AtomicBool,
    ) -> Result<(), DriverError> {
        let start = self.nic.now();
        let mut exhausted = NoFrames;
        let mut give_up: Option<Tai> = None;
        // Set when `stop` is seen: the drain ends by then.
        let mut stop_by: Option<Tai> = None;
        loop {
            let stopped = stop.load(Ordering::Relaxed);
            if stopped && stop_by.is_none() {
                self.station.shutdown();
                stop_by = Some(self.nic.now() + DRAIN_GRACE + self.ring_span());
            }
            let src: &mut dyn Source = if give_up.is_some() || stopped { &mut exhausted } else { source };
            self.step(src, sink)?;
            if self.station.drained() && self.nic.unfinished() == 0 {
                break;
            }
            let now = self.nic.now();
            if stop_by.is_some_and(|t| now > t) {
                self.abandon_posted(sink);
                break;
            }
            match give_up {
                None if now - start > self.cfg.max_duration => {
                    self.station.shutdown();
                    give_up = Some(now + DRAIN_GRACE + self.ring_span());
                }
                None if source.next_due().is_none() && self.station.in_flight() == 0 => self.station.shutdown(),
                Some(t) if now > t => {
                    // Outcomes the last step produced are out; the rest of the posted frames never completed.
                    self.abandon_posted(sink);
                    break;
                }
                _ => {}
            }
            self.nic.wait(self.cfg.poll_period);
        }
        if give_up.is_some() {
            return Err(DriverError::Timeout(self.cfg.max_duration));
        }
        Ok(())
    }

    /// The station's counters, with the frames the backend reported refused after posting (see
    /// [`Nic::drain_refused`]) moved from `sent` to their rejection reasons.
    pub fn counters(&self) -> Counters {
        let mut c = *self.station.counters();
        for (i, n) in self.refused_counts.iter().enumerate() {
            c.sent = c.sent.saturating_sub(*n);
            c.rejected[i] += n;
        }
        c
    }

    /// One ring of slot periods: the longest a healthy NIC needs to finish what is posted.
    pub fn ring_span(&self) -> Nanos {
        self.station.ring_span()
    }
}

/// A source with nothing in it: for a link that carries only fillers (bring-up, benchmarks, experiments).
pub struct NoFrames;

impl Source for NoFrames {
    fn next_due(&self) -> Option<Tai> {
        None
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::source::{FlowSource, FlowSpec, Pattern};
    use crate::{NicObservation, Timing};
    use keepon_core::insert::Policy;
    use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
    use keepon_core::ring::SlotView;
    use keepon_core::time::{LinkRate, SlotGeometry};

    /// 1 Gb/s, 1230 B slots: δ = 10 µs exactly.
    const DELTA: i64 = 10_000;

    /// A NIC in virtual time that, like a real backend, counts completions but does not know wire times.
    /// It completes nothing beyond slot `stop_at`.
    struct CountingNic {
        now: Tai,
        first_post: Option<Tai>,
        posted: u64,
        consumed: u64,
        stop_at: u64,
        reals: VecDeque<(u64, FrameId)>,
        wire: Vec<WireEvent>,
        /// Refuse (like ETF's error queue) every real frame whose id is a multiple of this.
        refuse_every: Option<u64>,
        refused: Vec<(FrameId, Reason)>,
    }

    impl CountingNic {
        fn new(stop_at: u64) -> Self {
            CountingNic {
                now: Tai(1_000_000_000),
                first_post: None,
                posted: 0,
                consumed: 0,
                stop_at,
                reals: VecDeque::new(),
                wire: Vec::new(),
                refuse_every: None,
                refused: Vec::new(),
            }
        }
    }

    impl Nic for CountingNic {
        fn describe(&self) -> String {
            "counting".into()
        }
        fn timing(&self) -> Timing {
            Timing::LineRate
        }
        fn observe(&mut self) -> Result<NicObservation, NicError> {
            if let Some(t0) = self.first_post {
                // Slot k finishes at t0 + (k + 1)·δ, back to back while posted.
                let done = ((self.now - t0).0 / DELTA) as u64;
                let c = done.min(self.posted).min(self.stop_at).max(self.consumed);
                for k in self.consumed..c {
                    let frame = match self.reals.front() {
                        Some(&(s, id)) if s == k => {
                            self.reals.pop_front();
                            if self.refuse_every.is_some_and(|n| id.0 % n == 0) {
                                self.refused.push((id, Reason::Late));
                                continue;
                            }
                            Some(id)
                        }
                        _ => None,
                    };
                    self.wire.push(WireEvent {
                        nic_slot: k,
                        start: None,
                        rx: None,
                        frame,
                        bytes: None,
                        released: None,
                        stamped: false,
                        released_ephc: None,
                        ephc: None,
                        grid: None,
                        locked: false,
                    });
                }
                self.consumed = c;
            }
            Ok(NicObservation { consumed: self.consumed, now: self.now, gaps: Vec::new() })
        }
        fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError> {
            for v in slots {
                assert_eq!(v.slot, self.posted);
                if let SlotKind::Real { id, .. } = v.kind {
                    self.reals.push_back((v.slot, id));
                }
                self.posted += 1;
                self.first_post.get_or_insert(self.now);
            }
            Ok(())
        }
        fn drain_wire(&mut self, out: &mut Vec<WireEvent>) {
            out.append(&mut self.wire);
        }
        fn drain_refused(&mut self, out: &mut Vec<(FrameId, Reason)>) {
            out.append(&mut self.refused);
        }
        fn wait(&mut self, period: Nanos) {
            self.now += period;
        }
        fn now(&self) -> Tai {
            self.now
        }
        fn post_latency(&self) -> Nanos {
            Nanos(0)
        }
    }

    fn driver(stop_at: u64, max_duration: Nanos) -> Driver<CountingNic> {
        let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap();
        let ownership = Ownership::new(
            32,
            &[ClassSpec { name: "rt".into(), slots: vec![0] }, ClassSpec { name: "be".into(), slots: vec![] }],
        )
        .unwrap();
        let station = StationConfig {
            geometry,
            ownership,
            batch: 8,
            policy: Policy::Strict,
            max_pending: 1_000,
            max_advance: Nanos::from_ms(100),
            post_latency: Nanos(0),
            base_time: Tai(0),
            max_filler: keepon_core::time::MAX_SLOT_BYTES,
        };
        let loop_cfg = LoopConfig { poll_period: Nanos(20_000), max_duration };
        Driver::new(CountingNic::new(stop_at), station, loop_cfg).unwrap()
    }

    /// 200 best-effort frames, one every 30 µs from 100 µs after `start`.
    fn source(start: Tai) -> FlowSource {
        let spec = FlowSpec {
            flow: 1,
            class: ClassId(1),
            pattern: Pattern::BestEffort { offset: Nanos::from_us(100), period: Nanos::from_us(30) },
            frame_bytes: 200,
            count: 200,
            lead: Nanos(0),
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            rtag: false,
        };
        FlowSource::new(vec![spec], start)
    }

    #[test]
    fn wire_events_without_a_start_get_the_ephc_slot_time() {
        let mut d = driver(u64::MAX, Nanos::from_ms(1_000));
        let mut src = source(d.nic.now());
        let (mut sent, mut wire) = (HashMap::new(), Vec::new());
        d.run(&mut src, &mut |e| match e {
            Event::Outcome(o) => {
                assert!(sent.insert(o.id, o.result.expect("sent")).is_none(), "two outcomes");
            }
            Event::Wire(w) => wire.push(w),
            Event::Underrun(u) => panic!("underrun {u:?}"),
        })
        .unwrap();
        assert_eq!(sent.len(), 200);
        assert!(wire.len() > 200, "fillers are reported too");
        let t0 = wire[0].start.expect("filled in");
        for w in &wire {
            // On this grid (no underrun) slot k is at t0 + k·δ, fillers and frames alike.
            assert_eq!(w.start, Some(t0 + Nanos(w.nic_slot as i64 * DELTA)), "slot {}", w.nic_slot);
            if let Some(id) = w.frame {
                assert_eq!(w.start, Some(sent[&id].time), "a frame's wire time is its outcome's");
                assert_eq!(w.nic_slot, sent[&id].slot);
            }
        }
        assert_eq!(wire.iter().filter(|w| w.frame.is_some()).count(), 200);
        assert!(d.sent.is_empty(), "remembered times are forgotten once used");
    }

    #[test]
    fn frames_the_kernel_refused_after_posting_end_rejected_and_are_counted_so() {
        let mut d = driver(u64::MAX, Nanos::from_ms(1_000));
        d.nic.refuse_every = Some(5);
        let mut src = source(d.nic.now());
        let mut outcomes: HashMap<FrameId, Result<u64, Reason>> = HashMap::new();
        let mut wire_frames = HashSet::new();
        d.run(&mut src, &mut |e| match e {
            Event::Outcome(o) => {
                assert!(outcomes.insert(o.id, o.result.map(|s| s.slot)).is_none(), "two outcomes for {:?}", o.id);
            }
            Event::Wire(w) => {
                if let Some(id) = w.frame {
                    wire_frames.insert(id);
                }
            }
            Event::Underrun(_) => {}
        })
        .unwrap();
        assert_eq!(outcomes.len(), 200);
        for (id, r) in &outcomes {
            if id.0 % 5 == 0 {
                assert_eq!(*r, Err(Reason::Late), "frame {id:?} was refused by the backend");
                assert!(!wire_frames.contains(id), "a refused frame has no wire event");
            } else {
                assert!(r.is_ok() && wire_frames.contains(id), "frame {id:?}: {r:?}");
            }
        }
        let c = d.counters();
        assert_eq!((c.sent, c.rejected[Reason::Late.index()], c.rejected_total()), (160, 40, 40));
        assert_eq!(d.station.counters().sent, 200, "the station itself counted them sent when consumed");
    }

    #[test]
    fn a_drain_the_nic_never_finishes_is_bounded_and_every_frame_gets_one_outcome() {
        let max = Nanos::from_ms(2);
        // The link stops completing after slot 40 (0.4 ms), with frames posted.
        let mut d = driver(40, max);
        let start = d.nic.now();
        let mut src = source(start);
        let mut outcomes: HashMap<FrameId, Result<u64, Reason>> = HashMap::new();
        let r = d.run(&mut src, &mut |e| {
            if let Event::Outcome(o) = e {
                assert!(outcomes.insert(o.id, o.result.map(|s| s.slot)).is_none(), "two outcomes for {:?}", o.id);
            }
        });
        assert!(matches!(r, Err(DriverError::Timeout(t)) if t == max), "{r:?}");
        let took = d.nic.now() - start;
        assert!(took <= max + DRAIN_GRACE + Nanos(32 * DELTA) + Nanos::from_us(100), "ran {took:?}");
        // Frames submitted by the timeout: sent before the link stopped, posted and never completed, or
        // shut down before they were posted.
        let sent = outcomes.values().filter(|r| matches!(r, Ok(k) if *k < 40)).count();
        let faults = outcomes.values().filter(|r| **r == Err(Reason::LinkFault)).count();
        let shut = outcomes.values().filter(|r| **r == Err(Reason::Shutdown)).count();
        assert!(sent > 0 && faults > 0 && faults <= 8, "{sent} sent, {faults} link faults (at most a batch)");
        assert_eq!(sent + faults + shut, outcomes.len(), "{outcomes:?}");
        assert!(outcomes.len() >= 60, "frames due in the first 2 ms: {}", outcomes.len());
        // The driver is spent; stepping it again gives no second outcome.
        d.nic.stop_at = u64::MAX;
        let mut again = 0;
        for _ in 0..100 {
            d.step(&mut NoFrames, &mut |e| again += u32::from(matches!(e, Event::Outcome(_)))).unwrap();
            d.nic.wait(Nanos(20_000));
        }
        assert_eq!(again, 0, "abandoned frames got a second outcome");
    }
}
