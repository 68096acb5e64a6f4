//! The wire's O(1) step: slot after slot, the next slot's start byte and how far it is from its schedule time,
//! by integer accumulators (Bresenham) instead of exact rational arithmetic.
//!
//! ```text
//!   EPHC piece   E(p) = E(p₀) + (p − p₀)·b      b = a_e/d_e ns per byte (the oscillator as PTP sees it)
//!   schedule     S(j) = S(j₀) + (j − j₀)·δ      δ = a_s/d_s ns per schedule slot (fixed)
//!   ε = E(p) − S(j), kept exactly in units of 1/(d_e·d_s) ns
//!
//!   boundary step (the disciplined wire): p is the first byte at or after S(j) (0 ≤ ε < b); the first byte at
//!   or after S(j + 1) is p + n with n = ⌈(δ − ε)/b⌉ ∈ {n₀, n₀ + 1}: one add and one compare decide which.
//!   fixed step (the nominal wire): p + n for a fixed n.
//! ```
//!
//! Each accumulator (ε, and E and S as whole ns plus a remainder) moves by a constant and carries at most once
//! per step, so posting a slot costs a few adds and compares. The constants are computed once per pair of clock
//! pieces — where a piece begins (a rate change, a step, a re-anchoring) — with the exact arithmetic of
//! [`crate::ephc`]; every result is exact, so the wire's lengths and times are the ones the exact arithmetic
//! gives (`tests/golden.rs`).

use crate::ephc::{Exact, Line};

/// Bytes a step moves and what that adds to each accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Advance {
    /// Bytes.
    n: u64,
    /// `n·b` as whole ns and a remainder in `1/d_e` ns.
    whole: i64,
    part: u64,
    /// `n·b − δ` in units of `1/(d_e·d_s)` ns: what ε moves by.
    eps: i128,
}

/// What a [`Step`] steps by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// To the first byte at or after the next schedule slot's start.
    Boundary,
    /// A fixed number of bytes.
    Fixed(u64),
}

/// Stepping state over one EPHC piece and the schedule (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    mode: Mode,
    /// The EPHC and schedule pieces it steps along; the last byte it may reach.
    e_id: u64,
    s_id: u64,
    end: u64,
    /// The byte it is at, and its EPHC time: whole ns and remainder in `1/d_e` ns.
    p: u64,
    e_ns: i64,
    e_rem: u64,
    /// The schedule slot it is at, and its start.
    j: u64,
    s_ns: i64,
    s_rem: u64,
    /// `E(p) − S(j)` in `1/(d_e·d_s)` ns, in `[0, byte)` (boundary mode only; 0 in fixed mode).
    eps: i128,
    de: u64,
    ds: u64,
    /// One byte in `1/(d_e·d_s)` ns.
    byte: i128,
    /// The two advances of a boundary step (`n₀`, `n₀ + 1`), or the fixed one (twice).
    lo: Advance,
    hi: Advance,
    /// `δ` as whole ns and a remainder in `1/d_s` ns.
    s_whole: i64,
    s_part: u64,
}

/// Whole ns stay this far inside `i64` when a step is built: it would take centuries of steps to leave it.
const NS_BOUND: i64 = 1 << 62;

impl Step {
    /// A step along EPHC piece `e` (from byte `at`) and schedule piece `s` (from schedule slot `sched`): `None`
    /// where the numbers do not fit the accumulators (then the caller computes exactly), or, in boundary mode,
    /// if `at` is not the first byte at or after `sched`'s start.
    pub(crate) fn new(mode: Mode, e: &Line, at: &Exact, s: &Line, sched: &Exact) -> Option<Step> {
        let (de, ds) = (u64::try_from(e.d).ok()?, u64::try_from(s.d).ok()?);
        // The schedule is one piece for ever (nothing adjusts it).
        if de >= 1 << 62 || ds >= 1 << 62 || s.end != u64::MAX {
            return None;
        }
        let byte = e.a.checked_mul(s.d)?;
        let delta = s.a.checked_mul(e.d)?;
        if byte <= 0 || delta <= 0 {
            return None;
        }
        // ε matters in boundary mode only; a fixed step leaves it alone (it would drift without bound).
        let boundary = mode == Mode::Boundary;
        let advance = |n: u64| -> Option<Advance> {
            let x = e.a.checked_mul(i128::from(n))?;
            let whole = i64::try_from(x / e.d).ok()?;
            let eps = if boundary { byte.checked_mul(i128::from(n))?.checked_sub(delta)? } else { 0 };
            Some(Advance { n, whole, part: (x % e.d) as u64, eps })
        };
        let (lo, hi) = match mode {
            Mode::Boundary => {
                // n₀ = ⌈δ/b⌉ − 1: from ε = 0 the next boundary is ⌈δ/b⌉ bytes on, from ε just below b one fewer.
                let n0 = u64::try_from((delta + byte - 1) / byte - 1).ok()?;
                (advance(n0)?, advance(n0 + 1)?)
            }
            Mode::Fixed(n) => {
                let a = advance(n)?;
                (a, a)
            }
        };
        let s_whole = i64::try_from(s.a / s.d).ok()?;
        let mut step = Step {
            mode,
            e_id: e.id,
            s_id: s.id,
            end: e.end,
            p: 0,
            e_ns: 0,
            e_rem: 0,
            j: 0,
            s_ns: 0,
            s_rem: 0,
            eps: 0,
            de,
            ds,
            byte,
            lo,
            hi,
            s_whole,
            s_part: (s.a % s.d) as u64,
        };
        step.seed(at, sched).then_some(step)
    }

    /// Move to byte `at` and schedule slot `sched` (exact times of the same pieces), keeping the constants: false
    /// (and unusable) if they are of other pieces, out of range, or, in boundary mode, `at` is not the first byte
    /// at or after `sched`'s start.
    pub(crate) fn seed(&mut self, at: &Exact, sched: &Exact) -> bool {
        let (e_id, p, e_ns, e_rem) = at.parts();
        let (s_id, j, s_ns, s_rem) = sched.parts();
        let fits = e_id == self.e_id && s_id == self.s_id && e_ns.abs() < NS_BOUND && s_ns.abs() < NS_BOUND;
        // Unusable until seeded again: no (p, j) matches.
        (self.p, self.j) = (u64::MAX, u64::MAX);
        if !fits {
            return false;
        }
        let (de, ds) = (i128::from(self.de), i128::from(self.ds));
        let diff = i128::from(e_ns) - i128::from(s_ns);
        let eps = match self.mode {
            Mode::Boundary => (|| diff.checked_mul(de)?.checked_mul(ds)?.checked_add(e_rem * ds - s_rem * de))(),
            Mode::Fixed(_) => Some(0),
        };
        let Some(eps) = eps else { return false };
        if self.mode == Mode::Boundary && !(0..self.byte).contains(&eps) {
            return false;
        }
        (self.p, self.e_ns, self.e_rem, self.j, self.s_ns, self.s_rem, self.eps) =
            (p, e_ns, e_rem as u64, j, s_ns, s_rem as u64, eps);
        true
    }

    /// Whether it steps along EPHC piece `e_id` in `mode`.
    pub(crate) fn is_for(&self, e_id: u64, mode: Mode) -> bool {
        self.e_id == e_id && self.mode == mode
    }

    /// Whether it is at byte `p` and schedule slot `j`.
    #[inline]
    pub(crate) fn is_at(&self, p: u64, j: u64) -> bool {
        self.p == p && self.j == j
    }

    /// `⌊E(p)⌋ − ⌊S(j)⌋`, ns: the slot's error as the station measures it (positive: late). (Both times stay
    /// within ±2^62 ns, so the difference fits.)
    #[inline]
    pub(crate) fn error(&self) -> i64 {
        self.e_ns - self.s_ns
    }

    /// Step to the next slot start if its distance `n` (bytes; boundary mode: to the first byte at or after
    /// `S(j + 1)`, fixed: the fixed count) passes `ok` and stays on the EPHC piece: returns `n` and the new error,
    /// or `None` (nothing moved).
    #[inline]
    pub(crate) fn next_if(&mut self, ok: impl FnOnce(u64) -> bool) -> Option<(u64, i64)> {
        let eps = self.eps + self.lo.eps;
        let short = eps >= 0;
        let adv = if short { &self.lo } else { &self.hi };
        let n = adv.n;
        if !ok(n) || n > self.end.saturating_sub(self.p) {
            return None;
        }
        self.p += n;
        self.eps = if short { eps } else { eps + self.byte };
        let rem = self.e_rem + adv.part;
        let carry = rem >= self.de;
        self.e_rem = if carry { rem - self.de } else { rem };
        self.e_ns += adv.whole + i64::from(carry);
        self.j += 1;
        let rem = self.s_rem + self.s_part;
        let carry = rem >= self.ds;
        self.s_rem = if carry { rem - self.ds } else { rem };
        self.s_ns += self.s_whole + i64::from(carry);
        Some((n, self.error()))
    }
}
