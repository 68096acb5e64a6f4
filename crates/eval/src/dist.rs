//! Seeded random draws: every distribution of the evaluation comes from here.
//!
//! One [`Draw`] is a ChaCha8 stream keyed by `(seed, stream)`: each model and each noise source gets its own
//! stream, so adding a draw to one model never changes another's numbers, and a run is a pure function of its
//! parameters. Normal variates come from the Box–Muller transform (no extra dependency).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded stream of draws.
pub struct Draw {
    rng: ChaCha8Rng,
    spare: Option<f64>,
}

impl Draw {
    /// Stream `stream` of seed `seed`.
    pub fn new(seed: u64, stream: u64) -> Draw {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Draw { rng, spare: None }
    }

    /// Uniform on `[lo, hi)` (`lo` when the range is empty).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            return lo;
        }
        lo + (hi - lo) * self.rng.gen::<f64>()
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen::<f64>() < p
    }

    /// Standard normal.
    pub fn std_normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // Box–Muller: u1 in (0, 1] so the logarithm is finite.
        let u1 = 1.0 - self.rng.gen::<f64>();
        let u2 = self.rng.gen::<f64>();
        let r = (-2.0 * u1.ln()).sqrt();
        let a = std::f64::consts::TAU * u2;
        self.spare = Some(r * a.sin());
        r * a.cos()
    }

    /// Normal with mean `mean` and standard deviation `sd`.
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        mean + sd * self.std_normal()
    }

    /// Log-normal with median `median` and shape `sigma` (standard deviation of the logarithm).
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.std_normal()).exp()
    }
}

/// A first-order autoregressive process with stationary standard deviation `sd` and correlation time `tau`:
/// stepping by `dt` multiplies the state by `exp(−dt/tau)` and adds the innovation that keeps the variance at
/// `sd²`. The shape of a servo-controlled clock error (PTP, phc2sys) around zero.
pub struct Ar1 {
    sd: f64,
    tau: f64,
    x: f64,
}

impl Ar1 {
    /// A process started from its stationary distribution.
    pub fn new(sd: f64, tau: f64, draw: &mut Draw) -> Ar1 {
        Ar1 { sd, tau, x: draw.normal(0.0, sd) }
    }

    /// The state after `dt` more (same unit as `tau`).
    pub fn step(&mut self, dt: f64, draw: &mut Draw) -> f64 {
        if self.tau <= 0.0 {
            self.x = draw.normal(0.0, self.sd);
        } else {
            let a = (-dt.max(0.0) / self.tau).exp();
            self.x = a * self.x + (1.0 - a * a).sqrt() * draw.normal(0.0, self.sd);
        }
        self.x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        (m, (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt())
    }

    #[test]
    fn normal_has_its_moments_and_streams_are_independent_and_repeatable() {
        let mut a = Draw::new(7, 1);
        let xs: Vec<f64> = (0..200_000).map(|_| a.normal(3.0, 2.0)).collect();
        let (m, sd) = moments(&xs);
        assert!((m - 3.0).abs() < 0.03 && (sd - 2.0).abs() < 0.03, "{m} {sd}");
        let mut b = Draw::new(7, 1);
        assert_eq!(b.normal(3.0, 2.0), xs[0]);
        let mut c = Draw::new(7, 2);
        assert_ne!(c.normal(3.0, 2.0), xs[0]);
    }

    #[test]
    fn ar1_keeps_its_variance_and_correlates_close_steps() {
        let mut d = Draw::new(3, 0);
        let mut p = Ar1::new(5.0, 100.0, &mut d);
        let xs: Vec<f64> = (0..200_000).map(|_| p.step(1.0, &mut d)).collect();
        let (_, sd) = moments(&xs);
        assert!((sd - 5.0).abs() < 0.3, "{sd}");
        let diffs: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
        let (_, dsd) = moments(&diffs);
        // exp(−1/100) correlation: the step is ≈ sd·√(2(1−a)) ≈ 0.7, far below an uncorrelated √2·sd ≈ 7.
        assert!(dsd < 1.0, "{dsd}");
    }
}
