//! The paper's A.9 simulation (simulated time): how clock granularity and timestamp jitter limit PTP, with and
//! without the moving-average frequency filter, against the bounds of Eq. 4 and Eq. 6.
//!
//! Model (the paper's Eq. 3): every timestamp is the stamping clock's reading rounded to its granularity `g`,
//! plus a uniform jitter in `[0, j]`; both clocks have granularity `g`, all four timestamps jitter `j`. The
//! master is ideal; the slave starts `ppm` fast. One E2E exchange per interval `I` (Delay_Req 1 ms after the
//! Sync), symmetric path delay `d`; both messages leave at a random phase of the granularity grid. After each exchange the slave's servo ([`MaServo`]: step by the measured
//! offset, frequency = moving average of per-interval estimates; window 1 = unfiltered) corrects the clock.
//!
//! Per exchange we record the **offset error** (measured offset − true offset, mid-exchange; Eq. 4 bounds its
//! magnitude by `δ_TS = (g_M + g_S + max(j_M^in + j_M^out, j_S^in + j_S^out))/2`) and the **drift** (how far the
//! true offset moved between one correction and the next measurement; Eq. 6 bounds it per interval by
//! `δ_Drift = I·max[(g_S + j_S^in)/(I − g_S − j_S^in), (g_M + j_M^out)/(I + g_S + j_S^in)]`, ρ_M = 1).

use keepon_core::time::{Nanos, Tai};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::{ClockError, ServoClock};
use crate::servo::mafilter::{MaConfig, MaServo};
use crate::servo::{Sample, Servo};

/// One point of the sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct A9Config {
    /// Clock granularity of both clocks, ns.
    pub granularity: f64,
    /// Timestamp jitter of all four timestamps, ns (uniform `[0, j]`).
    pub jitter: f64,
    /// Moving-average window (1 = no frequency filtering).
    pub window: usize,
    /// Sync interval, ns.
    pub interval: f64,
    /// One-way path delay, ns.
    pub delay: f64,
    /// The slave's initial frequency error, ppm.
    pub ppm: f64,
    /// Exchanges simulated.
    pub rounds: u32,
    /// Seed.
    pub seed: u64,
}

impl A9Config {
    /// The paper's settings: 100 ms interval, 10 µs symmetric delay, 1 ppm initial error.
    pub fn paper(granularity: f64, jitter: f64, window: usize, rounds: u32, seed: u64) -> A9Config {
        A9Config { granularity, jitter, window, interval: 100e6, delay: 10e3, ppm: 1.0, rounds, seed }
    }

    /// Eq. 4: the bound on the offset error, ns.
    pub fn eq4_bound(&self) -> f64 {
        let (g, j) = (self.granularity, self.jitter);
        0.5 * (g + g + (j + j).max(j + j))
    }

    /// Eq. 6: the bound on one interval's drift, ns.
    pub fn eq6_bound(&self) -> f64 {
        let (g, j, i) = (self.granularity, self.jitter, self.interval);
        i * ((g + j) / (i - g - j)).max((g + j) / (i + g + j))
    }
}

/// How a node stamps its messages: each timestamp is its clock's reading rounded to `granularity`, plus a jitter
/// uniform in `[0, jitter]`, for what it sends (TX) and what it receives (RX) separately.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stamping {
    /// TX stamps: granularity and jitter, ns.
    pub tx: (f64, f64),
    /// RX stamps: granularity and jitter, ns.
    pub rx: (f64, f64),
}

impl Stamping {
    /// The same granularity and jitter for every stamp (the A.9 model).
    pub fn uniform(granularity: f64, jitter: f64) -> Stamping {
        Stamping { tx: (granularity, jitter), rx: (granularity, jitter) }
    }
}

/// One exchange's record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct A9Round {
    /// Exchange number (from 1).
    pub n: u32,
    /// Measured offset − true offset, ns.
    pub offset_error: f64,
    /// True offset change since the previous correction, ns (none for the first exchange).
    pub drift: Option<f64>,
    /// The slave's frequency adjustment after the exchange, ppm.
    pub freq_ppm: f64,
    /// The slave's remaining frequency error after the exchange (oscillator + adjustment), ppm.
    pub residual_ppm: f64,
    /// The true offset (slave − master) mid-exchange, before the correction, ns.
    pub true_offset: f64,
}

/// The slave: phase `s0` at true time `t0`, rate `1 + ρ + F` (ρ its oscillator error, F the adjustment).
struct FloatClock {
    t0: f64,
    s0: f64,
    rho: f64,
    ppt: i64,
    now: f64,
}

impl FloatClock {
    fn rate(&self) -> f64 {
        1.0 + self.rho + self.ppt as f64 * 1e-12
    }
    fn at(&self, t: f64) -> f64 {
        self.s0 + (t - self.t0) * self.rate()
    }
    fn rebase(&mut self) {
        self.s0 = self.at(self.now);
        self.t0 = self.now;
    }
}

impl ServoClock for FloatClock {
    fn now(&self) -> Tai {
        Tai(self.at(self.now).round() as i64)
    }
    fn step(&mut self, by: Nanos) -> Result<Tai, ClockError> {
        self.rebase();
        self.s0 += by.0 as f64;
        Ok(self.now())
    }
    fn set_freq_ppt(&mut self, ppt: i64) -> Result<Tai, ClockError> {
        self.rebase();
        self.ppt = ppt;
        Ok(self.now())
    }
    fn freq_ppt(&self) -> i64 {
        self.ppt
    }
}

/// Run one point of the sweep (both nodes stamp with `cfg`'s granularity and jitter).
pub fn run(cfg: &A9Config) -> Result<Vec<A9Round>, ClockError> {
    let both = Stamping::uniform(cfg.granularity, cfg.jitter);
    run_between(cfg, both, both)
}

/// Run `cfg`'s exchanges with each node's own stamping (`cfg.granularity` and `cfg.jitter` are not used).
pub fn run_between(
    cfg: &A9Config,
    master_stamps: Stamping,
    slave_stamps: Stamping,
) -> Result<Vec<A9Round>, ClockError> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let coarsest =
        [master_stamps.tx, master_stamps.rx, slave_stamps.tx, slave_stamps.rx].iter().map(|s| s.0).fold(0.0, f64::max);
    let g = coarsest.max(1e-9);
    let mut phase_rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x9e37_79b9);
    let mut stamp = |(g, j): (f64, f64), reading: f64| -> f64 {
        let g = g.max(1e-9);
        let q = (reading / g).round() * g;
        q + if j > 0.0 { rng.gen_range(0.0..=j) } else { 0.0 }
    };
    // Slave time is kept relative to an epoch far from zero only in its integer readings; here both clocks
    // start at 1 s so every reading is positive.
    let mut slave = FloatClock { t0: 0.0, s0: 1e9, rho: cfg.ppm * 1e-6, ppt: 0, now: 0.0 };
    let master = |t: f64| 1e9 + t;
    let mut servo = MaServo::new(MaConfig { window: cfg.window, delay_window: 1, jump_threshold: Nanos::ZERO });
    let mut out = Vec::with_capacity(cfg.rounds as usize);
    let mut after_correction: Option<f64> = None;
    for n in 1..=cfg.rounds {
        // Messages leave at a uniformly random phase of the granularity grid, so rounding errors are uniform in
        // [−g/2, g/2] as Eq. 3 assumes (on a whole-ns interval grid a message would otherwise always hit the
        // same phase).
        let ts = f64::from(n) * cfg.interval + phase_rng.gen_range(0.0..g);
        let theta = |c: &FloatClock, t: f64| c.at(t) - master(t);
        let drift = after_correction.map(|a| theta(&slave, ts) - a);
        let t1 = stamp(master_stamps.tx, master(ts));
        let t2 = stamp(slave_stamps.rx, slave.at(ts + cfg.delay));
        let t3_true = ts + 1e6 + phase_rng.gen_range(0.0..g);
        let t3 = stamp(slave_stamps.tx, slave.at(t3_true));
        let t4 = stamp(master_stamps.rx, master(t3_true + cfg.delay));
        let measured = ((t2 - t1) - (t4 - t3)) / 2.0;
        let truth = theta(&slave, (ts + t3_true + cfg.delay) / 2.0);
        // The servo works in whole ns: feed it the exchange with the readings' differences rounded.
        slave.now = t3_true + cfg.delay;
        let s = Sample {
            at: slave.now(),
            sync_raw: Some(Nanos((t2 - t1).round() as i64)),
            delay_raw: Some(Nanos((t3 - t4).round() as i64)),
            peer_delay: None,
        };
        servo.sample(s, &mut slave)?;
        after_correction = Some(theta(&slave, slave.now));
        out.push(A9Round {
            n,
            offset_error: measured - truth,
            drift,
            freq_ppm: slave.ppt as f64 * 1e-6,
            residual_ppm: (slave.rate() - 1.0) * 1e6,
            true_offset: truth,
        });
    }
    Ok(out)
}

/// Summary of one point: medians and maxima of |offset error| and |drift| after a settling period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct A9Summary {
    /// Median |offset error|, ns.
    pub offset_median: f64,
    /// Largest |offset error|, ns.
    pub offset_max: f64,
    /// Mean |drift| per interval, ns.
    pub drift_mean: f64,
    /// Median |drift| per interval, ns.
    pub drift_median: f64,
    /// Largest |drift| per interval, ns.
    pub drift_max: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Summarise the rounds after the first `settle` (the filter's start-up).
pub fn summarise(rounds: &[A9Round], settle: u32) -> A9Summary {
    let late: Vec<&A9Round> = rounds.iter().filter(|r| r.n > settle).collect();
    let off: Vec<f64> = late.iter().map(|r| r.offset_error.abs()).collect();
    let dr: Vec<f64> = late.iter().filter_map(|r| r.drift.map(f64::abs)).collect();
    A9Summary {
        offset_max: off.iter().copied().fold(0.0, f64::max),
        offset_median: median(off),
        drift_mean: dr.iter().sum::<f64>() / dr.len().max(1) as f64,
        drift_max: dr.iter().copied().fold(0.0, f64::max),
        drift_median: median(dr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(g: f64, j: f64, window: usize) -> (A9Config, A9Summary) {
        let c = A9Config::paper(g, j, window, 1500, 11);
        let r = run(&c).unwrap();
        (c, summarise(&r, 50))
    }

    /// The qualitative claims of A.9 on a reduced sweep: the offset error grows with granularity and with
    /// jitter and stays within Eq. 4; the moving-average filter reduces the drift several-fold.
    #[test]
    fn a9_qualitative_claims_hold() {
        let by_g: Vec<_> = [800.0, 3200.0, 12_000.0].iter().map(|&g| point(g, 1000.0, 10)).collect();
        let by_j: Vec<_> = [0.0, 500.0, 3000.0].iter().map(|&j| point(100.0, j, 10)).collect();
        for w in by_g.windows(2).chain(by_j.windows(2)) {
            assert!(w[1].1.offset_median > w[0].1.offset_median, "{:?} !> {:?}", w[1], w[0]);
        }
        for (c, s) in by_g.iter().chain(&by_j) {
            assert!(
                s.offset_max <= c.eq4_bound() + 1.0,
                "{c:?}: max offset error {} > Eq. 4 {}",
                s.offset_max,
                c.eq4_bound()
            );
        }
        for &(g, j) in &[(800.0, 1000.0), (12_000.0, 1000.0)] {
            let (c, filtered) = point(g, j, 10);
            let (_, raw) = point(g, j, 1);
            assert!(raw.drift_mean > 4.0 * filtered.drift_mean, "g {g}: unfiltered {raw:?} vs filtered {filtered:?}");
            assert!(filtered.drift_mean < c.eq6_bound(), "{c:?}: {filtered:?} vs Eq. 6 {}", c.eq6_bound());
        }
    }

    #[test]
    fn without_errors_the_slave_locks_exactly() {
        let c = A9Config { granularity: 1e-9, ..A9Config::paper(0.0, 0.0, 10, 200, 1) };
        let r = run(&c).unwrap();
        let s = summarise(&r, 20);
        assert!(s.offset_max < 1.0 && s.drift_max < 1.0, "{s:?}");
        assert!((r.last().unwrap().freq_ppm + 1.0).abs() < 1e-3);
    }
}
