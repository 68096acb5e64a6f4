//! A proportional-integral servo (linuxptp-like behaviour, written from REFERENCE §E's facts, not its code).
//!
//! Gains are per sync interval `I`, so they mean the same at every interval: a correction `kp·o/I + Σ ki·o/I`
//! (ns/s = ppb) removes the fraction `kp` of an offset `o` within one interval, and the integral term learns
//! the oscillator's frequency error. With the update order used here the loop `o' = (1 − kp − ki)·o + y,
//! y' = y − ki·o` is stable for `0 < kp < 2`, `0 < ki < kp` (e.g. the hardware defaults 0.7/0.3 give poles of
//! magnitude √0.3 ≈ 0.55).
//!
//! ```text
//!  Unlocked ──1st sample──▶ Unlocked ──2nd sample: f = f − Δo/Δt──▶ |o| > first-step? ─yes─▶ Stepping ─▶ Locked
//!      ▲                                                                   └──no──────────────────────▶ Locked
//!      └─────────────────────── |o| > step threshold (0 = never) ◀───────────────────────────────────────┘
//! ```

use keepon_core::time::{Nanos, Tai};

use super::{OffsetEstimator, Sample, Servo, ServoState, ServoStatus};
use crate::clock::{ClockError, ServoClock};

/// Configuration of the PI servo.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PiConfig {
    /// Proportional gain per sync interval.
    pub kp: f64,
    /// Integral gain per sync interval.
    pub ki: f64,
    /// The nominal sync interval (gains are scaled by it).
    pub interval: Nanos,
    /// Step instead of slewing when the offset at lock-in exceeds this (linuxptp: 20 µs).
    pub first_step_threshold: Nanos,
    /// Once locked, an offset beyond this drops back to unlocked (and steps); 0 = never.
    pub step_threshold: Nanos,
    /// Largest frequency adjustment, ppb (anti-windup: the integral stops at it).
    pub max_ppb: f64,
    /// Path delay averaging window (exchanges).
    pub delay_window: usize,
}

impl PiConfig {
    /// Gains for exact TX timestamps (linuxptp's hardware-timestamping defaults, kp 0.7, ki 0.3).
    pub fn exact_tx(interval: Nanos) -> PiConfig {
        PiConfig {
            kp: 0.7,
            ki: 0.3,
            interval,
            first_step_threshold: Nanos::from_us(20),
            step_threshold: Nanos::ZERO,
            max_ppb: 500_000.0,
            delay_window: 8,
        }
    }

    /// Gains for noisy software timestamps (linuxptp's software-timestamping defaults, kp 0.1, ki 0.001).
    pub fn software(interval: Nanos) -> PiConfig {
        PiConfig { kp: 0.1, ki: 0.001, ..PiConfig::exact_tx(interval) }
    }
}

/// The PI servo.
#[derive(Clone, Debug)]
pub struct PiServo {
    cfg: PiConfig,
    est: OffsetEstimator,
    first: Option<(Tai, Nanos)>,
    integral_ppb: f64,
    status: ServoStatus,
}

impl PiServo {
    /// A servo with `cfg`.
    pub fn new(cfg: PiConfig) -> PiServo {
        PiServo {
            est: OffsetEstimator::new(cfg.delay_window),
            cfg,
            first: None,
            integral_ppb: 0.0,
            status: ServoStatus::INITIAL,
        }
    }

    fn interval_s(&self) -> f64 {
        (self.cfg.interval.0 as f64 / 1e9).max(1e-9)
    }

    fn set_freq<C: ServoClock>(&mut self, ppb: f64, clock: &mut C) -> Result<f64, ClockError> {
        let ppb = ppb.clamp(-self.cfg.max_ppb, self.cfg.max_ppb);
        if !ppb.is_finite() {
            return Err(ClockError::NotFinite);
        }
        clock.set_freq_ppt((ppb * 1000.0).round() as i64)?;
        Ok(ppb)
    }

    fn step<C: ServoClock>(&mut self, by: Nanos, clock: &mut C) -> Result<(), ClockError> {
        clock.step(by)?;
        self.est.after_step(by);
        Ok(())
    }
}

impl Servo for PiServo {
    fn sample<C: ServoClock>(&mut self, s: Sample, clock: &mut C) -> Result<ServoStatus, ClockError> {
        let Some(o) = self.est.absorb(&s) else {
            self.status.mean_delay = self.est.mean_delay();
            return Ok(self.status);
        };
        self.status.offset = Some(o);
        self.status.mean_delay = self.est.mean_delay();
        let locked_before = self.status.state != ServoState::Unlocked;
        if locked_before && self.cfg.step_threshold.0 > 0 && o.0.abs() > self.cfg.step_threshold.0 {
            // Lost: start over from this sample.
            self.status.state = ServoState::Unlocked;
            self.first = Some((s.at, o));
            return Ok(self.status);
        }
        match (self.status.state, self.first) {
            (ServoState::Unlocked, None) => {
                self.first = Some((s.at, o));
            }
            (ServoState::Unlocked, Some((t0, o0))) => {
                let dt = (s.at - t0).0 as f64 / 1e9;
                if dt <= 0.0 {
                    self.first = Some((s.at, o));
                    return Ok(self.status);
                }
                // The offset grew by Δo over Δt at the current frequency: run slower by Δo/Δt.
                let current = clock.freq_ppt() as f64 / 1000.0;
                let f = self.set_freq(current - (o.0 - o0.0) as f64 / dt, clock)?;
                self.integral_ppb = f;
                self.status.freq_ppb = f;
                self.first = None;
                if o.0.abs() > self.cfg.first_step_threshold.0 {
                    self.step(Nanos(-o.0), clock)?;
                    self.status.state = ServoState::Stepping;
                } else {
                    self.status.state = ServoState::Locked;
                }
            }
            _ => {
                let i = self.interval_s();
                let o_ppb = o.0 as f64 / i;
                let integral = self.integral_ppb - self.cfg.ki * o_ppb;
                // Anti-windup: the integral never leaves the frequency range.
                self.integral_ppb = integral.clamp(-self.cfg.max_ppb, self.cfg.max_ppb);
                let f = self.set_freq(self.integral_ppb - self.cfg.kp * o_ppb, clock)?;
                self.status.freq_ppb = f;
                self.status.state = ServoState::Locked;
            }
        }
        Ok(self.status)
    }

    fn status(&self) -> ServoStatus {
        self.status
    }
}
