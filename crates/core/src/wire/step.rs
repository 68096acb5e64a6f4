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
    /// `n·b − δ` in units of `1/L` ns (`L = lcm(d_e, d_s)`): what ε moves by.
    eps: i64,
}

/// What a [`Step`] steps by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// To the first byte at or after the next schedule slot's start.
    Boundary,
    /// A fixed number of bytes.
    Fixed(u64),
    /// A fixed number of bytes on the disciplined wire while it is later than its schedule and its slots are as
    /// short as they may be (64-byte slots on a clock PTP has made fast): ε tracked, no longer within a byte.
    Clamped(u64),
}

/// Where a [`Step`] is: a byte and its EPHC time, a schedule slot and its start, and the exact difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The byte, and its EPHC time: whole ns and remainder in `1/d_e` ns.
    p: u64,
    e_ns: i64,
    e_rem: u64,
    /// The schedule slot, and its start.
    j: u64,
    s_ns: i64,
    s_rem: u64,
    /// `E(p) − S(j)` in `1/L` ns (`L = lcm(d_e, d_s)`): in `[0, byte)` in boundary mode, any in clamped mode
    /// (the caller stops within a few ns), 0 in fixed mode.
    eps: i64,
}

impl Cursor {
    /// The byte it is at.
    #[inline]
    pub(crate) fn p(&self) -> u64 {
        self.p
    }

    /// `⌊E(p)⌋ − ⌊S(j)⌋`, ns: the slot's error as the station measures it (positive: late). (Both times stay
    /// within ±2^62 ns, so the difference fits.)
    #[inline]
    pub(crate) fn error(&self) -> i64 {
        self.e_ns - self.s_ns
    }
}

/// Stepping state over one EPHC piece and the schedule (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    mode: Mode,
    /// The EPHC and schedule pieces it steps along; the last byte it may reach.
    e_id: u64,
    s_id: u64,
    end: u64,
    /// Where it is; while `fat` is set, `fat` is (the fine loop's form of the same place).
    at: Cursor,
    fine: Option<Fine>,
    fat: Option<FineCursor>,
    de: u64,
    ds: u64,
    /// `L/d_e` and `L/d_s`: what turns a remainder of either clock into `1/L` ns.
    ue: u64,
    us: u64,
    /// One byte in `1/L` ns.
    byte: i64,
    /// The two advances of a boundary step (`n₀`, `n₀ + 1`), or the fixed one (twice).
    lo: Advance,
    hi: Advance,
    /// `δ` as whole ns and a remainder in `1/d_s` ns.
    s_whole: i64,
    s_part: u64,
}

/// `x / d`, without a division where `d` is 1 (both clocks' remainders in the same unit, the usual case).
#[inline]
fn div(x: u64, d: u64) -> u64 {
    if d == 1 {
        x
    } else {
        x / d
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
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
        // Exact differences of the two clocks in 1/L ns, L = lcm(d_e, d_s); ε then fits 64 bits (checked here).
        let g = gcd(de, ds);
        let (ue, us) = (ds / g, de / g);
        let byte = e.a.checked_mul(i128::from(ue))?;
        let delta = s.a.checked_mul(i128::from(us))?;
        if byte <= 0 || delta <= 0 || byte >= 1 << 62 || delta >= 1 << 62 {
            return None;
        }
        let byte = byte as i64;
        // A clamped step's ε leaves [0, byte) by a few ns before its caller stops: headroom for that.
        if matches!(mode, Mode::Clamped(_)) && (byte >= 1 << 56 || i128::from(ue) * e.d >= 1 << 56) {
            return None;
        }
        // ε matters in boundary and clamped mode only; a fixed step leaves it alone (it would drift without bound).
        let boundary = !matches!(mode, Mode::Fixed(_));
        let advance = |n: u64| -> Option<Advance> {
            let x = e.a.checked_mul(i128::from(n))?;
            let whole = i64::try_from(x / e.d).ok()?;
            let eps = if boundary { i64::try_from(i128::from(byte) * i128::from(n) - delta).ok()? } else { 0 };
            Some(Advance { n, whole, part: (x % e.d) as u64, eps })
        };
        let (lo, hi) = match mode {
            Mode::Boundary => {
                // n₀ = ⌈δ/b⌉ − 1: from ε = 0 the next boundary is ⌈δ/b⌉ bytes on, from ε just below b one fewer.
                let b = i128::from(byte);
                let n0 = u64::try_from((delta + b - 1) / b - 1).ok()?;
                (advance(n0)?, advance(n0 + 1)?)
            }
            Mode::Fixed(n) | Mode::Clamped(n) => {
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
            at: Cursor { p: 0, e_ns: 0, e_rem: 0, j: 0, s_ns: 0, s_rem: 0, eps: 0 },
            fine: None,
            fat: None,
            de,
            ds,
            ue,
            us,
            byte,
            lo,
            hi,
            s_whole,
            s_part: (s.a % s.d) as u64,
        };
        step.fine = step.fine_of();
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
        (self.at.p, self.at.j, self.fat) = (u64::MAX, u64::MAX, None);
        if !fits {
            return false;
        }
        let l = i128::from(self.ue) * i128::from(self.de);
        let diff = i128::from(e_ns) - i128::from(s_ns);
        let eps = match self.mode {
            Mode::Boundary | Mode::Clamped(_) => (|| {
                let x = diff.checked_mul(l)?.checked_add(e_rem * i128::from(self.ue) - s_rem * i128::from(self.us))?;
                i64::try_from(x).ok()
            })(),
            Mode::Fixed(_) => Some(0),
        };
        let Some(eps) = eps else { return false };
        if self.mode == Mode::Boundary && !(0..self.byte).contains(&eps) {
            return false;
        }
        self.at = Cursor { p, e_ns, e_rem: e_rem as u64, j, s_ns, s_rem: s_rem as u64, eps };
        true
    }

    /// Whether it steps along EPHC piece `e_id` in `mode`.
    pub(crate) fn is_for(&self, e_id: u64, mode: Mode) -> bool {
        self.e_id == e_id && self.mode == mode
    }

    /// Whether it is at byte `p` and schedule slot `j`.
    #[inline]
    pub(crate) fn is_at(&self, p: u64, j: u64) -> bool {
        match &self.fat {
            Some(f) => f.p == p && f.j == j,
            None => self.at.p == p && self.at.j == j,
        }
    }

    /// Where it is.
    #[inline]
    pub(crate) fn cursor(&mut self) -> Cursor {
        if let (Some(fine), Some(f)) = (self.fine, self.fat.take()) {
            self.at = fine.leave(self, &f);
        }
        self.at
    }

    /// Move it to `at` (a cursor [`Step::next_if`] moved from [`Step::cursor`]).
    #[inline]
    pub(crate) fn set_cursor(&mut self, at: Cursor) {
        self.at = at;
        self.fat = None;
    }

    /// `⌊E(p)⌋ − ⌊S(j)⌋` where it is ([`Cursor::error`]).
    #[inline]
    pub(crate) fn error(&self) -> i64 {
        match (&self.fine, &self.fat) {
            (Some(fine), Some(f)) => fine.error(f),
            _ => self.at.error(),
        }
    }

    /// The fine step and where it is, if a byte lasts at most a nanosecond ([`Fine`]).
    #[inline]
    pub(crate) fn fine_mut(&mut self) -> Option<(Fine, &mut FineCursor)> {
        let fine = self.fine?;
        if self.fat.is_none() {
            self.fat = Some(fine.enter(self, &self.at));
        }
        self.fat.as_mut().map(|f| (fine, f))
    }

    /// Step the cursor to the next slot start if its distance `n` (bytes; boundary mode: to the first byte at or
    /// after `S(j + 1)`, fixed: the fixed count) passes `ok` and stays on the EPHC piece: returns `n` (the new
    /// error is the cursor's), or `None` (nothing moved). A cursor of this step only.
    #[inline(always)]
    pub(crate) fn next_if(&self, c: &mut Cursor, ok: impl FnOnce(u64) -> bool) -> Option<u64> {
        let eps = c.eps + self.lo.eps;
        let short = eps >= 0;
        let adv = if short { &self.lo } else { &self.hi };
        let n = adv.n;
        if !ok(n) || n > self.end.saturating_sub(c.p) {
            return None;
        }
        c.p += n;
        c.eps = if short { eps } else { eps + self.byte };
        let rem = c.e_rem + adv.part;
        let carry = rem >= self.de;
        c.e_rem = if carry { rem - self.de } else { rem };
        c.e_ns += adv.whole + i64::from(carry);
        c.j += 1;
        let rem = c.s_rem + self.s_part;
        let carry = rem >= self.ds;
        c.s_rem = if carry { rem - self.ds } else { rem };
        c.s_ns += self.s_whole + i64::from(carry);
        Some(n)
    }

    /// In clamped mode: whether the slot at cursor `c` is clamped — the first byte at or after the next schedule
    /// slot's start is less than the fixed count away (`E(p + n − 1) ≥ S(j + 1)`), so the boundary step would want
    /// a shorter slot than the fixed one.
    #[inline]
    pub(crate) fn clamped(&self, c: &Cursor) -> bool {
        c.eps + self.lo.eps - self.byte >= 0
    }

    /// How many steps from cursor `c` surely stay on the EPHC piece (each is at most `n₀ + 1` bytes).
    #[inline]
    pub(crate) fn room(&self, p: u64) -> u64 {
        if self.end == u64::MAX {
            return u64::MAX; // the last piece: no end to reach (and no division)
        }
        self.end.saturating_sub(p) / self.hi.n.max(1)
    }

    /// The distances (bytes) a step can have: `n₀` and `n₀ + 1` (boundary), or the fixed count twice. Where a
    /// schedule slot is a whole number `n₀ + 1` of bytes, ε never moves and the step is always `n₀ + 1`.
    #[inline]
    pub(crate) fn distances(&self) -> (u64, u64) {
        if self.hi.eps == 0 {
            (self.hi.n, self.hi.n)
        } else {
            (self.lo.n, self.hi.n)
        }
    }

    /// [`Step::next_if`] on its own cursor, with the new error.
    #[inline]
    pub(crate) fn step_if(&mut self, ok: impl FnOnce(u64) -> bool) -> Option<(u64, i64)> {
        let mut c = self.cursor();
        let n = self.next_if(&mut c, ok)?;
        self.at = c;
        Some((n, c.error()))
    }
}

/// The boundary step where a byte lasts at most a nanosecond (8 Gb/s and faster): a slot's error `⌊E⌋ − ⌊S⌋` is
/// then 0 or 1 ns, read off `S`'s fraction and ε with one compare, so the EPHC's own whole-ns accumulator drops
/// out of the loop ([`Fine::enter`], [`Fine::next`], [`Fine::leave`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fine {
    /// `L = lcm(d_e, d_s)`, one ns in `1/L` ns.
    l: u64,
    /// `δ`'s remainder in `1/L` ns and whole ns.
    s_part: u64,
    s_whole: i64,
    /// ε's moves (`1/L` ns) and the byte counts of the short and the long step, and one byte.
    lo_eps: i64,
    lo_n: u64,
    hi_n: u64,
    byte: i64,
    /// Whether steps of one length come in runs of at least [`RUN_MIN`] ([`Fine::run`]), and which: long (ε
    /// moves by `hi_eps = lo_eps + byte ≥ 0`, small) or short (ε moves by `lo_eps`, small in size).
    runs: Option<bool>,
    /// [`Step`]'s `ue` and `us`.
    ue: u64,
    us: u64,
}

/// A [`Fine`] step's state: the byte, ε, and the schedule slot's start as whole ns and remainder in `1/L` ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FineCursor {
    /// The byte.
    pub(crate) p: u64,
    /// The schedule slot.
    pub(crate) j: u64,
    eps: i64,
    s_ns: i64,
    s_rem: u64,
}

impl Step {
    /// The fine step of a boundary step, where a byte lasts at most a nanosecond and `L` fits.
    fn fine_of(&self) -> Option<Fine> {
        let l = self.ue.checked_mul(self.de)?;
        let fits = matches!(self.mode, Mode::Boundary | Mode::Clamped(_)) && l < 1 << 62 && self.byte as u64 <= l;
        fits.then(|| Fine {
            l,
            s_part: self.s_part * self.us,
            s_whole: self.s_whole,
            lo_eps: self.lo.eps,
            lo_n: self.lo.n,
            hi_n: self.hi.n,
            byte: self.byte,
            runs: runs_of(self.lo.eps, self.byte),
            ue: self.ue,
            us: self.us,
        })
    }
}

impl Fine {
    /// The fine cursor of `c` (a cursor of the step it came from).
    #[inline]
    fn enter(&self, _step: &Step, c: &Cursor) -> FineCursor {
        FineCursor { p: c.p, j: c.j, eps: c.eps, s_ns: c.s_ns, s_rem: c.s_rem * self.us }
    }

    /// Back to a cursor of the step.
    fn leave(&self, _step: &Step, f: &FineCursor) -> Cursor {
        // E = S + ε/L exactly: its whole ns and remainder from S's (ε ≥ 0; beyond a ns only in clamped mode).
        let e = ((f.s_rem + f.eps as u64) / self.l) as i64;
        let e_rem_l = f.s_rem + f.eps as u64 - e as u64 * self.l;
        Cursor {
            p: f.p,
            e_ns: f.s_ns + e,
            e_rem: div(e_rem_l, self.ue),
            j: f.j,
            s_ns: f.s_ns,
            s_rem: div(f.s_rem, self.us),
            eps: f.eps,
        }
    }

    /// `⌊E(p)⌋ − ⌊S(j)⌋`: 0 or 1 ns.
    #[inline(always)]
    pub(crate) fn error(&self, f: &FineCursor) -> i64 {
        i64::from(f.s_rem + f.eps as u64 >= self.l)
    }

    /// [`Fine::next`] for each of a run of filler slots (the caller has made the checks): each slot's L2 length
    /// (its bytes less `overhead`) into `lens`, the start of the slot after it into `starts` (as long as `lens`).
    /// Returns how many of them were 1 ns late. The schedule's whole ns are added once, after the run.
    ///
    /// Where steps of one length come in runs (a schedule slot within a small fraction of a byte of a whole number
    /// of bytes: the nominal rate, or any rate PTP sets near it), a run's length is one division and each slot of
    /// it a constant length ([`same`]); otherwise slot by slot ([`each`]). Without `short_ok` (only where
    /// [`Fine::long_runs`]) it stops before the first short slot. Returns how many it posted and how many of them
    /// were late.
    #[inline(always)]
    pub(crate) fn run(
        &self,
        f: &mut FineCursor,
        lens: &mut [u32],
        starts: &mut [u64],
        overhead: u64,
        short_ok: bool,
    ) -> (usize, u64) {
        let m = lens.len().min(starts.len());
        // A few slots (a poll that posts one or two): slot by slot costs less than setting up a run.
        let Some(long) = self.runs.filter(|_| m >= RUN_MIN as usize || !short_ok) else {
            return (m, each(self, f, &mut lens[..m], &mut starts[..m], overhead));
        };
        let (lo_eps, byte) = (self.lo_eps, self.byte);
        let hi_eps = lo_eps + byte;
        let (mut late, mut done) = (0u64, 0usize);
        while done < m {
            let short = f.eps + lo_eps >= 0;
            if short && !short_ok {
                break;
            }
            // Steps of the common length from here: long while ε + lo_eps < 0 (ε grows by hi_eps ≥ 0 each),
            // short while ε + lo_eps ≥ 0 (ε falls by −lo_eps > 0 each); one of the other length, alone.
            let q = match (short, long) {
                (false, true) if hi_eps == 0 => m - done,
                (false, true) => ((-lo_eps - f.eps - 1) / hi_eps + 1) as usize,
                (true, false) => (f.eps / -lo_eps) as usize,
                _ => 1,
            };
            let q = q.min(m - done);
            let (n, d) = if short { (self.lo_n, lo_eps) } else { (self.hi_n, hi_eps) };
            let (l, s_part) = (self.l as i64, self.s_part as i64);
            late += same(
                f,
                &mut lens[done..done + q],
                &mut starts[done..done + q],
                (n, (n - overhead) as u32, d),
                (l, s_part),
            );
            done += q;
        }
        f.s_ns += self.s_whole * done as i64;
        f.j += done as u64;
        (done, late)
    }

    /// Whether its slots come in runs of the long length, the short one alone between them ([`Fine::run`] can
    /// then post the runs alone, where a short slot is shorter than a filler may be).
    #[inline]
    pub(crate) fn long_runs(&self) -> bool {
        self.runs == Some(true)
    }
}

impl Fine {
    /// The clamped step's [`Fine::run`] (a [`Mode::Clamped`] step's fine form): every slot the fixed length `n`,
    /// ε moving by `d = n·b − δ` each. Posts the slots that are surely as the clamped loop posts them — clamped
    /// (`ε ≥ byte − d`, [`Step::clamped`]) and with `ε ≤ L`, so that no slot starts 2 ns late — up to the
    /// arrays' length, and returns how many, and how many of them were 1 ns late. ε is monotone, so both bounds
    /// are one division.
    #[inline(always)]
    pub(crate) fn run_clamped(
        &self,
        f: &mut FineCursor,
        lens: &mut [u32],
        starts: &mut [u64],
        overhead: u64,
    ) -> (usize, u64) {
        let m = lens.len().min(starts.len()) as u64;
        let (n, d, byte, l) = (self.lo_n, self.lo_eps, self.byte, self.l as i64);
        let floor = byte - d;
        if f.eps < floor || f.eps > l {
            return (0, 0);
        }
        // Slots k = 0, 1, … with ε_k = ε + k·d ≥ floor (ε falling) and ε_(k+1) ≤ L (ε rising).
        let q = match d.cmp(&0) {
            core::cmp::Ordering::Less => ((f.eps - floor) / -d + 1) as u64,
            core::cmp::Ordering::Greater => ((l - f.eps) / d) as u64,
            core::cmp::Ordering::Equal => m,
        };
        let q = q.min(m) as usize;
        let late = same(f, &mut lens[..q], &mut starts[..q], (n, (n - overhead) as u32, d), (l, self.s_part as i64));
        f.s_ns += self.s_whole * q as i64;
        f.j += q as u64;
        (q, late)
    }
}

/// Steps of one length `n` (L2 length `len`), ε moving by `d` each ([`Fine::run`]): the lengths and starts, ε,
/// S's remainder and its carries into whole ns (the whole ns of δ are the caller's), and how many of the slots
/// started 1 ns late (`⌊E⌋ − ⌊S⌋ = 1`: S's remainder and ε reach a whole ns).
#[inline(never)]
fn same(
    f: &mut FineCursor,
    lens: &mut [u32],
    starts: &mut [u64],
    (n, len, d): (u64, u32, i64),
    (l, s_part): (i64, i64),
) -> u64 {
    // S's remainder less L, in [−L, 0): a carry is the sign turning.
    let (mut p, mut eps, mut r) = (f.p, f.eps, f.s_rem as i64 - l);
    let (mut late, mut carries) = (0u64, 0u64);
    for (x, s) in lens.iter_mut().zip(starts.iter_mut()) {
        late += u64::from(r + eps >= 0);
        eps += d;
        p += n;
        *x = len;
        *s = p;
        let rem = r + s_part;
        let carry = rem >= 0;
        r = if carry { rem - l } else { rem };
        carries += u64::from(carry);
    }
    f.p = p;
    f.eps = eps;
    f.s_rem = (r + l) as u64;
    f.s_ns += carries as i64;
    late
}

/// [`Fine::run`] slot by slot, where the two lengths alternate too often for runs.
#[inline(always)]
fn each(fine: &Fine, f: &mut FineCursor, lens: &mut [u32], starts: &mut [u64], overhead: u64) -> u64 {
    let (l, s_part, lo_eps, byte) = (fine.l, fine.s_part, fine.lo_eps, fine.byte);
    let (lo_n, hi_n) = (fine.lo_n, fine.hi_n);
    let (lo_len, hi_len) = ((lo_n - overhead) as u32, (hi_n - overhead) as u32);
    // S's remainder less L, in [−L, 0): a carry is the sign turning, so each step is an add and a select (two
    // cycles of latency, like ε's) rather than an add, a compare, a select and a subtract.
    let (l, s_part) = (l as i64, s_part as i64);
    let (mut p, mut eps, mut r) = (f.p, f.eps, f.s_rem as i64 - l);
    let (mut late, mut carries) = (0u64, 0u64);
    for (len, start) in lens.iter_mut().zip(starts.iter_mut()) {
        late += u64::from(r + eps >= 0);
        let t = eps + lo_eps;
        let short = t >= 0;
        eps = if short { t } else { t + byte };
        p += if short { lo_n } else { hi_n };
        *len = if short { lo_len } else { hi_len };
        *start = p;
        let rem = r + s_part;
        let carry = rem >= 0;
        r = if carry { rem - l } else { rem };
        carries += u64::from(carry);
    }
    let m = lens.len().min(starts.len()) as u64;
    f.p = p;
    f.eps = eps;
    f.s_rem = (r + l) as u64;
    f.j += m;
    f.s_ns += fine.s_whole * m as i64 + carries as i64;
    late
}

/// Runs shorter than this on average are posted slot by slot ([`each`]): a division per run costs more.
const RUN_MIN: i64 = 8;

/// Whether a fine step's lengths come in runs ([`Fine::runs`]): `Some(true)` for runs of long steps (ε moves by
/// `hi_eps = lo_eps + byte`, at most `byte / RUN_MIN`), `Some(false)` for runs of short ones.
fn runs_of(lo_eps: i64, byte: i64) -> Option<bool> {
    let hi_eps = lo_eps + byte;
    if hi_eps.saturating_mul(RUN_MIN) <= byte {
        Some(true)
    } else if lo_eps.saturating_neg().saturating_mul(RUN_MIN) <= byte {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A fine step with `L = l`, a schedule slot of `s_whole + s_part/L` ns and a byte of `byte/L` ns, `n₀ = lo_n`.
    fn fine(l: u64, s_part: u64, byte: i64, lo_eps: i64, lo_n: u64) -> Fine {
        Fine { l, s_part, s_whole: 6, lo_eps, lo_n, hi_n: lo_n + 1, byte, runs: runs_of(lo_eps, byte), ue: 1, us: 1 }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Runs of one length (a division per run, a constant length within it) post exactly what stepping slot by
        /// slot posts: lengths, starts, late count and where it ends — near-integer slots (ε moving by a small
        /// `hi_eps` or `lo_eps`, or not at all) and any other.
        #[test]
        fn runs_post_what_slot_by_slot_posts(
            l in 1u64..1_000_000_000_000,
            s_frac in 0.0f64..1.0,
            byte_frac in 0.001f64..=1.0,
            (near, eps_frac) in (0u8..4, 0.0f64..1.0),
            (eps0_frac, rem_frac) in (0.0f64..1.0, 0.0f64..1.0),
            m in 0usize..200,
        ) {
            let byte = ((l as f64 * byte_frac) as i64).clamp(1, l as i64);
            // hi_eps = lo_eps + byte in [0, byte): 0 (a whole number of bytes), small, near a byte, or any.
            let hi_eps = match near {
                0 => 0,
                1 => ((byte as f64 * eps_frac / 50.0) as i64).min(byte - 1),
                2 => byte - 1 - ((byte as f64 * eps_frac / 50.0) as i64).min(byte - 1),
                _ => ((byte as f64 * eps_frac) as i64).min(byte - 1),
            };
            let f = fine(l, ((l as f64 * s_frac) as u64).min(l - 1), byte, hi_eps - byte, 83);
            let eps = ((byte as f64 * eps0_frac) as i64).min(byte - 1);
            let start = FineCursor { p: 1000, j: 7, eps, s_ns: 100, s_rem: ((l as f64 * rem_frac) as u64).min(l - 1) };
            let (mut a, mut b) = (start, start);
            let (mut lens_a, mut lens_b) = (vec![0u32; m], vec![0u32; m]);
            let (mut starts_a, mut starts_b) = (vec![0u64; m], vec![0u64; m]);
            let (n_a, late_a) = f.run(&mut a, &mut lens_a, &mut starts_a, 20, true);
            prop_assert_eq!(n_a, m);
            let late_b = each(&f, &mut b, &mut lens_b, &mut starts_b, 20);
            prop_assert_eq!(late_a, late_b);
            prop_assert_eq!(a, b);
            prop_assert_eq!(&lens_a, &lens_b);
            prop_assert_eq!(&starts_a, &starts_b);
            // Long runs alone: up to the first short slot, as slot by slot.
            if f.long_runs() {
                let mut c = start;
                let (mut lens_c, mut starts_c) = (vec![0u32; m], vec![0u64; m]);
                let (n_c, _) = f.run(&mut c, &mut lens_c, &mut starts_c, 20, false);
                let first_short = lens_b.iter().position(|&len| u64::from(len) == f.lo_n - 20).unwrap_or(m);
                prop_assert_eq!(n_c, first_short);
                prop_assert_eq!(&lens_c[..n_c], &lens_b[..n_c]);
                prop_assert_eq!(&starts_c[..n_c], &starts_b[..n_c]);
                prop_assert_eq!(c.p, if n_c == 0 { start.p } else { starts_b[n_c - 1] });
            }
        }
    }
}
