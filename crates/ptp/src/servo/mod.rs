//! Servos: turn PTP measurements into clock adjustments.
//!
//! One small trait, [`Servo`], with explicit, visible state ([`ServoState`]: unlocked → stepping → locked, as
//! in linuxptp's servo interface) and three implementations, selectable by [`ServoKind`]:
//!
//! - [`kalman::KalmanServo`]: statime's Kalman filter (it estimates offset, frequency and delay jointly and
//!   steers by frequency; it steps above its step threshold);
//! - [`pi::PiServo`]: a proportional-integral servo with linuxptp-like behaviour (frequency estimate from the
//!   first two samples, one step above the first-step threshold, anti-windup), re-implemented from the facts
//!   in REFERENCE §E;
//! - [`mafilter::MaServo`]: the paper's scheme (A.9): correct the offset every sync by a step and set the
//!   frequency to a moving average of per-interval frequency estimates (window 1 = no filtering).
//!
//! Inputs are the raw PTP differences statime also uses: `t2 − t1` of a Sync (master→slave) and `t3 − t4` of a
//! Delay_Req (slave→master), in the slave's and master's clocks. With path delay `d` and slave offset `o`
//! (slave − master): `t2 − t1 = o + d`, `t3 − t4 = o − d`. With the peer-to-peer mechanism there is no Delay_Req:
//! the link delay `d` is measured on its own (Pdelay_Req/Resp, independent of `o`) and comes as a sample of its
//! own, which updates the servo's delay estimate and never adjusts the clock.

pub mod floor;
pub mod kalman;
pub mod mafilter;
pub mod pi;
pub mod prefilter;

use core::fmt;

use keepon_core::time::{Nanos, Tai};

use crate::clock::{ClockError, ServoClock};

/// One measurement handed to a servo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The slave's clock reading when the measurement was made (its Sync RX or Delay_Req TX time).
    pub at: Tai,
    /// `t2 − t1` of a Sync (slave RX − master TX), corrections applied.
    pub sync_raw: Option<Nanos>,
    /// `t3 − t4` of a Delay_Req (slave TX − master RX).
    pub delay_raw: Option<Nanos>,
    /// A peer-to-peer link delay measurement `((t4 − t1) − (t3 − t2))/2` of a Pdelay exchange. A sample with
    /// only this never adjusts the clock: it is a property of the link, not of the clock's offset.
    pub peer_delay: Option<Nanos>,
}

/// Where a servo is on its way to lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServoState {
    /// Not enough measurements yet (or lost: re-acquiring).
    Unlocked,
    /// The last measurement made the servo step the clock.
    Stepping,
    /// Past lock-in: steering by frequency (whether the offset is small enough for the application is the
    /// driver's sync threshold, judged on [`ServoStatus::offset`]).
    Locked,
}

impl fmt::Display for ServoState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServoState::Unlocked => "unlocked",
            ServoState::Stepping => "stepping",
            ServoState::Locked => "locked",
        })
    }
}

/// What a servo knows, after its last measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServoStatus {
    /// Its state.
    pub state: ServoState,
    /// Its latest estimate of the slave's offset from the master (slave − master), before correction.
    pub offset: Option<Nanos>,
    /// The frequency adjustment it set last, ppb relative to nominal.
    pub freq_ppb: f64,
    /// Its estimate of the mean path delay.
    pub mean_delay: Option<Nanos>,
}

impl ServoStatus {
    /// The status before any measurement.
    pub const INITIAL: ServoStatus =
        ServoStatus { state: ServoState::Unlocked, offset: None, freq_ppb: 0.0, mean_delay: None };
}

/// A servo: measurements in, clock adjustments out.
pub trait Servo {
    /// Absorb one measurement, adjusting `clock` as needed. A clock that refuses an adjustment is an error; the
    /// servo then stays unlocked and tries again on the next measurement.
    fn sample<C: ServoClock>(&mut self, s: Sample, clock: &mut C) -> Result<ServoStatus, ClockError>;
    /// When (in the clock's time) the servo wants [`Servo::update`] called, if at all.
    fn update_due(&self) -> Option<Tai> {
        None
    }
    /// A timer the servo asked for via [`Servo::update_due`] has expired.
    fn update<C: ServoClock>(&mut self, _clock: &mut C) -> Result<ServoStatus, ClockError> {
        Ok(self.status())
    }
    /// The servo's status now.
    fn status(&self) -> ServoStatus;
}

/// The selectable servos.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServoKind {
    /// statime's Kalman filter.
    Kalman,
    /// The PI servo.
    Pi,
    /// The paper's moving-average frequency filter.
    MovingAverage,
}

impl core::str::FromStr for ServoKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kalman" => Ok(ServoKind::Kalman),
            "pi" => Ok(ServoKind::Pi),
            "ma" | "moving-average" => Ok(ServoKind::MovingAverage),
            other => Err(format!("unknown servo {other:?}: expected kalman, pi or moving-average")),
        }
    }
}

/// Any one of the servos, chosen at run time.
pub enum AnyServo {
    /// statime's Kalman filter.
    Kalman(Box<kalman::KalmanServo>),
    /// The PI servo.
    Pi(pi::PiServo),
    /// The moving-average filter.
    MovingAverage(mafilter::MaServo),
}

impl AnyServo {
    /// A servo of `kind` with its default configuration for sync interval `interval`.
    pub fn new(kind: ServoKind, interval: Nanos) -> AnyServo {
        match kind {
            ServoKind::Kalman => AnyServo::Kalman(Box::default()),
            ServoKind::Pi => AnyServo::Pi(pi::PiServo::new(pi::PiConfig::exact_tx(interval))),
            ServoKind::MovingAverage => AnyServo::MovingAverage(mafilter::MaServo::new(mafilter::MaConfig::default())),
        }
    }
}

impl Servo for AnyServo {
    fn sample<C: ServoClock>(&mut self, s: Sample, clock: &mut C) -> Result<ServoStatus, ClockError> {
        match self {
            AnyServo::Kalman(k) => k.sample(s, clock),
            AnyServo::Pi(p) => p.sample(s, clock),
            AnyServo::MovingAverage(m) => m.sample(s, clock),
        }
    }
    fn update_due(&self) -> Option<Tai> {
        match self {
            AnyServo::Kalman(k) => k.update_due(),
            AnyServo::Pi(p) => p.update_due(),
            AnyServo::MovingAverage(m) => m.update_due(),
        }
    }
    fn update<C: ServoClock>(&mut self, clock: &mut C) -> Result<ServoStatus, ClockError> {
        match self {
            AnyServo::Kalman(k) => k.update(clock),
            AnyServo::Pi(p) => p.update(clock),
            AnyServo::MovingAverage(m) => m.update(clock),
        }
    }
    fn status(&self) -> ServoStatus {
        match self {
            AnyServo::Kalman(k) => k.status(),
            AnyServo::Pi(p) => p.status(),
            AnyServo::MovingAverage(m) => m.status(),
        }
    }
}

/// Offset from the raw differences, shared by the PI and moving-average servos: the mean path delay is the
/// average of the last `window` per-exchange delays — `((t2 − t1) − (t3 − t4))/2`, each pairing a Delay_Req with
/// the Sync before it (E2E), or the peer delays as measured (P2P); the offset of a Sync is
/// `(t2 − t1) − mean delay`.
#[derive(Clone, Debug)]
pub struct OffsetEstimator {
    window: usize,
    delays: std::collections::VecDeque<i64>,
    last_sync: Option<i64>,
}

impl OffsetEstimator {
    /// Average the path delay over `window` exchanges (at least 1).
    pub fn new(window: usize) -> Self {
        OffsetEstimator { window: window.max(1), delays: Default::default(), last_sync: None }
    }

    /// The mean path delay, once one exchange is complete.
    pub fn mean_delay(&self) -> Option<Nanos> {
        if self.delays.is_empty() {
            return None;
        }
        let sum: i128 = self.delays.iter().map(|&d| i128::from(d)).sum();
        Some(Nanos((sum / self.delays.len() as i128) as i64))
    }

    /// Absorb a sample; returns the offset of its Sync, if it has one and the delay is known.
    pub fn absorb(&mut self, s: &Sample) -> Option<Nanos> {
        if let (Some(d), Some(sync)) = (s.delay_raw, s.sync_raw.or(self.last_sync.map(Nanos))) {
            self.push_delay((sync.0 - d.0) / 2);
        }
        if let Some(d) = s.peer_delay {
            self.push_delay(d.0);
        }
        if let Some(sync) = s.sync_raw {
            self.last_sync = Some(sync.0);
        }
        let sync = s.sync_raw?;
        Some(sync - self.mean_delay()?)
    }

    fn push_delay(&mut self, d: i64) {
        if self.delays.len() == self.window {
            self.delays.pop_front();
        }
        self.delays.push_back(d);
    }

    /// The slave's clock was stepped by `by`: shift the stored Sync difference so it pairs with the next
    /// Delay_Req, which is timestamped on the stepped clock.
    pub fn after_step(&mut self, by: Nanos) {
        if let Some(s) = &mut self.last_sync {
            *s += by.0;
        }
    }
}

#[cfg(test)]
mod tests;
