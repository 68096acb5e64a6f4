//! The byte clock: every real-time frame starts on the wire at its txtime, to the byte, unpadded, with the
//! class isolation of time windows ([`windows`]).
//!
//! A saturated link is a byte clock: once the wire position is known to the byte, the next frame can start at
//! any byte boundary (8 ns at 1 Gb/s, 0.8 ns at 10 Gb/s) by choosing the lengths of the fillers before it. The
//! slot station ([`crate::station`]) keeps one ring slot per schedule slot; this one keeps no slots at all:
//!
//! ```text
//!   wire  ──┬──────────────┬────────┬──────┬─────────────┬────────┬──
//!           │ filler 1518  │ filler │ RT f │  BE frame   │ filler │      each descriptor: 64 B … max_frame
//!           P₀             P₁       B_f = nearest byte to txtime(f)
//! ```
//!
//! - **Wire position.** Descriptor `k` starts at byte `P_k` (bytes since link-up, preamble and gap included);
//!   the EPHC gives each byte its network time, exactly (`time = T0 + bytes·8/rate`, adjusted as PTP says).
//! - **Frames at byte times.** A real-time frame with txtime `t` starts at `B`, the byte nearest `t` (the next
//!   one if that would start before its window opens). The descriptors before it are sized so that the wire
//!   reaches `B` exactly: fillers are 64 bytes to `max_frame`, and a gap shorter than a minimum frame after a
//!   real frame is closed by padding that frame (the receiving stack ignores the zeros). Where neither is
//!   possible (a frame arrived after the descriptor before it was posted, or the frame before is as long as
//!   the link allows) the frame moves later by the least amount, inside its window, and its outcome says by
//!   how much; outside its window it is rejected.
//! - **Isolation.** A real-time frame is admitted only if its whole wire time lies in one window of its class;
//!   best effort goes only where no window is, and only in gaps it fills exactly or with room for a filler.
//! - **Descriptor economy.** With nothing due, fillers are as long as the link allows: a descriptor per
//!   `max_frame` bytes instead of one per slot. The wire is posted `lead` (as bytes at the line rate) beyond the
//!   next descriptor the NIC will fetch, so a NIC oscillator off the host's keeps the lead.
//! - **Outcomes.** Every frame ends as sent (descriptor, EPHC time, its txtime as `scheduled`: the difference
//!   is its deviation) or rejected (reason), as in the slot station.

mod admit;
mod change;
mod place;
mod post;
mod sorted;
pub use crate::schedule::windows;

pub use place::Place;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use crate::ephc::{ClockAdjust, Ephc, EphcError, Exact, Stride};
use crate::isolation::ClassId;
use crate::outcome::{Counters, Frame, FrameId, Outcome, Reason, Sent};
use crate::prebuffer::BeQueues;
use crate::ring::{Ring, RingError, SlotKind, SlotView};
use crate::station::{Alignment, Observation, Poll, Underrun};
use crate::time::{LinkRate, Nanos, Tai, MAX_SLOT_BYTES, MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};
use crate::wire::track::Track;
use windows::{Rat, Windows};

/// The shortest descriptor on the wire, preamble and gap included: a minimum frame.
const MIN_WIRE: u64 = (MIN_FRAME_BYTES + WIRE_OVERHEAD_BYTES) as u64;

/// The smallest `max_frame`: a gap one byte longer than the longest filler must still split into two fillers.
pub const MIN_MAX_FRAME: u32 = 2 * MIN_WIRE as u32 - WIRE_OVERHEAD_BYTES;

/// How a byte-clock station runs.
#[derive(Clone, Debug)]
pub struct ByteConfig {
    /// Line rate.
    pub rate: LinkRate,
    /// Every class's windows on the schedule.
    pub windows: Windows,
    /// Descriptors in the ring.
    pub ring: u32,
    /// The longest descriptor (L2 bytes with FCS) the backend sends: fillers and padded frames up to it.
    pub max_frame: u32,
    /// How far ahead of the host's clock the wire is posted: frames must be handed in at least this long
    /// before their txtime.
    pub lead: Nanos,
    /// Frames waiting per class, at most.
    pub max_pending: usize,
    /// Furthest ahead a txtime may be.
    pub max_advance: Nanos,
    /// Host time from a post to the NIC starting on it (set by the driver from the backend).
    pub post_latency: Nanos,
    /// A real-time frame whose wire time another already holds: refused `slot-taken` (strict), or sent at the first
    /// time after the frames that hold it, still inside its window (relaxed; its outcome shows how late).
    pub policy: crate::insert::Policy,
}

/// A configuration that cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteConfigError {
    /// The ring is empty or larger than the slot station allows.
    Ring(u32),
    /// The longest descriptor is below [`MIN_MAX_FRAME`] or above the largest the crate supports.
    MaxFrame(u32),
    /// The lead is not positive.
    Lead(Nanos),
}

impl fmt::Display for ByteConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ByteConfigError::Ring(n) => write!(f, "ring of {n} descriptors: need 2 to 65536"),
            ByteConfigError::MaxFrame(m) => {
                write!(f, "largest frame {m} B: need {MIN_MAX_FRAME} to {MAX_SLOT_BYTES} B (two minimum frames' wire time, so any gap can be filled exactly)")
            }
            ByteConfigError::Lead(l) => write!(f, "lead {} ns must be positive", l.0),
        }
    }
}

/// A real-time frame waiting for its byte.
#[derive(Clone, Debug)]
struct Waiting<B> {
    frame: Frame<B>,
    /// Its window's absolute opening and closing times.
    open: Rat,
    close: Rat,
    /// Wire bytes it occupies (frame with FCS, at least 64, plus preamble and gap).
    wire: u64,
    /// The byte it starts at and that byte's exact EPHC start, as found under clock generation `.0`
    /// ([`ByteStation::clock_gen`]).
    target: Option<(u64, u64, Rat)>,
}

/// A station on the byte clock: the sans-IO core a backend drives exactly as the slot station
/// ([`crate::station::Station`]): submit frames, poll with the NIC's consumer count, post what it returns.
pub struct ByteStation<B> {
    cfg: ByteConfig,
    ring: Ring,
    /// Network time of every byte position (count = bytes since link-up).
    ephc: Ephc,
    /// The wire by the host clock, at the nominal byte time (see [`crate::station::Station`]'s).
    host: crate::wire::host::HostView,
    /// The EPHC time of the host time last submitted at ([`crate::wire::host::NowMemo`]).
    now_memo: crate::wire::host::NowMemo,
    /// The wire's record of the descriptors posted and not long consumed (the last two rings of consumed ones
    /// too): the byte each starts at and its EPHC time; its end is the byte the next descriptor starts at.
    track: Track<Tai>,
    /// Real-time frames by (txtime, id).
    rt: sorted::Sorted<(Tai, FrameId), Waiting<B>>,
    /// Best-effort frames, FIFO per class, round-robin over classes (as on the slot station).
    be: BeQueues<B>,
    queued: Vec<usize>,
    outcomes: Vec<Outcome>,
    counters: Counters,
    /// Down, up (anchor provisional or final) or draining, and the gaps the station expects
    /// ([`crate::wire::lifecycle`], as on the slot station).
    life: crate::wire::lifecycle::Lifecycle,
    /// The real-time frame at the head whose target byte was last checked against its window, the clock
    /// generation it was found in, and the byte: the posting loop asks for the head once per descriptor.
    checked: Option<((Tai, FrameId), u64, u64)>,
    /// Bumped whenever the EPHC moves (an adjustment, a re-anchor): cached target bytes are found again.
    clock_gen: u64,
    /// The EPHC's exact time of `next_pos`, the byte the next descriptor starts at: the times of the bytes after
    /// it (the next descriptor's, a frame's target) are found from it without 128-bit division.
    cursor: Exact,
    /// The longest filler's step of the cursor on the clock's current piece.
    stride: Option<Stride>,
    /// The lead in wire bytes at the nominal rate.
    lead_bytes: u64,
    /// Each sent real-time frame's wire start minus its txtime (the byte clock's alignment: rounding to the byte,
    /// and moves after an underrun or under the relaxed policy).
    deviation: Alignment,
    /// A change of windows waiting for its switch ([`ByteStation::change_windows`]), and the last one done.
    changes: change::Changes,
    /// EPHC intervals the wire passed over without sending in them, and why: its latest underruns (idle, or
    /// posted and then moved later: `underrun`) and forward clock steps (`clock-step`). A frame due in one is
    /// rejected for that reason, not `late`.
    lost: VecDeque<(Tai, Tai, Reason)>,
}

impl<B: AsRef<[u8]>> ByteStation<B> {
    /// A station whose link comes up at the first poll.
    pub fn new(cfg: ByteConfig, t0: Tai) -> Result<Self, ByteConfigError> {
        if !(2..=65_536).contains(&cfg.ring) {
            return Err(ByteConfigError::Ring(cfg.ring));
        }
        if !(MIN_MAX_FRAME..=MAX_SLOT_BYTES).contains(&cfg.max_frame) {
            return Err(ByteConfigError::MaxFrame(cfg.max_frame));
        }
        if cfg.lead.0 <= 0 {
            return Err(ByteConfigError::Lead(cfg.lead));
        }
        let byte = cfg.rate.byte_time();
        Ok(ByteStation {
            ring: Ring::with_max_filler(cfg.ring, cfg.max_frame, cfg.max_frame),
            ephc: Ephc::new(byte, 0, t0),
            host: crate::wire::host::HostView::new(byte, t0),
            now_memo: crate::wire::host::NowMemo::default(),
            track: Track::new(3 * u64::from(cfg.ring) + 1, Tai(0)),
            rt: sorted::Sorted::default(),
            be: BeQueues::new(cfg.windows.classes()),
            queued: alloc::vec![0; cfg.windows.classes()],
            outcomes: Vec::new(),
            counters: Counters::default(),
            life: crate::wire::lifecycle::Lifecycle::new(),
            checked: None,
            clock_gen: 0,
            cursor: Ephc::new(byte, 0, t0).exact(0),
            stride: None,
            lead_bytes: (cfg.lead.0 as u128 * u128::from(byte.den())).div_ceil(u128::from(byte.num())) as u64,
            lost: VecDeque::new(),
            changes: change::Changes::new(),
            deviation: Alignment::default(),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ByteConfig {
        &self.cfg
    }

    /// The windows.
    pub fn windows(&self) -> &Windows {
        &self.cfg.windows
    }

    /// The descriptor ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// How far sent real-time frames started from their txtimes ([`Alignment`], one record per frame).
    pub fn alignment(&self) -> &Alignment {
        &self.deviation
    }

    /// The EPHC (count = bytes since link-up).
    pub fn ephc(&self) -> &Ephc {
        &self.ephc
    }

    /// Frames handed in and not yet ended.
    pub fn in_flight(&self) -> usize {
        self.rt.len() + self.be.len() + self.ring.real_frames()
    }

    /// The link is up and its anchor final: the backend reported where it started, or descriptors have left. The
    /// slot station's [`crate::station::Station::schedule_settled`] also waits for its grid to be acquired; the byte
    /// clock has no grid to acquire (a frame goes on the byte nearest its time from the first descriptor on), so
    /// the two answer the same question.
    pub fn schedule_settled(&self) -> bool {
        self.life.anchored()
    }

    /// Descriptor `k` (posted or being posted) for handing to the NIC.
    pub fn view(&self, k: u64) -> SlotView<'_> {
        self.ring.view(k)
    }

    /// Outcomes since the last call.
    pub fn drain_outcomes(&mut self) -> alloc::vec::Drain<'_, Outcome> {
        self.outcomes.drain(..)
    }

    /// Shut down: frames not yet posted are rejected `shutdown`, and nothing more is posted.
    pub fn shutdown(&mut self) {
        self.life.drain();
        let rt: alloc::vec::Vec<_> = self.rt.take_all().collect();
        for w in rt {
            self.reject(w.frame.id, w.frame.class, Reason::Shutdown);
        }
        while let Some(f) = self.be.pop() {
            self.reject(f.id, f.class, Reason::Shutdown);
        }
    }

    /// Shut down and every posted frame has left.
    pub fn drained(&self) -> bool {
        self.life.is_draining() && self.in_flight() == 0
    }

    /// EPHC time descriptor `k` starts at (posted ones as posted; later ones: where the next would start).
    pub fn slot_time(&self, k: u64) -> Tai {
        self.track.tag(k).unwrap_or(self.cursor.time())
    }

    /// The byte the next descriptor starts at.
    #[inline]
    fn next_pos(&self) -> u64 {
        self.track.end()
    }

    /// The link comes up at `t` (by the host clock): onto the schedule's byte grid ([`crate::wire::snap_to_bytes`]).
    fn snap(&self, t: Tai) -> Tai {
        crate::wire::snap_to_bytes(t, self.cfg.rate.byte_time(), self.cfg.windows.base_time())
    }

    /// The EPHC's time at host time `host`.
    pub fn ephc_at(&self, host: Tai) -> Tai {
        crate::wire::host::read(&self.ephc, self.host.position(host))
    }

    /// [`ByteStation::ephc_at`] of a submission's `now`, kept for the next one at the same `now`.
    fn ephc_now(&mut self, now: Tai) -> Tai {
        if let Some(e) = self.now_memo.get(now) {
            debug_assert_eq!(e, self.ephc_at(now), "a kept EPHC reading outlived a clock change");
            return e;
        }
        let e = self.ephc_at(now);
        self.now_memo.keep(now, e);
        e
    }

    /// One ring of the longest descriptors: the longest a healthy NIC needs to finish what is posted.
    pub fn ring_span(&self) -> Nanos {
        let per = self.cfg.rate.wire_time(self.cfg.max_frame);
        Nanos(i64::try_from(per.ceil_mul(self.ring.len())).unwrap_or(i64::MAX))
    }

    /// Apply a synchronisation adjustment from the next byte not yet posted on: posted descriptors keep their
    /// times; frames still waiting are placed by the adjusted clock. A frame due in the time a forward step skipped
    /// is rejected `clock-step` when it comes up (or at admission); one the step leaves no byte inside its window
    /// for, `not-owned`.
    pub fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        let before = self.ephc.time_of(self.next_pos());
        let applied = self.ephc.apply(adj, self.next_pos());
        self.clock_moved();
        // A step forward skips the time between: frames due in it are `clock-step`.
        let after = self.ephc.time_of(self.next_pos());
        if matches!(adj, ClockAdjust::Step(_)) && after > before {
            self.lose(before, after, Reason::ClockStep);
        }
        applied
    }

    /// The EPHC moved: cached target bytes are found again, and the cursor's stride with the new piece.
    fn clock_moved(&mut self) {
        self.now_memo.forget();
        self.clock_gen += 1;
        self.stride = None;
        self.cursor = self.ephc.exact(self.next_pos());
    }

    /// Why a frame due at `t` can no longer go: the wire passed it, in an underrun's lost time, over a clock step,
    /// or neither (`late`).
    fn passed(&self, t: Tai) -> Reason {
        let lost = self.lost.iter().rev().find(|&&(from, to, _)| from <= t && t < to);
        lost.map_or(Reason::Late, |&(_, _, why)| why)
    }

    /// Remember that the wire passed over `[from, to)` for `why` ([`ByteStation::passed`]).
    fn lose(&mut self, from: Tai, to: Tai, why: Reason) {
        if self.lost.len() == crate::wire::LOST_KEPT {
            self.lost.pop_front();
        }
        self.lost.push_back((from, to, why));
    }

    fn reject(&mut self, id: FrameId, class: ClassId, why: Reason) {
        self.counters.rejected[why.index()] += 1;
        self.outcomes.push(Outcome { id, class, result: Err(why) });
    }

    /// The exact EPHC time of byte `p`.
    fn time_at(&self, p: u64) -> Rat {
        let e = if p >= self.cursor.count() { self.ephc.exact_from(&self.cursor, p) } else { self.ephc.exact(p) };
        let (num, den) = e.fraction();
        Rat { num, den }
    }

    /// Wire time of `bytes` bytes at the nominal rate, exactly.
    fn span_of(&self, bytes: u64) -> Rat {
        let b = self.cfg.rate.byte_time();
        Rat { num: i128::from(b.num()) * i128::from(bytes), den: i128::from(b.den()) }
    }

    /// One poll: observe the NIC's consumer count (and any gaps it saw), end the frames that left, detect
    /// underruns, post descriptors up to `lead` ahead.
    pub fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError> {
        let done = self.ring.observe(obs.consumed)?;
        let mut underruns = Vec::new();
        let land = obs.now + self.cfg.post_latency;
        if self.life.is_down() {
            let land = self.snap(land);
            self.host.anchor(land, self.next_pos());
            self.ephc.set_time(land, self.next_pos());
            self.clock_moved();
            self.life.link_up(self.ring.posted());
        }
        for gap in obs.gaps {
            // The link's real start, reported: snapped onto the schedule's byte grid as the estimate was.
            let seen = self.life.gap(gap.at);
            let restart = if seen.link_up { self.snap(gap.restart) } else { gap.restart };
            let moved = self.reanchor(gap.at, restart, !(seen.expected || seen.link_up), !seen.expected);
            if !seen.expected {
                self.counters.underruns += 1;
                underruns.push(Underrun {
                    at_slot: gap.at,
                    detected: obs.now,
                    restart: gap.restart,
                    shift: Nanos(moved),
                });
            }
        }
        self.reclaim(done);
        self.life.consumed(self.ring.consumed());
        let posted = self.ring.posted();
        let idle = self.ring.consumed() == posted && self.host.time_of(self.next_pos()) <= obs.now;
        if idle && !self.life.is_draining() && posted > 0 {
            let moved = self.reanchor(posted, land, false, true);
            self.life.underrun_detected(posted);
            self.counters.underruns += 1;
            underruns.push(Underrun { at_slot: posted, detected: obs.now, restart: land, shift: Nanos(moved) });
        }
        if self.life.is_draining() {
            return Ok(Poll { post: posted..posted, underruns });
        }
        self.promote_change();
        let post = self.post_ahead();
        self.counters.slots_posted += post.end - post.start;
        Ok(Poll { post, underruns })
    }

    /// Descriptor `at` started (or will start) at host time `restart`: move the host's view there, and the
    /// EPHC of that descriptor and all after it by as much (only later, with `only_later`: a gap the NIC saw
    /// can only delay the wire; an earlier restart is the host view's drift). With `underrun`, the EPHC time the wire
    /// lost is remembered: frames due in it are rejected `underrun`. Returns the move, ns.
    fn reanchor(&mut self, at: u64, restart: Tai, only_later: bool, underrun: bool) -> i64 {
        self.now_memo.forget();
        let pos = self.track.start(at).unwrap_or(self.next_pos());
        let moved = self.host.anchor(restart, pos);
        let moved = if only_later { moved.max(0) } else { moved };
        if moved > 0 && underrun {
            // From where descriptor `at` was to start to where the wire now resumes posting.
            let lost_from = self.ephc.time_of(pos);
            let lost_to = Tai(self.ephc.time_of(self.next_pos()).0.saturating_add(moved));
            self.lose(lost_from, lost_to, Reason::Underrun);
        }
        if moved != 0 {
            self.track.update_tags_from(at, |t| *t = Tai(t.0.saturating_add(moved)));
            let t =
                i128::from(self.ephc.time_of(self.next_pos()).0) + self.ephc.scaled(self.next_pos(), i128::from(moved));
            self.ephc.set_time(Tai(crate::station::sat_i64(t)), self.next_pos());
            self.clock_moved();
        }
        moved
    }

    /// The descriptors the NIC finished: their frames are sent.
    fn reclaim(&mut self, done: Range<u64>) {
        let mut sent = Vec::new();
        let track = &self.track;
        self.ring.reclaim(done.clone(), |k, kind| {
            if let SlotKind::Real { id, class, txtime, ring_slot, .. } = kind {
                let time = track.tag(k).unwrap_or(Tai(0));
                sent.push(Outcome { id, class, result: Ok(Sent { slot: k, time, ring_slot, scheduled: txtime }) });
            }
        });
        for o in &sent {
            if let Ok(Sent { time, scheduled: Some(t), .. }) = o.result {
                self.deviation.record(time.0.saturating_sub(t.0));
            }
        }
        self.counters.fillers_sent += (done.end - done.start) - sent.len() as u64;
        self.counters.sent += sent.len() as u64;
        self.outcomes.extend(sent);
        // Consumed (fetched) descriptors may still be on their way to the wire, and their times are asked for
        // when they get there: keep two rings' worth.
        self.track.forget_before(done.end.saturating_sub(2 * self.ring.len()));
    }
}

#[cfg(test)]
mod tests;
