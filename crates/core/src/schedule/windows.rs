//! Isolation as time windows: per class, intervals of the cycle on the network-time schedule — the form of an
//! IEEE 802.1Qbv gate control list — instead of ring-slot masks.
//!
//! ```text
//!   cycle n:  base + n·C ──┬──────┬───────────┬────┬──────────────┬── base + (n+1)·C
//!                          │ tc-0 │           │tc-1│              │
//!                         off₀   off₀+len₀          (best effort: wherever no window is)
//! ```
//!
//! A real-time frame is admitted only if its whole wire time (preamble, frame and inter-frame gap) lies inside
//! one window of its class; best effort only where no window is. Windows of different classes never overlap, so
//! no frame runs into a window that is not its class's: a guard band by construction. A slot mask is the special
//! case `slot i = [i·δ, (i+1)·δ)` ([`Windows::from_slots`]). Times are exact rationals: `δ` (and so a slot mask's
//! window edges) need not be whole nanoseconds (at 10 Gb/s a byte is 0.8 ns).

use alloc::string::String;
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::fmt;

use crate::isolation::{ClassId, Ownership, MAX_CLASSES};
use crate::time::{LinkRate, Nanos, SlotGeometry, Tai, MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};

/// A time as an exact fraction of a nanosecond: `num / den` ns since the TAI epoch (`den > 0`).
#[derive(Clone, Copy, Debug)]
pub struct Rat {
    /// Numerator.
    pub num: i128,
    /// Denominator, positive.
    pub den: i128,
}

impl Rat {
    /// A whole number of nanoseconds.
    pub fn ns(t: i128) -> Rat {
        Rat { num: t, den: 1 }
    }

    /// Floored to whole ns.
    #[inline]
    pub fn floor(self) -> i128 {
        if self.den == 1 {
            return self.num;
        }
        self.num.div_euclid(self.den)
    }

    /// Rounded up to whole ns.
    pub fn ceil(self) -> i128 {
        -(-self.num).div_euclid(self.den)
    }
}

impl core::ops::Add for Rat {
    type Output = Rat;

    /// (For a time and a span: one of the two denominators is small, so the product stays far inside 128 bits —
    /// an absolute time in `1/(5·10¹²)` ns is about 10³¹.)
    fn add(self, o: Rat) -> Rat {
        if self.den == o.den {
            return Rat { num: self.num + o.num, den: self.den };
        }
        Rat { num: self.num * o.den + o.num * self.den, den: self.den * o.den }
    }
}

impl core::ops::Sub for Rat {
    type Output = Rat;

    fn sub(self, o: Rat) -> Rat {
        self + Rat { num: -o.num, den: o.den }
    }
}

impl PartialEq for Rat {
    fn eq(&self, o: &Rat) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}

impl Eq for Rat {}

impl PartialOrd for Rat {
    fn partial_cmp(&self, o: &Rat) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Rat {
    /// Whole nanoseconds first, then the fractions (each below its denominator): no product of two absolute
    /// times' numerators and denominators, which would leave 128 bits.
    #[inline]
    fn cmp(&self, o: &Rat) -> Ordering {
        // Denominators are positive: with one denominator, or products inside 128 bits (a time against a span or a
        // whole-ns time), the numerators decide without a division.
        if self.den == o.den {
            return self.num.cmp(&o.num);
        }
        if let (Some(a), Some(b)) = (self.num.checked_mul(o.den), o.num.checked_mul(self.den)) {
            return a.cmp(&b);
        }
        let (a, b) = (self.floor(), o.floor());
        a.cmp(&b).then_with(|| {
            let (fa, fb) = (self.num - a * self.den, o.num - b * o.den);
            (fa * o.den).cmp(&(fb * self.den))
        })
    }
}

/// One window of a class: `length` from `offset` after each cycle start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// From the cycle start.
    pub offset: Nanos,
    /// How long it is open.
    pub length: Nanos,
}

/// A class and its windows (none: best effort, which may send wherever no class has a window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassWindows {
    /// Class name.
    pub name: String,
    /// Its windows in the cycle.
    pub windows: Vec<Window>,
}

/// A window list that cannot be used, naming what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// The cycle is not positive.
    Cycle(Nanos),
    /// No classes, or more than [`MAX_CLASSES`].
    Classes(usize),
    /// A window that starts before the cycle or ends after it.
    BeyondCycle {
        /// Class name.
        class: String,
        /// The window.
        window: Window,
        /// The cycle.
        cycle: Nanos,
    },
    /// A window shorter than the wire time of a minimum frame (64 bytes, with preamble and gap): no frame fits.
    TooShort {
        /// Class name.
        class: String,
        /// The window.
        window: Window,
        /// The shortest usable window at the link's rate.
        min: Nanos,
    },
    /// Two windows overlap (of one class or of two).
    Overlap {
        /// The one that starts first: class name and window.
        first: (String, Window),
        /// The other.
        second: (String, Window),
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = |w: &Window| alloc::format!("offset {} ns length {} ns", w.offset.0, w.length.0);
        match self {
            WindowError::Cycle(c) => write!(f, "cycle time {} ns must be positive", c.0),
            WindowError::Classes(n) => write!(f, "{n} classes: need 1 to {MAX_CLASSES}"),
            WindowError::BeyondCycle { class, window, cycle } => {
                write!(f, "class {class}: window {} exceeds the cycle of {} ns", w(window), cycle.0)
            }
            WindowError::TooShort { class, window, min } => write!(
                f,
                "class {class}: window {} is shorter than a minimum frame's wire time ({} ns)",
                w(window),
                min.0
            ),
            WindowError::Overlap { first, second } => write!(
                f,
                "window {} of class {} overlaps window {} of class {}",
                w(&first.1),
                first.0,
                w(&second.1),
                second.0
            ),
        }
    }
}

/// One window, in ticks of the schedule (`1/q` ns) from the cycle start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: i128,
    end: i128,
    class: ClassId,
}

/// Every class's windows on the schedule: cycle `n` starts at `base + n·cycle`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    /// Ticks per ns.
    q: i128,
    base: Tai,
    /// In ticks.
    cycle: i128,
    /// All windows of all classes, by start.
    spans: Vec<Span>,
    names: Vec<String>,
    /// The slot period in ticks, where the windows are a slot mask's.
    slot: Option<i128>,
}

impl Windows {
    /// Windows given in nanoseconds, validated: each inside the cycle, at least a minimum frame's wire time at
    /// `rate` long, none overlapping another.
    pub fn new(base: Tai, cycle: Nanos, classes: &[ClassWindows], rate: LinkRate) -> Result<Windows, WindowError> {
        if cycle.0 <= 0 {
            return Err(WindowError::Cycle(cycle));
        }
        if classes.is_empty() || classes.len() > MAX_CLASSES {
            return Err(WindowError::Classes(classes.len()));
        }
        let min = Nanos(rate.byte_time().ceil_mul(u64::from(MIN_FRAME_BYTES + WIRE_OVERHEAD_BYTES)) as i64);
        let mut spans = Vec::new();
        for (i, c) in classes.iter().enumerate() {
            for w in &c.windows {
                if w.offset.0 < 0 || w.length.0 < 0 || w.offset.0.saturating_add(w.length.0) > cycle.0 {
                    return Err(WindowError::BeyondCycle { class: c.name.clone(), window: *w, cycle });
                }
                if w.length < min {
                    return Err(WindowError::TooShort { class: c.name.clone(), window: *w, min });
                }
                let (start, end) = (i128::from(w.offset.0), i128::from(w.offset.0 + w.length.0));
                spans.push(Span { start, end, class: ClassId(i as u8) });
            }
        }
        spans.sort_by_key(|s| (s.start, s.end));
        for pair in spans.windows(2) {
            if pair[1].start < pair[0].end {
                let named = |s: &Span| {
                    let w = Window { offset: Nanos(s.start as i64), length: Nanos((s.end - s.start) as i64) };
                    (classes[usize::from(s.class.0)].name.clone(), w)
                };
                return Err(WindowError::Overlap { first: named(&pair[0]), second: named(&pair[1]) });
            }
        }
        let names = classes.iter().map(|c| c.name.clone()).collect();
        Ok(Windows { q: 1, base, cycle: i128::from(cycle.0), spans, names, slot: None })
    }

    /// The windows a slot mask stands for: ring slot `i` of a class is `[i·δ, (i+1)·δ)` of a cycle of `N·δ`,
    /// adjacent slots of one class merged into one window. Exact, also where `δ` is not whole ns.
    pub fn from_slots(base: Tai, geometry: SlotGeometry, ownership: &Ownership) -> Windows {
        let delta = geometry.period();
        let (num, q) = (i128::from(delta.num()), i128::from(delta.den()));
        let mut spans: Vec<Span> = Vec::new();
        for i in 0..ownership.ring() {
            if let Some(class) = ownership.owner_of(u64::from(i)) {
                let (start, end) = (i128::from(i) * num, i128::from(i + 1) * num);
                match spans.last_mut() {
                    Some(last) if last.class == class && last.end == start => last.end = end,
                    _ => spans.push(Span { start, end, class }),
                }
            }
        }
        let names = (0..ownership.classes()).map(|c| String::from(ownership.name(ClassId(c as u8)))).collect();
        Windows { q, base, cycle: i128::from(ownership.ring()) * num, spans, names, slot: Some(num) }
    }

    /// Number of windows in the cycle (all classes).
    pub fn spans(&self) -> usize {
        self.spans.len()
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.names.len()
    }

    /// A class's name.
    pub fn name(&self, c: ClassId) -> &str {
        &self.names[usize::from(c.0)]
    }

    /// Whether `c` is a class here.
    pub fn has_class(&self, c: ClassId) -> bool {
        usize::from(c.0) < self.names.len()
    }

    /// A class without windows: best effort.
    pub fn is_best_effort(&self, c: ClassId) -> bool {
        self.has_class(c) && !self.spans.iter().any(|s| s.class == c)
    }

    /// The schedule's base time.
    pub fn base_time(&self) -> Tai {
        self.base
    }

    /// The cycle, exactly.
    pub fn cycle(&self) -> Rat {
        Rat { num: self.cycle, den: self.q }
    }

    /// The longest window of class `c` (zero for best effort).
    pub fn longest(&self, c: ClassId) -> Rat {
        let ticks = self.spans.iter().filter(|s| s.class == c).map(|s| s.end - s.start).max().unwrap_or(0);
        Rat { num: ticks, den: self.q }
    }

    /// The longest stretch of the cycle no window holds (across the cycle's end too): a best-effort frame
    /// longer than this can never go. `None` without windows (no limit).
    pub fn longest_free(&self) -> Option<Rat> {
        let (first, last) = (self.spans.first()?, self.spans.last()?);
        let wrap = self.cycle - last.end + first.start;
        let inner = self.spans.windows(2).map(|p| p[1].start - p[0].end).max().unwrap_or(0);
        Some(Rat { num: wrap.max(inner), den: self.q })
    }

    /// The ring slot `t` falls in, where the windows are a slot mask's (0 for windows given as time): what an
    /// outcome reports as its ring slot.
    pub fn ring_slot_at(&self, t: Rat) -> u32 {
        let Some(slot) = self.slot else { return 0 };
        let (_, off) = self.locate(t);
        u32::try_from(off.num.div_euclid(off.den * slot)).unwrap_or(0)
    }

    /// The first cycle start at or after `t`, exactly.
    pub fn cycle_start_at_or_after(&self, t: Tai) -> Rat {
        let (n, off) = self.locate(Rat::ns(i128::from(t.0)));
        self.at(if off.num == 0 { n } else { n + 1 }, 0)
    }

    /// Class `c`'s windows as exact `(open, close)` offsets from the cycle start, in cycle order.
    pub fn of_class(&self, c: ClassId) -> impl Iterator<Item = (Rat, Rat)> + '_ {
        let q = self.q;
        self.spans
            .iter()
            .filter(move |s| s.class == c)
            .map(move |s| (Rat { num: s.start, den: q }, Rat { num: s.end, den: q }))
    }

    /// The cycle holding `t` and `t`'s offset into it, in ticks (`t·q − base·q − n·cycle`, exact to below a
    /// tick: floored).
    fn locate(&self, t: Rat) -> (i128, Rat) {
        // Ticks since base: (t − base)·q = (t.num − base·t.den)·q / t.den.
        let since = Rat { num: (t.num - i128::from(self.base.0) * t.den) * self.q, den: t.den };
        let n = since.num.div_euclid(since.den * self.cycle);
        (n, Rat { num: since.num - n * self.cycle * since.den, den: since.den })
    }

    /// The absolute time of a tick of cycle `n`.
    fn at(&self, n: i128, tick: i128) -> Rat {
        Rat { num: i128::from(self.base.0) * self.q + n * self.cycle + tick, den: self.q }
    }

    /// The window of class `c` that holds all of `[start, end)`, as its absolute `(open, close)`; `None` if no
    /// window of `c` does.
    ///
    /// Windows of the class that follow each other without a gap (also across the cycle's end) are one: a
    /// frame may run from one into the next, as through a gate that stays open.
    pub fn admitting(&self, c: ClassId, start: Rat, end: Rat) -> Option<(Rat, Rat)> {
        let (n, off) = self.locate(start);
        let i = self.spans.iter().position(|s| s.class == c && Rat::ns(s.start) <= off && off < Rat::ns(s.end))?;
        let open = self.at(n, self.spans[i].start);
        let (mut cycle, mut j, mut close) = (n, i, self.at(n, self.spans[i].end));
        // At most one lap: a class whose windows fill the cycle is open for good, as far as one frame goes.
        for _ in 0..=self.spans.len() {
            if end <= close {
                return Some((open, close));
            }
            (cycle, j) = if j + 1 == self.spans.len() { (cycle + 1, 0) } else { (cycle, j + 1) };
            let next = self.spans[j];
            if next.class != c || self.at(cycle, next.start) != close {
                return None;
            }
            close = self.at(cycle, next.end);
        }
        (end <= close).then_some((open, close))
    }

    /// The opening time of the first window of class `c` that opens at or after `t` (`None` for best effort).
    pub fn next_opening(&self, c: ClassId, t: Rat) -> Option<Rat> {
        let (n, off) = self.locate(t);
        let mine = || self.spans.iter().filter(|s| s.class == c);
        match mine().find(|s| Rat::ns(s.start) >= off) {
            Some(s) => Some(self.at(n, s.start)),
            None => mine().next().map(|s| self.at(n + 1, s.start)),
        }
    }

    /// The first window (of any class) that `[start, end)` enters, as its absolute opening time: best effort
    /// may not use that interval. `None` if the interval is free of windows.
    pub fn first_reserved(&self, start: Rat, end: Rat) -> Option<Rat> {
        self.first_reserved_window(start, end).map(|(open, _)| open)
    }

    /// The earliest time at or after `start` from which `span` is free of windows, within two cycles (`None`
    /// if no stretch of the cycle is that long): where a best-effort frame of that wire time can go next.
    pub fn next_free(&self, start: Rat, span: Rat) -> Option<Rat> {
        let mut t = start;
        for _ in 0..=2 * self.spans.len() + 1 {
            match self.first_reserved_window(t, t + span) {
                None => return Some(t),
                Some((_, close)) => t = close,
            }
        }
        None
    }

    /// [`Windows::first_reserved`], with the window's absolute closing time.
    fn first_reserved_window(&self, start: Rat, end: Rat) -> Option<(Rat, Rat)> {
        if self.spans.is_empty() {
            return None;
        }
        let (n, off) = self.locate(start);
        // Windows of this cycle that end after `off`, then those of the next cycles, until one opens at or after
        // `end`.
        let mut cycle = n;
        loop {
            for s in &self.spans {
                if cycle == n && Rat::ns(s.end) <= off {
                    continue;
                }
                let (open, close) = (self.at(cycle, s.start), self.at(cycle, s.end));
                if open >= end {
                    return None;
                }
                if close > start {
                    return Some((open.max(start), close));
                }
            }
            cycle += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::ClassSpec;

    fn rate() -> LinkRate {
        LinkRate::from_mbps(1000).unwrap()
    }

    fn class(name: &str, w: &[(i64, i64)]) -> ClassWindows {
        ClassWindows {
            name: name.into(),
            windows: w.iter().map(|&(o, l)| Window { offset: Nanos(o), length: Nanos(l) }).collect(),
        }
    }

    #[test]
    fn bad_window_lists_are_refused_by_name() {
        let base = Tai(0);
        let over =
            Windows::new(base, Nanos(10_000), &[class("a", &[(0, 2_000)]), class("b", &[(1_500, 1_000)])], rate());
        assert!(matches!(&over, Err(WindowError::Overlap { first, second }) if first.0 == "a" && second.0 == "b"));
        assert!(over.unwrap_err().to_string().contains("overlaps"));
        let beyond = Windows::new(base, Nanos(10_000), &[class("a", &[(9_000, 2_000)])], rate());
        assert!(matches!(beyond, Err(WindowError::BeyondCycle { .. })));
        // 84 bytes at 1 Gb/s: 672 ns.
        let short = Windows::new(base, Nanos(10_000), &[class("a", &[(0, 671)])], rate());
        assert!(matches!(short, Err(WindowError::TooShort { min: Nanos(672), .. })));
        assert!(Windows::new(base, Nanos(10_000), &[class("a", &[(0, 672)])], rate()).is_ok());
        assert!(matches!(Windows::new(base, Nanos(0), &[], rate()), Err(WindowError::Cycle(_))));
    }

    #[test]
    fn frames_fit_only_inside_their_class_windows() {
        let w = Windows::new(Tai(1_000), Nanos(10_000), &[class("a", &[(1_000, 2_000)]), class("be", &[])], rate())
            .unwrap();
        let a = ClassId(0);
        // Cycle 3: 31 000 … 41 000; the window 32 000 … 34 000.
        let (open, close) = w.admitting(a, Rat::ns(32_000), Rat::ns(34_000)).unwrap();
        assert_eq!((open, close), (Rat::ns(32_000), Rat::ns(34_000)));
        assert!(w.admitting(a, Rat::ns(31_999), Rat::ns(32_500)).is_none());
        assert!(w.admitting(a, Rat::ns(33_000), Rat::ns(34_001)).is_none());
        assert!(w.admitting(ClassId(1), Rat::ns(32_000), Rat::ns(32_100)).is_none());
        assert!(w.is_best_effort(ClassId(1)) && !w.is_best_effort(a));
        // Before the base time too.
        assert!(w.admitting(a, Rat::ns(-8_000), Rat::ns(-7_000)).is_some());
        // Windows that meet, also across the cycle's end, are one.
        let meet = Windows::new(Tai(0), Nanos(10_000), &[class("a", &[(0, 1_000), (8_000, 2_000)])], rate()).unwrap();
        assert_eq!(meet.admitting(a, Rat::ns(9_500), Rat::ns(10_800)), Some((Rat::ns(8_000), Rat::ns(11_000))));
        assert!(meet.admitting(a, Rat::ns(9_500), Rat::ns(11_001)).is_none());
        let always = Windows::new(Tai(0), Nanos(10_000), &[class("a", &[(0, 10_000)])], rate()).unwrap();
        assert!(always.admitting(a, Rat::ns(9_000), Rat::ns(11_000)).is_some());
        // Best effort: what no window holds.
        assert_eq!(w.first_reserved(Rat::ns(31_000), Rat::ns(32_000)), None);
        assert_eq!(w.first_reserved(Rat::ns(31_000), Rat::ns(32_001)), Some(Rat::ns(32_000)));
        assert_eq!(w.first_reserved(Rat::ns(33_000), Rat::ns(33_001)), Some(Rat::ns(33_000)));
        assert_eq!(w.first_reserved(Rat::ns(34_000), Rat::ns(42_000)), None);
        assert_eq!(w.first_reserved(Rat::ns(34_000), Rat::ns(42_001)), Some(Rat::ns(42_000)));
        // The next free stretch for a span: after the window that blocks it, here the next cycle's.
        assert_eq!(w.next_free(Rat::ns(31_000), Rat::ns(1_000)), Some(Rat::ns(31_000)));
        assert_eq!(w.next_free(Rat::ns(31_500), Rat::ns(1_000)), Some(Rat::ns(34_000)));
        assert_eq!(w.next_free(Rat::ns(33_000), Rat::ns(8_000)), Some(Rat::ns(34_000)));
        assert_eq!(w.next_free(Rat::ns(41_000), Rat::ns(2_000)), Some(Rat::ns(44_000)));
        assert_eq!(w.next_free(Rat::ns(33_000), Rat::ns(8_001)), None, "longer than any free stretch");
        assert_eq!(w.longest_free(), Some(Rat::ns(8_000)));
        assert_eq!(w.next_opening(a, Rat::ns(31_000)), Some(Rat::ns(32_000)));
        assert_eq!(w.next_opening(a, Rat::ns(32_000)), Some(Rat::ns(32_000)));
        assert_eq!(w.next_opening(a, Rat::ns(32_001)), Some(Rat::ns(42_000)));
        assert_eq!(w.next_opening(ClassId(1), Rat::ns(0)), None);
        assert_eq!(meet.longest_free(), Some(Rat::ns(7_000)));
        assert_eq!(always.longest_free(), Some(Rat::ns(0)));
    }

    #[test]
    fn a_slot_mask_is_windows_of_whole_slots_exactly() {
        // 10 Gb/s, 1126-byte slots: δ = 916.8 ns, not whole ns.
        let g = SlotGeometry::new(LinkRate::from_mbps(10_000).unwrap(), 1126).unwrap();
        let own = Ownership::new(
            8,
            &[
                ClassSpec { name: "rt".into(), slots: alloc::vec![2, 3, 6] },
                ClassSpec { name: "be".into(), slots: alloc::vec![] },
            ],
        )
        .unwrap();
        let w = Windows::from_slots(Tai(0), g, &own);
        let d = |k: i128| Rat { num: k * 4584, den: 5 }; // k·916.8 ns
        assert_eq!(w.admitting(ClassId(0), d(2), d(4)), Some((d(2), d(4))));
        assert_eq!(w.admitting(ClassId(0), d(6), d(7)), Some((d(6), d(7))));
        assert!(w.admitting(ClassId(0), d(5), d(6)).is_none());
        assert!(w.admitting(ClassId(0), d(6), Rat { num: 7 * 4584 + 1, den: 5 }).is_none());
        assert_eq!(w.longest(ClassId(0)), Rat { num: 2 * 4584, den: 5 });
        assert_eq!(w.first_reserved(d(8), d(10)), None);
        assert_eq!(w.first_reserved(d(8), d(11)), Some(d(10)));
        // What `Info` reports: the windows as offsets, and cycle starts (8·δ = 7334.4 ns).
        let of: alloc::vec::Vec<(Rat, Rat)> = w.of_class(ClassId(0)).collect();
        assert_eq!(of, [(d(2), d(4)), (d(6), d(7))]);
        assert_eq!((d(2).floor(), d(2).ceil(), Rat::ns(-3).ceil()), (1833, 1834, -3));
        assert_eq!(w.cycle_start_at_or_after(Tai(0)), d(0));
        assert_eq!(w.cycle_start_at_or_after(Tai(1)), d(8));
        assert_eq!(w.cycle_start_at_or_after(Tai(7334)), d(8));
        assert_eq!(w.cycle_start_at_or_after(Tai(7335)), d(16));
        assert_eq!(w.cycle_start_at_or_after(Tai(-7334)), d(0));
        assert_eq!(w.cycle_start_at_or_after(Tai(-7335)), d(-8));
        assert_eq!(w.of_class(ClassId(1)).count(), 0);
        // Ring slots of times: slot 2 is [1833.6, 2750.4) ns of each cycle.
        let at = |t: Rat| w.ring_slot_at(t);
        assert_eq!((at(d(2)), at(d(3) - Rat { num: 1, den: 5 }), at(d(3)), at(d(8 + 7)), at(d(-1))), (2, 2, 3, 7, 7));
        assert_eq!(Windows::new(Tai(0), Nanos(10_000), &[], rate()).map(|w| w.ring_slot_at(d(3))).ok(), None);
    }
}
