//! The station: the whole driver model of one keepon link as a sans-IO state machine.
//!
//! Inputs are frames ([`Station::submit`]) and observations of the NIC ([`Station::poll`]); outputs are the
//! slots to post ([`Poll::post`], read with [`Station::view`]) and one [`Outcome`] per frame
//! ([`Station::drain_outcomes`]). The station never reads a clock: the caller passes `now`.
//!
//! Underruns. If the NIC ever finds no posted slot, the link goes idle and the slot grid breaks: slot `k` no
//! longer starts at `T0 + k·δ`. A poll that finds every posted slot consumed (or a backend that saw the gap)
//! reports an [`Underrun`], re-anchors the EPHC at the restart time, and skips the slot numbers the gap ate so
//! that ring slot ownership stays aligned with the schedule (`k mod N` keeps meaning the same time in the
//! cycle, to within half a slot). Frames that were placed in eaten slots are rejected with
//! [`Reason::Underrun`]; none is ever sent at a time other than the one its outcome reports.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use crate::ephc::Ephc;
use crate::insert::{decide, Decision, Policy};
use crate::isolation::{ClassId, Ownership};
use crate::outcome::{Counters, Frame, Outcome, Reason, Sent};
use crate::prebuffer::{BeQueues, RtQueue};
use crate::ring::{Ring, RingError, SlotKind, SlotView};
use crate::time::{Nanos, SlotGeometry, Tai};

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
    /// Most frames waiting (pre-buffered or queued) at once.
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
pub struct Observation {
    /// Slots the NIC has finished with since it started (a count, not a time).
    pub consumed: u64,
    /// Host time of the observation.
    pub now: Tai,
    /// A gap the backend itself saw on the wire (simulated NICs, TX timestamps), if any.
    pub gap: Option<Gap>,
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
    /// Slot numbers skipped to keep the ring aligned with the schedule.
    pub lost_slots: u64,
}

/// The result of a poll.
#[must_use = "the posted slots must be handed to the NIC"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Poll {
    /// Slots to hand to the NIC now, in order (read them with [`Station::view`]).
    pub post: Range<u64>,
    /// An underrun detected at this poll.
    pub underrun: Option<Underrun>,
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
    /// Station count = NIC count + `skipped` (slot numbers eaten by underruns).
    skipped: u64,
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
            skipped: 0,
            started: false,
            draining: false,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StationConfig {
        &self.cfg
    }

    /// The clock (read-only).
    pub fn ephc(&self) -> &Ephc {
        &self.ephc
    }

    /// The clock, for PTP and tests: adjust only with [`Ephc`]'s continuous operations or explicit steps.
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

    /// Frames waiting outside the ring.
    fn waiting(&self) -> usize {
        self.rt.len() + self.displaced.len() + self.be.len()
    }

    /// The slot a frame scheduled at `t` targets.
    pub fn slot_of(&self, t: Tai) -> Option<u64> {
        self.ephc.slot_of(t)
    }

    /// Slot `k` as it must be handed to the NIC.
    pub fn view(&self, k: u64) -> SlotView<'_> {
        self.ring.view(k)
    }

    /// Take the outcomes produced so far.
    pub fn drain_outcomes(&mut self) -> alloc::vec::Drain<'_, Outcome> {
        self.outcomes.drain(..)
    }

    fn reject(&mut self, id: crate::outcome::FrameId, class: ClassId, why: Reason) {
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
            self.be.push(frame.class.0 as usize, frame);
            return Ok(());
        }
        let Some(target) = frame.txtime.and_then(|t| self.ephc.slot_of(t)) else {
            self.reject(frame.id, frame.class, Reason::Late);
            return Err(Reason::Late);
        };
        self.schedule(frame, target, target)
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
            if t - now > self.cfg.max_advance {
                return Err(Reason::TooFarAhead);
            }
        }
        if self.waiting() >= self.cfg.max_pending {
            return Err(Reason::QueueFull);
        }
        Ok(())
    }

    /// Place a real-time frame now, queue it, or reject it.
    fn schedule(&mut self, frame: Frame<B>, target: u64, from: u64) -> Result<(), Reason> {
        let d = decide(&self.ring, &self.cfg.ownership, self.cfg.policy, frame.class, target, from);
        match d {
            Decision::Place(k) => {
                self.ring.place(k, frame.id, frame.class, frame.txtime, frame.data.as_ref());
                Ok(())
            }
            Decision::Wait(k) if k == target => {
                self.rt.push(frame);
                Ok(())
            }
            Decision::Wait(k) => {
                self.displaced.push_back(Displaced { frame, target, from: k });
                Ok(())
            }
            Decision::Reject(why) => {
                self.reject(frame.id, frame.class, why);
                Err(why)
            }
        }
    }

    /// One iteration of the poll loop: observe, reclaim, detect underruns, place, post.
    pub fn poll(&mut self, obs: Observation) -> Result<Poll, RingError> {
        // Phase 1, observe.
        let consumed = obs.consumed + self.skipped;
        let done = self.ring.observe(consumed)?;
        let n_done = done.end - done.start;

        // A gap the backend saw is corrected before the consumed slots are timestamped.
        let mut underrun = None;
        if let Some(gap) = obs.gap {
            underrun = Some(self.absorb_gap(gap.at + self.skipped, gap.restart, obs.now));
        }

        // Phase 2, reclaim: consumed real frames are sent; their slots become zeroed fillers.
        let mut reals = 0;
        let (ephc, outcomes, counters) = (&self.ephc, &mut self.outcomes, &mut self.counters);
        self.ring.reclaim(done, |k, kind| {
            if let SlotKind::Real { id, class, .. } = kind {
                reals += 1;
                counters.sent += 1;
                outcomes.push(Outcome { id, class, result: Ok(Sent { slot: k, time: ephc.time_of(k) }) });
            }
        });
        self.counters.fillers_sent += n_done - reals;

        // Underrun: every posted slot is gone, so the link is idle until the next post lands.
        if !self.started {
            self.started = true;
            let _ = self.absorb_gap(0, obs.now + self.cfg.post_latency, obs.now);
        } else if !self.draining && self.ring.consumed() == self.ring.posted() && underrun.is_none() {
            let at = self.ring.posted();
            underrun = Some(self.absorb_gap(at, obs.now + self.cfg.post_latency, obs.now));
        }
        if underrun.is_some() {
            self.counters.underruns += 1;
        }
        self.ephc.advance(self.ring.consumed());

        if self.draining {
            return Ok(Poll { post: self.ring.posted()..self.ring.posted(), underrun });
        }

        // Phase 3, place: pre-buffered frames whose slot entered the window, then best effort.
        self.place_waiting();
        self.place_best_effort();

        // Phase 4, post: keep `batch` slots ahead of the consumer (the only doorbell).
        let post = self.ring.post_to(self.ring.consumed() + u64::from(self.cfg.batch));
        self.counters.slots_posted += post.end - post.start;
        Ok(Poll { post, underrun })
    }

    /// Re-anchor the clock so that station slot `at` starts at `restart`; if the ring is drained at `at`, skip
    /// the slot numbers the gap ate, rejecting frames placed in them.
    fn absorb_gap(&mut self, at: u64, restart: Tai, now: Tai) -> Underrun {
        let old = self.ephc.time_of(at);
        let mut lost = 0;
        if at == self.ring.posted() && self.ring.consumed() == at && restart > old {
            let p = self.ephc.nominal_period();
            // Nearest whole number of slots: the grid stays within half a slot of where it was.
            let span = (restart - old).0 as u128;
            lost = u64::try_from((2 * span * u128::from(p.den()) + u128::from(p.num())) / (2 * u128::from(p.num())))
                .unwrap_or(u64::MAX);
            for k in at..at.saturating_add(lost.min(self.ring.len())) {
                if let SlotKind::Real { id, class, .. } = self.ring.take(k) {
                    self.reject(id, class, Reason::Underrun);
                }
            }
            self.skip(lost);
        }
        self.ephc.set_time(restart, at + lost);
        Underrun { at_slot: at, detected: now, restart, lost_slots: lost }
    }

    /// Advance a drained ring by `lost` slot numbers.
    fn skip(&mut self, lost: u64) {
        if lost > 0 {
            self.ring.jump_to(self.ring.posted() + lost);
            self.skipped += lost;
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
            let _ = self.schedule(d.frame, d.target, d.from);
        }
        while let Some(t) = self.rt.peek_txtime() {
            let target = self.ephc.slot_of(t);
            if target.is_some_and(|k| k >= end) {
                break;
            }
            let Some(frame) = self.rt.pop() else { break };
            match target {
                Some(k) => {
                    let _ = self.schedule(frame, k, k);
                }
                None => self.reject(frame.id, frame.class, Reason::Late),
            }
        }
    }

    /// Fill free unowned slots of the window with best-effort frames, in order.
    fn place_best_effort(&mut self) {
        if self.be.is_empty() {
            return;
        }
        let window = self.ring.window();
        let mut k = window.start;
        while !self.be.is_empty() {
            let Some(next) = self.cfg.ownership.next_in(self.cfg.ownership.unowned(), k) else { return };
            if next >= window.end {
                return;
            }
            if self.ring.is_free(next) {
                if let Some(f) = self.be.pop() {
                    self.ring.place(next, f.id, f.class, None, f.data.as_ref());
                }
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
