//! The clock a servo steers: our own small trait, the EPHC behind it, and the bridge to statime's `Clock`.
//!
//! A servo never reads a host clock: [`ServoClock::now`] is whatever the driver says "now" is (on a station,
//! the EPHC's time of the current slot count). Frequencies are *absolute* adjustments relative to the
//! nominal rate, in parts per trillion (the EPHC's native unit, 1000× finer than `adjfine`'s ppb); statime's
//! absolute ppm is converted at the bridge.
//!
//! [`EphcClock`] is the EPHC as a servo sees it. Both adjustments are applied at the current count and never
//! change it: a frequency change keeps the time of the current slot exactly where it was (continuity), a step
//! moves every slot's time by exactly the step. Every applied adjustment is also queued as a
//! [`ClockAdjust`] so that a driver holding another copy of the clock (a station's schedule grid) can apply
//! the same change at the same count.

use core::fmt;

use keepon_core::ephc::{ClockAdjust, Ephc, EphcError, MAX_PPT};
use keepon_core::station::Station;
use keepon_core::time::{Nanos, Tai};

/// What a servo needs from a clock.
pub trait ServoClock {
    /// The clock's reading now.
    fn now(&self) -> Tai;
    /// Jump the clock by `by`; returns the time (after the step) at which it was applied.
    fn step(&mut self, by: Nanos) -> Result<Tai, ClockError>;
    /// Set the absolute frequency adjustment (parts per trillion relative to nominal, positive = faster);
    /// returns the time at which it was applied.
    fn set_freq_ppt(&mut self, ppt: i64) -> Result<Tai, ClockError>;
    /// The frequency adjustment in force, parts per trillion.
    fn freq_ppt(&self) -> i64;
}

/// Errors of clock adjustment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockError {
    /// The EPHC refused the adjustment.
    Ephc(EphcError),
    /// A frequency that is not a finite number (from a servo's arithmetic).
    NotFinite,
    /// A step that does not fit the clock's range.
    StepOutOfRange,
    /// The clock takes no adjustment now (a servo absorbing a measurement that must not steer).
    Frozen,
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockError::Ephc(e) => write!(f, "EPHC: {e}"),
            ClockError::NotFinite => write!(f, "frequency adjustment is not a finite number"),
            ClockError::StepOutOfRange => write!(f, "phase step does not fit the clock's range"),
            ClockError::Frozen => write!(f, "the clock takes no adjustment now"),
        }
    }
}

/// Convert a frequency in ppm (as statime gives it) to ppt, refusing what the EPHC cannot do.
pub fn ppm_to_ppt(ppm: f64) -> Result<i64, ClockError> {
    if !ppm.is_finite() {
        return Err(ClockError::NotFinite);
    }
    let ppt = (ppm * 1e6).round();
    if ppt.abs() > MAX_PPT as f64 {
        return Err(ClockError::Ephc(EphcError::RateOutOfRange(ppt as i64)));
    }
    Ok(ppt as i64)
}

/// The EPHC as a servo's clock, at a slot count the driver advances.
#[derive(Clone, Debug)]
pub struct EphcClock {
    ephc: Ephc,
    count: u64,
    /// The clock's reading now, when the driver knows it more finely than the slot count.
    at: Option<Tai>,
    pending: Vec<(u64, ClockAdjust)>,
}

impl EphcClock {
    /// Wrap `ephc`, whose current slot count is `count`.
    pub fn new(ephc: Ephc, count: u64) -> EphcClock {
        EphcClock { ephc, count, at: None, pending: Vec::new() }
    }

    /// The clock of `station` as its servo sees it at host time `now`: the EPHC from the byte the NIC is on, reading
    /// the station's current clock ([`StationFace::clock_at`]).
    pub fn of_station<S: keepon_core::face::StationFace>(station: &S, now: Tai) -> EphcClock {
        EphcClock::new(station.ephc().clone(), station.wire_position(station.ring().consumed()))
            .reading(station.clock_at(now))
    }

    /// The same clock reading `now` at present (the driver converts the host clock through the station's host
    /// grid, [`keepon_core::face::StationFace::clock_at`]); steps move it. Without this, `now` is the start of
    /// the current slot.
    pub fn reading(mut self, now: Tai) -> EphcClock {
        self.at = Some(now);
        self
    }

    /// Tell the clock that the wire has reached slot `count` (counts never go back; an older count is ignored).
    pub fn advance_to(&mut self, count: u64) {
        if count > self.count {
            self.count = count;
            self.ephc.advance(count);
        }
    }

    /// The current slot count.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The clock itself.
    pub fn ephc(&self) -> &Ephc {
        &self.ephc
    }

    /// The adjustments applied since the last call, each with the count it was applied at, in order.
    pub fn take_adjustments(&mut self) -> Vec<(u64, ClockAdjust)> {
        core::mem::take(&mut self.pending)
    }

    fn apply(&mut self, adj: ClockAdjust) -> Result<Tai, ClockError> {
        self.ephc.apply(adj, self.count).map_err(ClockError::Ephc)?;
        if let (Some(at), ClockAdjust::Step(by)) = (self.at.as_mut(), adj) {
            *at += by;
        }
        self.pending.push((self.count, adj));
        Ok(self.now())
    }
}

impl ServoClock for EphcClock {
    fn now(&self) -> Tai {
        self.at.unwrap_or_else(|| self.ephc.time_of(self.count))
    }

    fn step(&mut self, by: Nanos) -> Result<Tai, ClockError> {
        // Keep the clock's anchor far from i64 overflow: refuse steps beyond ±100 years.
        if by.0.unsigned_abs() > 100 * 365 * 86_400 * 1_000_000_000 {
            return Err(ClockError::StepOutOfRange);
        }
        self.apply(ClockAdjust::Step(by))
    }

    fn set_freq_ppt(&mut self, ppt: i64) -> Result<Tai, ClockError> {
        self.apply(ClockAdjust::Rate(ppt))
    }

    fn freq_ppt(&self) -> i64 {
        self.ephc.rate_ppt()
    }
}

/// A station's EPHC as a servo's clock: every adjustment goes through [`Station::adjust_clock`], which moves the
/// schedule's grid with the EPHC and re-places (or rejects, `clock-step`) frames in the insertion window.
/// "Now" is the start of the slot the NIC is on (the last consumed count).
pub struct StationClock<'a, B> {
    station: &'a mut Station<B>,
}

impl<'a, B: AsRef<[u8]>> StationClock<'a, B> {
    /// Steer `station`'s clock.
    pub fn new(station: &'a mut Station<B>) -> Self {
        StationClock { station }
    }
}

impl<B: AsRef<[u8]>> ServoClock for StationClock<'_, B> {
    fn now(&self) -> Tai {
        self.station.slot_time(self.station.ring().consumed())
    }

    fn step(&mut self, by: Nanos) -> Result<Tai, ClockError> {
        self.station.adjust_clock(ClockAdjust::Step(by)).map_err(ClockError::Ephc)?;
        Ok(self.now())
    }

    fn set_freq_ppt(&mut self, ppt: i64) -> Result<Tai, ClockError> {
        self.station.adjust_clock(ClockAdjust::Rate(ppt)).map_err(ClockError::Ephc)?;
        Ok(self.now())
    }

    fn freq_ppt(&self) -> i64 {
        self.station.ephc().rate_ppt()
    }
}

/// A [`Tai`] as statime's time (statime's time is unsigned: instants before the epoch read as the epoch).
pub fn to_statime_time(t: Tai) -> statime::time::Time {
    statime::time::Time::from_nanos(u64::try_from(t.0).unwrap_or(0))
}

/// statime's duration in whole nanoseconds (rounded; saturating at the `i64` range).
pub fn from_statime_duration(d: statime::time::Duration) -> Nanos {
    let ns = d.nanos_rounded();
    Nanos(i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX }))
}

/// Any [`ServoClock`] as statime's [`statime::Clock`], counting the steps statime makes.
pub struct StatimeClock<'a, C: ServoClock> {
    clock: &'a mut C,
    /// Steps applied through this bridge.
    pub steps: u32,
    /// The UTC offset the master announced last (seconds), if it was marked valid. keepon's EPHC runs on TAI
    /// and does not apply it; it is recorded so the driver can check it.
    pub utc_offset: Option<i16>,
}

impl<'a, C: ServoClock> StatimeClock<'a, C> {
    /// Bridge `clock`.
    pub fn new(clock: &'a mut C) -> Self {
        StatimeClock { clock, steps: 0, utc_offset: None }
    }
}

impl<C: ServoClock> statime::Clock for StatimeClock<'_, C> {
    type Error = ClockError;

    fn now(&self) -> statime::time::Time {
        to_statime_time(self.clock.now())
    }

    fn step_clock(&mut self, offset: statime::time::Duration) -> Result<statime::time::Time, ClockError> {
        let at = self.clock.step(from_statime_duration(offset))?;
        self.steps += 1;
        Ok(to_statime_time(at))
    }

    fn set_frequency(&mut self, ppm: f64) -> Result<statime::time::Time, ClockError> {
        let at = self.clock.set_freq_ppt(ppm_to_ppt(ppm)?)?;
        Ok(to_statime_time(at))
    }

    fn set_properties(&mut self, props: &statime::config::TimePropertiesDS) -> Result<(), ClockError> {
        self.utc_offset = props.utc_offset();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keepon_core::time::{LinkRate, SlotGeometry};
    use proptest::prelude::*;
    use statime::Clock as _;

    fn clock(mbps: u64, bytes: u32) -> EphcClock {
        let g = SlotGeometry::new(LinkRate::from_mbps(mbps).unwrap(), bytes).unwrap();
        EphcClock::new(Ephc::new(g.period(), 0, Tai(1_700_000_000_000_000_000)), 0)
    }

    #[test]
    fn statime_bridge_converts_units_and_queues_adjustments() {
        let mut c = clock(1000, 300);
        c.advance_to(1000);
        let before = c.now();
        let mut b = StatimeClock::new(&mut c);
        b.set_frequency(1.5).unwrap();
        b.step_clock(statime::time::Duration::from_nanos(-250)).unwrap();
        assert_eq!(b.steps, 1);
        assert!(b.set_frequency(f64::NAN).is_err());
        assert!(b.set_frequency(2000.0).is_err());
        assert_eq!(c.freq_ppt(), 1_500_000);
        assert_eq!(c.now(), Tai(before.0 - 250));
        assert_eq!(
            c.take_adjustments(),
            vec![(1000, ClockAdjust::Rate(1_500_000)), (1000, ClockAdjust::Step(Nanos(-250)))]
        );
        assert!(c.take_adjustments().is_empty());
        assert_eq!(ppm_to_ppt(-0.000_000_4), Ok(0));
    }

    /// A servo steering a station moves its EPHC, not its schedule: the schedule stays on network time and the
    /// wire follows it (slots posted after the adjustment start within a byte of their schedule times).
    #[test]
    fn station_clock_moves_the_ephc_and_leaves_the_schedule() {
        use keepon_core::insert::Policy;
        use keepon_core::isolation::{ClassSpec, Ownership};
        use keepon_core::station::{Observation, StationConfig};
        let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 300).unwrap();
        let cfg = StationConfig {
            geometry,
            ownership: Ownership::new(8, &[ClassSpec { name: "a".into(), slots: vec![0] }]).unwrap(),
            batch: 2,
            policy: Policy::Strict,
            max_pending: 8,
            max_advance: Nanos::from_ms(1),
            post_latency: Nanos::ZERO,
            base_time: Tai(1_000_000),
            max_filler: keepon_core::time::MAX_SLOT_BYTES,
        };
        let mut st: Station<Vec<u8>> = Station::new(cfg, Tai(1_000_000)).unwrap();
        let _ = st.poll(Observation { consumed: 0, now: Tai(1_000_000), gaps: &[] }).unwrap();
        let schedule = st.schedule().clone();
        let p = st.wire_position(st.ring().posted()) + 100 * 320;
        let before = st.ephc().time_of(p);
        let mut c = StationClock::new(&mut st);
        c.step(Nanos(-777)).unwrap();
        c.set_freq_ppt(3_000_000).unwrap();
        assert_eq!(c.freq_ppt(), 3_000_000);
        assert!(c.set_freq_ppt(MAX_PPT + 1).is_err());
        // −777 ns, then +3 ppm over 100 slots of 2.56 µs from the adjustment on: 0.768 ns → floor.
        assert_eq!(st.ephc().time_of(p).0 - before.0, -777);
        assert_eq!(st.schedule(), &schedule);
        assert_eq!(st.ring().consumed(), 0);
        // Post on: every slot from the next on starts within a byte (8 ns) of its schedule time.
        let mut consumed = 0;
        for _ in 0..50 {
            consumed += 2;
            let now = st.host_time_of(consumed);
            let _ = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
        }
        let a = st.alignment();
        assert!(a.slots > 50 && a.max_abs() <= 8, "{}", a.summary());
    }

    proptest! {
        /// Frequency changes keep the clock continuous at the current count; steps move every later slot by
        /// exactly the step; neither changes the count, and the count↔time mapping stays a bijection.
        #[test]
        fn adjustments_keep_count_and_continuity(
            mbps in prop::sample::select(vec![100u64, 1000, 10_000, 25_000]),
            bytes in 64u32..1600,
            ops in prop::collection::vec((0u64..2_000_000, -500.0f64..500.0, -5_000_000i64..5_000_000, any::<bool>()), 1..25),
        ) {
            let mut c = clock(mbps, bytes);
            for (dk, ppm, step, is_step) in ops {
                let count = c.count() + dk;
                c.advance_to(count);
                let probe = [count, count + 1, count + 997, count + 1_000_003];
                let before: Vec<Tai> = probe.iter().map(|&k| c.ephc().time_of(k)).collect();
                let mut b = StatimeClock::new(&mut c);
                if is_step {
                    b.step_clock(statime::time::Duration::from_nanos(step)).unwrap();
                } else {
                    b.set_frequency(ppm).unwrap();
                }
                prop_assert_eq!(c.count(), count);
                for (i, &k) in probe.iter().enumerate() {
                    let t = c.ephc().time_of(k);
                    prop_assert_eq!(c.ephc().slot_of(t), Some(k));
                    if is_step {
                        prop_assert_eq!(t.0 - before[i].0, step);
                    }
                }
                if !is_step {
                    prop_assert_eq!(c.ephc().time_of(count), before[0]);
                }
            }
        }
    }
}
