//! The paper's servo (A.9): correct the offset at every Sync by a step, and set the frequency to the moving
//! average of the last `window` per-interval frequency estimates. `window = 1` is the unfiltered scheme (the
//! grey line of Fig. 29), `window = 10` the paper's filter.
//!
//! Per-interval estimate: after the step at the previous Sync the offset was (nominally) zero, so an offset `o`
//! measured `Δt` later at frequency `f` means the frequency that would have held it at zero is `f − o/Δt`.
//! Averaging `N` such estimates telescopes the timestamp errors: the mean's error is `(ε_n − ε_{n−N})/(N·Δt)`
//! instead of `(ε_n − ε_{n−1})/Δt`, about `N`× smaller.

use std::collections::VecDeque;

use keepon_core::time::{Nanos, Tai};

use super::{OffsetEstimator, Sample, Servo, ServoState, ServoStatus};
use crate::clock::{ClockError, ServoClock};

/// Configuration of the moving-average servo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaConfig {
    /// Frequency estimates averaged (1 = no filtering; the paper uses 10).
    pub window: usize,
    /// Path delay averaging window (exchanges; the paper's per-exchange offset is 1).
    pub delay_window: usize,
    /// An offset beyond this is a phase jump, not drift: step, but do not learn a frequency from it
    /// (0 = never; the paper's scheme).
    pub jump_threshold: Nanos,
}

impl Default for MaConfig {
    fn default() -> Self {
        MaConfig { window: 10, delay_window: 1, jump_threshold: Nanos::from_us(20) }
    }
}

/// The moving-average servo.
#[derive(Clone, Debug)]
pub struct MaServo {
    cfg: MaConfig,
    est: OffsetEstimator,
    /// When the last step was applied (the clock's time after it).
    last: Option<Tai>,
    freqs: VecDeque<f64>,
    status: ServoStatus,
}

impl MaServo {
    /// A servo with `cfg`.
    pub fn new(cfg: MaConfig) -> MaServo {
        MaServo {
            est: OffsetEstimator::new(cfg.delay_window),
            cfg: MaConfig { window: cfg.window.max(1), ..cfg },
            last: None,
            freqs: VecDeque::new(),
            status: ServoStatus::INITIAL,
        }
    }
}

impl Servo for MaServo {
    fn sample<C: ServoClock>(&mut self, s: Sample, clock: &mut C) -> Result<ServoStatus, ClockError> {
        let Some(o) = self.est.absorb(&s) else {
            self.status.mean_delay = self.est.mean_delay();
            return Ok(self.status);
        };
        self.status.offset = Some(o);
        self.status.mean_delay = self.est.mean_delay();
        let jump = self.cfg.jump_threshold.0 > 0 && o.0.abs() > self.cfg.jump_threshold.0;
        match self.last {
            Some(t0) if !jump && s.at > t0 => {
                let dt = (s.at - t0).0 as f64 / 1e9;
                let f = clock.freq_ppt() as f64 / 1000.0;
                if self.freqs.len() == self.cfg.window {
                    self.freqs.pop_front();
                }
                self.freqs.push_back(f - o.0 as f64 / dt);
                let mean = self.freqs.iter().sum::<f64>() / self.freqs.len() as f64;
                if !mean.is_finite() {
                    return Err(ClockError::NotFinite);
                }
                clock.set_freq_ppt((mean * 1000.0).round() as i64)?;
                self.status.freq_ppb = mean;
                self.status.state = ServoState::Locked;
            }
            _ => self.status.state = ServoState::Stepping,
        }
        let after = clock.step(Nanos(-o.0))?;
        self.est.after_step(Nanos(-o.0));
        self.last = Some(after);
        Ok(self.status)
    }

    fn status(&self) -> ServoStatus {
        self.status
    }
}
