//! The grid: the schedule on network time, the EPHC, and the disciplined wire.
//!
//! ```text
//!   network time ─┬──────────┬──────────┬──────────┬──────────┬─  S(j) = base + j·δ   (schedule, fixed)
//!                 j          j+1        j+2        j+3
//!   wire (bytes) ─┬─────────┬┬──────────┬─────────┬──────────┬─  P_k, E(P_k) = EPHC time of byte P_k
//!                 k  filler   k+1 frame  k+2 filler (trimmed)
//!
//!   invariant (locked): S(j) ≤ E(P_k) < S(j) + one byte time, where j = k + shift
//! ```
//!
//! Wire slot `k` starts at byte `P_k` (bytes since link-up, preamble and gap included); its length `L_k` is
//! chosen when it is posted, so `P_{k+1} = P_k + L_k + 20`. The EPHC `E` gives each byte its network time; a
//! PTP servo steers it (rate: the oscillator's error as PTP sees it; steps). The discipline picks `L_k` so that
//! `P_{k+1}` is the first byte whose EPHC time is at or after `S(j + 1)`: the residual is below a byte and is
//! corrected again at the next slot, so it never accumulates. Lengths are bounded — fillers 64 B … the
//! backend's largest frame, real frames their data … the slot size — so an error larger than the bounds absorb
//! in one slot (after link-up, a step, a restart) takes a few slots; if the next slot would still be more than
//! half a slot off, the mapping is re-evaluated ([`Station::realign`]): the wire slot carries the schedule slot
//! it reaches soonest given how far lengths can move it (a skip forward, or a spacer that carries none).

use core::ops::Range;

use super::{sat_i64, Station};
use crate::ephc::{ClockAdjust, Ephc, EphcError};
use crate::outcome::Reason;
use crate::ring::SlotKind;
use crate::time::{Nanos, SlotPeriod, Tai, MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};
use crate::wire::step::{Mode, Step};

use super::ClockAdjusted;

/// The schedule slot a posted wire slot carried ([`Station::carried`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Carried {
    /// Schedule slot (starts at `schedule().time_of(slot)`).
    pub slot: u64,
    /// The grid was locked when the slot was posted (not being acquired after link-up, a step or a restart) and
    /// the slot starts within a byte of its schedule time on the EPHC. (A locked grid may still leave a slot a
    /// little further off where lengths cannot follow: after a real frame that cannot pad any further.)
    pub locked: bool,
}

/// The schedule of a configuration: schedule slot `j` at `S(j)`, anchored a whole number of ring cycles before
/// `base_time` — far enough back (about 2⁶² ns before the TAI epoch) that every time the clock can reach maps to
/// a slot — so that every cycle start `base_time + n·N·δ`, `n` of either sign, is a schedule slot `j ≡ 0 (mod
/// N)`. (`R` below is the shortest whole number of nanoseconds made of whole cycles.) Its conversions are computed
/// from the slot at `near` (the station's start: the present), where they need no 128-bit division.
pub(super) fn schedule_grid(cfg: &super::StationConfig, near: Tai) -> Ephc {
    let delta = cfg.geometry.period();
    let r = i128::from(cycle_of(delta, cfg.ownership.ring()).num());
    let back = (i128::from(cfg.base_time.0) + (1i128 << 62)).div_euclid(r) + 1;
    let anchor = i128::from(cfg.base_time.0) - back * r;
    let grid = Ephc::new(delta, 0, Tai(anchor as i64));
    let near = grid.slot_at_or_after(near).unwrap_or(0);
    grid.rebased(near)
}

/// Whole-ns sizes of the geometry the discipline compares errors with, computed once (each is a 128-bit division).
#[derive(Clone, Copy, Debug)]
pub(super) struct Sizes {
    /// One byte time, rounded up ([`Station::tolerance`]).
    pub(super) tol: i64,
    /// Half the nominal slot period, rounded down ([`Station::half_slot`]).
    pub(super) half: i64,
    /// Wire bytes (length + 20) a disciplined filler may have: at least the slot less [`Station::shrink_cap`] and
    /// a minimum frame, at most the longest filler.
    pub(super) filler: (u64, u64),
}

impl Sizes {
    pub(super) fn of(g: &crate::time::SlotGeometry, (lo, hi): (u32, u32)) -> Sizes {
        let tol = i64::try_from(g.rate().byte_time().ceil_mul(1)).unwrap_or(i64::MAX);
        let half = i64::try_from(g.period().floor_mul(1) / 2).unwrap_or(i64::MAX);
        let floor = g.slot_bytes() - shrink_cap(g);
        let overhead = u64::from(WIRE_OVERHEAD_BYTES);
        let filler = (u64::from(lo.max(floor).min(hi)) + overhead, u64::from(hi) + overhead);
        Sizes { tol, half, filler }
    }
}

/// How much a disciplined slot may shrink below the slot size ([`Station::shrink_cap`]).
fn shrink_cap(g: &crate::time::SlotGeometry) -> u32 {
    (g.slot_bytes() - MIN_FRAME_BYTES) / 4
}

/// `N·δ` as an exact period.
fn cycle_of(delta: SlotPeriod, ring: u32) -> SlotPeriod {
    SlotPeriod::new(delta.num() * u64::from(ring), delta.den())
}

impl<B: AsRef<[u8]>> Station<B> {
    /// The schedule (schedule slot `j` starts at `schedule().time_of(j)`): applications align their txtimes to
    /// it. Fixed by the configuration's base time; nothing moves it.
    pub fn schedule(&self) -> &Ephc {
        &self.schedule
    }

    /// The configured base time (TAI ns): a cycle starts there.
    pub fn base_time(&self) -> Tai {
        self.cfg.base_time
    }

    /// The cycle time `N·δ`, exact.
    pub fn cycle_time(&self) -> SlotPeriod {
        cycle_of(self.cfg.geometry.period(), self.cfg.ownership.ring())
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

    /// The wire slot a frame scheduled at `t` targets: the unposted slot that carries the schedule slot whose
    /// interval contains `t`. (Already posted slots may have carried it under an earlier mapping.)
    pub fn slot_of(&self, t: Tai) -> Option<u64> {
        let j = self.schedule.slot_of(t)?;
        u64::try_from(i128::from(j) - i128::from(self.shift)).ok()
    }

    /// Like [`Station::slot_of`], but `late` for a schedule slot a posted slot already carried (or passed).
    pub(super) fn target_of(&self, t: Tai) -> Result<u64, Reason> {
        let j = self.schedule.slot_of(t).ok_or(Reason::Late)?;
        // Its schedule slot passed while the link was idle (an underrun the station recovered from): say so.
        if self.gaps.iter().any(|g| g.contains(&j)) {
            return Err(Reason::Underrun);
        }
        if j < self.j_end {
            return Err(Reason::Late);
        }
        let k = u64::try_from(i128::from(j) - i128::from(self.shift)).map_err(|_| Reason::Late)?;
        if k < self.spacer_until && k >= self.ring.posted() {
            // The wire is still acquiring the schedule there: the slot will not start at its time.
            return Err(self.realign_cause);
        }
        Ok(k)
    }

    /// The first unposted slot that carries a schedule slot and starts on its time (those before it are
    /// spacers).
    pub(super) fn first_placeable(&self) -> u64 {
        let k = i128::from(self.j_end) - i128::from(self.shift);
        u64::try_from(k).unwrap_or(0).max(self.ring.posted()).max(self.spacer_until)
    }

    /// The schedule slot posted slot `k` carried, if it carried one and is still tracked (about four rings back),
    /// and whether the grid was locked when it was posted (not being acquired after link-up, a step or a restart).
    pub fn carried(&self, k: u64) -> Option<Carried> {
        self.track.tag(k)
    }

    /// Start byte of wire slot `k`: exact from the oldest slot still tracked (about four rings back) up to the
    /// next slot to post; beyond, extrapolated at the nominal slot size.
    pub(super) fn position(&self, k: u64) -> u64 {
        let size = u64::from(self.cfg.geometry.slot_bytes() + WIRE_OVERHEAD_BYTES);
        let (base, last) = (self.track.base(), self.track.last());
        match self.track.start(k) {
            Some(p) => p,
            None if k > last => self.track.end().saturating_add((k - last).saturating_mul(size)),
            None => self.track.start(base).unwrap_or(0).saturating_sub((base - k).saturating_mul(size)),
        }
    }

    /// Wire start time of slot `k` on the EPHC: by the clock that governed it when it was posted; for a slot not
    /// yet posted, the time the discipline will give it (the first byte at or after its schedule time).
    pub fn slot_time(&self, k: u64) -> Tai {
        if k > self.ring.posted() {
            let j = u64::try_from(i128::from(k) + i128::from(self.shift)).unwrap_or(0);
            let s = self.schedule.time_of(j);
            return self.ephc.slot_at_or_after(s).map_or(s, |p| self.ephc.time_of(p));
        }
        let p = self.position(k);
        self.clock_of(p).time_of(p)
    }

    /// The schedule slot wire slot `k` carries if it is not posted yet (`k + shift`).
    pub fn schedule_slot_of(&self, k: u64) -> u64 {
        // k + shift, or 0 where that leaves u64 (either way).
        k.checked_add_signed(self.shift).unwrap_or(0)
    }

    /// The clock piece that governs byte position `p`.
    fn clock_of(&self, p: u64) -> &Ephc {
        if p >= self.clock_from {
            return &self.ephc;
        }
        let piece = self.history.iter().rev().find(|(from, _)| *from <= p);
        piece.map_or(&self.ephc, |(_, c)| c)
    }

    /// The EPHC's time at host time `host`: the host's view of the wire says which byte is going out, the EPHC
    /// what time that byte has. Equal to `host` until synchronisation moves the EPHC. Saturates at the ends of
    /// the i64 range (untrusted times never wrap).
    pub fn ephc_at(&self, host: Tai) -> Tai {
        let at = self.host.position(host);
        crate::wire::host::read(self.clock_of(at.0), at)
    }

    /// [`Station::ephc_at`] of a submission's `now`, kept for the next one at the same `now`.
    pub(super) fn ephc_now(&mut self, now: Tai) -> Tai {
        if let Some(e) = self.now_memo.get(now) {
            debug_assert_eq!(e, self.ephc_at(now), "a kept EPHC reading outlived a clock change");
            return e;
        }
        let e = self.ephc_at(now);
        self.now_memo.keep(now, e);
        e
    }

    /// The current clock (every adjustment applied, also those that govern only slots not yet posted) at host
    /// time `host`: the time a synchronisation servo reasons in. It differs from [`Station::ephc_at`] only
    /// while an adjustment has not yet reached the wire (at most `batch` slots).
    pub fn clock_at(&self, host: Tai) -> Tai {
        crate::wire::host::read(&self.ephc, self.host.position(host))
    }

    /// When slot `k` starts (started) by the host clock: the wire as the host sees it, which synchronisation
    /// never moves.
    pub fn host_time_of(&self, k: u64) -> Tai {
        self.host.time_of(self.position(k))
    }

    /// The host time at EPHC time `t` (the inverse of [`Station::ephc_at`], to within a nanosecond).
    pub fn host_at(&self, t: Tai) -> Tai {
        let p = self.ephc.slot_of(t).unwrap_or(0);
        let c = self.clock_of(p);
        let into = i128::from(t.0) - i128::from(c.time_of(p).0);
        Tai(sat_i64(i128::from(self.host.time_of(p).0) + c.unscaled(p, into)))
    }

    /// The byte position on the wire where slot `k` starts (the EPHC's count for that slot): exact for slots still
    /// tracked, extrapolated at the nominal slot size beyond.
    pub fn wire_position(&self, k: u64) -> u64 {
        self.position(k)
    }

    /// Start a new clock piece at byte `from`, keeping the current one for earlier slots still in flight.
    fn split_clock(&mut self, from: u64) {
        self.now_memo.forget();
        // Slots before `from` may be consumed (fetched) yet still on their way to the wire: they keep their piece.
        if from > self.clock_from {
            self.history.push_back((self.clock_from, self.ephc.clone()));
            self.clock_from = from;
        }
    }

    /// Forget positions more than about four rings before consumed slot `c`, and the clock pieces and slews that
    /// govern only those (slots consumed — fetched — may still be on their way to the wire, and their times are
    /// asked for when they get there).
    pub(super) fn forget_before(&mut self, c: u64) {
        self.now_memo.forget();
        let keep_from = c.saturating_sub(4 * self.ring.len());
        self.track.forget_before(keep_from);
        let p = self.track.start(self.track.base()).unwrap_or(0);
        self.ephc.advance(p);
        while self.history.len() > 1 && self.history[1].0 <= p {
            self.history.pop_front();
        }
        if self.clock_from <= p {
            self.history.clear();
        }
    }

    /// Slot `at` started (or will start) at host time `restart`: re-anchor the host's view of the wire there,
    /// and the clock by the same amount (its offset from the host clock, which synchronisation may have set, is
    /// kept). Every clock piece governing bytes from there on moves: a gap reported late, after an adjustment
    /// split the clock at a later slot, moves the current clock too. Returns how far the slot moved (positive:
    /// later than the clock had it).
    ///
    /// With `only_later` (a gap the backend saw on a wire the station thought was streaming), the clock moves
    /// only forward: a gap can only delay the wire, so a restart earlier than the host's view expected is that
    /// view's drift (it runs at the nominal byte time, the oscillator does not), not the wire's — moving the
    /// disciplined clock back by it would make the slots sized for the schedule leave early.
    pub(super) fn reanchor(&mut self, at: u64, restart: Tai, only_later: bool) -> i64 {
        self.now_memo.forget();
        let p = self.position(at);
        let moved = self.host.anchor(restart, p);
        let moved = if only_later { moved.max(0) } else { moved };
        if moved != 0 {
            // Slots posted from `at` on were sized by a clock that had the wire elsewhere: not locked after all.
            self.track.update_tags_from(at, |c| {
                if let Some(c) = c {
                    c.locked = false;
                }
            });
        }
        if p >= self.clock_from {
            self.split_clock(p);
        } else {
            // Split the history piece holding `p` there, so earlier slots keep their times.
            if let Some(i) = self.history.iter().rposition(|(from, _)| *from < p) {
                if self.history.get(i + 1).is_none_or(|(from, _)| *from != p) {
                    let piece = self.history[i].1.clone();
                    self.history.insert(i + 1, (p, piece));
                }
            }
            for (from, c) in self.history.iter_mut().filter(|(from, _)| *from >= p) {
                let t = Tai(sat_i64(i128::from(c.time_of(*from).0) + c.scaled(*from, i128::from(moved))));
                c.set_time(t, *from);
            }
        }
        // The clock runs on through the gap at its own rate: `moved` of the oscillator's time is `moved` scaled
        // by the clock's frequency adjustment (a synchronised clock would otherwise lose its correction over
        // every gap: 100 ns per 2 ms gap at 50 ppm).
        let from = self.clock_from.max(p);
        let t = Tai(sat_i64(i128::from(self.ephc.time_of(from).0) + self.ephc.scaled(from, i128::from(moved))));
        self.ephc.set_time(t, from);
        moved
    }

    /// The link comes up at `t` (by the host clock): [`crate::wire::snap_to_bytes`] onto the schedule's byte grid.
    pub(super) fn snap(&self, t: Tai) -> Tai {
        crate::wire::snap_to_bytes(t, self.cfg.geometry.rate().byte_time(), self.schedule.time_of(0))
    }

    /// The phase is to be (re)acquired from the next slot on.
    pub(super) fn start_acquiring(&mut self) {
        if !self.acquiring {
            self.acquiring = true;
            self.acquire_since = self.ring.posted();
        }
    }

    /// Half the nominal slot period, ns.
    pub(super) fn half_slot(&self) -> i128 {
        i128::from(self.sizes.half)
    }

    /// How far the next slot to post is from its schedule time by the current clock (positive: late).
    fn next_error(&mut self) -> i128 {
        let k = self.ring.posted();
        let t = self.ephc.exact_from(&self.cursor, self.position(k));
        let s = self.schedule.exact_from(&self.sched_cursor, self.schedule_slot_of(k));
        (self.cursor, self.sched_cursor) = (t, s);
        i128::from(t.time().0) - i128::from(s.time().0)
    }

    /// The wire moved against the schedule (link-up, a restart, a step, or lengths that could not keep up):
    /// re-choose the mapping for the next slot to post ([`Station::realign`]), make the slots that cannot start on
    /// their schedule time while the lengths catch up spacers, and let the frames in the window follow
    /// ([`Station::follow_mapping`]) — those that cannot are rejected with `cause`.
    pub(super) fn remap(&mut self, rewind: bool, cause: Reason) {
        self.realign_cause = cause;
        let moved = self.realign(rewind);
        let b = self.ring.posted();
        let e = self.next_error();
        let tol = self.tolerance();
        // Slots that would start more than a byte early (before their frames' txtimes) while the lengths catch up
        // carry no frames: a frame never leaves before its schedule slot's start by more than a byte, the
        // `SO_TXTIME` promise. Slots late by less than half a slot do carry frames, as after any disturbance
        // (their outcomes say by how much). (Up to half a slot early used to be allowed: after host stalls, 2–5 %
        // of frames left up to 5 µs early, `validation/robustness`.)
        let slot = self.cfg.geometry.slot_bytes();
        let cap = self.cfg.geometry.rate().byte_time().floor_mul(u64::from(self.cfg.max_filler - slot)) as i128;
        // Without the discipline (nominal slots, a harness counting a peer's slots) lengths never catch up: the
        // mapping moves a whole slot at a time and slots within half a slot of their time carry frames, as before.
        let limit = self.early_limit();
        let m = if e >= -limit || cap == 0 { 0 } else { ((-e - limit) + cap - 1) / cap };
        let until = b + (m as u64).min(self.ring.len());
        let spacers = until > self.spacer_until.max(b);
        self.spacer_until = until;
        if e.abs() > tol {
            self.start_acquiring();
        }
        if moved || spacers {
            self.follow_mapping(cause);
        }
    }

    /// How early (ns) a slot may start and still carry a real-time frame: a byte on the disciplined wire (the
    /// `SO_TXTIME` promise); without the discipline, half a slot (lengths never catch up, see [`Station::remap`]).
    pub(super) fn early_limit(&self) -> i128 {
        let tol = self.tolerance();
        if self.discipline {
            tol
        } else {
            tol.max(self.half_slot())
        }
    }

    /// Slot `k` is about to be posted more than [`Station::early_limit`] before its schedule time although the
    /// spacers [`Station::remap`] chose were to prevent it (they assume every slot before can grow to the largest
    /// filler; one holding a real frame cannot, and a stream of underruns can re-anchor the wire faster than
    /// lengths follow): a real-time frame in it is taken out and rejected with the cause of the re-alignment
    /// rather than sent early. Best-effort frames have no time to be early for and stay.
    fn withhold_early(&mut self, k: u64) {
        if let SlotKind::Real { id, class, txtime: Some(_), .. } = self.ring.kind(k) {
            let _ = self.ring.take(k);
            self.reject(id, class, self.realign_cause);
        }
    }

    /// Most bytes the discipline takes off one slot: a quarter of what the slot has above the minimum frame.
    pub(super) fn shrink_cap(&self) -> u32 {
        shrink_cap(&self.cfg.geometry)
    }

    /// One byte time, rounded up to whole ns: the alignment the discipline keeps.
    pub(super) fn tolerance(&self) -> i128 {
        i128::from(self.sizes.tol)
    }

    /// Choose the schedule slot the next slot to post carries: of the two schedule slots around its EPHC time,
    /// the one the wire reaches soonest — late by `a` it must shrink slots (at most `slot − 64` bytes each), early
    /// by `b` it must lengthen them (at most `max_filler − slot`). With `rewind` (after a clock step) the wire may
    /// carry schedule slots again that slots posted under the wrong clock carried: their times were not what the
    /// clock said. Otherwise a schedule slot is carried at most once (an earlier one makes the slot a spacer).
    /// Returns whether the mapping changed.
    fn realign(&mut self, rewind: bool) -> bool {
        let b = self.ring.posted();
        let t = self.ephc.time_of(self.position(b));
        let byte = self.cfg.geometry.rate().byte_time();
        let slot = self.cfg.geometry.slot_bytes();
        let shrink = i128::from(self.shrink_cap());
        let grow = i128::from(self.cfg.max_filler - slot);
        let j = match self.schedule.slot_of(t) {
            None => 0,
            Some(jf) => {
                // Errors in bytes (what the lengths move), rounded down: a residual below a byte is none.
                let to_bytes = |ns: i128| (ns * i128::from(byte.den())).div_euclid(i128::from(byte.num()));
                let late = to_bytes(i128::from(t.0) - i128::from(self.schedule.time_of(jf).0));
                let early = to_bytes(i128::from(self.schedule.time_of(jf + 1).0) - i128::from(t.0));
                // The direction that catches up in fewer slots; late on a tie (a frame may leave late while the
                // lengths catch up, and its outcome says by how much; early slots carry no frames).
                // Slots each direction takes (a zero capacity: never). Early only if that is no slower and needs
                // no spacer (less than half a slot early), or if late would take more than four slots and early is
                // faster; otherwise late (its frames leave late, their outcomes saying by how much).
                let slots = |err: i128, cap: i128| {
                    if err == 0 {
                        0
                    } else if cap == 0 {
                        i128::MAX
                    } else {
                        (err + cap - 1) / cap
                    }
                };
                let (s_early, s_late) = (slots(early, grow), slots(late, shrink));
                let half_bytes = i128::from(slot + WIRE_OVERHEAD_BYTES) / 2;
                if (early < half_bytes && s_early <= s_late) || (s_late > 4 && s_early < s_late) {
                    jf + 1
                } else {
                    jf
                }
            }
        };
        if rewind {
            self.j_end = self.j_end.min(j);
            self.gaps.clear();
        }
        if self.after_underrun && j > self.j_end && self.j_end > 0 {
            // The schedule slots the idle wire passed over: frames for them get `underrun`, not `late`.
            if self.gaps.len() == crate::wire::LOST_KEPT {
                self.gaps.pop_front();
            }
            self.gaps.push_back(self.j_end..j);
        }
        let shift = sat_i64(i128::from(j) - i128::from(b));
        let shift0 = *self.shift0.get_or_insert(shift);
        self.counters.grid_shift_slots = shift.saturating_sub(shift0);
        if shift == self.shift {
            return false;
        }
        self.shift = shift;
        self.phase = u64::try_from(i128::from(shift).rem_euclid(i128::from(self.ring.len()))).unwrap_or(0);
        true
    }

    /// Phase 4, post: advance the producer to `min(target, consumed + N)`, choosing each slot's length as it is
    /// posted (see the module doc). Returns the slots to hand to the NIC.
    pub(super) fn post_to(&mut self, target: u64) -> Range<u64> {
        let start = self.ring.posted();
        let end = target.min(self.ring.consumed() + self.ring.len());
        let half = self.half_slot();
        let tol = self.tolerance();
        let early = self.early_limit();
        // The next slot's error as the previous iteration computed it (the clock and the mapping have not changed
        // since, unless a skip or a remap said so): saves two divisions of 128-bit clock arithmetic per slot.
        let mut known: Option<i128> = None;
        let slot = self.cfg.geometry.slot_bytes();
        let mode = if self.discipline { Mode::Boundary } else { Mode::Fixed(u64::from(slot + WIRE_OVERHEAD_BYTES)) };
        let piece = self.ephc.piece_id(self.track.end());
        if self.step.as_ref().is_some_and(|s| !s.is_for(piece, mode)) {
            self.step = None;
        }
        if self.clamp.as_ref().is_some_and(|s| !s.is_for(piece, self.clamp_mode())) {
            self.clamp = None;
        }
        // The steady state first (a step already where the wire is): usually all there is to post.
        if (self.post_steady(end) > 0 || self.post_clamped(end) > 0) && self.ring.posted() >= end {
            return start..self.ring.posted();
        }
        while self.ring.posted() < end {
            if self.post_clamped(end) > 0 {
                known = None;
                continue;
            }
            let k = self.ring.posted();
            let p = self.position(k);
            let j = self.schedule_slot_of(k);
            // The O(1) step (crate::wire::step) where the clock allows it; the exact arithmetic otherwise.
            let stepping = self.step_at(p, j, mode);
            if stepping && self.post_steady(end) > 0 {
                known = None;
                continue;
            }
            let mut tag = None;
            if j >= self.j_end {
                let e = match (known.take(), &self.step) {
                    (Some(e), _) => e,
                    (None, Some(s)) if stepping => i128::from(s.error()),
                    _ => self.next_error(),
                };
                if self.acquiring && (-tol..=tol).contains(&e) {
                    self.acquiring = false;
                    self.align.acquired(k - self.acquire_since.min(k));
                }
                if self.acquiring {
                    self.align.acquiring_slots += 1;
                } else {
                    self.align.record(sat_i64(e));
                }
                self.j_end = j + 1;
                if e < -early {
                    self.withhold_early(k);
                }
                let locked = !self.acquiring && (-tol..=tol).contains(&e);
                tag = Some(Carried { slot: j, locked });
            } else {
                self.align.spacers += 1;
            }
            // The length that makes the next slot start on the first byte at or after its schedule time (stepped
            // if that length is within the slot's bounds; the same length the exact arithmetic finds).
            let (lo, hi) = if self.discipline { self.len_bounds(k) } else { (slot, slot) };
            let ok = |n: u64| {
                n.checked_sub(u64::from(WIRE_OVERHEAD_BYTES))
                    .is_some_and(|l| (u64::from(lo)..=u64::from(hi)).contains(&l))
            };
            let stepped = self.step.as_mut().filter(|_| stepping).and_then(|s| s.step_if(ok));
            let (mut len, mut e_next) = match stepped {
                Some((n, e)) => ((n - u64::from(WIRE_OVERHEAD_BYTES)) as u32, i128::from(e)),
                None if self.discipline => self.length_for(k, p, j + 1),
                None => (slot, i128::MAX),
            };
            // Late beyond a byte although the slot is as short as it can be (64-byte slots, or real frames back to
            // back): let this filler span the next schedule slot too — the next slot carries `j + 2` — if no frame
            // waits for `j + 1` (preferably a slot no class owns; any free one once half a slot late).
            let mut skip = false;
            if self.discipline && e_next > tol && self.may_skip_to(k + 1, e_next > half) {
                let cursors = (self.cursor, self.sched_cursor);
                let (len2, e2) = self.length_for(k, p, j + 2);
                if e2.abs() < e_next {
                    (len, e_next, skip) = (len2, e2, true);
                } else {
                    (self.cursor, self.sched_cursor) = cursors; // at the slot actually posted
                }
            }
            self.ring.set_len(k, len);
            let _ = self.ring.post_to(k + 1);
            self.track.push(u64::from(len + WIRE_OVERHEAD_BYTES), tag);
            // As short as a filler may be, from the exact arithmetic: the next slots may be too (the clamped step).
            if stepped.is_none()
                && !skip
                && self.discipline
                && u64::from(len + WIRE_OVERHEAD_BYTES) == self.sizes.filler.0
            {
                self.seed_clamp(j + 1);
            }
            if skip {
                self.j_end = self.j_end.max(j + 2);
                self.shift += 1;
                self.phase = (self.phase + 1) % self.ring.len();
                self.align.skips += 1;
                if let Some(s0) = self.shift0 {
                    self.counters.grid_shift_slots = self.shift.saturating_sub(s0);
                }
                self.follow_mapping(Reason::ClockStep);
            }
            // A whole slot off (a step or restart the lengths could not absorb): re-choose the mapping.
            let e_next = if e_next == i128::MAX { self.next_error() } else { e_next };
            known = Some(e_next);
            if e_next.abs() > 2 * half {
                self.remap(false, Reason::ClockStep);
                known = None;
            }
        }
        start..self.ring.posted()
    }

    /// Keep every slot at the nominal size (`false`) instead of sizing them to the schedule: the wire then runs at
    /// the oscillator's rate, and the mapping of wire slots to schedule slots is re-chosen whenever it drifts a
    /// whole slot (class windows move by up to a slot against network time). For harnesses that count a peer's
    /// slots at the nominal period (the dual clock's RX slot clock); default `true`.
    pub fn set_discipline(&mut self, on: bool) {
        self.discipline = on;
    }

    /// Whether the step is at byte `p` and schedule slot `j` in `mode`, seeding it there if it can be (from the
    /// exact cursors, which the exact arithmetic leaves at the next slot's start).
    fn step_at(&mut self, p: u64, j: u64, mode: Mode) -> bool {
        if self.step.as_ref().is_some_and(|s| s.is_at(p, j)) {
            return true;
        }
        let at = self.ephc.exact_from(&self.cursor, p);
        let sched = self.schedule.exact_from(&self.sched_cursor, j);
        (self.cursor, self.sched_cursor) = (at, sched);
        match &mut self.step {
            Some(s) => s.seed(&at, &sched),
            None => {
                self.step = Step::new(mode, &self.ephc.line(p), &at, &self.schedule.line(j), &sched);
                self.step.is_some()
            }
        }
    }

    /// The clamped step's mode: every slot the shortest a disciplined filler may be.
    pub(super) fn clamp_mode(&self) -> Mode {
        Mode::Clamped(self.sizes.filler.0)
    }

    /// Put the clamped step where the exact cursors are (the next slot to post starts at `cursor`, schedule slot
    /// `j` at `sched_cursor`), building it if it is of another piece.
    fn seed_clamp(&mut self, j: u64) {
        let (at, sched) = (self.cursor, self.sched_cursor);
        if !self.clamp.as_mut().is_some_and(|s| s.seed(&at, &sched)) {
            let p = at.count();
            self.clamp = Step::new(self.clamp_mode(), &self.ephc.line(p), &at, &self.schedule.line(j), &sched);
        }
    }

    /// Slot `k + 1` is free and no frame waits for it: a filler may span its schedule slot too (with `late`, any
    /// free slot; otherwise only one no class owns).
    fn may_skip_to(&self, k1: u64, late: bool) -> bool {
        let next_free = k1 < self.ring.window().end && self.ring.is_free(k1);
        next_free && (late || self.own_for(k1).owner_of(self.schedule_slot_of(k1)).is_none())
    }

    /// The wire lengths slot `k` may be posted with on the disciplined wire.
    fn len_bounds(&self, k: u64) -> (u32, u32) {
        let (lo, hi) = self.ring.len_range(k);
        // Never shorter than the slot less a quarter of its slack: shrinking slots to catch up (after a restart,
        // say) must not empty the ring's lead (batch slots of time ahead of the NIC), or the host would fall
        // behind the wire it is catching up with.
        (lo.max(self.cfg.geometry.slot_bytes() - self.shrink_cap()).min(hi), hi)
    }

    /// The length for slot `k` (starting at byte `p`) that makes the next slot start on the first byte at or after
    /// the start of schedule slot `j`, within the slot's bounds, and how far off (ns, positive: late) the next slot
    /// then starts. Leaves the cursors at that next slot's start and at `j`'s, so the following slot's length
    /// costs a few multiplications and 64-bit divisions instead of 128-bit ones.
    fn length_for(&mut self, k: u64, p: u64, j: u64) -> (u32, i128) {
        let target = self.schedule.exact_from(&self.sched_cursor, j);
        let at_p = self.ephc.exact_from(&self.cursor, p);
        // The first byte at or after the target.
        let q = self.ephc.first_reaching_from(&at_p, &target);
        let want = i128::from(q.count()) - i128::from(p) - i128::from(WIRE_OVERHEAD_BYTES);
        let (lo, hi) = self.len_bounds(k);
        let len = want.clamp(i128::from(lo), i128::from(hi)) as u32;
        let next = if i128::from(len) == want {
            q
        } else {
            self.ephc.exact_from(&at_p, p + u64::from(len + WIRE_OVERHEAD_BYTES))
        };
        (self.cursor, self.sched_cursor) = (next, target);
        (len, i128::from(next.time().0) - i128::from(target.time().0))
    }

    /// Apply a synchronisation adjustment (a PTP servo's step or frequency change) to the EPHC, from the first
    /// slot not yet posted on; no count ever changes, and the schedule stays where it is on network time.
    ///
    /// Slots already posted to the NIC keep the clock they were posted under (their frames' outcomes report
    /// that time: the NIC has them, nothing can move them). From the next slot on, the discipline sizes slots by
    /// the adjusted clock: a rate change or a small step is absorbed by the lengths within a slot or two; a step
    /// that leaves the next slot more than half a slot off moves the mapping of wire slots to schedule slots,
    /// and real-time frames in the insertion window move with it to the slot that now carries their schedule
    /// slot — or are rejected with [`Reason::ClockStep`] if that slot is gone, taken or beyond the window.
    /// Before the first poll the link is not up yet and the first poll re-anchors the clock.
    pub fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<ClockAdjusted, EphcError> {
        let from = self.ring.posted();
        let p = self.position(from);
        // Validate on a copy first, so a refused adjustment changes nothing.
        let mut ephc = self.ephc.clone();
        ephc.apply(adj, p)?;
        self.split_clock(p);
        self.ephc = ephc;
        let before = self.counters.rejected[Reason::ClockStep.index()];
        if let ClockAdjust::Step(by) = adj {
            if by != Nanos::ZERO && !self.life.is_down() {
                self.start_acquiring();
            }
        }
        if !self.life.is_down() && self.next_error().abs() > self.tolerance() {
            self.remap(matches!(adj, ClockAdjust::Step(_)), Reason::ClockStep);
        }
        Ok(ClockAdjusted { from_slot: from, rejected: self.counters.rejected[Reason::ClockStep.index()] - before })
    }
}
