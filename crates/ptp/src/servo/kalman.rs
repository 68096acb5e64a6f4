//! statime's Kalman filter behind our [`Servo`] trait.
//!
//! The filter estimates offset, frequency and mean delay jointly from the raw Sync and Delay_Req differences,
//! steers by frequency for `steer_time` after each measurement (then asks for an update, which returns to its
//! frequency estimate), and steps above its step threshold (1 ms by default).

use keepon_core::time::{Nanos, Tai};
use statime::filters::{Filter, KalmanConfiguration, KalmanFilter};
use statime::port::Measurement;
use statime::time::Duration;

use super::{Sample, Servo, ServoState, ServoStatus};
use crate::clock::{from_statime_duration, to_statime_time, ClockError, ServoClock, StatimeClock};

/// statime's Kalman filter as a servo.
pub struct KalmanServo {
    filter: KalmanFilter,
    status: ServoStatus,
    update_due: Option<Tai>,
    measured: bool,
    /// The latest clock time the filter has seen (its filter time cannot be later), moved with every step.
    /// statime's filter must never run backwards from it (it asserts so): the filter reads the clock through
    /// [`Floor`], which never reads earlier. An event time can be a little ahead of the driver's reading (a
    /// slot's TX time, known once the NIC fetched it); one more than [`MAX_AHEAD`] ahead was stamped before
    /// a backward step (a Delay_Req sent before it, answered after) and is dropped.
    seen: Option<Tai>,
}

impl Default for KalmanServo {
    fn default() -> Self {
        KalmanServo::new(KalmanConfiguration::default())
    }
}

impl KalmanServo {
    /// A servo with statime's configuration `cfg`.
    pub fn new(cfg: KalmanConfiguration) -> KalmanServo {
        KalmanServo {
            filter: KalmanFilter::new(cfg),
            status: ServoStatus::INITIAL,
            update_due: None,
            measured: false,
            seen: None,
        }
    }

    fn after<C: ServoClock>(&mut self, clock: &mut C, steps: u32, next: Option<core::time::Duration>) -> ServoStatus {
        let est = self.filter.current_estimates();
        if self.measured {
            self.status.offset = Some(from_statime_duration(est.offset_from_master));
            self.status.mean_delay = Some(from_statime_duration(est.mean_delay));
            self.status.state = if steps > 0 { ServoState::Stepping } else { ServoState::Locked };
        }
        self.status.freq_ppb = clock.freq_ppt() as f64 / 1000.0;
        if let Some(d) = next {
            let ns = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
            self.update_due = Some(clock.now() + Nanos(ns));
        }
        self.status
    }
}

/// How far ahead of the clock's reading a measurement's event time may be (see `KalmanServo::seen`).
pub const MAX_AHEAD: Nanos = Nanos(1_000_000);

/// A clock that never reads earlier than `floor` (moved with its steps): what statime's filter needs.
struct Floor<'a, C> {
    inner: &'a mut C,
    floor: Option<Tai>,
}

impl<C: ServoClock> ServoClock for Floor<'_, C> {
    fn now(&self) -> Tai {
        let t = self.inner.now();
        self.floor.map_or(t, |f| t.max(f))
    }
    fn step(&mut self, by: Nanos) -> Result<Tai, ClockError> {
        let t = self.inner.step(by)?;
        if let Some(f) = &mut self.floor {
            *f += by;
        }
        Ok(self.now().max(t))
    }
    fn set_freq_ppt(&mut self, ppt: i64) -> Result<Tai, ClockError> {
        self.inner.set_freq_ppt(ppt)?;
        Ok(self.now())
    }
    fn freq_ppt(&self) -> i64 {
        self.inner.freq_ppt()
    }
}

impl KalmanServo {
    /// The filter saw time `t` while the clock read `before`; it reads `after` now (a step moved it by the
    /// difference, and the filter's time with it).
    fn saw(&mut self, before: Tai, after: Tai, t: Tai) {
        let latest = self.seen.map_or(t.max(before), |s| s.max(t).max(before));
        self.seen = Some(latest + (after - before));
    }
}

fn dur(n: Nanos) -> Duration {
    Duration::from_nanos(n.0)
}

impl Servo for KalmanServo {
    fn sample<C: ServoClock>(&mut self, s: Sample, clock: &mut C) -> Result<ServoStatus, ClockError> {
        if s.at > clock.now() + MAX_AHEAD {
            return Ok(self.status); // stamped by the clock before a step: not a measurement of this clock
        }
        self.seen = Some(self.seen.map_or(s.at, |t| t.max(s.at)));
        let mut clock = Floor { inner: clock, floor: self.seen };
        let clock = &mut clock;
        let before = clock.now();
        let m = Measurement {
            event_time: to_statime_time(s.at),
            offset: None,
            delay: None,
            peer_delay: None,
            raw_sync_offset: s.sync_raw.map(dur),
            raw_delay_offset: s.delay_raw.map(dur),
        };
        let mut bridge = StatimeClock::new(clock);
        let up = self.filter.measurement(m, &mut bridge);
        let steps = bridge.steps;
        self.measured |= s.sync_raw.is_some();
        self.saw(before, clock.now(), s.at);
        Ok(self.after(clock.inner, steps, up.next_update))
    }

    fn update_due(&self) -> Option<Tai> {
        self.update_due
    }

    fn update<C: ServoClock>(&mut self, clock: &mut C) -> Result<ServoStatus, ClockError> {
        let mut clock = Floor { inner: clock, floor: self.seen };
        let clock = &mut clock;
        let before = clock.now();
        self.update_due = None;
        let mut bridge = StatimeClock::new(clock);
        let up = self.filter.update(&mut bridge);
        let steps = bridge.steps;
        self.saw(before, clock.now(), before);
        let st = self.after(clock.inner, steps, up.next_update);
        Ok(st)
    }

    fn status(&self) -> ServoStatus {
        self.status
    }
}
