//! An emulated oscillator error for host-paced links — **for tests only**.
//!
//! On one host every network namespace shares `CLOCK_TAI`, so a synchronisation test cannot judge a slave by
//! comparing clocks of different hosts. Instead the link's clock is made deliberately wrong: the backend's
//! clock reads `link(h) = h + offset + (h − origin)·ppb/10⁹` at host time `h` (`origin` is when the backend
//! opened), and the host-paced backend releases slots by that clock. The slots then really leave
//! `1 + ppb/10⁹` times too fast, the EPHC (which counts them) starts `offset` off and runs `ppb` fast, exactly
//! as on a NIC whose oscillator is off — and the true error of the EPHC is `EPHC − CLOCK_TAI`, read
//! in-process. A line-rate link cannot be emulated (its PHY paces the slots), and a production link has no
//! use for this.

use keepon_core::time::{Nanos, Tai};

/// Largest emulated frequency error (±1000 ppm, the most the EPHC can be steered).
pub const MAX_PPB: i64 = 1_000_000;

/// An emulated clock error relative to the host clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emulation {
    /// Phase error at `origin`.
    pub offset: Nanos,
    /// Frequency error, parts per billion (positive: the link's clock runs fast).
    pub ppb: i64,
    /// Host time at which the error is `offset`.
    pub origin: Tai,
}

fn sat(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

impl Emulation {
    /// The link's clock at host time `host`.
    pub fn link(&self, host: Tai) -> Tai {
        let dt = i128::from(host.0) - i128::from(self.origin.0);
        Tai(sat(i128::from(host.0) + i128::from(self.offset.0) + dt * i128::from(self.ppb) / 1_000_000_000))
    }

    /// The host time at which the link's clock reads `link` (the inverse of [`Emulation::link`], to a
    /// nanosecond).
    pub fn host(&self, link: Tai) -> Tai {
        let rel = i128::from(link.0) - i128::from(self.origin.0) - i128::from(self.offset.0);
        let dt = rel * 1_000_000_000 / (1_000_000_000 + i128::from(self.ppb));
        Tai(sat(i128::from(self.origin.0) + dt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_and_host_are_inverse_and_the_rate_is_the_injected_one() {
        let e = Emulation { offset: Nanos(-1_000_000_000), ppb: 50_000, origin: Tai(1_700_000_000_000_000_000) };
        let h = Tai(e.origin.0 + 10_000_000_000); // 10 s later
                                                  // 10 s at +50 ppm gains 500 µs on top of the −1 s offset.
        assert_eq!(e.link(h), Tai(h.0 - 1_000_000_000 + 500_000));
        for dt in [0i64, 1, 999, 123_456_789, 10_000_000_000, -5_000_000_000] {
            let h = Tai(e.origin.0 + dt);
            assert!((e.host(e.link(h)).0 - h.0).abs() <= 1, "dt {dt}");
        }
        let slow = Emulation { offset: Nanos(3_000_000), ppb: -50_000, origin: Tai(0) };
        assert_eq!(slow.link(Tai(1_000_000_000)), Tai(1_000_000_000 + 3_000_000 - 50_000));
    }
}
