//! statime's Kalman filter behind our [`Servo`] trait.
//!
//! The filter estimates offset, frequency and mean delay jointly from the raw Sync and Delay_Req differences (or,
//! with P2P, the raw Sync differences and the measured peer delays), steers by frequency for `steer_time` after
//! each measurement (then asks for an update, which returns to its frequency estimate), and steps above its step
//! threshold (1 ms by default). A peer delay alone only updates the filter's delay: statime's filter would also
//! steer on it, from its last offset estimate — on a master too, whose filter outlived its slave state.

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
    /// A Sync was measured (the offset estimate means something).
    measured: bool,
    /// A Sync or a peer delay was measured (the delay estimate means something).
    delay_measured: bool,
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
            delay_measured: false,
            seen: None,
        }
    }

    fn after<C: ServoClock>(&mut self, clock: &mut C, steps: u32, next: Option<core::time::Duration>) -> ServoStatus {
        let est = self.filter.current_estimates();
        if self.measured {
            self.status.offset = Some(from_statime_duration(est.offset_from_master));
            self.status.state = if steps > 0 { ServoState::Stepping } else { ServoState::Locked };
        }
        if self.delay_measured {
            self.status.mean_delay = Some(from_statime_duration(est.mean_delay));
        }
        self.status.freq_ppb = clock.freq_ppt() as f64 / 1000.0;
        if let Some(d) = next {
            let ns = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
            self.update_due = Some(clock.now() + Nanos(ns));
        }
        self.status
    }
}

/// A clock that refuses every adjustment: the filter absorbs a peer delay through it without steering.
struct Frozen<'a, C>(&'a mut C);

impl<C: ServoClock> ServoClock for Frozen<'_, C> {
    fn now(&self) -> Tai {
        self.0.now()
    }
    fn step(&mut self, _: Nanos) -> Result<Tai, ClockError> {
        Err(ClockError::Frozen)
    }
    fn set_freq_ppt(&mut self, _: i64) -> Result<Tai, ClockError> {
        Err(ClockError::Frozen)
    }
    fn freq_ppt(&self) -> i64 {
        self.0.freq_ppt()
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
            peer_delay: s.peer_delay.map(dur),
            raw_sync_offset: s.sync_raw.map(dur),
            raw_delay_offset: s.delay_raw.map(dur),
        };
        let (steps, next) = if s.sync_raw.is_none() && s.delay_raw.is_none() {
            // A peer delay alone: absorbed, no steering, and the update the last steering asked for stands.
            let mut frozen = Frozen(&mut *clock);
            let _ = self.filter.measurement(m, &mut StatimeClock::new(&mut frozen));
            (0, None)
        } else {
            let mut bridge = StatimeClock::new(clock);
            let up = self.filter.measurement(m, &mut bridge);
            (bridge.steps, up.next_update)
        };
        self.measured |= s.sync_raw.is_some();
        self.delay_measured |= s.sync_raw.is_some() || s.peer_delay.is_some();
        self.saw(before, clock.now(), s.at);
        Ok(self.after(clock.inner, steps, next))
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
