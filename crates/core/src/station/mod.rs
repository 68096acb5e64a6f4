//! The station: the whole driver model of one keepon link as a sans-IO state machine.
//!
//! Inputs are frames ([`Station::submit`]) and observations of the NIC ([`Station::poll`]); outputs are the
//! slots to post ([`Poll::post`], read with [`Station::view`]) and one [`Outcome`] per frame
//! ([`Station::drain_outcomes`]). The station never reads a clock: the caller passes `now`.
//!
//! The `impl` is split by concern, one file each: [`admission`](self) (the checks a frame passes on the way in),
//! `placement` (frames into slots of the insertion window), `grid` (the schedule on network time, the EPHC and
//! the disciplined wire: which schedule slot each wire slot carries and how long each posted slot is).
//!
//! **The schedule on network time.** Schedule slot `j` starts at `S(j) = base_time + j·δ` of network time (δ
//! the nominal slot period), so cycle `n` starts at `base_time + n·N·δ` (IEEE 802.1Qbv `AdminBaseTime`,
//! `AdminCycleTime = N·δ`), and ring slot `i` of the ownership map is schedule slot `j` with `j mod N = i`.
//! Two stations with the same plan share their windows without talking to each other. Txtimes are read against
//! this grid, which nothing moves: not the NIC's oscillator, not synchronisation, not underruns.
//!
//! **The disciplined wire.** The EPHC ([`Station::ephc`]) counts *bytes* on the wire (preamble and gap
//! included) and gives each its network time; a PTP servo steers it. The wire's slots are as long as the station
//! makes them: each posted slot's length is chosen, as it is posted, so that the next slot starts on the first
//! byte at or after its schedule time `S(j)` — fillers anywhere from the minimum frame (64 B) to the backend's
//! largest, real frames by their zero padding. The residual is corrected at the next slot, so the oscillator's
//! error (whatever the servo says it is), steps, rate changes and underruns never move a slot off its schedule
//! time by more than a byte once the phase is acquired. Where lengths cannot absorb an error (a step, a restart,
//! 64-byte slots that cannot shrink), the wire slot changes which schedule slot it carries (a slip of the
//! ownership phase) and the lengths do the rest; schedule slots already carried are never carried twice (a
//! wire slot that would is a spacer: a filler that carries no schedule slot).
//!
//! Underruns. If the NIC ever finds no posted slot, the link goes idle and the wire's byte count no longer maps
//! to time as the EPHC had it. The station learns of it from the backend (a reported gap) or, for backends
//! that cannot see the wire, from a drained ring whose last slot should already have ended. It reports an
//! [`Underrun`], re-anchors the EPHC at the restart (the counts themselves never change), and re-acquires the
//! schedule as after a step. Frames waiting in the insertion window are re-placed against the new mapping or
//! rejected with [`Reason::Underrun`]; none is ever sent at a time other than the one its outcome reports.
//!
//! The contract after an underrun, honestly: frames already handed to the NIC cannot be recalled. The (at most
//! `batch`) frames posted when the link went idle leave late by the gap, and so may frames posted before the
//! station learned when the wire really restarted. Every `Sent` outcome therefore carries the start of the
//! schedule slot that holds the frame's txtime ([`Sent::scheduled`]) — its deviation is `time − scheduled` —
//! so the application sees exactly how far each frame was off.

pub(crate) mod admission;
pub mod alignment;
mod change;
mod grid;
mod placement;
mod posted;
mod steady;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use crate::ephc::{Ephc, Exact};
use crate::insert::Policy;
use crate::isolation::{ClassId, Ownership};
use crate::outcome::{Counters, Frame, FrameId, Outcome, Reason, Sent};
use crate::prebuffer::{BeQueues, RtQueue};
use crate::ring::{Ring, RingError, SlotKind, SlotView};
use crate::time::{Nanos, SlotGeometry, Tai, MAX_SLOT_BYTES};

pub use crate::schedule::{ChangeError, ScheduleChange};
pub use alignment::Alignment;
pub use grid::Carried;

/// A txtime further than this in the past is `late` without looking for its slot (a day: any slot that old is long
/// gone, and the slot arithmetic never sees times the clock cannot represent).
pub const MAX_PAST: Nanos = Nanos(86_400_000_000_000);

/// `x` clamped to the i64 range.
pub(crate) fn sat_i64(x: i128) -> i64 {
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
    /// Network time (TAI) at which a schedule cycle starts: cycle `n` starts at `base_time + n·N·δ` (802.1Qbv
    /// `AdminBaseTime`; any base time names the same grid as one a whole number of cycles away).
    pub base_time: Tai,
    /// Longest frame the backend can send (L2 bytes with FCS), at least the slot size: fillers are posted with
    /// any length from 64 bytes up to this to keep the wire on the schedule.
    pub max_filler: u32,
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
    /// The largest filler must be at least the slot size and at most a jumbo frame.
    BadMaxFiller {
        /// Requested largest filler.
        max_filler: u32,
        /// Slot size.
        slot_bytes: u32,
    },
    /// The base time is negative.
    BadBaseTime(Tai),
}

impl fmt::Display for StationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StationError::BadBatch { batch, ring } => {
                write!(f, "batch {batch} must be at least 1 and less than the ring size {ring}")
            }
            StationError::BadMaxFiller { max_filler, slot_bytes } => write!(
                f,
                "largest filler {max_filler} B must be at least the slot size {slot_bytes} B and at most {MAX_SLOT_BYTES} B"
            ),
            StationError::BadBaseTime(t) => write!(f, "base time {} ns is before the TAI epoch", t.0),
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
    /// How far the wire moved (positive: later than the clock had it).
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
    /// The EPHC: the network time of every byte position on the wire (count = bytes since link-up, preamble
    /// and inter-frame gap included). Governs positions from `clock_from` on; `history` keeps the pieces of
    /// earlier positions still in flight, as (first position, clock).
    ephc: Ephc,
    clock_from: u64,
    history: VecDeque<(u64, Ephc)>,
    /// The wire by the host clock: when the host saw (or expects) byte position `p` go out, at the nominal byte
    /// time. Re-anchored with the EPHC at link-up, underruns and reported gaps, but never adjusted by
    /// synchronisation; it converts host times (`now`, restart estimates) into EPHC time ([`Station::ephc_at`]).
    host: crate::wire::host::HostView,
    /// The EPHC time of the host time last submitted at ([`crate::wire::host::NowMemo`]).
    now_memo: crate::wire::host::NowMemo,
    /// Start position of wire slots from about four rings back to `posted` (the last is where the next slot to
    /// post starts), and the schedule slot each posted one carried (`None`: a spacer).
    track: posted::Posted,
    /// The schedule on network time: schedule slot `j` starts at `schedule.time_of(j)`. Never adjusted.
    schedule: Ephc,
    /// The EPHC's exact time of the last slot start the discipline computed, and the schedule's of the last
    /// target: the next slot's are found from them without 128-bit division ([`crate::ephc::Exact`]).
    cursor: Exact,
    sched_cursor: Exact,
    /// The O(1) step along the current clock piece that posts slots in the steady state ([`crate::wire::step`]).
    step: Option<crate::wire::step::Step>,
    /// The O(1) step while the disciplined wire is late and its slots as short as they may be
    /// ([`crate::wire::step::Mode::Clamped`], `station/steady.rs`).
    clamp: Option<crate::wire::step::Step>,
    sizes: grid::Sizes,
    /// Unposted wire slot `k` carries schedule slot `k + shift`.
    shift: i64,
    /// The shift at link-up (slips since are reported as [`Counters::grid_shift_slots`]).
    shift0: Option<i64>,
    /// Ownership phase, `shift mod N`: slot `k` is ring slot `(k + phase) mod N` of the ownership map.
    phase: u64,
    /// One past the last schedule slot a posted wire slot carried: earlier schedule slots are gone, and a wire
    /// slot that maps to one is a spacer.
    j_end: u64,
    /// The grid is being (re)acquired: since link-up, a step or a restart, no slot has started within a byte
    /// of its schedule time yet.
    acquiring: bool,
    /// Unposted slots before this are spacers: the lengths are still catching up with the schedule there.
    spacer_until: u64,
    /// The last schedule slots the wire passed over while idle (underruns), for the reason their frames get.
    gaps: VecDeque<Range<u64>>,
    /// The mapping is being re-chosen after an underrun (not at link-up).
    after_underrun: bool,
    acquire_since: u64,
    /// Why the mapping last changed (the reason frames that cannot follow it are rejected with).
    realign_cause: Reason,
    align: Alignment,
    /// Size slots to the schedule ([`Station::set_discipline`]).
    discipline: bool,
    ring: Ring,
    rt: RtQueue<B>,
    displaced: VecDeque<Displaced<B>>,
    be: BeQueues<B>,
    outcomes: Vec<Outcome>,
    counters: Counters,
    /// Frames waiting outside the ring, per class (pre-buffered, displaced, best-effort queue).
    queued: Vec<usize>,
    /// Down, up (the anchor provisional until the backend reports the link's start, or slots leave) or draining,
    /// and the gaps the station expects ([`crate::wire::lifecycle`]). The link's start is snapped onto the
    /// schedule's byte grid whenever its report arrives: a report that comes after slots have already been consumed
    /// must not leave the grid a fraction of a byte off the schedule for the rest of the run.
    life: crate::wire::lifecycle::Lifecycle,
    /// A schedule change waiting for its slot ([`Station::change_schedule`]), and the map before the last one that
    /// took effect, from the slot it took effect at.
    changes: change::Changes,
}

impl<B: AsRef<[u8]>> Station<B> {
    /// A station whose slot 0 is expected to start at `t0`. The first poll anchors the clock for real.
    pub fn new(cfg: StationConfig, t0: Tai) -> Result<Self, StationError> {
        let ring_len = cfg.ownership.ring();
        if cfg.batch == 0 || cfg.batch >= ring_len {
            return Err(StationError::BadBatch { batch: cfg.batch, ring: ring_len });
        }
        let slot_bytes = cfg.geometry.slot_bytes();
        if cfg.max_filler < slot_bytes || cfg.max_filler > MAX_SLOT_BYTES {
            return Err(StationError::BadMaxFiller { max_filler: cfg.max_filler, slot_bytes });
        }
        if cfg.base_time.0 < 0 {
            return Err(StationError::BadBaseTime(cfg.base_time));
        }
        let byte = cfg.geometry.rate().byte_time();
        let ephc = Ephc::new(byte, 0, t0);
        let schedule = grid::schedule_grid(&cfg, t0);
        let ring = Ring::with_max_filler(ring_len, slot_bytes, cfg.max_filler);
        Ok(Station {
            cursor: ephc.exact(0),
            sched_cursor: schedule.exact(0),
            step: None,
            clamp: None,
            sizes: grid::Sizes::of(&cfg.geometry, ring.len_range_filler()),
            ephc,
            clock_from: 0,
            history: VecDeque::new(),
            host: crate::wire::host::HostView::new(byte, t0),
            now_memo: crate::wire::host::NowMemo::default(),
            track: posted::Posted::new(5 * u64::from(ring_len) + 1),
            schedule,
            shift: 0,
            shift0: None,
            phase: 0,
            j_end: 0,
            acquiring: true,
            spacer_until: 0,
            gaps: VecDeque::new(),
            after_underrun: false,
            acquire_since: 0,
            realign_cause: Reason::Underrun,
            align: Alignment::default(),
            discipline: true,
            ring,
            rt: RtQueue::default(),
            displaced: VecDeque::new(),
            be: BeQueues::new(cfg.ownership.classes()),
            outcomes: Vec::new(),
            counters: Counters::default(),
            queued: alloc::vec![0; cfg.ownership.classes()],
            life: crate::wire::lifecycle::Lifecycle::new(),
            changes: change::Changes::new(),
            cfg,
        })
    }
}

impl<B> Station<B> {
    /// The ownership phase: unposted slot `k` is ring slot `(k + phase) mod N` of the ownership map.
    pub fn phase(&self) -> u64 {
        self.phase
    }

    /// The configuration.
    pub fn config(&self) -> &StationConfig {
        &self.cfg
    }

    /// The EPHC (read-only): network time of wire byte positions. A slot's time is [`Station::slot_time`].
    pub fn ephc(&self) -> &Ephc {
        &self.ephc
    }

    /// The ring (read-only).
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// How far the wire's slots started from their schedule times, so far (see [`Alignment`]).
    pub fn alignment(&self) -> &Alignment {
        &self.align
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

    /// True once the link is up and the grid acquired: the backend reported when the link really came up (or
    /// slots have left without such a report), and a slot has started within a byte of its schedule time (an
    /// undisciplined station, [`Station::set_discipline`], does not wait for that).
    pub fn schedule_settled(&self) -> bool {
        self.life.anchored() && (!self.acquiring || !self.discipline)
    }

    /// Unposted wire slot `k` carries schedule slot `k + schedule_shift()`.
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

    /// True once shut down and every posted slot is consumed.
    pub fn drained(&self) -> bool {
        self.life.is_draining() && self.ring.consumed() == self.ring.posted()
    }
}

impl<B: AsRef<[u8]>> Station<B> {
    /// Phase 2, reclaim: consumed real frames are sent; their slots become zeroed fillers.
    #[inline]
    fn reclaim(&mut self, done: Range<u64>) -> u64 {
        if self.ring.real_frames() == 0 {
            // Fillers only: nothing to report.
            self.ring.reclaim_fillers(done);
            return 0;
        }
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
        // where the station already expected one (it detected the underrun itself, or the link came up) only
        // refines the restart time; any other is a new underrun.
        let mut underruns = Vec::new();
        let mut reals = 0;
        let mut from = done.start;
        let mut moved_any = false;
        for gap in obs.gaps {
            let at = gap.at;
            let split = at.clamp(from, done.end);
            reals += self.reclaim(from..split);
            from = split;
            // The link's real start: its byte grid is made to meet the schedule's (see `Station::snap`).
            let seen = self.life.gap(at);
            let restart = if seen.link_up { self.snap(gap.restart) } else { gap.restart };
            let moved = self.reanchor(at, restart, !(seen.expected || seen.link_up));
            moved_any |= moved != 0;
            if !seen.expected {
                self.counters.underruns += 1;
                underruns.push(Underrun { at_slot: at, detected: obs.now, restart: gap.restart, shift: Nanos(moved) });
            }
        }
        reals += self.reclaim(from..done.end);
        self.counters.fillers_sent += (done.end - done.start).saturating_sub(reals);
        self.life.consumed(self.ring.consumed());

        // Underrun detected by the station itself (for backends that cannot see the wire).
        let land = obs.now + self.cfg.post_latency;
        let posted = self.ring.posted();
        let end = self.track.end(); // where slot `posted` starts
                                    // Every posted slot is consumed (fetched) and, by the host's view of the wire, the last one has already
                                    // ended: the wire is idle now. (A gap that opens while slots are still in flight is only visible to a
                                    // backend that sees the wire; it arrives as a reported gap above, and also refines the restart here.)
        let idle = self.ring.consumed() == posted && self.host.time_of(end) <= obs.now;
        if self.life.is_down() {
            // The link comes up.
            let land = self.snap(land);
            let _ = self.reanchor(posted, land, false);
            self.life.link_up(posted);
            moved_any = true;
        } else if idle && !self.life.is_draining() {
            let moved = self.reanchor(posted, land, false);
            moved_any |= moved != 0;
            self.life.underrun_detected(posted);
            self.counters.underruns += 1;
            underruns.push(Underrun { at_slot: posted, detected: obs.now, restart: land, shift: Nanos(moved) });
        }
        if moved_any {
            self.start_acquiring();
            self.after_underrun = !underruns.is_empty();
            self.remap(false, Reason::Underrun);
            self.after_underrun = false;
        }
        let c = self.ring.consumed();
        self.forget_before(c);

        if self.life.is_draining() {
            return Ok(Poll { post: posted..posted, underruns });
        }

        // Phase 3, place: pre-buffered frames whose slot entered the window, then best effort.
        self.place_waiting();
        self.place_best_effort();

        // Phase 4, post: keep `batch` slots ahead of the consumer (the only doorbell), each with the length that
        // keeps the wire on the schedule.
        let post = self.post_to(c + u64::from(self.cfg.batch));
        self.counters.slots_posted += post.end - post.start;
        self.promote_change();
        Ok(Poll { post, underruns })
    }

    /// Stop accepting frames: everything not yet posted is rejected with [`Reason::Shutdown`]; later polls
    /// post nothing, so the NIC drains and the posted frames still get their `Sent` outcomes.
    pub fn shutdown(&mut self) {
        self.life.drain();
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
}

#[cfg(test)]
mod tests;
