//! Two keepon stations back to back, single vs dual clock (paper §4.2), in simulated time, seeded.
//!
//! Station A is the master: its slot grid is the network's time (slot `n` starts at `n·δ`), its PTP TX
//! timestamps are exact (keepon knows its slot times), and so are its RX timestamps (the master side is
//! ideal here, so that the comparison isolates the slave's RX path, which the dual clock addresses). Both
//! stations stream at line rate. Station B, the slave, has an oscillator fast by `ppm` with a random-walk
//! `wander` ([`crate::sim::Oscillator`], the same model as the simulated NIC's), and a polling driver:
//!
//! - **single clock**: a Sync is timestamped in software when B's poll loop sees it: arrival + poll lag
//!   `U[0, poll_period]` + host jitter `U[0, host_jitter]` (+ a preemption `spike` with probability
//!   `spike_prob`), read on B's TX EPHC; the configured mean latency is subtracted (calibration). A PTP servo
//!   steers the TX EPHC.
//! - **dual clock**: B counts A's slots into an RX slot clock ([`keepon_core::dualclock::DualClock`]); a Sync's
//!   `t2` is the RX clock's time of the Sync's RX slot — exact up to the clock's anchoring. PTP steps the RX
//!   clock's phase by the measured offset (its rate is A's already); a local servo steers the TX EPHC to the RX
//!   clock at every clock sample (the readings agree within 2τ; faulty pairs are skipped, and after the RX
//!   clock was renumbered for lost frames — good only to a slot — until PTP has measured it again).
//!
//! Clock samples are taken every `sample` at a random phase up to `poll_period` (a poll loop's phase relative
//! to the slot grids varies; at fixed phases the two clocks' quantizations would alias into a bias).
//!
//! Faults: with probability `fault_prob` per clock sample, B's TX reading is stale by `U[1, fault_slots]` slots
//! (a late consumer-index update; it heals by itself) and, independently with probability `rx_loss_prob`, B's
//! RX ring loses `U[1, fault_slots]` frames (counts lost for good).
//!
//! Measured: **sync error** — B's TX EPHC at its current slot minus the master's time at that slot's true
//! start (what a scheduled frame is off by); **clock stability** — B's clock reading (single: TX; dual:
//! merged) minus the EPHC's exact value at the sampling instant.

use keepon_core::dualclock::{DualClock, DualCounters, Merge};
use keepon_core::ephc::Ephc;
use keepon_core::time::{Nanos, SlotPeriod, Tai};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::{ClockError, EphcClock, ServoClock};
use crate::servo::{AnyServo, Sample, Servo, ServoKind};
use crate::sim::{Oscillator, EPOCH};

/// Gains of the local TX-to-RX loop, per clock sample.
const KP: f64 = 0.002;
const KI: f64 = 0.000_01;

/// Parameters of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualSimConfig {
    /// Slot period δ of both stations.
    pub period: SlotPeriod,
    /// B's oscillator error, ppm, and its wander, ppm/√s.
    pub ppm: f64,
    /// Wander, ppm/√s.
    pub wander: f64,
    /// B's initial clock offset.
    pub initial_offset: Nanos,
    /// PTP sync interval.
    pub interval: Nanos,
    /// One-way path delay.
    pub delay: Nanos,
    /// How often B's driver reads its clocks (a clock sample).
    pub sample: Nanos,
    /// B's poll period (software RX lag is uniform up to it).
    pub poll_period: Nanos,
    /// Extra host jitter on software RX, uniform.
    pub host_jitter: Nanos,
    /// Probability that a Sync's software RX timestamp is hit by a preemption.
    pub spike_prob: f64,
    /// Length of a preemption.
    pub spike: Nanos,
    /// Probability of a stale TX reading per clock sample.
    pub fault_prob: f64,
    /// Probability of lost RX frames per clock sample.
    pub rx_loss_prob: f64,
    /// Largest fault, slots.
    pub fault_slots: u32,
    /// The PTP servo (single clock) / the local TX-to-RX servo's kind is always PI.
    pub servo: ServoKind,
    /// Simulated duration.
    pub duration: Nanos,
    /// Statistics start after this.
    pub settle: Nanos,
    /// Dual clock on.
    pub dual: bool,
    /// Seed.
    pub seed: u64,
}

impl DualSimConfig {
    /// The comparison's defaults: 300 B slots at 1 Gb/s (δ = 2.56 µs, the paper's §4 setting), B 10 ppm fast
    /// with 0.01 ppm/√s wander and 20 µs off, 125 ms syncs over a 1 µs link, clock samples every 1 ms, a
    /// 10 µs poll loop with 5 µs jitter and 1 % preemptions of 50 µs, stale TX readings on 1 % of samples and
    /// lost RX frames on 0.1 % (up to 8 slots each).
    pub fn defaults(period: SlotPeriod, dual: bool, seed: u64) -> DualSimConfig {
        DualSimConfig {
            period,
            ppm: 10.0,
            wander: 0.01,
            initial_offset: Nanos::from_us(20),
            interval: Nanos::from_ms(125),
            delay: Nanos::from_us(1),
            sample: Nanos::from_ms(1),
            poll_period: Nanos::from_us(10),
            host_jitter: Nanos::from_us(5),
            spike_prob: 0.01,
            spike: Nanos::from_us(50),
            fault_prob: 0.01,
            rx_loss_prob: 0.001,
            fault_slots: 8,
            servo: ServoKind::Pi,
            duration: Nanos::from_ms(60_000),
            settle: Nanos::from_ms(20_000),
            dual,
            seed,
        }
    }
}

/// What one run measured (after `settle`), ns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DualSimResult {
    /// Sync error at every clock sample.
    pub sync_error: Vec<f64>,
    /// Clock stability error at every clock sample.
    pub stability: Vec<f64>,
    /// Merge outcomes (dual clock).
    pub merges: DualCounters,
    /// Sync error at every clock sample from the start (before `settle` too): how it converges.
    pub from_start: Vec<f64>,
}

/// The dual clock's local loop: a PI steering the TX EPHC's frequency to the RX clock, one sample of
/// `T_tx − T_rx` per clock sample; gains per sample interval (see [`crate::servo::pi`]), no initial estimate
/// (the readings' ±τ quantization would make a two-sample frequency estimate useless).
struct Steer {
    kp: f64,
    ki: f64,
    integral_ppb: f64,
    interval_s: f64,
}

impl Steer {
    fn steer<C: ServoClock>(&mut self, diff_ns: f64, clock: &mut C) -> Result<(), ClockError> {
        let o_ppb = diff_ns / self.interval_s.max(1e-9);
        self.integral_ppb = (self.integral_ppb - self.ki * o_ppb).clamp(-500_000.0, 500_000.0);
        let f = (self.integral_ppb - self.kp * o_ppb).clamp(-500_000.0, 500_000.0);
        clock.set_freq_ppt((f * 1000.0).round() as i64)?;
        Ok(())
    }
}

/// Mean of |x|, and the p-th percentile of |x| (p in 0..=100).
pub fn abs_stats(xs: &[f64], p: f64) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut a: Vec<f64> = xs.iter().map(|x| x.abs()).collect();
    a.sort_by(f64::total_cmp);
    let idx = ((p / 100.0) * (a.len() - 1) as f64).round() as usize;
    (a.iter().sum::<f64>() / a.len() as f64, a[idx.min(a.len() - 1)])
}

/// The median |x| of each run of `per` samples (whole runs only).
pub fn window_medians(xs: &[f64], per: usize) -> Vec<f64> {
    xs.chunks_exact(per.max(1))
        .map(|w| {
            let mut a: Vec<f64> = w.iter().map(|x| x.abs()).collect();
            a.sort_by(f64::total_cmp);
            a[a.len() / 2]
        })
        .collect()
}

/// When synchronisation converged, in windows: the first window whose median |error| (`medians`, from
/// [`window_medians`]) is within twice the steady state's typical one (the median of the windows from `steady`
/// on). `None` without a steady state, or if no window gets there.
pub fn converged(medians: &[f64], steady: usize) -> Option<usize> {
    let tail = medians.get(steady..).filter(|t| !t.is_empty())?;
    let mut sorted = tail.to_vec();
    sorted.sort_by(f64::total_cmp);
    let bound = 2.0 * sorted[sorted.len() / 2];
    medians.iter().position(|&m| m <= bound)
}

/// Run one configuration.
pub fn run(cfg: &DualSimConfig) -> Result<DualSimResult, ClockError> {
    let mut osc = Oscillator::new(cfg.period, cfg.ppm, cfg.wander, cfg.seed);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xd0a1_c10c);
    let delta = cfg.period.num() as f64 / cfg.period.den() as f64;
    let mut clock = EphcClock::new(Ephc::new(cfg.period, 0, EPOCH + cfg.initial_offset), 0);
    let mut ptp = AnyServo::new(cfg.servo, cfg.interval);
    let mut local = Steer { kp: KP, ki: KI, integral_ppb: 0.0, interval_s: cfg.sample.0 as f64 / 1e9 };
    let mut dual = DualClock::new(cfg.period);
    let since = |t: Tai| (t.0 - EPOCH.0) as f64;
    let d = cfg.delay.0 as f64;
    let mean_sw_latency = (cfg.poll_period.0 + cfg.host_jitter.0) as f64 / 2.0 + cfg.spike_prob * cfg.spike.0 as f64;
    let mut lost: u64 = 0;
    let mut out = DualSimResult::default();
    let sample = cfg.sample.0.max(1) as f64;
    let interval = cfg.interval.0.max(1) as f64;
    let mut next_sync = interval;
    let mut n = 1u64;
    // After the RX clock was renumbered for lost frames it is only good to a slot until PTP measures it again:
    // the TX EPHC is not steered to it meanwhile.
    let mut rx_trusted = true;
    while n as f64 * sample <= cfg.duration.0 as f64 {
        // Clock samples are taken by the poll loop: at a jittered phase of the slot grids.
        let t = n as f64 * sample + rng.gen_range(0.0..=cfg.poll_period.0 as f64);
        n += 1;
        osc.wander_to(t);
        let k = osc.slot_at(t);
        clock.advance_to(k);
        // PTP exchange(s) due before this sample.
        while next_sync <= t {
            // The Sync leaves in A's first slot at or after the sync time: t1 exact.
            let slot_a = (next_sync / delta).ceil();
            let t1_true = slot_a * delta;
            next_sync += interval;
            let arrive = t1_true + d;
            let t2 = if cfg.dual {
                // The Sync is A's slot `slot_a`: its RX count, less the frames lost so far.
                match dual.rx_time_of((slot_a as u64).saturating_sub(lost)) {
                    Some(t) => t.0,
                    None => continue, // RX clock not anchored yet
                }
            } else {
                let mut lag =
                    rng.gen_range(0.0..=cfg.poll_period.0 as f64) + rng.gen_range(0.0..=cfg.host_jitter.0 as f64);
                if rng.gen_bool(cfg.spike_prob.clamp(0.0, 1.0)) {
                    lag += cfg.spike.0 as f64;
                }
                let seen = osc.slot_at(arrive + lag);
                clock.ephc().time_of(seen).0 - mean_sw_latency.round() as i64
            };
            let t1 = EPOCH.0 + t1_true.round() as i64;
            // Delay_Req in B's first slot after the Sync was handled: t3 exact, t4 exact (ideal master RX).
            let k3 = osc.slot_at(arrive + cfg.poll_period.0 as f64) + 1;
            let t3 = clock.ephc().time_of(k3).0;
            let t4 = EPOCH.0 + (osc.start_of(k3) + d).round() as i64;
            let s = Sample {
                at: clock.now(),
                sync_raw: Some(Nanos(t2 - t1)),
                delay_raw: Some(Nanos(t3 - t4)),
                peer_delay: None,
            };
            if cfg.dual {
                // PTP sets the RX clock's phase (its rate is A's already); the TX EPHC follows through the local
                // loop, or is stepped with it when the offset is beyond τ (at lock-in).
                let o = (t2 - t1 + t3 - t4) / 2;
                dual.step(Nanos(-o));
                rx_trusted = true;
                if o.abs() > dual.tau().0 {
                    clock.step(Nanos(-o))?;
                }
            } else {
                ptp.sample(s, &mut clock)?;
            }
        }
        // A clock sample: the TX reading (stale on a fault), the RX count (less lost frames).
        let stale =
            if rng.gen_bool(cfg.fault_prob.clamp(0.0, 1.0)) { rng.gen_range(1..=cfg.fault_slots.max(1)) } else { 0 };
        if rng.gen_bool(cfg.rx_loss_prob.clamp(0.0, 1.0)) {
            lost += u64::from(rng.gen_range(1..=cfg.fault_slots.max(1)));
        }
        let t_tx = clock.ephc().time_of(k.saturating_sub(u64::from(stale)));
        // The EPHC's exact value now: interpolate within the current slot.
        let (a, b) = (clock.ephc().time_of(k), clock.ephc().time_of(k + 1));
        let frac = (t - osc.start_of(k)) / (osc.start_of(k + 1) - osc.start_of(k));
        let truth = a.0 as f64 + frac * (b.0 - a.0) as f64;
        let reading = if cfg.dual {
            let rx_count = ((t - d) / delta).floor().max(0.0) as u64;
            let m = dual.read(t_tx, rx_count.saturating_sub(lost));
            if matches!(m, Merge::RxLagging(_)) {
                rx_trusted = false;
            }
            if let (Merge::Agree(_), Some(rx), true) = (m, dual.rx_time_of(rx_count.saturating_sub(lost)), rx_trusted) {
                // Steer TX to RX: both lag by U[0, τ); their difference averages out.
                local.steer((t_tx.0 - rx.0) as f64, &mut clock)?;
            }
            m.time()
        } else {
            t_tx
        };
        let sync_error = since(clock.ephc().time_of(k)) - osc.start_of(k);
        out.from_start.push(sync_error);
        if t >= cfg.settle.0 as f64 {
            out.stability.push(reading.0 as f64 - truth);
            out.sync_error.push(sync_error);
        }
    }
    out.merges = dual.counters();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keepon_core::time::{LinkRate, SlotGeometry};

    /// The paper's claim, qualitatively, on a shortened run: the dual clock synchronises far better than the
    /// single clock with software RX timestamps, and its merged reading is more stable.
    #[test]
    fn dual_clock_beats_single_clock() {
        let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 300).unwrap();
        let mut single = DualSimConfig::defaults(g.period(), false, 3);
        single.duration = Nanos::from_ms(30_000);
        single.settle = Nanos::from_ms(15_000);
        let dual = DualSimConfig { dual: true, ..single };
        let s = run(&single).unwrap();
        let d = run(&dual).unwrap();
        let (s_mean, s_p99) = abs_stats(&s.sync_error, 99.0);
        let (d_mean, d_p99) = abs_stats(&d.sync_error, 99.0);
        assert!(d_mean * 5.0 < s_mean, "sync error: dual {d_mean} ns vs single {s_mean} ns");
        assert!(d_p99 < s_p99, "sync p99: dual {d_p99} vs single {s_p99}");
        let (_, s_stab) = abs_stats(&s.stability, 99.0);
        let (_, d_stab) = abs_stats(&d.stability, 99.0);
        assert!(d_stab < s_stab, "stability p99: dual {d_stab} vs single {s_stab}");
        assert!(d.merges.rx_lagging > 0 && d.merges.tx_lagging > 0, "faults were snapped: {:?}", d.merges);
    }

    /// Convergence: the first window within twice the steady state's typical median.
    #[test]
    fn convergence_is_the_first_window_near_the_steady_state() {
        let w = window_medians(&[5.0, -5.0, 5.0, 1.0, 1.0, -1.0, 9.0], 2);
        assert_eq!(w, [5.0, 5.0, 1.0], "medians of whole windows (the upper middle of two)");
        assert_eq!(converged(&[40.0, 20.0, 3.0, 2.0, 1.0, 2.0, 1.0], 4), Some(3));
        assert_eq!(converged(&[1.0, 1.0, 1.0], 1), Some(0));
        assert_eq!(converged(&[9.0, 5.0, 1.0], 2), Some(2));
        assert_eq!(converged(&[1.0], 3), None, "no steady state to judge against");
    }
}
