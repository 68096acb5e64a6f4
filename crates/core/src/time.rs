//! Time as types: TAI instants, signed durations, link rates and the exact slot period.
//!
//! Every time in keepon is an integer number of nanoseconds on the TAI timescale. The one quantity that is not
//! a whole number of nanoseconds is the slot period `δ = (slot_bytes + 20)·8 / rate` (at 10 Gb/s a byte takes
//! 0.8 ns, at 2.5 Gb/s 3.2 ns), so it is kept as an exact reduced fraction [`SlotPeriod`] and converted to
//! nanoseconds only at the last step, with a single floor. All conversions live in this module and in
//! [`crate::ephc`].
//!
//! Range: `Tai` is an `i64` of nanoseconds since the TAI epoch (1970), good until 2262. Slot counts are `u64`;
//! products of counts and periods are formed in 128-bit integers: ten years of 64-byte slots at 100 Gb/s are
//! 4.7·10^16 slots, and `count · numerator` stays below 10^24.

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// Bytes of preamble (7), start-of-frame delimiter (1) and minimum inter-frame gap (12) that every frame
/// occupies on the wire besides its L2 bytes.
pub const WIRE_OVERHEAD_BYTES: u32 = 20;

/// Smallest Ethernet frame (L2 including FCS).
pub const MIN_FRAME_BYTES: u32 = 64;

/// Largest slot keepon accepts (a 9000-byte jumbo payload plus header and FCS).
pub const MAX_SLOT_BYTES: u32 = 9018;

/// Largest standard Ethernet frame (1500-byte payload, header, FCS): the longest filler on a link without jumbo
/// frames.
pub const MAX_STD_FRAME_BYTES: u32 = 1518;

/// An instant on the TAI timescale, in nanoseconds since 1970-01-01 00:00:00 TAI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tai(pub i64);

/// A signed span of time in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub i64);

impl Tai {
    /// Nanoseconds since the TAI epoch.
    pub const fn ns(self) -> i64 {
        self.0
    }
}

impl Nanos {
    /// Zero duration.
    pub const ZERO: Nanos = Nanos(0);
    /// From microseconds.
    pub const fn from_us(us: i64) -> Nanos {
        Nanos(us * 1_000)
    }
    /// From milliseconds.
    pub const fn from_ms(ms: i64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    /// The value in nanoseconds.
    pub const fn ns(self) -> i64 {
        self.0
    }
}

impl Add<Nanos> for Tai {
    type Output = Tai;
    fn add(self, rhs: Nanos) -> Tai {
        Tai(self.0 + rhs.0)
    }
}
impl AddAssign<Nanos> for Tai {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 += rhs.0;
    }
}
impl Sub<Nanos> for Tai {
    type Output = Tai;
    fn sub(self, rhs: Nanos) -> Tai {
        Tai(self.0 - rhs.0)
    }
}
impl SubAssign<Nanos> for Tai {
    fn sub_assign(&mut self, rhs: Nanos) {
        self.0 -= rhs.0;
    }
}
impl Sub<Tai> for Tai {
    type Output = Nanos;
    fn sub(self, rhs: Tai) -> Nanos {
        Nanos(self.0 - rhs.0)
    }
}
impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 - rhs.0)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ns", self.0)
    }
}

/// Errors of time and geometry construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeError {
    /// The link rate is zero or not a whole number of Mb/s.
    BadRate(u64),
    /// The slot size is outside `64..=9018` bytes.
    BadSlotBytes(u32),
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeError::BadRate(r) => {
                write!(f, "link rate {r} b/s is not a positive whole number of Mb/s (at most 1.6 Tb/s)")
            }
            TimeError::BadSlotBytes(b) => {
                write!(f, "slot size {b} B is outside {MIN_FRAME_BYTES}..={MAX_SLOT_BYTES} B")
            }
        }
    }
}

/// A link's line rate in bits per second, a positive whole number of Mb/s.
///
/// The Mb/s granularity keeps every slot period a small exact fraction of a nanosecond (denominator at most
/// the rate in Mb/s), which in turn bounds the 128-bit products in [`crate::ephc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkRate {
    bps: u64,
}

impl LinkRate {
    /// Checked constructor.
    pub fn from_bps(bps: u64) -> Result<Self, TimeError> {
        if bps == 0 || !bps.is_multiple_of(1_000_000) || bps > 1_600_000_000_000 {
            return Err(TimeError::BadRate(bps));
        }
        Ok(LinkRate { bps })
    }
    /// From megabits per second.
    pub fn from_mbps(mbps: u64) -> Result<Self, TimeError> {
        Self::from_bps(mbps.saturating_mul(1_000_000))
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.bps
    }
    /// Time of one byte on the wire (8 bits), as an exact period: 8 ns at 1 Gb/s, 0.8 ns at 10 Gb/s.
    pub fn byte_time(self) -> SlotPeriod {
        SlotPeriod::new(8_000, self.bps / 1_000_000)
    }

    /// Wire time of `bytes` L2 bytes plus preamble, SFD and IFG, as an exact period.
    pub fn wire_time(self, l2_bytes: u32) -> SlotPeriod {
        let bits = u64::from(l2_bytes + WIRE_OVERHEAD_BYTES) * 8;
        SlotPeriod::new(bits * 1_000, self.bps / 1_000_000)
    }
}

impl fmt::Display for LinkRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mbps = self.bps / 1_000_000;
        if mbps < 1000 {
            return write!(f, "{mbps} Mb/s");
        }
        let (whole, mut frac, mut width) = (mbps / 1000, mbps % 1000, 3usize);
        if frac == 0 {
            return write!(f, "{whole} Gb/s");
        }
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        write!(f, "{whole}.{frac:0width$} Gb/s")
    }
}

/// An exact duration `num / den` nanoseconds, kept in lowest terms (`den ≥ 1`).
///
/// Used for the slot period `δ`. Never rounded: `k` periods are `⌊k·num/den⌋` ns, computed in 128 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotPeriod {
    num: u64,
    den: u64,
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

impl SlotPeriod {
    /// `num/den` ns in lowest terms. Panics on a zero denominator (a programming error, not input).
    pub const fn new(num: u64, den: u64) -> SlotPeriod {
        assert!(den != 0 && num != 0, "slot period must be positive");
        let g = gcd(num, den);
        SlotPeriod { num: num / g, den: den / g }
    }
    /// Numerator (ns).
    pub const fn num(self) -> u64 {
        self.num
    }
    /// Denominator.
    pub const fn den(self) -> u64 {
        self.den
    }
    /// `⌊k·δ⌋` ns.
    pub fn floor_mul(self, k: u64) -> u128 {
        u128::from(k) * u128::from(self.num) / u128::from(self.den)
    }
    /// `⌈k·δ⌉` ns.
    pub fn ceil_mul(self, k: u64) -> u128 {
        (u128::from(k) * u128::from(self.num)).div_ceil(u128::from(self.den))
    }
    /// Whole slots in a non-negative span: `⌊span/δ⌋`.
    pub fn slots_in(self, span: Nanos) -> u64 {
        if span.0 <= 0 {
            return 0;
        }
        let q = u128::from(span.0 as u64) * u128::from(self.den) / u128::from(self.num);
        u64::try_from(q).unwrap_or(u64::MAX)
    }
    /// True if the period is a whole number of nanoseconds.
    pub const fn is_whole_ns(self) -> bool {
        self.den == 1
    }
}

impl fmt::Display for SlotPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{} ns", self.num)
        } else {
            let whole = self.num / self.den;
            let rem = self.num % self.den;
            // Show up to 6 decimals; exact when den divides 10^6.
            let frac = u128::from(rem) * 1_000_000 / u128::from(self.den);
            let exact = (u128::from(rem) * 1_000_000) % u128::from(self.den) == 0;
            let mut digits = [0u8; 6];
            let mut v = frac;
            for d in digits.iter_mut().rev() {
                *d = b'0' + (v % 10) as u8;
                v /= 10;
            }
            let mut len = 6;
            while len > 1 && digits[len - 1] == b'0' {
                len -= 1;
            }
            let s = core::str::from_utf8(&digits[..len]).unwrap_or("?");
            write!(f, "{whole}.{s}{} ns", if exact { "" } else { "…" })
        }
    }
}

/// The fixed geometry of a keepon link: line rate, slot size, and the resulting exact slot period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotGeometry {
    rate: LinkRate,
    slot_bytes: u32,
    period: SlotPeriod,
}

impl SlotGeometry {
    /// Checked constructor: `slot_bytes` is the L2 frame including FCS.
    pub fn new(rate: LinkRate, slot_bytes: u32) -> Result<Self, TimeError> {
        if !(MIN_FRAME_BYTES..=MAX_SLOT_BYTES).contains(&slot_bytes) {
            return Err(TimeError::BadSlotBytes(slot_bytes));
        }
        Ok(SlotGeometry { rate, slot_bytes, period: rate.wire_time(slot_bytes) })
    }
    /// Line rate.
    pub const fn rate(&self) -> LinkRate {
        self.rate
    }
    /// L2 bytes of every slot (including FCS).
    pub const fn slot_bytes(&self) -> u32 {
        self.slot_bytes
    }
    /// Exact slot period δ.
    pub const fn period(&self) -> SlotPeriod {
        self.period
    }
    /// Slots per second at line rate (rounded down).
    pub fn slots_per_second(&self) -> u64 {
        u64::try_from(u128::from(self.period.den) * 1_000_000_000 / u128::from(self.period.num)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::string::ToString;

    #[test]
    fn paper_slot_periods_are_exact() {
        let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap();
        assert_eq!(g.period(), SlotPeriod::new(10_000, 1));
        let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 300).unwrap();
        assert_eq!(g.period(), SlotPeriod::new(2_560, 1));
        let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1518).unwrap();
        assert_eq!(g.period(), SlotPeriod::new(12_304, 1));
    }

    #[test]
    fn fractional_periods_stay_exact() {
        // 10 Gb/s: 0.8 ns per byte; 64 B slot = 84 B on the wire = 67.2 ns.
        let g = SlotGeometry::new(LinkRate::from_mbps(10_000).unwrap(), 64).unwrap();
        assert_eq!(g.period(), SlotPeriod::new(336, 5));
        assert_eq!(g.period().floor_mul(5), 336);
        assert_eq!(g.period().to_string(), "67.2 ns");
        // 2.5 Gb/s: 3.2 ns per byte; 300 B slot = 320 B = 1024 ns exactly.
        let g = SlotGeometry::new(LinkRate::from_mbps(2_500).unwrap(), 300).unwrap();
        assert_eq!(g.period(), SlotPeriod::new(1024, 1));
        // 100 Gb/s: 84 B = 6.72 ns.
        let g = SlotGeometry::new(LinkRate::from_mbps(100_000).unwrap(), 64).unwrap();
        assert_eq!(g.period(), SlotPeriod::new(168, 25));
        assert_eq!(g.slots_per_second(), 148_809_523);
    }

    #[test]
    fn years_at_100g_do_not_overflow() {
        let g = SlotGeometry::new(LinkRate::from_mbps(100_000).unwrap(), 64).unwrap();
        let ten_years_slots = g.slots_per_second() * 3600 * 24 * 366 * 10;
        let t = g.period().floor_mul(ten_years_slots);
        assert!(t > 315_000_000_000_000_000 && t < 317_000_000_000_000_000, "{t}");
    }

    #[test]
    fn bad_inputs_are_rejected() {
        assert_eq!(LinkRate::from_bps(0), Err(TimeError::BadRate(0)));
        assert_eq!(LinkRate::from_bps(1_500), Err(TimeError::BadRate(1_500)));
        let r = LinkRate::from_mbps(1000).unwrap();
        assert_eq!(SlotGeometry::new(r, 63), Err(TimeError::BadSlotBytes(63)));
        assert_eq!(SlotGeometry::new(r, 9019), Err(TimeError::BadSlotBytes(9019)));
    }

    #[test]
    fn rates_display() {
        assert_eq!(LinkRate::from_mbps(2500).unwrap().to_string(), "2.5 Gb/s");
        assert_eq!(LinkRate::from_mbps(1000).unwrap().to_string(), "1 Gb/s");
        assert_eq!(LinkRate::from_mbps(100).unwrap().to_string(), "100 Mb/s");
    }
}
