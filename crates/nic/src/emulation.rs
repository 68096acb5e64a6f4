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

/// What a test asks for: the link's clock `offset` off and `ppb` fast, and optionally a phase step of `by`
/// once `after` has passed since the backend opened (an oscillator hit; on a master, a master phase jump).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmulatedError {
    /// Phase error when the backend opens.
    pub offset: Nanos,
    /// Frequency error, parts per billion.
    pub ppb: i64,
    /// A phase step: (after this long, by this much).
    pub step: Option<(Nanos, Nanos)>,
}

/// An emulated clock error relative to the host clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emulation {
    /// Phase error at `origin`.
    pub offset: Nanos,
    /// Frequency error, parts per billion (positive: the link's clock runs fast).
    pub ppb: i64,
    /// Host time at which the error is `offset`.
    pub origin: Tai,
    /// From host time `.0` on, the link's clock is `.1` further ahead.
    pub step: Option<(Tai, Nanos)>,
}

fn sat(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

impl Emulation {
    /// The error `e`, starting at host time `origin`.
    pub fn new(e: EmulatedError, origin: Tai) -> Emulation {
        Emulation { offset: e.offset, ppb: e.ppb, origin, step: e.step.map(|(after, by)| (origin + after, by)) }
    }

    /// The link's clock at host time `host`, without the step.
    fn smooth(&self, host: Tai) -> Tai {
        let dt = i128::from(host.0) - i128::from(self.origin.0);
        Tai(sat(i128::from(host.0) + i128::from(self.offset.0) + dt * i128::from(self.ppb) / 1_000_000_000))
    }

    /// The inverse of [`Emulation::smooth`], to a nanosecond.
    fn smooth_inverse(&self, link: Tai) -> Tai {
        let rel = i128::from(link.0) - i128::from(self.origin.0) - i128::from(self.offset.0);
        let dt = rel * 1_000_000_000 / (1_000_000_000 + i128::from(self.ppb));
        Tai(sat(i128::from(self.origin.0) + dt))
    }

    /// The link's clock at host time `host`.
    pub fn link(&self, host: Tai) -> Tai {
        match self.step {
            Some((at, by)) if host >= at => self.smooth(host) + by,
            _ => self.smooth(host),
        }
    }

    /// The host time at which the link's clock reads `link` (the inverse of [`Emulation::link`], to a
    /// nanosecond). Across a forward step, link times the clock skipped map to the step's instant; across a
    /// backward one, link times it read twice map to the later reading.
    pub fn host(&self, link: Tai) -> Tai {
        let Some((at, by)) = self.step else { return self.smooth_inverse(link) };
        let after = self.smooth_inverse(link - by);
        if after >= at {
            return after;
        }
        let before = self.smooth_inverse(link);
        if before < at {
            before
        } else {
            at
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_and_host_are_inverse_and_the_rate_is_the_injected_one() {
        let e = Emulation {
            offset: Nanos(-1_000_000_000),
            ppb: 50_000,
            origin: Tai(1_700_000_000_000_000_000),
            step: None,
        };
        let h = Tai(e.origin.0 + 10_000_000_000); // 10 s later
                                                  // 10 s at +50 ppm gains 500 µs on top of the −1 s offset.
        assert_eq!(e.link(h), Tai(h.0 - 1_000_000_000 + 500_000));
        for dt in [0i64, 1, 999, 123_456_789, 10_000_000_000, -5_000_000_000] {
            let h = Tai(e.origin.0 + dt);
            assert!((e.host(e.link(h)).0 - h.0).abs() <= 1, "dt {dt}");
        }
        let slow = Emulation { offset: Nanos(3_000_000), ppb: -50_000, origin: Tai(0), step: None };
        assert_eq!(slow.link(Tai(1_000_000_000)), Tai(1_000_000_000 + 3_000_000 - 50_000));
    }

    /// A phase step lands at its instant, and `host` stays a (monotone) inverse across it in both directions.
    #[test]
    fn a_phase_step_moves_the_link_clock_at_its_instant() {
        for by in [Nanos(10_000), Nanos(-10_000)] {
            let err = EmulatedError { offset: Nanos(3_000_000), ppb: 50_000, step: Some((Nanos::from_ms(40_000), by)) };
            let e = Emulation::new(err, Tai(1_000_000_000_000));
            let at = Tai(1_000_000_000_000 + 40_000_000_000);
            let jump = e.link(at) - e.link(at - Nanos(1)) - by;
            assert!((0..=2).contains(&jump.0), "step {by:?}: the clock moved {jump:?} besides the step");
            assert_eq!(e.link(at - Nanos(1_000_000_000)), e.smooth(at - Nanos(1_000_000_000)));
            let mut last = Tai(i64::MIN);
            for dl in (-50_000i64..50_000).step_by(997) {
                let l = e.link(at) + Nanos(dl);
                let h = e.host(l);
                assert!(h >= last, "host() not monotone at {dl}");
                last = h;
                if by.0 > 0 && dl < 0 && dl >= -by.0 {
                    assert_eq!(h, at, "a skipped link time maps to the step");
                } else {
                    assert!((e.link(h).0 - l.0).abs() <= 1, "inverse at {dl}");
                }
            }
        }
    }
}
