//! Phase 4 in the steady state: posting slots while the wire is on its schedule, a few adds and compares each.
//!
//! The general loop of [`Station::post_to`] decides every case a slot can be in: acquiring the schedule after
//! link-up, a step or a restart, lengths clamped at their bounds, skips, spacers, early slots, re-mapping. Once
//! the wire follows the schedule, every slot is the same case: the O(1) step ([`crate::wire::step`]) gives its
//! length and the next slot's error, and no slot is early, clamped, skipped or re-mapped. This loop posts those
//! slots with exactly the bookkeeping the general loop would do for them (alignment, what each carried), and
//! hands any other slot back to the general loop. Identical outputs: `tests/golden.rs`.
//!
//! ```text
//!   per slot k (schedule slot j = k + shift, starting at byte p = the step's):
//!     e = ⌊E(p)⌋ − ⌊S(j)⌋          the step's error, no division
//!     n = next boundary − p         boundary mode: n₀ or n₀ + 1 (one compare); nominal: the slot size
//!     hand back if e < −early, or the slot cannot be n − 20 bytes long (its bounds), or the step leaves its piece
//!     post: length n − 20, carried (j, locked), alignment e; re-map after it if the next error passes half a slot
//! ```

use super::alignment::Run;
use super::grid::Carried;
use super::Station;
use crate::outcome::Reason;
use crate::ring::SlotKind;
use crate::time::{MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};
use crate::wire::step::{Fine, FineCursor, Step};

/// What the loop compares with, fixed for one call.
struct Limits {
    /// A byte time (ns, rounded up): a slot this near its time is locked.
    tol: i64,
    /// How early a slot may start (ns); earlier ones go to the general loop.
    early: i64,
    /// An error beyond this (ns) re-chooses the mapping after the slot.
    remap_at: i64,
    /// Wire bytes (length + 20) a filler may have.
    filler: (u64, u64),
    /// Shortest length (L2 bytes) a disciplined slot may have, and the slot size.
    floor: u32,
    slot: u32,
    discipline: bool,
}

/// The arrays the loop writes, borrowed apart from the station so the loop's state stays in registers.
struct Arrays<'a> {
    /// The ring's lengths and kinds (slot `k` at `k mod N`), and `N`.
    lens: &'a mut [u32],
    kinds: &'a [SlotKind],
    ring: usize,
    /// The track's starts and tags (slot `k` at `k mod len`, a power of two).
    starts: &'a mut [u64],
    tags: &'a mut [Option<Carried>],
    /// The alignment histogram.
    hist: &'a mut [u64],
}

/// Where the loop stopped.
struct Stop {
    /// Slots posted.
    posted: u64,
    /// The last one ended a whole slot off: re-choose the mapping.
    remap: bool,
}

impl<B: AsRef<[u8]>> Station<B> {
    /// Post slots from the next unposted one towards `end` while each is the steady-state case (see the module
    /// doc) and the step is at it. Returns how many it posted.
    pub(super) fn post_steady(&mut self, end: u64) -> u64 {
        let start = self.ring.posted();
        let j = self.schedule_slot_of(start);
        let at = self.track.end();
        // Acquiring (after link-up, a step, a restart): the general loop, slot by slot.
        if self.acquiring || start >= end || j < self.j_end || !self.step.as_ref().is_some_and(|s| s.is_at(at, j)) {
            return 0;
        }
        if let Some(m) = self.post_fine(start, j, at, end) {
            return m;
        }
        let slot = self.cfg.geometry.slot_bytes();
        let overhead = u64::from(WIRE_OVERHEAD_BYTES);
        let (lo, hi) = self.ring.len_range_filler();
        let floor = slot - if self.discipline { self.shrink_cap() } else { 0 };
        let lim = Limits {
            // Small (a byte time, half a slot): i64 throughout.
            tol: self.sizes.tol,
            early: if self.discipline { self.sizes.tol } else { self.sizes.tol.max(self.sizes.half) },
            remap_at: self.sizes.half.saturating_mul(2),
            filler: if self.discipline {
                (u64::from(lo.max(floor).min(hi)) + overhead, u64::from(hi) + overhead)
            } else {
                (0, u64::MAX)
            },
            floor,
            slot,
            discipline: self.discipline,
        };
        let any_real = self.ring.real_frames() > 0;
        let first = self.ring.index(start);
        let ring = self.ring.len() as usize;
        let Some(step) = self.step.as_mut() else { return 0 };
        let (lens, kinds) = self.ring.lens_mut();
        let (starts, tags) = self.track.arrays_mut();
        let arrays = Arrays { lens, kinds, ring, starts, tags, hist: self.align.hist_mut() };
        let mut run = Run::default();
        let at = (start, first, j);
        let stop = match (any_real, self.discipline) {
            (false, true) => steady::<false, true>(step, arrays, &lim, at, end - start, &mut run),
            (true, true) => steady::<true, true>(step, arrays, &lim, at, end - start, &mut run),
            (false, false) => steady::<false, false>(step, arrays, &lim, at, end - start, &mut run),
            (true, false) => steady::<true, false>(step, arrays, &lim, at, end - start, &mut run),
        };
        self.align.merge(&run);
        self.track.posted(stop.posted);
        if stop.posted > 0 {
            self.j_end = j + stop.posted;
        }
        let _ = self.ring.post_to(start + stop.posted);
        if stop.remap {
            self.remap(false, Reason::ClockStep);
        }
        stop.posted
    }
}

impl<B: AsRef<[u8]>> Station<B> {
    /// The fine loop's case of [`Station::post_steady`] (from slot `start`, schedule slot `j`, byte `at`; the step
    /// is there): fillers only on the disciplined wire, both step lengths within a filler's bounds, a byte within
    /// a ns. Posts towards `end` and returns how many; `None` for any other case.
    fn post_fine(&mut self, start: u64, j: u64, at: u64, end: u64) -> Option<u64> {
        if !self.discipline || self.ring.real_frames() > 0 {
            return None;
        }
        let (min, max) = self.sizes.filler;
        let step = self.step.as_mut()?;
        let (n0, n1) = step.distances();
        let m = (end - start).min(step.room(at));
        let (fine, cursor) = step.fine_mut()?;
        // A short slot shorter than a filler may be (64-byte slots on a clock PTP has made fast): the runs of long
        // ones alone, the general loop posts it.
        let short_ok = min <= n0;
        if !(n1 <= max && (short_ok || (min <= n1 && fine.long_runs()))) {
            return None;
        }
        let first = self.ring.index(start);
        let (lens, _) = self.ring.lens_mut();
        let (m, late) = fine_loop(&fine, cursor, (lens, self.track.starts_mut()), (start, first), m, short_ok);
        self.align.record_bits(m, late);
        self.track.posted_run(m, j);
        if m > 0 {
            self.j_end = j + m;
        }
        let _ = self.ring.post_to(start + m);
        Some(m)
    }
}

impl<B: AsRef<[u8]>> Station<B> {
    /// The clamped case of the steady state: fillers only on the disciplined wire, later than its schedule by
    /// more than the slots can make up (the shortest filler still ends after the next schedule slot's start: a
    /// 64-byte slot cannot shrink, so a clock PTP has made fast leaves the wire a little later every slot until a
    /// filler spans two schedule slots — the general loop's skip). Posts, from the next unposted slot towards
    /// `end`, the slots the general loop would post as they are — each the shortest filler, carrying the next
    /// schedule slot, locked, its error recorded — and stops where that loop decides something else (not clamped
    /// any more, or the next slot would start more than a byte time late). Returns how many it posted.
    pub(super) fn post_clamped(&mut self, end: u64) -> u64 {
        let start = self.ring.posted();
        if !self.discipline || self.acquiring || start >= end || self.ring.real_frames() > 0 {
            return 0;
        }
        let (j, at) = (self.schedule_slot_of(start), self.track.end());
        if j < self.j_end || !self.clamp.as_ref().is_some_and(|s| s.is_at(at, j)) {
            return 0;
        }
        let tol = self.sizes.tol;
        let first = self.ring.index(start);
        let ring = self.ring.len() as usize;
        let Some(step) = self.clamp.as_mut() else { return 0 };
        let max = (end - start).min(step.room(at));
        let (lens, _) = self.ring.lens_mut();
        let starts = self.track.starts_mut();
        // Where a byte lasts at most a ns, a run of slots in closed form first (neither array wrapping); then
        // slot by slot.
        let (mut m, mut late) = (0, 0);
        if let Some((fine, cursor)) = step.fine_mut() {
            let si = ((start + 1) & (starts.len() as u64 - 1)) as usize;
            let n = max as usize;
            if let (Some(lens), Some(starts)) = (lens.get_mut(first..first + n), starts.get_mut(si..si + n)) {
                let (q, l) = fine.run_clamped(cursor, lens, starts, u64::from(WIRE_OVERHEAD_BYTES));
                (m, late) = (q as u64, l);
            }
        }
        self.align.record_bits(m, late);
        let mut run = Run::default();
        let i = first + m as usize;
        let at = (start + m, if i >= ring { i - ring } else { i });
        m += clamped(step, (lens, starts, self.align.hist_mut()), &mut run, at, max - m, tol);
        self.align.merge(&run);
        self.track.posted_run(m, j);
        if m > 0 {
            self.j_end = j + m;
        }
        let _ = self.ring.post_to(start + m);
        m
    }
}

/// The clamped loop ([`Station::post_clamped`]): up to `max` slots from `(k, ring index)`; the lengths (ring),
/// starts (track) and alignment histogram it writes; `tol`, a byte time in whole ns.
#[inline(never)]
fn clamped(
    step: &mut Step,
    (lens, starts, hist): (&mut [u32], &mut [u64], &mut [u64]),
    run: &mut Run,
    (k0, mut i): (u64, usize),
    max: u64,
    tol: i64,
) -> u64 {
    let overhead = u64::from(WIRE_OVERHEAD_BYTES);
    let mut c = step.cursor();
    let (ring, smask) = (lens.len(), starts.len() as u64 - 1);
    let mut small = [0u64; 8];
    let mut stats = *run;
    let mut k = k0;
    while k < k0 + max {
        // This slot locked and clamped, the next one starting within a byte time: as the general loop posts it.
        let e = c.error();
        if !(0..=tol).contains(&e) || !step.clamped(&c) {
            break;
        }
        let mut next = c;
        let Some(n) = step.next_if(&mut next, |_| true) else { break };
        if next.error() > tol {
            break; // the general loop decides whether this filler spans two schedule slots
        }
        match small.get_mut(e as usize) {
            Some(count) => *count += 1,
            None => stats.record(hist, e),
        }
        if let Some(len) = lens.get_mut(i) {
            *len = (n - overhead) as u32;
        }
        if let Some(s) = starts.get_mut(((k + 1) & smask) as usize) {
            *s = next.p();
        }
        c = next;
        k += 1;
        i += 1;
        if i == ring {
            i = 0;
        }
    }
    for (e, &count) in small.iter().enumerate() {
        if count > 0 {
            stats.record_many(hist, e as i64, count);
        }
    }
    step.set_cursor(c);
    *run = stats;
    k - k0
}

/// The loop itself: up to `max` slots from `(k, ring index, j)`, the grid locked (not acquiring). `REAL`: the ring
/// may hold real frames (their lengths narrow the bounds); without, every slot is a filler. `BOUNDARY`: the
/// disciplined wire, whose slots start within a byte after their times (never early, never a slot off).
#[inline(never)]
fn steady<const REAL: bool, const BOUNDARY: bool>(
    step: &mut Step,
    a: Arrays<'_>,
    lim: &Limits,
    (k0, mut i, mut j): (u64, usize, u64),
    max: u64,
    run: &mut Run,
) -> Stop {
    let overhead = u64::from(WIRE_OVERHEAD_BYTES);
    let mut c = step.cursor();
    let mut k = k0;
    let end = k0 + max;
    // Errors of 0..8 ns (every slot of a disciplined wire at 1 Gb/s and faster) are counted here and added to the
    // histogram at the end; others are recorded as they come.
    let mut small = [0u64; 8];
    let mut stats = *run;
    let mut remap = false;
    let (tmask, smask) = (a.tags.len() as u64 - 1, a.starts.len() as u64 - 1);
    let Arrays { lens, kinds, ring, starts, tags, hist } = a;
    while k < end {
        let e = c.error();
        if !BOUNDARY && e < -lim.early {
            break;
        }
        let (lo, hi) = if REAL && lim.discipline {
            match kinds.get(i) {
                Some(SlotKind::Real { len, .. }) => {
                    let lo = (len + 4).max(MIN_FRAME_BYTES).max(lim.floor).min(lim.slot);
                    (u64::from(lo) + overhead, u64::from(lim.slot) + overhead)
                }
                _ => lim.filler,
            }
        } else {
            lim.filler
        };
        let start = c.p();
        let Some(n) = step.next_if(&mut c, |n| lo <= n && n <= hi) else { break };
        let near = -lim.tol <= e && e <= lim.tol;
        match small.get_mut(e as u64 as usize) {
            Some(count) => *count += 1,
            None => stats.record(hist, e),
        }
        let e_next = c.error();
        // A disciplined slot that started within a byte of its time ends within a byte of the next one's: no skip
        // to consider (the general loop's case `e_next > tol`), never early, never a slot off.
        debug_assert!(!BOUNDARY || (0..=lim.tol).contains(&e_next), "a stepped slot ends {e_next} ns off");
        if let Some(len) = lens.get_mut(i) {
            *len = (n - overhead) as u32;
        }
        if let Some(t) = tags.get_mut((k & tmask) as usize) {
            *t = Some(Carried { slot: j, locked: near });
        }
        if let Some(s) = starts.get_mut(((k + 1) & smask) as usize) {
            *s = start + n;
        }
        k += 1;
        j += 1;
        i += 1;
        if i == ring {
            i = 0;
        }
        if !BOUNDARY && e_next.unsigned_abs() > lim.remap_at.unsigned_abs() {
            // A whole slot off (the nominal wire drifting): re-choose the mapping, as the general loop does.
            remap = true;
            break;
        }
    }
    for (e, &count) in small.iter().enumerate() {
        if count > 0 {
            stats.record_many(hist, e as i64, count);
        }
    }
    step.set_cursor(c);
    *run = stats;
    Stop { posted: k - k0, remap }
}

/// The fine loop ([`crate::wire::step::Fine`]): `m` filler slots from `(k, ring index)` on the disciplined wire
/// where a byte lasts at most a nanosecond — every slot locked, its error 0 or 1 ns, the schedule slots it carries
/// recorded as one run ([`super::posted::Posted::posted_run`]). The arrays are walked in runs that do not wrap, so
/// the loop has no index checks. Returns how many slots were late by 1 ns.
#[inline(never)]
fn fine_loop(
    fine: &Fine,
    cursor: &mut FineCursor,
    (lens, starts): (&mut [u32], &mut [u64]),
    (k, mut i): (u64, usize),
    m: u64,
    short_ok: bool,
) -> (u64, u64) {
    let overhead = u64::from(WIRE_OVERHEAD_BYTES);
    let (ring, cap) = (lens.len(), starts.len());
    // The start written for slot k is that of slot k + 1.
    let mut si = ((k + 1) & (cap as u64 - 1)) as usize;
    let m = m as usize;
    // Usually neither array wraps: one run.
    if let (Some(lens), Some(starts)) = (lens.get_mut(i..i + m), starts.get_mut(si..si + m)) {
        let (n, late) = fine.run(cursor, lens, starts, overhead, short_ok);
        return (n as u64, late);
    }
    let mut late = 0u64;
    let mut done = 0usize;
    while done < m {
        let run = (m - done).min(ring - i).min(cap - si);
        let (n, l) = fine.run(cursor, &mut lens[i..i + run], &mut starts[si..si + run], overhead, short_ok);
        late += l;
        done += n;
        if n < run {
            break;
        }
        i += run;
        if i == ring {
            i = 0;
        }
        si += run;
        if si == cap {
            si = 0;
        }
    }
    (done as u64, late)
}
