//! The EPHC: an emulated PTP hardware clock whose ticks are transmitted slots.
//!
//! `time(count) = count·period + offset` (paper §3.2). Slot `k` starts on the wire at `time(k)`, and a frame
//! scheduled at `t` belongs in slot `slot_of(t)`, the `k` with `time(k) ≤ t < time(k+1)`.
//!
//! Adjustments never change the slot count, and every one except an explicit [`Ephc::step`]/[`Ephc::set_time`]
//! keeps time continuous:
//!
//! - **rate** ([`Ephc::set_rate_ppt`]): the period becomes `δ·(1 + ppt/10¹²)` from the given count on; the clock
//!   is re-anchored there so `time` does not move. Parts per trillion are 1000× finer than the ppb of
//!   `adjfine`, so no PTP servo correction is ever truncated away (the prototype's integer-ns period lost every
//!   correction below ~80 ppm).
//! - **slew** ([`Ephc::slew`]): gain or lose `d` over `n` slots by running fast or slow, then return to the
//!   base rate.
//! - **step** ([`Ephc::step`], [`Ephc::set_time`]): a deliberate jump of the offset.
//!
//! Representation: the clock is a piecewise-linear function of the count, anchored at `(count₀, ns₀ + frac₀/D)`
//! with slope `A/D` ns per slot, `A = num·(10¹² + ppt)`, `D = den·10¹²`. All arithmetic is exact in `i128`;
//! only [`Ephc::time_of`] floors to whole nanoseconds. Re-anchoring at every adjustment keeps the products
//! small: `(k − count₀)·A < 10^36` for ten years at 100 Gb/s.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::time::{Nanos, SlotPeriod, Tai};

/// Parts per trillion in one unit (the rate scale).
const PPT_ONE: i128 = 1_000_000_000_000;

/// Largest frequency adjustment accepted, in ppt (±1000 ppm).
pub const MAX_PPT: i64 = 1_000_000_000;

/// Errors of clock adjustment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EphcError {
    /// A frequency adjustment beyond ±1000 ppm.
    RateOutOfRange(i64),
    /// A step that would take the clock beyond ±2^62 ns (about 146 years either side of 1970).
    StepOutOfRange(Nanos),
    /// A slew that would need more than ±1000 ppm, or a slew over zero slots.
    SlewTooFast {
        /// Requested correction.
        by: Nanos,
        /// Slots to spread it over.
        over_slots: u64,
    },
}

impl fmt::Display for EphcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EphcError::RateOutOfRange(p) => {
                write!(f, "frequency adjustment {p} ppt is beyond ±{MAX_PPT} ppt (±1000 ppm)")
            }
            EphcError::StepOutOfRange(by) => {
                write!(f, "a step of {} ns would take the clock beyond ±2^62 ns", by.0)
            }
            EphcError::SlewTooFast { by, over_slots } => {
                write!(f, "slewing {by} over {over_slots} slots needs more than ±1000 ppm; step instead")
            }
        }
    }
}

/// One adjustment of the clock, as a PTP servo asks for it. Applying one never changes the slot count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockAdjust {
    /// Jump every slot's time by this much ([`Ephc::step`]).
    Step(Nanos),
    /// Set the absolute frequency adjustment to this many parts per trillion from the given slot on, keeping
    /// time continuous there ([`Ephc::set_rate_ppt`]).
    Rate(i64),
}

/// One linear piece of the clock: `time(k) = ns + (frac + (k − start)·a) / d`. `a = whole·d + part` (in 64 bits,
/// `d64 = 0` where `d` does not fit) and `inv_d` (the bits of `1/d` as an `f64`) are kept to step along the piece
/// without division ([`Exact`]), with `inv_a` (`1/a`) to estimate a count from a time; `id` names this piece (no two pieces built or moved anywhere share one), so an
/// [`Exact`] knows whether it still applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    start: u64,
    ns: i64,
    frac: i128,
    a: i128,
    d: i128,
    whole: i64,
    part: u64,
    d64: u64,
    inv_d: u64,
    inv_a: u64,
    id: u64,
}

/// A fresh [`Segment::id`].
fn fresh_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn floor_div(x: i128, y: i128) -> i128 {
    let q = x / y;
    if (x - q * y != 0) && ((x < 0) != (y < 0)) {
        q - 1
    } else {
        q
    }
}

/// `x` as an `f64`, to within a few units in its last place, in a few instructions (`as f64` on an `i128` is a
/// library call).
#[inline]
fn approx(x: i128) -> f64 {
    let m = x.unsigned_abs();
    let v = ((m >> 64) as u64 as f64) * 18_446_744_073_709_551_616.0 + (m as u64 as f64);
    if x < 0 {
        -v
    } else {
        v
    }
}

/// `⌊x / y⌋` for `y > 0`, from `inv_y` (the bits of `1/y` as an `f64`): a floating-point estimate corrected by
/// one exact multiplication, without 128-bit division (a library call of some hundred instructions) where the
/// estimate is within one of the quotient — always while the quotient stays below 2^52 — and otherwise refined
/// once more on the remainder ([`floor_div_far`]).
#[inline(always)]
fn floor_div_by(x: i128, y: i128, inv_y: u64) -> i128 {
    let inv = f64::from_bits(inv_y);
    // Truncated (this crate has no floating-point floor): the correction takes it to the floor.
    let q0 = approx(x) * inv;
    if q0.abs() < 4_503_599_627_370_496.0 {
        let q = q0 as i64 as i128;
        let r = x - q * y;
        if r < 0 {
            if r >= -y {
                return q - 1;
            }
        } else if r < y {
            return q;
        } else if r < 2 * y {
            return q + 1;
        }
    }
    floor_div_far(x, y, inv)
}

/// [`floor_div_by`] where the estimate is further off: once more on the remainder while the quotient is within
/// ±2^62, exactly beyond.
#[cold]
#[inline(never)]
fn floor_div_far(x: i128, y: i128, inv: f64) -> i128 {
    let q0 = approx(x) * inv;
    if q0.abs() < 4_611_686_018_427_387_904.0 {
        let mut q = q0 as i64 as i128;
        let mut r = x - q * y;
        let dq = (approx(r) * inv) as i64 as i128;
        q += dq;
        r -= dq * y;
        if r < 0 {
            (q, r) = (q - 1, r + y);
        } else if r >= y {
            (q, r) = (q + 1, r - y);
        }
        if (0..y).contains(&r) {
            return q;
        }
    }
    floor_div(x, y)
}

impl Segment {
    fn new(start: u64, ns: i64, frac: i128, period: SlotPeriod, ppt: i64) -> Segment {
        let a = i128::from(period.num()) * (PPT_ONE + i128::from(ppt));
        let d = i128::from(period.den()) * PPT_ONE;
        let inv_d = (1.0 / d as f64).to_bits();
        let fits = (d < 1 << 62) && (a / d < 1 << 40);
        let (whole, part, d64) = if fits { ((a / d) as i64, (a % d) as u64, d as u64) } else { (0, 0, 0) };
        let inv_a = (1.0 / a as f64).to_bits();
        Segment { start, ns, frac, a, d, whole, part, d64, inv_d, inv_a, id: fresh_id() }
    }

    /// Exact start of slot `k` as (whole ns, remainder in 1/d ns), remainder in `[0, d)`.
    fn exact_at(&self, k: u64) -> (i64, i128) {
        let dk = i128::from(k) - i128::from(self.start);
        let x = self.frac + dk * self.a;
        let q = floor_div_by(x, self.d, self.inv_d);
        // Beyond ±2^63 ns (about 292 years from 1970) the time saturates; nothing keepon schedules gets there (the
        // configuration bounds every span), but slot numbers derived from untrusted times must not wrap.
        let ns = i64::try_from(i128::from(self.ns) + q).unwrap_or(if q < 0 { i64::MIN } else { i64::MAX });
        (ns, x - q * self.d)
    }

    fn time_of(&self, k: u64) -> Tai {
        Tai(self.exact_at(k).0)
    }

    /// The least `k ≥ 0` with `time_of(k) ≥ t`: `time_of(k) ≥ t ⇔ frac + dk·a ≥ (t − ns)·d`. `None` beyond the
    /// count's range.
    fn first_at_or_after(&self, t: Tai) -> Option<u64> {
        let need = (i128::from(t.0) - i128::from(self.ns)) * self.d - self.frac;
        let dk = -floor_div_by(-need, self.a, self.inv_a);
        u64::try_from((i128::from(self.start) + dk).max(0)).ok()
    }

    /// The `k` with `time_of(k) ≤ t < time_of(k+1)`, or `None` before slot 0.
    fn slot_of(&self, t: Tai) -> Option<u64> {
        // time_of(k) ≤ t  ⇔  frac + dk·a < (t − ns + 1)·d  ⇔  dk ≤ ⌊((t − ns + 1)·d − frac − 1) / a⌋
        let r = i128::from(t.0) - i128::from(self.ns);
        let dk = floor_div_by((r + 1) * self.d - self.frac - 1, self.a, self.inv_a);
        u64::try_from(i128::from(self.start) + dk).ok()
    }
}

/// The exact time of one count, kept to find nearby counts' times without 128-bit division.
///
/// The poll loop asks, slot after slot, for the time of a byte a slot further on and for the first byte at or
/// after the next schedule time: from an `Exact` of a count before it on the same piece of the clock, both take
/// a few multiplications and one 64-bit division instead of two 128-bit ones
/// ([`Ephc::exact_from`], [`Ephc::first_at_or_after_from`]). An `Exact` remembers the piece it was computed on; if
/// the clock has been adjusted since (another piece governs the count asked for), the answer is computed afresh,
/// so a stale one is never wrong, only slower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exact {
    /// The [`Segment::id`] of the piece it was computed on.
    seg: u64,
    k: u64,
    ns: i64,
    /// Below a nanosecond, in `1/d` ns of `seg`: `[0, d)`.
    rem: i128,
    /// `seg`'s denominator (so two clocks' exact times compare: the schedule's and the EPHC's).
    d: i128,
}

impl Exact {
    /// The count.
    pub fn count(&self) -> u64 {
        self.k
    }

    /// Its start time, floored to whole ns (as [`Ephc::time_of`]).
    pub fn time(&self) -> Tai {
        Tai(self.ns)
    }

    /// Its exact start as `(numerator, denominator)` ns: `ns + rem/d`.
    pub fn fraction(&self) -> (i128, i128) {
        (i128::from(self.ns) * self.d + self.rem, self.d)
    }

    /// Whether it starts at or after `t`, exactly (below a nanosecond too; `t` may be another clock's).
    pub fn reaches(&self, t: &Exact) -> bool {
        self.ns > t.ns || (self.ns == t.ns && self.rem * t.d >= t.rem * self.d)
    }

    /// `t`'s part below a nanosecond in `1/d` ns, rounded up: a time of the `1/d` lattice is at or after `t` iff
    /// its remainder is at least this (in the same whole nanosecond).
    fn rem_in(t: &Exact, d: i128) -> i128 {
        if t.d == d {
            t.rem
        } else {
            -floor_div(-(t.rem * d), t.d)
        }
    }
}

impl Segment {
    fn exact(&self, k: u64) -> Exact {
        let (ns, rem) = self.exact_at(k);
        Exact { seg: self.id, k, ns, rem, d: self.d }
    }

    /// The exact time `n` counts after `from` (on this segment), without division: `n·a/d` is `n·whole` ns plus
    /// the carry of `rem + n·part` (below `(n + 1)·d`), estimated in floating point and corrected exactly. `None`
    /// where the numbers leave 64 bits (up to about 2²⁰ counts on; the caller then divides).
    fn step_from(&self, from: &Exact, n: u64) -> Option<Exact> {
        let d = self.d64;
        if d == 0 || n >= 1 << 20 {
            return None;
        }
        // rem < d < 2^62 and part < d: y < 2^83 in 128 bits (one multiplication), used only below 2^63.
        let y = u128::from(from.rem as u64) + u128::from(n) * u128::from(self.part);
        let y = u64::try_from(y).ok().filter(|y| *y < 1 << 63)?;
        // The estimate is off by at most one either way (y/d < 2^52); the correction makes it exact.
        let mut carry = ((y as i64) as f64 * f64::from_bits(self.inv_d)) as u64;
        if carry * d > y {
            carry -= 1;
        } else if y - carry * d >= d {
            carry += 1;
        }
        let ns = from.ns.checked_add((n as i64) * self.whole + carry as i64)?;
        Some(Exact { seg: self.id, k: from.k + n, ns, rem: i128::from(y - carry * d), d: self.d })
    }
}

/// The linear piece of an [`Ephc`] that governs a count, for stepping along it with integer accumulators
/// ([`crate::wire::step`]): `time(k + n) = time(k) + n·a/d` exactly while `k + n ≤ end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Line {
    /// The piece's identity ([`Exact`]s computed on it carry it).
    pub(crate) id: u64,
    /// Slope numerator: ns per count is `a/d`.
    pub(crate) a: i128,
    /// Slope denominator; an [`Exact`] of this piece has its remainder in `1/d` ns.
    pub(crate) d: i128,
    /// The last count the piece governs together with the next one (the next piece starts there with the same
    /// exact time), or `u64::MAX`.
    pub(crate) end: u64,
}

/// A fixed advance of `n` counts along one piece of an [`Ephc`], computed once per piece: stepping an [`Exact`]
/// by it is two adds and a compare ([`Stride::step`]). The byte clock posts most descriptors at one length (the
/// longest filler); this is their step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stride {
    seg: u64,
    n: u64,
    whole: i64,
    part: u64,
    d: u64,
    /// The last count the piece governs (`u64::MAX`: every later one).
    end: u64,
}

impl Stride {
    /// The counts it advances by.
    #[inline]
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether it advances by nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// `from` advanced by [`Stride::len`] counts, if both are on this stride's piece (else `None`: the caller asks
    /// the clock, [`Ephc::exact_from`]).
    #[inline]
    pub fn step(&self, from: &Exact) -> Option<Exact> {
        let k = from.k.checked_add(self.n)?;
        if from.seg != self.seg || k > self.end {
            return None;
        }
        // rem < d < 2^62 and part < d: no overflow.
        let mut rem = from.rem as u64 + self.part;
        let mut ns = from.ns.checked_add(self.whole)?;
        if rem >= self.d {
            rem -= self.d;
            ns = ns.checked_add(1)?;
        }
        Some(Exact { seg: self.seg, k, ns, rem: i128::from(rem), d: from.d })
    }

    /// Step `from` by this stride `n` times, handing each start time on the way (floored; `from`'s first) to
    /// `each`, and return the exact time after the last step: `None`, with nothing handed, if `from` is not on this
    /// stride's piece or the steps would leave it.
    #[inline]
    pub fn run(&self, from: &Exact, n: u64, mut each: impl FnMut(Tai)) -> Option<Exact> {
        let k = from.k.checked_add(self.n.checked_mul(n)?)?;
        if from.seg != self.seg || k > self.end {
            return None;
        }
        // Whole ns after the last step, at most: checked once, so no step below can overflow.
        let steps = i64::try_from(n).ok()?;
        from.ns.checked_add(self.whole.checked_add(1)?.checked_mul(steps)?)?;
        let (mut ns, mut rem) = (from.ns, from.rem as u64);
        for _ in 0..n {
            each(Tai(ns));
            ns += self.whole;
            rem += self.part;
            if rem >= self.d {
                rem -= self.d;
                ns += 1;
            }
        }
        Some(Exact { seg: self.seg, k, ns, rem: i128::from(rem), d: from.d })
    }
}

impl Exact {
    /// `(piece id, count, whole ns, remainder in 1/d ns)`.
    pub(crate) fn parts(&self) -> (u64, u64, i64, i128) {
        (self.seg, self.k, self.ns, self.rem)
    }
}

/// The emulated PTP hardware clock of one keepon link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ephc {
    nominal: SlotPeriod,
    base_ppt: i64,
    slew: Option<Slew>,
    seg: Segment,
    /// The base-rate piece that follows an active slew.
    after_slew: Option<Segment>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slew {
    end: u64,
    extra_ppt: i64,
}

impl Ephc {
    /// A clock on which slot `count` starts at `t`, running at the nominal period.
    pub fn new(nominal: SlotPeriod, count: u64, t: Tai) -> Ephc {
        Ephc { nominal, base_ppt: 0, slew: None, seg: Segment::new(count, t.0, 0, nominal, 0), after_slew: None }
    }

    /// The same clock with its piece re-based at count `k`: every count keeps its exact time, and conversions
    /// near `k` stay within the division-free range ([`floor_div_by`]: quotients below 2^52). A clock counted from
    /// far back (the schedule grid's slot 0 lies about 2^62 ns before the epoch) otherwise divides in 128 bits at
    /// every conversion. Only a clock without a slew in progress is re-based (others are returned as they are).
    pub(crate) fn rebased(mut self, k: u64) -> Ephc {
        if self.slew.is_some() || self.after_slew.is_some() {
            return self;
        }
        let (ns, rem) = self.seg.exact_at(k);
        self.seg = Segment::new(k, ns, rem, self.nominal, self.base_ppt);
        self
    }

    fn piece(&self, k: u64) -> &Segment {
        match &self.after_slew {
            Some(next) if k >= next.start => next,
            _ => &self.seg,
        }
    }

    /// The identity of the piece that governs count `k` ([`Line::id`]).
    #[inline]
    pub(crate) fn piece_id(&self, k: u64) -> u64 {
        self.piece(k).id
    }

    /// The piece that governs count `k` ([`Line`]).
    pub(crate) fn line(&self, k: u64) -> Line {
        let seg = self.piece(k);
        let end = match &self.after_slew {
            Some(next) if seg.id != next.id => next.start,
            _ => u64::MAX,
        };
        Line { id: seg.id, a: seg.a, d: seg.d, end }
    }

    /// Start time of slot `k` (floored to whole ns).
    pub fn time_of(&self, k: u64) -> Tai {
        self.piece(k).time_of(k)
    }

    /// The slot whose interval `[time_of(k), time_of(k+1))` contains `t`; `None` for times before slot 0.
    pub fn slot_of(&self, t: Tai) -> Option<u64> {
        match &self.after_slew {
            Some(next) if t >= next.time_of(next.start) => next.slot_of(t),
            _ => self.seg.slot_of(t),
        }
    }

    /// The first slot starting at or after `t`: the least `k` with `time_of(k) ≥ t` (with a period below a
    /// nanosecond several slots share a floored time; this is the first of them).
    pub fn slot_at_or_after(&self, t: Tai) -> Option<u64> {
        match &self.after_slew {
            Some(next) if t > next.time_of(next.start) => next.first_at_or_after(t),
            _ => self.seg.first_at_or_after(t),
        }
    }

    /// The exact time of count `k` ([`Exact`]).
    pub fn exact(&self, k: u64) -> Exact {
        self.piece(k).exact(k)
    }

    /// The exact time of count `k`, found from `near` (a count at or before `k`) without 128-bit division while
    /// one piece of the clock, the one `near` was computed on, governs both.
    pub fn exact_from(&self, near: &Exact, k: u64) -> Exact {
        let seg = self.piece(k);
        if seg.id == near.seg && near.k <= k && self.piece(near.k).id == near.seg {
            if k == near.k {
                return *near;
            }
            if let Some(e) = seg.step_from(near, k - near.k) {
                return e;
            }
        }
        seg.exact(k)
    }

    /// The advance of `n` counts along the piece that governs count `k` ([`Stride`]); `None` where its numbers do
    /// not fit 64 bits.
    pub fn stride(&self, k: u64, n: u64) -> Option<Stride> {
        let seg = self.piece(k);
        let end = match &self.after_slew {
            Some(next) if seg.id != next.id => next.start,
            _ => u64::MAX,
        };
        if seg.d64 == 0 {
            return None;
        }
        let x = seg.a.checked_mul(i128::from(n))?;
        let whole = i64::try_from(x / seg.d).ok()?;
        Some(Stride { seg: seg.id, n, whole, part: (x % seg.d) as u64, d: seg.d64, end })
    }

    /// The first count at or after `t` ([`Ephc::slot_at_or_after`]) with its exact time, found from `near` (a count
    /// whose time is at or before `t`) without 128-bit division while one piece of the clock governs both: the
    /// count is estimated in floating point and corrected exactly.
    pub fn first_at_or_after_from(&self, near: &Exact, t: Tai) -> Exact {
        let whole = Exact { seg: 0, k: 0, ns: t.0, rem: 0, d: 1 };
        self.first_reaching_from(near, &whole)
    }

    /// The first count whose exact start is at or after `t`'s exact start (`t` a time of this clock or another,
    /// below a nanosecond too), found from `near` as [`Ephc::first_at_or_after_from`]. The disciplined wire asks
    /// this of the schedule's slot starts: comparing floored times instead would let a slot start up to a byte
    /// before its schedule time wherever the schedule's fraction of a nanosecond lies above the byte's.
    pub fn first_reaching_from(&self, near: &Exact, t: &Exact) -> Exact {
        let seg = self.piece(near.k);
        if seg.id == near.seg && !near.reaches(t) {
            // time(near.k + n) ≥ t  ⇔  rem + n·a ≥ (t − ns)·d + t's remainder in 1/d: the least such n.
            let need = (i128::from(t.ns) - i128::from(near.ns)) * seg.d + Exact::rem_in(t, seg.d) - near.rem;
            let reaches = |n: u64| i128::from(n) * seg.a >= need;
            if let Ok(need) = i64::try_from(need.max(0)) {
                let mut n = (need as f64 * f64::from_bits(seg.inv_a)) as u64;
                for _ in 0..4 {
                    if !reaches(n) {
                        n += 1;
                    } else if n > 0 && reaches(n - 1) {
                        n -= 1;
                    } else if let Some(e) = seg.step_from(near, n).filter(|e| self.piece(e.k).id == near.seg) {
                        return e;
                    } else {
                        break;
                    }
                }
            }
        }
        // Afresh: the first count at or after `t`'s whole nanosecond, then the few (with a period below a
        // nanosecond) that share it until one reaches `t` exactly.
        let mut k = self.slot_at_or_after(Tai(t.ns)).unwrap_or(0);
        loop {
            let e = self.piece(k).exact(k);
            if e.reaches(t) || k == u64::MAX {
                return e;
            }
            k += 1;
        }
    }

    /// The paper's `offset`: the time at which slot 0 would have started at the current rate.
    pub fn offset(&self) -> Tai {
        self.seg.time_of(0)
    }

    /// The nominal slot period δ.
    pub fn nominal_period(&self) -> SlotPeriod {
        self.nominal
    }

    /// The steady-state frequency adjustment, parts per trillion.
    pub fn rate_ppt(&self) -> i64 {
        self.base_ppt
    }

    /// The frequency adjustment in force at slot `k` (the steady-state one, plus a slew's extra rate while it
    /// lasts), parts per trillion.
    pub fn rate_at(&self, k: u64) -> i64 {
        self.base_ppt + self.slew.filter(|s| k < s.end).map_or(0, |s| s.extra_ppt)
    }

    /// `ns` of the oscillator's time (the slots' own clock) at slot `k`, in this clock's time: what the clock
    /// advances while the oscillator runs `ns` without counting slots (a gap in the stream).
    pub fn scaled(&self, k: u64, ns: i128) -> i128 {
        let rate = self.rate_at(k);
        // Within a slot or a gap of a few seconds the product fits 64 bits: a division by a constant, no call.
        match i64::try_from(ns).ok().and_then(|n| n.checked_mul(rate)) {
            Some(x) => ns + i128::from(x / PPT_ONE as i64),
            None => ns + ns * i128::from(rate) / PPT_ONE,
        }
    }

    /// The inverse of [`Ephc::scaled`]: `ns` of this clock's time at slot `k`, in the oscillator's time.
    pub fn unscaled(&self, k: u64, ns: i128) -> i128 {
        ns * PPT_ONE / (PPT_ONE + i128::from(self.rate_at(k)))
    }

    /// True while a slew is in progress at slot `k`.
    pub fn slewing_at(&self, k: u64) -> bool {
        self.slew.is_some_and(|s| k < s.end)
    }

    /// Rebuild the pieces so that the clock keeps its exact value at `at` and runs at the current base rate
    /// (plus the slew's extra rate until its end).
    fn rebuild(&mut self, at: u64, ns: i64, frac: i128) {
        let slewing = self.slew.filter(|s| at < s.end);
        self.slew = slewing;
        let extra = slewing.map_or(0, |s| s.extra_ppt);
        self.seg = Segment::new(at, ns, frac, self.nominal, self.base_ppt + extra);
        self.after_slew = slewing.map(|s| {
            let (ns, frac) = self.seg.exact_at(s.end);
            Segment::new(s.end, ns, frac, self.nominal, self.base_ppt)
        });
    }

    /// Set the frequency adjustment to `ppt` from slot `at` on, keeping time continuous there.
    pub fn set_rate_ppt(&mut self, ppt: i64, at: u64) -> Result<(), EphcError> {
        if !(-MAX_PPT..=MAX_PPT).contains(&ppt) {
            return Err(EphcError::RateOutOfRange(ppt));
        }
        let (ns, frac) = self.piece(at).exact_at(at);
        self.base_ppt = ppt;
        self.rebuild(at, ns, frac);
        Ok(())
    }

    /// Gain `by` (lose, if negative) over the `over_slots` slots from `at`, continuously, then run at the base
    /// rate again. Replaces any slew in progress. The achieved correction is exact to within
    /// `over_slots·δ·10⁻¹²` (rate resolution), far below a nanosecond.
    pub fn slew(&mut self, by: Nanos, over_slots: u64, at: u64) -> Result<(), EphcError> {
        let err = EphcError::SlewTooFast { by, over_slots };
        if over_slots == 0 {
            return Err(err);
        }
        // extra/10¹² · over·num/den = by  ⇒  extra = by·den·10¹² / (over·num), rounded to nearest.
        let numer = i128::from(by.0) * i128::from(self.nominal.den()) * PPT_ONE;
        let denom = i128::from(over_slots) * i128::from(self.nominal.num());
        let extra = floor_div(2 * numer + denom, 2 * denom);
        let total = extra + i128::from(self.base_ppt);
        if !(-i128::from(MAX_PPT)..=i128::from(MAX_PPT)).contains(&total) {
            return Err(err);
        }
        let (ns, frac) = self.piece(at).exact_at(at);
        self.slew = Some(Slew { end: at.saturating_add(over_slots), extra_ppt: extra as i64 });
        self.rebuild(at, ns, frac);
        Ok(())
    }

    /// Jump the clock by `by` (the paper's `adjtime`). The count is unchanged.
    pub fn step(&mut self, by: Nanos) {
        self.seg.ns += by.0;
        self.seg.id = fresh_id();
        if let Some(next) = &mut self.after_slew {
            next.ns += by.0;
            next.id = fresh_id();
        }
    }

    /// Make slot `at` start at `t` exactly (settime; also used to re-anchor after an underrun). Cancels a slew.
    pub fn set_time(&mut self, t: Tai, at: u64) {
        self.slew = None;
        self.rebuild(at, t.0, 0);
    }

    /// Apply `adj` at slot `at` (a rate change takes effect there; a step moves every slot).
    pub fn apply(&mut self, adj: ClockAdjust, at: u64) -> Result<(), EphcError> {
        match adj {
            ClockAdjust::Step(by) => {
                // (Steps come from a servo that reads the network: an absurd one is refused, never wraps.)
                const BOUND: i64 = 1 << 62;
                let fits = |ns: i64| ns.checked_add(by.0).is_some_and(|t| (-BOUND..=BOUND).contains(&t));
                if !fits(self.seg.ns) || self.after_slew.is_some_and(|n| !fits(n.ns)) {
                    return Err(EphcError::StepOutOfRange(by));
                }
                self.step(by);
                Ok(())
            }
            ClockAdjust::Rate(ppt) => self.set_rate_ppt(ppt, at),
        }
    }

    /// Drop pieces that lie entirely before slot `count`; call as the count advances. Never changes a time.
    pub fn advance(&mut self, count: u64) {
        if let Some(next) = self.after_slew {
            if count >= next.start {
                self.seg = next;
                self.after_slew = None;
                self.slew = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{LinkRate, SlotGeometry};
    use proptest::prelude::*;

    fn geom(mbps: u64, bytes: u32) -> SlotGeometry {
        SlotGeometry::new(LinkRate::from_mbps(mbps).unwrap(), bytes).unwrap()
    }

    /// A clock re-based at a count keeps every count's exact time and every time's count, near the new base and
    /// far from it (the schedule grid counts from about 2^62 ns before the epoch and is re-based at the present).
    #[test]
    fn a_rebased_clock_keeps_every_time() {
        let back = Tai(-(1i64 << 62) - 155_648);
        let far = Ephc::new(geom(100_000, 64).period(), 0, back);
        let near = far.slot_at_or_after(Tai(1_700_000_000_000_000_000)).unwrap();
        let re = far.clone().rebased(near);
        for k in [0, 1, near / 2, near - 1, near, near + 1, near + 1_000_000_007, near * 2] {
            assert_eq!(re.exact(k).fraction(), far.exact(k).fraction(), "count {k}");
            assert_eq!(re.time_of(k), far.time_of(k), "count {k}");
        }
        for t in [back.0 + 1, -1, 0, 1_700_000_000_000_000_000, 1_700_000_000_000_000_003, i64::MAX / 2] {
            assert_eq!(re.slot_of(Tai(t)), far.slot_of(Tai(t)), "time {t}");
            assert_eq!(re.slot_at_or_after(Tai(t)), far.slot_at_or_after(Tai(t)), "time {t}");
        }
    }

    /// A step that would take the clock out of range is refused and changes nothing (a servo reads the network:
    /// found by the station fuzz check, it used to overflow).
    #[test]
    fn an_absurd_step_is_refused() {
        let mut e = Ephc::new(geom(1000, 125).period(), 0, Tai(1_000_000_000));
        let before = e.clone();
        for by in [i64::MAX, i64::MIN, (1 << 62) - 999_999_999, -(1 << 62) - 1_000_000_001] {
            assert_eq!(e.apply(ClockAdjust::Step(Nanos(by)), 5), Err(EphcError::StepOutOfRange(Nanos(by))));
            assert_eq!(e, before);
        }
        assert_eq!(e.apply(ClockAdjust::Step(Nanos(-1_000_000_000)), 5), Ok(()));
        assert_eq!(e.time_of(0), Tai(0));
    }

    #[test]
    fn slot_arithmetic_matches_the_paper_example() {
        // 1 Gb/s, 1230 B: δ = 10 µs.
        let c = Ephc::new(geom(1000, 1230).period(), 0, Tai(1_000_000));
        assert_eq!(c.time_of(0), Tai(1_000_000));
        assert_eq!(c.time_of(32), Tai(1_320_000));
        assert_eq!(c.slot_of(Tai(1_319_999)), Some(31));
        assert_eq!(c.slot_of(Tai(1_320_000)), Some(32));
        assert_eq!(c.slot_of(Tai(999_999)), None);
        assert_eq!(c.offset(), Tai(1_000_000));
    }

    #[test]
    fn fractional_period_round_trips() {
        let c = Ephc::new(geom(10_000, 64).period(), 0, Tai(0)); // 67.2 ns
        for k in 0..1000 {
            let t = c.time_of(k);
            assert_eq!(c.slot_of(t), Some(k));
            assert_eq!(c.slot_of(Tai(c.time_of(k + 1).0 - 1)), Some(k));
        }
        assert_eq!(c.time_of(5), Tai(336));
    }

    #[test]
    fn rate_change_is_continuous_and_exact() {
        let mut c = Ephc::new(geom(1000, 300).period(), 0, Tai(0)); // 2560 ns
        let before = c.time_of(1000);
        c.set_rate_ppt(1_000_000, 1000).unwrap(); // +1 ppm
        assert_eq!(c.time_of(1000), before);
        // 10^6 slots later the clock has gained 1 ppm of 2.56 s = 2560 ns.
        assert_eq!(c.time_of(1_001_000).0 - before.0, 2_560_000_000 + 2_560);
        assert_eq!(c.set_rate_ppt(MAX_PPT + 1, 0), Err(EphcError::RateOutOfRange(MAX_PPT + 1)));
    }

    #[test]
    fn slew_gains_exactly_then_returns_to_base() {
        let mut c = Ephc::new(geom(1000, 300).period(), 0, Tai(0));
        c.slew(Nanos(500), 100_000, 10).unwrap();
        assert!(c.slewing_at(50));
        let end = 10 + 100_000;
        assert_eq!(c.time_of(end).0, end as i64 * 2560 + 500);
        assert_eq!(c.time_of(end + 10).0, (end + 10) as i64 * 2560 + 500);
        c.advance(end + 1);
        assert!(!c.slewing_at(end + 1));
        assert_eq!(c.time_of(end + 10).0, (end + 10) as i64 * 2560 + 500);
        assert!(c.slew(Nanos(1_000_000), 10, 0).is_err());
    }

    #[test]
    fn ten_years_at_100g_keep_exact() {
        let g = geom(100_000, 64);
        let mut c = Ephc::new(g.period(), 0, Tai(0));
        let k = g.slots_per_second() * 3600 * 24 * 3660;
        let t = c.time_of(k);
        assert_eq!(t.0 as u128, g.period().floor_mul(k));
        assert_eq!(c.slot_of(t), Some(k));
        c.set_rate_ppt(-MAX_PPT, 0).unwrap();
        let t = c.time_of(k);
        assert_eq!(c.slot_of(t), Some(k));
    }

    proptest! {

        /// The division without 128-bit division ([`floor_div_by`]) is the floor, for quotients of any size and
        /// divisors of every scale the clocks use.
        #[test]
        fn floor_div_by_is_the_floor(x in any::<i128>(), y in 1i128..(1i128 << 100), shift in 0u32..100) {
            let x = x >> shift;
            let y = (y >> shift).max(1);
            let inv = (1.0 / y as f64).to_bits();
            prop_assert_eq!(floor_div_by(x, y, inv), floor_div(x, y));
            prop_assert_eq!(floor_div_by(x % (y * 1000), y, inv), floor_div(x % (y * 1000), y));
        }
        /// Clock continuity: random rate changes and slews never move the time of the slot they are applied at,
        /// never change the count↔time bijection, and time stays strictly increasing.
        #[test]
        fn adjustments_keep_time_continuous(
            mbps in prop::sample::select(vec![100u64, 1000, 2500, 10_000, 25_000, 100_000]),
            bytes in 64u32..1600,
            ops in prop::collection::vec((0u64..5_000_000, -MAX_PPT / 2..MAX_PPT / 2, -2_000i64..2_000, any::<bool>()), 1..20),
        ) {
            let g = geom(mbps, bytes);
            let mut c = Ephc::new(g.period(), 0, Tai(1_700_000_000_000_000_000));
            let mut at = 0u64;
            for (dk, ppt, slew_ns, is_slew) in ops {
                at += dk;
                let before = c.time_of(at);
                let probe = [at.saturating_sub(3), at, at + 1, at + 7, at + 1_000_003];
                if is_slew {
                    c.slew(Nanos(slew_ns), 1_000_000, at).unwrap();
                } else {
                    c.set_rate_ppt(ppt, at).unwrap();
                }
                prop_assert_eq!(c.time_of(at), before);
                let mut last = None;
                for k in probe {
                    let t = c.time_of(k);
                    prop_assert_eq!(c.slot_of(t), Some(k));
                    if let Some(prev) = last { prop_assert!(t >= prev); }
                    last = Some(t);
                }
                c.advance(at);
            }
        }

        /// `slot_of` is the inverse of `time_of` on whole intervals.
        /// The division-free cursor agrees with the exact clock: `exact_from` with `time_of`, and
        /// `first_at_or_after_from` with `slot_at_or_after`, from any earlier count and any guess, across rate
        /// changes, slews and steps made after the cursor was taken (a stale cursor is recomputed, never wrong).
        #[test]
        fn the_cursor_agrees_with_the_clock(
            mbps in prop::sample::select(vec![10u64, 100, 1000, 2500, 10_000, 25_000, 100_000]),
            ppt in -MAX_PPT / 10..MAX_PPT / 10,
            start in 0u64..1u64 << 40,
            steps in prop::collection::vec((0u64..20_000, 0u64..3_000, -4i64..4, 0u8..4), 1..40),
            slot_bytes in 64u32..1538,
            sched_phase in 0i64..1_000_000,
        ) {
            let byte = LinkRate::from_mbps(mbps).unwrap().byte_time();
            let mut c = Ephc::new(byte, 0, Tai(1_700_000_000_000_000_000));
            c.set_rate_ppt(ppt, start).unwrap();
            let sched = Ephc::new(geom(mbps, slot_bytes).period(), 0, Tai(1_700_000_000_000_000_000 - sched_phase));
            let mut near = c.exact(start);
            for (dk, span, miss, adjust) in steps {
                match adjust {
                    1 => c.set_rate_ppt(-ppt / 2, near.count() + dk / 2).unwrap(),
                    2 => c.slew(Nanos(50), 1_000_000, near.count()).unwrap(),
                    3 => c.step(Nanos(-37)),
                    _ => {}
                }
                let k = near.count() + dk;
                let e = c.exact_from(&near, k);
                prop_assert_eq!((e.count(), e.time()), (k, c.time_of(k)));
                prop_assert_eq!(e, c.exact(k));
                // The first byte at or after a time a few ns past `k + span`'s.
                let t = Tai(c.time_of(k + span).0 + miss.unsigned_abs() as i64);
                let f = c.first_at_or_after_from(&e, t);
                prop_assert!(c.time_of(f.count()) >= t && c.time_of(f.count() - 1) < t, "{} for {t:?}", f.count());
                prop_assert_eq!(Some(f.count()), c.slot_at_or_after(t));
                prop_assert!(c.time_of(e.count()) <= c.time_of(f.count()));
                prop_assert_eq!(f, c.exact(f.count()));
                // The first byte at or after a slot start of another clock (the schedule's), exactly: below a
                // nanosecond too.
                let j = sched.slot_of(c.time_of(k + span)).unwrap() + 1;
                let target = sched.exact(j);
                let g = c.first_reaching_from(&e, &target);
                prop_assert!(g.reaches(&target) && !c.exact(g.count() - 1).reaches(&target), "{} for {target:?}", g.count());
                prop_assert!(g.time() >= target.time() && c.time_of(g.count() - 1) <= target.time());
                prop_assert_eq!(g, c.exact(g.count()));
                near = f;
            }
        }

        #[test]
        fn slot_of_inverts_time_of(k in 0u64..1u64 << 40, mbps in prop::sample::select(vec![1000u64, 10_000, 40_000]), bytes in 64u32..9018) {
            let c = Ephc::new(geom(mbps, bytes).period(), 0, Tai(0));
            let t = c.time_of(k);
            let t1 = c.time_of(k + 1);
            prop_assert!(t1 > t);
            prop_assert_eq!(c.slot_of(t), Some(k));
            prop_assert_eq!(c.slot_of(Tai(t1.0 - 1)), Some(k));
        }
    }
}
