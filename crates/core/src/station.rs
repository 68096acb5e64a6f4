//! The station: the whole driver model of one keepon link as a sans-IO state machine.
//!
//! Inputs are frames ([`Station::submit`]) and observations of the NIC ([`Station::poll`]); outputs are the
//! slots to post ([`Poll::post`], read with [`Station::view`]) and one [`Outcome`] per frame
//! ([`Station::drain_outcomes`]). The station never reads a clock: the caller passes `now`.
//!
//! Underruns. If the NIC ever finds no posted slot, the link goes idle and the slot grid breaks: slot `k` no
//! longer starts at `T0 + k·δ`. The station learns of it from the backend (a reported gap) or, for backends
//! that cannot see the wire, from a drained ring whose last slot should already have ended. It reports an
//! [`Underrun`], re-anchors the EPHC at the restart (the count itself never changes), and shifts the
//! ownership phase by the slots the gap lost, so that ring slot `i` keeps its time in the schedule's cycle:
//! txtimes are read against the schedule's grid (the EPHC as anchored at link-up), and each wire slot carries
//! the schedule slot whose start is nearest (within half a slot). Frames waiting in the insertion window
//! are re-placed against the new clock or rejected with [`Reason::Underrun`]; none is ever sent at a time
//! other than the one its outcome reports.
//!
//! The contract after an underrun, honestly: frames already handed to the NIC cannot be recalled. The (at most
//! `batch`) frames posted when the link went idle leave late by the gap, and so may frames posted before the
//! station learned when the wire really restarted. Every `Sent` outcome therefore carries the start of the
//! schedule slot that holds the frame's txtime ([`Sent::scheduled`]) — its deviation is `time − scheduled` —
//! so the application sees exactly how far each frame was off; frames placed after the re-alignment leave
//! within half a slot of their schedule slot. The property tests bound the frames beyond half a slot by
//! `batch` per underrun.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use crate::ephc::{ClockAdjust, Ephc, EphcError};
use crate::insert::{decide, Decision, Policy};
use crate::isolation::{ClassId, Ownership};
use crate::outcome::{Counters, Frame, FrameId, Outcome, Reason, Sent};
use crate::prebuffer::{BeQueues, RtQueue};
use crate::ring::{Placed, Ring, RingError, SlotKind, SlotView};
use crate::time::{Nanos, SlotGeometry, Tai};

/// A txtime further than this in the past is `late` without looking for its slot (a day: any slot that old is long
/// gone, and the slot arithmetic never sees times the clock cannot represent).
pub const MAX_PAST: Nanos = Nanos(86_400_000_000_000);

/// `x` clamped to the i64 range.
fn sat_i64(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

/// Smallest frame data accepted: an Ethernet header.
pub const MIN_FRAME_DATA: usize = 14;

/// Static configuration of a station.
#[derive(Clone, Debug)]
pub struct StationConfig {
    /// Link rate and slot size.
    pub geometry: SlotGeometry,
    /// Ring size and slot ownership.
    pub ownership: Ownership,
    /// Slots kept posted ahead of the consumer; the insertion window starts `batch` slots ahead.
    pub batch: u32,
    /// Insertion policy.
    pub policy: Policy,
    /// Most frames of one class waiting (pre-buffered or queued, not yet in the ring) at once. Each class has
    /// its own budget of this size, so one class's backlog (a best-effort flood) never takes another class's
    /// admission capacity; the station holds at most `classes · max_pending` waiting frames.
    pub max_pending: usize,
    /// Furthest ahead of `now` a txtime may be.
    pub max_advance: Nanos,
    /// Expected delay from posting a slot to the NIC starting it on an idle link (doorbell + DMA fetch);
    /// used to estimate the restart time after an underrun.
    pub post_latency: Nanos,
}

/// Errors in the station configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StationError {
    /// `batch` must be in `1..N`.
    BadBatch {
        /// Requested batch.
        batch: u32,
        /// Ring size.
        ring: u32,
    },
}

impl fmt::Display for StationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StationError::BadBatch { batch, ring } => {
                write!(f, "batch {batch} must be at least 1 and less than the ring size {ring}")
            }
        }
    }
}

/// What the backend saw since the last poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation<'a> {
    /// Slots the NIC has finished with since it started (a count, not a time).
    pub consumed: u64,
    /// Host time of the observation.
    pub now: Tai,
    /// Gaps the backend itself saw on the wire since the last poll (simulated NICs, TX timestamps), in order.
    pub gaps: &'a [Gap],
}

/// A gap on the wire before slot `at` (NIC count), which then started at `restart`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// NIC count of the first slot after the gap.
    pub at: u64,
    /// When that slot actually started.
    pub restart: Tai,
}

/// An underrun the station detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Underrun {
    /// Station slot after which the link went idle.
    pub at_slot: u64,
    /// Host time of detection.
    pub detected: Tai,
    /// (Estimated) time the link restarts.
    pub restart: Tai,
    /// How far the slot grid moved (positive: later than the clock had it).
    pub shift: Nanos,
}

/// The result of a poll.
#[must_use = "the posted slots must be handed to the NIC"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Poll {
    /// Slots to hand to the NIC now, in order (read them with [`Station::view`]).
    pub post: Range<u64>,
    /// Underruns detected at this poll (usually none).
    pub underruns: Vec<Underrun>,
}

/// What [`Station::adjust_clock`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockAdjusted {
    /// The first slot governed by the adjusted clock (the first not yet posted).
    pub from_slot: u64,
    /// Frames of the insertion window rejected with [`Reason::ClockStep`] (their outcomes are queued).
    pub rejected: u64,
}

/// A relaxed-policy frame waiting for an owned slot beyond the window.
struct Displaced<B> {
    frame: Frame<B>,
    target: u64,
    from: u64,
}

/// One keepon link's driver model.
pub struct Station<B> {
    cfg: StationConfig,
    ephc: Ephc,
    ring: Ring,
    rt: RtQueue<B>,
    displaced: VecDeque<Displaced<B>>,
    be: BeQueues<B>,
    outcomes: Vec<Outcome>,
    counters: Counters,
    /// Frames waiting outside the ring, per class (pre-buffered, displaced, best-effort queue).
    queued: Vec<usize>,
    /// The schedule's grid: the EPHC as anchored when the link came up. Schedule slot `j` (ring slot
    /// `j mod N` of the ownership map) starts at `schedule.time_of(j)`; txtimes are read against it.
    schedule: Ephc,
    /// The schedule's grid was set from an estimate of when the link came up; the backend's report of the
    /// real start (a gap at the first slot) will replace it.
    schedule_provisional: bool,
    /// Wire slot `k` carries schedule slot `k + shift` (`shift` changes only when an underrun moves the wire
    /// grid by whole slots).
    shift: i64,
    /// Ownership phase, `shift mod N`: slot `k` is ring slot `(k + phase) mod N` of the ownership map. An underrun shifts the
    /// grid in time; moving the phase by the slots it lost keeps each ring slot at its time in the schedule's
    /// cycle, while the slot count itself is never changed.
    phase: u64,
    /// The clock governs slots from `clock_from` on; `history` keeps the clocks of earlier slots still in
    /// flight, as (first slot, clock).
    clock_from: u64,
    history: VecDeque<(u64, Ephc)>,
    /// The wire's grid by the host clock: when the host saw (or expects) slot `k` start. Re-anchored with the
    /// EPHC at link-up, underruns and reported gaps, but never adjusted by synchronisation; it converts host
    /// times (`now`, restart estimates) into EPHC time ([`Station::ephc_at`]) once a servo has moved the EPHC
    /// away from the host clock.
    host: Ephc,
    /// Station slot at which the station itself expects the wire to restart after an underrun it detected.
    expected_gap: Option<u64>,
    started: bool,
    draining: bool,
}

impl<B: AsRef<[u8]>> Station<B> {
    /// A station whose slot 0 is expected to start at `t0`. The first poll anchors the clock for real.
    pub fn new(cfg: StationConfig, t0: Tai) -> Result<Self, StationError> {
        let ring_len = cfg.ownership.ring();
        if cfg.batch == 0 || cfg.batch >= ring_len {
            return Err(StationError::BadBatch { batch: cfg.batch, ring: ring_len });
        }
        Ok(Station {
            ephc: Ephc::new(cfg.geometry.period(), 0, t0),
            ring: Ring::new(ring_len, cfg.geometry.slot_bytes()),
            rt: RtQueue::default(),
            displaced: VecDeque::new(),
            be: BeQueues::new(cfg.ownership.classes()),
            outcomes: Vec::new(),
            counters: Counters::default(),
            queued: alloc::vec![0; cfg.ownership.classes()],
            phase: 0,
            shift: 0,
            schedule_provisional: false,
            schedule: Ephc::new(cfg.geometry.period(), 0, t0),
            host: Ephc::new(cfg.geometry.period(), 0, t0),
            clock_from: 0,
            history: VecDeque::new(),
            expected_gap: None,
            started: false,
            draining: false,
            cfg,
        })
    }

    /// The ownership phase: slot `k` is ring slot `(k + phase) mod N` of the ownership map.
    pub fn phase(&self) -> u64 {
        self.phase
    }

    /// The configuration.
    pub fn config(&self) -> &StationConfig {
        &self.cfg
    }

    /// The clock (read-only).
    pub fn ephc(&self) -> &Ephc {
        &self.ephc
    }

    /// The clock, for tests: adjust only with [`Ephc`]'s continuous operations or explicit steps. Txtimes are
    /// read against [`Station::schedule`]; a synchronisation servo uses [`Station::adjust_clock`], which moves
    /// both.
    pub fn ephc_mut(&mut self) -> &mut Ephc {
        &mut self.ephc
    }

    /// The ring (read-only).
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Frames handed in that have no outcome yet.
    pub fn in_flight(&self) -> usize {
        self.rt.len() + self.displaced.len() + self.be.len() + self.ring.real_frames()
    }

    /// Frames without an outcome, by where they wait: (pre-buffered real-time, displaced by the relaxed
    /// policy, best-effort queues, in the ring).
    pub fn pending_breakdown(&self) -> (usize, usize, usize, usize) {
        (self.rt.len(), self.displaced.len(), self.be.len(), self.ring.real_frames())
    }

    /// Frames of `class` waiting outside the ring (pre-buffered, displaced, queued): its share of `max_pending`.
    pub fn queued(&self, class: ClassId) -> usize {
        self.queued.get(usize::from(class.0)).copied().unwrap_or(0)
    }

    /// A frame of `class` left the queues (into the ring, or to be re-decided).
    fn dequeued(&mut self, class: ClassId) {
        let q = &mut self.queued[usize::from(class.0)];
        debug_assert!(*q > 0, "queued count of class {} underflows", class.0);
        *q = q.saturating_sub(1);
    }

    /// The wire slot a frame scheduled at `t` targets: the one that carries the schedule slot whose interval
    /// contains `t` (the same as `ephc().slot_of(t)` until an underrun moves the wire grid).
    pub fn slot_of(&self, t: Tai) -> Option<u64> {
        let j = self.schedule.slot_of(t)?;
        u64::try_from(i128::from(j) - i128::from(self.shift)).ok()
    }

    /// The schedule's grid (see [`Station::slot_of`]): applications align their txtimes to it.
    pub fn schedule(&self) -> &Ephc {
        &self.schedule
    }

    /// The start of the first schedule cycle (a schedule slot of ring slot 0) at or after `t`, or `None` if that
    /// is beyond the clock's range. Applications and flow epochs align to it.
    pub fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai> {
        let n = self.ring.len();
        let j = self.schedule.slot_at_or_after(t)?;
        let j = j.checked_next_multiple_of(n)?;
        let start = self.schedule.time_of(j);
        (start >= t).then_some(start)
    }

    /// True once the schedule's grid is final: the backend reported when the link really came up, or slots
    /// have left without such a report (the estimate was right). Applications should align to it only then.
    pub fn schedule_settled(&self) -> bool {
        self.started && !self.schedule_provisional
    }

    /// Wire slot `k` carries schedule slot `k + schedule_shift()`.
    pub fn schedule_shift(&self) -> i64 {
        self.shift
    }

    /// Slot `k` as it must be handed to the NIC.
    pub fn view(&self, k: u64) -> SlotView<'_> {
        self.ring.view(k)
    }

    /// Take the outcomes produced so far.
    pub fn drain_outcomes(&mut self) -> alloc::vec::Drain<'_, Outcome> {
        self.outcomes.drain(..)
    }

    fn reject(&mut self, id: FrameId, class: ClassId, why: Reason) {
        self.counters.rejected[why.index()] += 1;
        self.outcomes.push(Outcome { id, class, result: Err(why) });
    }

    /// Hand a frame to the station. Every frame gets exactly one outcome in [`Station::drain_outcomes`]; the
    /// return value repeats an immediate rejection for convenience.
    pub fn submit(&mut self, frame: Frame<B>, now: Tai) -> Result<(), Reason> {
        self.counters.submitted += 1;
        let why = self.admit(&frame, now);
        if let Err(why) = why {
            self.reject(frame.id, frame.class, why);
            return Err(why);
        }
        if self.cfg.ownership.is_best_effort(frame.class) {
            self.queued[usize::from(frame.class.0)] += 1;
            self.be.push(frame.class.0 as usize, frame);
            return Ok(());
        }
        let Some(target) = frame.txtime.and_then(|t| self.slot_of(t)) else {
            self.reject(frame.id, frame.class, Reason::Late);
            return Err(Reason::Late);
        };
        self.insert(frame, target, target)
    }

    /// The checks that need no slot: class, length, txtime presence and horizon, capacity.
    fn admit(&self, frame: &Frame<B>, now: Tai) -> Result<(), Reason> {
        let own = &self.cfg.ownership;
        if self.draining {
            return Err(Reason::Shutdown);
        }
        if !own.has_class(frame.class) {
            return Err(Reason::UnknownClass);
        }
        let len = frame.data.as_ref().len();
        if len > self.ring.data_bytes() {
            return Err(Reason::Oversize);
        }
        if len < MIN_FRAME_DATA {
            return Err(Reason::Runt);
        }
        if own.is_best_effort(frame.class) {
            if frame.txtime.is_some() {
                return Err(Reason::UnexpectedTxtime);
            }
            if own.unowned().is_empty() {
                return Err(Reason::NoCapacity);
            }
        } else {
            let t = frame.txtime.ok_or(Reason::MissingTxtime)?;
            // Untrusted times: compared in i128, so no txtime (i64::MIN included) can wrap. The txtime is EPHC
            // time, `now` the host's: compare in EPHC time.
            let ahead = i128::from(t.0) - i128::from(self.ephc_at(now).0);
            if ahead > i128::from(self.cfg.max_advance.0) {
                return Err(Reason::TooFarAhead);
            }
            if ahead < -i128::from(MAX_PAST.0) {
                return Err(Reason::Late);
            }
        }
        if self.queued[usize::from(frame.class.0)] >= self.cfg.max_pending {
            return Err(Reason::QueueFull);
        }
        Ok(())
    }

    /// Place a real-time frame now, queue it, or reject it.
    fn insert(&mut self, frame: Frame<B>, target: u64, from: u64) -> Result<(), Reason> {
        let d = decide(&self.ring, &self.cfg.ownership, self.phase, self.cfg.policy, frame.class, target, from);
        match d {
            Decision::Place(k) => {
                let placed =
                    Placed { id: frame.id, class: frame.class, txtime: frame.txtime, ring_slot: self.ring_slot(k) };
                self.ring.place(k, placed, frame.data.as_ref());
                Ok(())
            }
            Decision::Wait(k) if k == target => {
                self.queued[usize::from(frame.class.0)] += 1;
                self.rt.push(frame);
                Ok(())
            }
            Decision::Wait(k) => {
                self.queued[usize::from(frame.class.0)] += 1;
                self.displaced.push_back(Displaced { frame, target, from: k });
                Ok(())
            }
            Decision::Reject(why) => {
                self.reject(frame.id, frame.class, why);
                Err(why)
            }
        }
    }

    /// The ownership map's ring slot for slot `k` under the current phase.
    fn ring_slot(&self, k: u64) -> u32 {
        ((k + self.phase) % self.ring.len()) as u32
    }

    /// Wire time of station slot `k`, by the clock that governed it when it was posted.
    fn slot_time(&self, k: u64) -> Tai {
        self.clock_of(k).time_of(k)
    }

    /// The clock piece that governs slot `k`.
    fn clock_of(&self, k: u64) -> &Ephc {
        if k >= self.clock_from {
            return &self.ephc;
        }
        let piece = self.history.iter().rev().find(|(from, _)| *from <= k);
        piece.map_or(&self.ephc, |(_, c)| c)
    }

    /// Phase 2, reclaim: consumed real frames are sent; their slots become zeroed fillers.
    fn reclaim(&mut self, done: Range<u64>) -> u64 {
        let mut reals = 0;
        let mut sent = Vec::new();
        self.ring.reclaim(done, |k, kind| {
            if let SlotKind::Real { id, class, ring_slot, txtime, .. } = kind {
                reals += 1;
                sent.push((k, id, class, ring_slot, txtime));
            }
        });
        for (k, id, class, ring_slot, txtime) in sent {
            let time = self.slot_time(k);
            let scheduled = txtime.and_then(|t| self.schedule.slot_of(t)).map(|j| self.schedule.time_of(j));
            self.counters.sent += 1;
            self.outcomes.push(Outcome { id, class, result: Ok(Sent { slot: k, time, ring_slot, scheduled }) });
        }
        reals
    }

    /// One iteration of the poll loop: observe, reclaim, detect underruns, place, post.
    pub fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError> {
        // Phase 1, observe.
        let done = self.ring.observe(obs.consumed)?;

        // Slots before a gap the backend saw keep the old clock; the gap re-anchors the rest. A gap at the slot
        // where the station already expected one (it detected the underrun itself) only refines the restart
        // time; any other is a new underrun.
        let mut underruns = Vec::new();
        let mut reals = 0;
        let mut from = done.start;
        let mut shift = 0i64;
        for gap in obs.gaps {
            let at = gap.at;
            let split = at.clamp(from, done.end);
            reals += self.reclaim(from..split);
            from = split;
            let moved = self.reanchor(at, gap.restart);
            if self.schedule_provisional && self.expected_gap == Some(at) {
                // The link's real start: the schedule's grid is the wire's, as it actually came up.
                self.schedule = self.ephc.clone();
                self.schedule_provisional = false;
            } else {
                shift += moved;
            }
            if self.expected_gap == Some(at) {
                self.expected_gap = None;
            } else {
                self.counters.underruns += 1;
                underruns.push(Underrun { at_slot: at, detected: obs.now, restart: gap.restart, shift: Nanos(moved) });
            }
        }
        reals += self.reclaim(from..done.end);
        self.counters.fillers_sent += (done.end - done.start).saturating_sub(reals);
        if self.ring.consumed() > 0 {
            self.schedule_provisional = false; // slots have left: the grid they set is the schedule's
        }

        // Underrun detected by the station itself (for backends that cannot see the wire).
        let land = obs.now + self.cfg.post_latency;
        let posted = self.ring.posted();
        // Every posted slot is consumed (fetched) and, by the EPHC, the last one has already ended: the wire is
        // idle now. (A gap that opens while slots are still in flight is only visible to a backend that sees
        // the wire; it arrives as a reported gap above, and also refines the restart estimated here.)
        let idle = self.ring.consumed() == posted && self.host.time_of(posted) <= obs.now;
        if !self.started {
            // The link comes up: the schedule's grid is the wire's grid from here on.
            let _ = self.reanchor(posted, land);
            self.schedule = self.ephc.clone();
            self.schedule_provisional = true;
            self.expected_gap = Some(posted);
            self.started = true;
        } else if idle && !self.draining {
            let moved = self.reanchor(posted, land);
            shift += moved;
            self.expected_gap = Some(posted);
            self.counters.underruns += 1;
            underruns.push(Underrun { at_slot: posted, detected: obs.now, restart: land, shift: Nanos(moved) });
        }
        if shift != 0 {
            self.realign();
            self.replace_window(Reason::Underrun);
        }
        let c = self.ring.consumed();
        self.ephc.advance(c);
        while self.history.len() > 1 && self.history[1].0 <= c {
            self.history.pop_front();
        }
        if self.clock_from <= c {
            self.history.clear();
        }

        if self.draining {
            return Ok(Poll { post: self.ring.posted()..self.ring.posted(), underruns });
        }

        // Phase 3, place: pre-buffered frames whose slot entered the window, then best effort.
        self.place_waiting();
        self.place_best_effort();

        // Phase 4, post: keep `batch` slots ahead of the consumer (the only doorbell).
        let post = self.ring.post_to(self.ring.consumed() + u64::from(self.cfg.batch));
        self.counters.slots_posted += post.end - post.start;
        Ok(Poll { post, underruns })
    }

    /// Start a new clock piece at slot `from`, keeping the current one for earlier slots still in flight.
    fn split_clock(&mut self, from: u64) {
        if from > self.clock_from && from > self.ring.consumed() {
            self.history.push_back((self.clock_from, self.ephc.clone()));
            self.clock_from = from;
        }
    }

    /// Slot `at` started (or will start) at host time `restart`: re-anchor the host grid there, and the clock
    /// by the same amount (its offset from the host clock, which synchronisation may have set, is kept). Every
    /// clock piece governing slots from `at` on moves: a gap reported late, after an adjustment split the
    /// clock at a later slot, moves the current clock too. Returns how far the slot moved (positive: later
    /// than the clock had it).
    fn reanchor(&mut self, at: u64, restart: Tai) -> i64 {
        let moved = sat_i64(i128::from(restart.0) - i128::from(self.host.time_of(at).0));
        self.host.set_time(restart, at);
        if at >= self.clock_from {
            self.split_clock(at);
        } else {
            // Split the history piece holding `at` there, so earlier slots keep their times.
            if let Some(i) = self.history.iter().rposition(|(from, _)| *from < at) {
                if self.history.get(i + 1).is_none_or(|(from, _)| *from != at) {
                    let piece = self.history[i].1.clone();
                    self.history.insert(i + 1, (at, piece));
                }
            }
            for (from, c) in self.history.iter_mut().filter(|(from, _)| *from >= at) {
                let t = Tai(sat_i64(i128::from(c.time_of(*from).0) + c.scaled(*from, i128::from(moved))));
                c.set_time(t, *from);
            }
        }
        // The clock runs on through the gap at its own rate: `moved` of the oscillator's time is `moved` scaled
        // by the clock's frequency adjustment (a synchronised clock would otherwise lose its correction over
        // every gap: 100 ns per 2 ms gap at 50 ppm).
        let from = self.clock_from.max(at);
        let t = Tai(sat_i64(i128::from(self.ephc.time_of(from).0) + self.ephc.scaled(from, i128::from(moved))));
        self.ephc.set_time(t, from);
        moved
    }

    /// The EPHC's time at host time `host`: the host grid says which slot (and how far into it) the wire is
    /// at, the EPHC what time that slot has. Equal to `host` until synchronisation moves the EPHC. Saturates at
    /// the ends of the i64 range (untrusted times never wrap).
    pub fn ephc_at(&self, host: Tai) -> Tai {
        let k = self.host.slot_of(host).unwrap_or(0);
        let into = i128::from(host.0) - i128::from(self.host.time_of(k).0);
        let c = self.clock_of(k);
        Tai(sat_i64(i128::from(c.time_of(k).0) + c.scaled(k, into)))
    }

    /// The current clock (every adjustment applied, also those that govern only slots not yet posted) at host
    /// time `host`: the time a synchronisation servo reasons in. It differs from [`Station::ephc_at`] only
    /// while an adjustment has not yet reached the wire (at most `batch` slots).
    pub fn clock_at(&self, host: Tai) -> Tai {
        let k = self.host.slot_of(host).unwrap_or(0);
        let into = i128::from(host.0) - i128::from(self.host.time_of(k).0);
        Tai(sat_i64(i128::from(self.ephc.time_of(k).0) + self.ephc.scaled(k, into)))
    }

    /// When slot `k` starts (started) by the host clock: the wire's grid as the host sees it, which
    /// synchronisation never moves.
    pub fn host_time_of(&self, k: u64) -> Tai {
        self.host.time_of(k)
    }

    /// The host time at EPHC time `t` (the inverse of [`Station::ephc_at`], to within a nanosecond).
    pub fn host_at(&self, t: Tai) -> Tai {
        let k = self.ephc.slot_of(t).unwrap_or(0);
        let c = self.clock_of(k);
        let into = i128::from(t.0) - i128::from(c.time_of(k).0);
        Tai(sat_i64(i128::from(self.host.time_of(k).0) + c.unscaled(k, into)))
    }

    /// The wire grid moved: find which schedule slot the first unposted wire slot now carries — the one whose
    /// start is nearest — and move the ownership phase accordingly, so that ring slot `i` keeps its time in
    /// the schedule's cycle. The wire then runs within half a slot of the schedule, however many underruns
    /// happen (the error does not accumulate: it is measured against the schedule's grid each time).
    fn realign(&mut self) {
        let b = self.ring.window().start;
        let half = Nanos((self.ephc.nominal_period().floor_mul(1) / 2) as i64);
        let Some(j) = self.schedule.slot_of(self.ephc.time_of(b) + half) else { return };
        let shift = i64::try_from(i128::from(j) - i128::from(b)).unwrap_or(self.shift);
        self.counters.grid_shift_slots = shift;
        self.shift = shift;
        self.phase = u64::try_from(i128::from(shift).rem_euclid(i128::from(self.ring.len()))).unwrap_or(0);
    }

    /// After the clock moved, put every real-time frame waiting in the window back into the slot its txtime
    /// now maps to (or reject it with `why` if that slot is gone, taken or not its class's).
    /// Frames in the window are not yet posted, so moving them is free; without this, re-anchoring could move
    /// a frame away from its scheduled time.
    fn replace_window(&mut self, why: Reason) {
        let window = self.ring.window();
        let mut moved: Vec<(Option<Tai>, FrameId, ClassId, Vec<u8>)> = Vec::new();
        for k in window {
            if let SlotKind::Real { id, class, txtime, len, ring_slot } = self.ring.kind(k) {
                let same_ring_slot = ring_slot == self.ring_slot(k);
                let keep = match txtime {
                    Some(t) => same_ring_slot && self.slot_of(t) == Some(k) && self.cfg.policy == Policy::Strict,
                    None => same_ring_slot,
                };
                if !keep {
                    moved.push((txtime, id, class, self.ring.view(k).bytes[..len as usize].to_vec()));
                    let _ = self.ring.take(k);
                }
            }
        }
        moved.sort_by_key(|m| (m.0.is_none(), m.0, m.1));
        for (txtime, id, class, bytes) in moved {
            let k = match txtime {
                Some(t) => {
                    let target = self.slot_of(t).unwrap_or(0);
                    match decide(&self.ring, &self.cfg.ownership, self.phase, self.cfg.policy, class, target, target) {
                        Decision::Place(k) => Some(k),
                        Decision::Wait(_) | Decision::Reject(_) => None,
                    }
                }
                None => self.free_unowned(self.ring.window().start),
            };
            match k {
                Some(k) => {
                    let placed = Placed { id, class, txtime, ring_slot: self.ring_slot(k) };
                    self.ring.place(k, placed, &bytes);
                }
                None => self.reject(id, class, why),
            }
        }
    }

    /// Apply a synchronisation adjustment (a PTP servo's step or frequency change) to the EPHC *and* the
    /// schedule's grid, from the first slot not yet posted on; the slot count never changes.
    ///
    /// Slots already posted to the NIC keep the clock they were posted under (their frames' outcomes report
    /// that time: the NIC has them, nothing can move them). Real-time frames in the insertion window whose
    /// txtime now maps to another slot are re-placed there, or rejected with [`Reason::ClockStep`] if that slot
    /// has passed, is taken or is not their class's (a frame moved beyond the window is rejected too: the ring
    /// holds only its bytes); relaxed frames displaced beyond the window search again from their new slot;
    /// pre-buffered frames are placed by the new grid when their slot enters the window. Ownership stays with the wire slots (the phase does not change), so a step also
    /// moves the class windows by the step in the clock's time. Before the first poll the link is not up yet and
    /// the first poll re-anchors the clock.
    pub fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<ClockAdjusted, EphcError> {
        let from = self.ring.posted();
        let j = u64::try_from(i128::from(from) + i128::from(self.shift)).unwrap_or(0);
        // Validate on copies first, so a refused adjustment changes nothing.
        let mut ephc = self.ephc.clone();
        let mut schedule = self.schedule.clone();
        ephc.apply(adj, from)?;
        schedule.apply(adj, j)?;
        self.split_clock(from);
        self.ephc = ephc;
        self.schedule = schedule;
        let before = self.counters.rejected[Reason::ClockStep.index()];
        self.replace_window(Reason::ClockStep);
        // Relaxed frames waiting beyond the window searched from a slot of the old grid: search again.
        let displaced: Vec<Displaced<B>> = self.displaced.drain(..).collect();
        for d in displaced {
            self.dequeued(d.frame.class);
            match d.frame.txtime.and_then(|t| self.slot_of(t)) {
                Some(k) => {
                    let _ = self.insert(d.frame, k, k);
                }
                None => self.reject(d.frame.id, d.frame.class, Reason::ClockStep),
            }
        }
        Ok(ClockAdjusted { from_slot: from, rejected: self.counters.rejected[Reason::ClockStep.index()] - before })
    }

    /// The first free unowned slot of the window at or after `k`.
    fn free_unowned(&self, mut k: u64) -> Option<u64> {
        let own = &self.cfg.ownership;
        let end = self.ring.window().end;
        loop {
            let next = own.next_in(own.unowned(), k + self.phase)? - self.phase;
            if next >= end {
                return None;
            }
            if self.ring.is_free(next) {
                return Some(next);
            }
            k = next + 1;
        }
    }

    /// Move frames whose slot entered the window into the ring.
    fn place_waiting(&mut self) {
        let end = self.ring.window().end;
        for _ in 0..self.displaced.len() {
            let Some(d) = self.displaced.pop_front() else { break };
            if d.from >= end {
                self.displaced.push_back(d);
                continue;
            }
            self.dequeued(d.frame.class);
            let _ = self.insert(d.frame, d.target, d.from);
        }
        while let Some(t) = self.rt.peek_txtime() {
            let target = self.slot_of(t);
            if target.is_some_and(|k| k >= end) {
                break;
            }
            let Some(frame) = self.rt.pop() else { break };
            self.dequeued(frame.class);
            match target {
                Some(k) => {
                    let _ = self.insert(frame, k, k);
                }
                None => self.reject(frame.id, frame.class, Reason::Late),
            }
        }
    }

    /// Fill free unowned slots of the window with best-effort frames, in order.
    fn place_best_effort(&mut self) {
        let mut k = self.ring.window().start;
        while !self.be.is_empty() {
            let Some(next) = self.free_unowned(k) else { return };
            if let Some(f) = self.be.pop() {
                self.dequeued(f.class);
                let placed = Placed { id: f.id, class: f.class, txtime: None, ring_slot: self.ring_slot(next) };
                self.ring.place(next, placed, f.data.as_ref());
            }
            k = next + 1;
        }
    }

    /// Stop accepting frames: everything not yet posted is rejected with [`Reason::Shutdown`]; later polls
    /// post nothing, so the NIC drains and the posted frames still get their `Sent` outcomes.
    pub fn shutdown(&mut self) {
        self.draining = true;
        let rt: Vec<_> = self.rt.drain().collect();
        for f in rt {
            self.reject(f.id, f.class, Reason::Shutdown);
        }
        while let Some(d) = self.displaced.pop_front() {
            self.reject(d.frame.id, d.frame.class, Reason::Shutdown);
        }
        while let Some(f) = self.be.pop() {
            self.reject(f.id, f.class, Reason::Shutdown);
        }
        self.queued.iter_mut().for_each(|q| *q = 0);
        for k in self.ring.window() {
            if let SlotKind::Real { id, class, .. } = self.ring.take(k) {
                self.reject(id, class, Reason::Shutdown);
            }
        }
    }

    /// True once shut down and every posted slot is consumed.
    pub fn drained(&self) -> bool {
        self.draining && self.ring.consumed() == self.ring.posted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::ClassSpec;
    use crate::time::LinkRate;

    const DATA: [u8; 60] = [0; 60];

    fn station() -> Station<&'static [u8]> {
        let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap(); // δ = 10 µs
        let ownership = Ownership::new(32, &[ClassSpec { name: "a".into(), slots: vec![0] }]).unwrap();
        let cfg = StationConfig {
            geometry,
            ownership,
            batch: 8,
            policy: Policy::Strict,
            max_pending: 64,
            max_advance: Nanos::from_ms(100),
            post_latency: Nanos(1_000),
        };
        Station::new(cfg, Tai(1_000_000)).unwrap()
    }

    fn poll(s: &mut Station<&'static [u8]>, consumed: u64, now: i64) -> Poll {
        s.poll(Observation { consumed, now: Tai(now), gaps: &[] }).unwrap()
    }

    /// After an underrun the schedule's ring slots keep their TAI times: a frame for ring slot 0 of a later
    /// cycle (by the original grid) still lands in ring slot 0, no later than its txtime and less than a slot
    /// earlier.
    #[test]
    fn underrun_keeps_ownership_aligned_with_the_schedule() {
        let mut s = station();
        let _ = poll(&mut s, 0, 999_000); // anchors slot 0 at 1 ms
        assert_eq!(s.ephc().time_of(0), Tai(1_000_000));
        let _ = poll(&mut s, 4, 1_040_000);
        // The host stalls 1.234 ms: every posted slot is gone when it polls again.
        let p = poll(&mut s, 12, 2_274_000);
        assert_eq!(p.underruns.len(), 1);
        assert_eq!(s.counters().underruns, 1);
        // Ring slot 0 of the cycle starting at 1 ms + 10·320 µs, by the original grid.
        let t = Tai(1_000_000 + 10 * 320_000);
        let f = Frame { id: FrameId(1), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
        assert_eq!(s.submit(f, Tai(2_274_000)), Ok(()));
        let mut consumed = 12;
        let mut now = 2_274_000;
        let sent = loop {
            consumed += 4;
            now += 40_000;
            let _ = poll(&mut s, consumed, now);
            if let Some(o) = s.drain_outcomes().next() {
                break o.result.unwrap();
            }
        };
        assert_eq!(sent.ring_slot, 0);
        assert!(sent.time <= t && t.0 - sent.time.0 < 10_000, "{:?} vs {:?}", sent.time, t);
    }

    /// Once synchronisation steps the EPHC far from the host clock (−1 s, +1 s), the station still judges
    /// admission, idleness and underrun restarts in EPHC time: a txtime a few ms ahead in network time is
    /// placed and sent at its time, one a second ahead by the host clock is too far ahead, steady polling
    /// finds no underrun, a real stall finds exactly one, and the re-anchored EPHC keeps its offset.
    #[test]
    fn host_times_are_converted_to_ephc_time_after_a_clock_step() {
        for step in [-1_000_000_000i64, 1_000_000_000] {
            let mut s = station();
            let _ = poll(&mut s, 0, 999_000);
            let _ = poll(&mut s, 4, 1_040_000);
            s.adjust_clock(ClockAdjust::Step(Nanos(step))).unwrap();
            // Slots already posted (up to 12, at 1.12 ms) keep their times; later ones have the stepped clock.
            assert_eq!(s.ephc_at(Tai(1_080_000)), Tai(1_080_000));
            assert_eq!(s.ephc_at(Tai(1_205_000)), Tai(1_205_000 + step));
            assert_eq!(s.host_at(Tai(1_205_000 + step)), Tai(1_205_000));
            let host = 1_080_000i64;
            // Steady polling: no underrun, whichever way the clock went.
            let mut consumed = 4;
            let mut now = host;
            while now < 1_300_000 {
                consumed += 4;
                let _ = poll(&mut s, consumed, now);
                now += 40_000;
            }
            assert_eq!(s.counters().underruns, 0, "step {step}");
            // Ring slot 0 of a cycle 3 ms ahead in network time (EPHC time) is admitted and leaves at its time.
            let cycle = s.cycle_start_at_or_after(s.ephc_at(Tai(now)) + Nanos::from_ms(3)).unwrap();
            let f = Frame { id: FrameId(1), class: ClassId(0), txtime: Some(cycle), data: &DATA[..] };
            assert_eq!(s.submit(f, Tai(now)), Ok(()), "step {step}");
            // 50 ms ahead by the host clock is 1 s away in network time for the −1 s step: too far ahead.
            let far = if step < 0 { now + 50_000_000 } else { now + step + 200_000_000 };
            let f = Frame { id: FrameId(2), class: ClassId(0), txtime: Some(Tai(far)), data: &DATA[..] };
            assert_eq!(s.submit(f, Tai(now)), Err(Reason::TooFarAhead), "step {step}");
            let sent = loop {
                consumed += 4;
                now += 40_000;
                let _ = poll(&mut s, consumed, now);
                let o: Vec<Outcome> = s.drain_outcomes().filter(|o| o.id == FrameId(1)).collect();
                if let Some(o) = o.first() {
                    break o.result.unwrap();
                }
                assert!(now < host + 10_000_000, "step {step}: frame never sent");
            };
            assert_eq!(sent.time, cycle, "step {step}");
            assert_eq!(s.counters().underruns, 0, "step {step}");
            // A stall of 1.2 ms: one underrun, and the EPHC stays `step` away from the host clock.
            now += 1_200_000;
            consumed = s.ring().posted();
            let p = poll(&mut s, consumed, now);
            assert_eq!(p.underruns.len(), 1, "step {step}");
            let off = s.ephc_at(Tai(now)).0 - now;
            assert!((off - step).abs() < 10_000, "step {step}: offset after re-anchoring {off}");
            consumed += 4;
            now += 40_000;
            let _ = poll(&mut s, consumed, now);
            assert_eq!(s.counters().underruns, 1, "step {step}");
        }
    }

    /// A gap the backend reports after a synchronisation adjustment (which split the clock at the slots then
    /// posted, later than the gap's slot) moves the whole wire from the gap on: the EPHC keeps its offset from
    /// the host clock. (It used to move only the older clock piece, so the EPHC jumped by the refinement.)
    #[test]
    fn a_gap_reported_after_an_adjustment_keeps_the_ephc_offset() {
        for adj in [ClockAdjust::Rate(1_000_000), ClockAdjust::Step(Nanos(-7_000))] {
            let mut s = station();
            let _ = poll(&mut s, 0, 999_000);
            let mut consumed = 4;
            let mut now = 1_040_000;
            while now < 1_200_000 {
                let _ = poll(&mut s, consumed, now);
                consumed += 4;
                now += 40_000;
            }
            // A stall: the station finds the ring drained and restarts the wire itself, at an estimate.
            now += 1_200_000;
            consumed = s.ring().posted();
            let p = poll(&mut s, consumed, now);
            assert_eq!(p.underruns.len(), 1);
            let gap_at = p.underruns[0].at_slot;
            let estimate = p.underruns[0].restart;
            // The servo adjusts the clock (from the slots posted now on)...
            s.adjust_clock(adj).unwrap();
            let later = Tai(now + 500_000);
            let before = s.ephc_at(later).0 - later.0;
            // ...and then the backend reports when the wire really restarted: 30 µs after the estimate.
            let gaps = [Gap { at: gap_at, restart: estimate + Nanos(30_000) }];
            let _ = s.poll(Observation { consumed, now: Tai(now + 10_000), gaps: &gaps }).unwrap();
            let after = s.ephc_at(later).0 - later.0;
            assert!(
                (after - before).abs() <= 2,
                "{adj:?}: EPHC − host {before} ns before the report, {after} ns after"
            );
        }
    }

    /// An underrun does not cost a steered clock its frequency correction: through the gap the EPHC runs at its
    /// own rate, as it does slot by slot. (It used to run through every gap at the oscillator's rate: 100 ns of
    /// a +50 ppm correction lost per 2 ms gap.) The same holds for a gap the backend reports.
    #[test]
    fn a_steered_clock_keeps_its_rate_through_a_gap() {
        for reported in [false, true] {
            let mut s = station();
            let _ = poll(&mut s, 0, 999_000);
            s.adjust_clock(ClockAdjust::Rate(50_000_000)).unwrap(); // +50 ppm
            let (mut consumed, mut now) = (4, 1_040_000);
            while now < 1_400_000 {
                let _ = poll(&mut s, consumed, now);
                consumed += 4;
                now += 40_000;
            }
            let h1 = Tai(now - 20_000);
            let e1 = s.ephc_at(h1);
            // A 2 ms stall: every posted slot went out, the wire idled.
            now += 2_000_000;
            consumed = s.ring().posted();
            let p = poll(&mut s, consumed, now);
            assert_eq!(p.underruns.len(), 1);
            if reported {
                let gaps = [Gap { at: p.underruns[0].at_slot, restart: p.underruns[0].restart + Nanos(30_000) }];
                let _ = s.poll(Observation { consumed, now: Tai(now + 10_000), gaps: &gaps }).unwrap();
            }
            let h2 = Tai(now + 200_000);
            let e2 = s.ephc_at(h2);
            let want = (h2.0 - h1.0) + (h2.0 - h1.0) * 50 / 1_000_000;
            assert!(
                ((e2.0 - e1.0) - want).abs() <= 2,
                "reported {reported}: EPHC advanced {} ns over {} ns, want {want}",
                e2.0 - e1.0,
                h2.0 - h1.0
            );
        }
    }

    /// `max_pending` is a budget per class: a best-effort backlog that fills its own budget leaves a real-time
    /// class's admission untouched.
    #[test]
    fn a_best_effort_flood_cannot_take_the_real_time_budget() {
        let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap();
        let classes = [ClassSpec { name: "rt".into(), slots: vec![0] }, ClassSpec { name: "be".into(), slots: vec![] }];
        let ownership = Ownership::new(32, &classes).unwrap();
        let cfg = StationConfig {
            geometry,
            ownership,
            batch: 8,
            policy: Policy::Strict,
            max_pending: 16,
            max_advance: Nanos::from_ms(100),
            post_latency: Nanos(1_000),
        };
        let mut s: Station<&'static [u8]> = Station::new(cfg, Tai(1_000_000)).unwrap();
        let _ = poll(&mut s, 0, 999_000);
        let be = |i: u64| Frame { id: FrameId(i), class: ClassId(1), txtime: None, data: &DATA[..] };
        let mut full = 0;
        for i in 0..1000 {
            full += usize::from(s.submit(be(i), Tai(999_000)) == Err(Reason::QueueFull));
        }
        assert_eq!(s.queued(ClassId(1)), 16);
        assert_eq!(full, 1000 - 16);
        // Every real-time frame within the horizon is admitted: 16 cycles' worth of ring slot 0.
        for i in 0..16u64 {
            let t = Tai(1_000_000 + (i as i64 + 2) * 320_000);
            let f = Frame { id: FrameId(10_000 + i), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
            assert_eq!(s.submit(f, Tai(999_000)), Ok(()), "real-time frame {i}");
        }
        assert_eq!(s.queued(ClassId(0)), 16);
        let f = Frame { id: FrameId(20_000), class: ClassId(0), txtime: Some(Tai(9_000_000)), data: &DATA[..] };
        assert_eq!(s.submit(f, Tai(999_000)), Err(Reason::QueueFull), "its own budget still binds");
    }

    /// Untrusted txtimes anywhere in the i64 range get a typed outcome, never an overflow (this runs in debug
    /// builds, where an overflow panics).
    #[test]
    fn extreme_txtimes_are_late_or_too_far_ahead() {
        let mut s = station();
        let _ = poll(&mut s, 0, 999_000);
        let now = Tai(999_000);
        let cases = [
            (i64::MIN, Reason::Late),
            (i64::MIN + 1, Reason::Late),
            (-1, Reason::Late),
            (0, Reason::Late),
            (500_000, Reason::Late),
            (i64::MAX, Reason::TooFarAhead),
            (i64::MAX - 1, Reason::TooFarAhead),
            (999_000 + 100_000_001, Reason::TooFarAhead),
        ];
        for (i, (t, want)) in cases.into_iter().enumerate() {
            let f = Frame { id: FrameId(i as u64), class: ClassId(0), txtime: Some(Tai(t)), data: &DATA[..] };
            assert_eq!(s.submit(f, now), Err(want), "txtime {t}");
        }
        // The same at the far ends of the host clock.
        for now in [i64::MIN, i64::MAX] {
            let f = Frame { id: FrameId(99), class: ClassId(0), txtime: Some(Tai(0)), data: &DATA[..] };
            assert!(s.submit(f, Tai(now)).is_err());
        }
        assert_eq!(s.drain_outcomes().count(), cases.len() + 2);
    }

    #[test]
    fn every_frame_gets_one_outcome_on_shutdown() {
        let mut s = station();
        let _ = poll(&mut s, 0, 999_000);
        for i in 0..5u64 {
            let t = Tai(1_000_000 + (i as i64 + 3) * 320_000);
            let f = Frame { id: FrameId(i), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
            assert_eq!(s.submit(f, Tai(999_000)), Ok(()));
        }
        let f = Frame { id: FrameId(9), class: ClassId(0), txtime: Some(Tai(1_000_000)), data: &[0u8; 2000][..] };
        assert_eq!(s.submit(f, Tai(999_000)), Err(Reason::Oversize));
        s.shutdown();
        let outcomes: Vec<Outcome> = s.drain_outcomes().collect();
        assert_eq!(outcomes.len(), 6);
        assert_eq!(outcomes.iter().filter(|o| o.result == Err(Reason::Shutdown)).count(), 5);
        assert_eq!(s.in_flight(), 0);
    }
}
