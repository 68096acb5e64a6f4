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
}

impl Default for KalmanServo {
    fn default() -> Self {
        KalmanServo::new(KalmanConfiguration::default())
    }
}

impl KalmanServo {
    /// A servo with statime's configuration `cfg`.
    pub fn new(cfg: KalmanConfiguration) -> KalmanServo {
        KalmanServo { filter: KalmanFilter::new(cfg), status: ServoStatus::INITIAL, update_due: None, measured: false }
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

fn dur(n: Nanos) -> Duration {
    Duration::from_nanos(n.0)
}

impl Servo for KalmanServo {
    fn sample<C: ServoClock>(&mut self, s: Sample, clock: &mut C) -> Result<ServoStatus, ClockError> {
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
        Ok(self.after(clock, steps, up.next_update))
    }

    fn update_due(&self) -> Option<Tai> {
        self.update_due
    }

    fn update<C: ServoClock>(&mut self, clock: &mut C) -> Result<ServoStatus, ClockError> {
        self.update_due = None;
        let mut bridge = StatimeClock::new(clock);
        let up = self.filter.update(&mut bridge);
        let steps = bridge.steps;
        let st = self.after(clock, steps, up.next_update);
        Ok(st)
    }

    fn status(&self) -> ServoStatus {
        self.status
    }
}
