//! A seeded simulation of one keepon slave synchronising its EPHC to an ideal master (simulated time).
//!
//! The slave's NIC sends one slot after another; its oscillator runs fast by `ppm` (plus a random-walk
//! `wander`), so slot `k` starts on the wire at true time `t_k` with `t_{k+1} − t_k = δ/(1 + ppm·10⁻⁶)`.
//! The EPHC stamps slot `k` with `time_of(k)`. The slave's *true error* at slot `k` is
//! `time_of(k) − master(t_k)`: what a frame scheduled into slot `k` is off by on the wire.
//!
//! One exchange per sync interval, E2E:
//! - Sync: sent by the master at `t1` (exact), received after the path delay plus a uniform RX jitter in
//!   `[0, rx_jitter]`; `t2` is the EPHC's reading then (the current slot's start: granularity δ, floored), minus
//!   the configured RX latency correction;
//! - Delay_Req: put into the first slot half an interval later; `t3 = time_of(slot)` exactly (keepon knows its
//!   TX time); the master stamps `t4` on arrival (exact).

use keepon_core::ephc::Ephc;
use keepon_core::time::{Nanos, SlotPeriod, Tai};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::{ClockError, EphcClock, ServoClock};
use crate::servo::{Sample, Servo, ServoStatus};

/// The master's epoch: true time 0 is this TAI instant.
pub const EPOCH: Tai = Tai(1_700_000_000_000_000_000);

/// A free-running oscillator driving a NIC's slot count, in true (simulated) time.
#[derive(Clone, Debug)]
pub struct Oscillator {
    period_ns: f64,
    ppm: f64,
    wander: f64,
    anchor_t: f64,
    anchor_k: u64,
    rng: ChaCha8Rng,
}

impl Oscillator {
    /// Slots of nominal `period`, the oscillator fast by `ppm`, its frequency a random walk of `wander` ppm per
    /// √s (applied piecewise at every [`Oscillator::wander_to`]), seeded.
    pub fn new(period: SlotPeriod, ppm: f64, wander: f64, seed: u64) -> Oscillator {
        Oscillator {
            period_ns: period.num() as f64 / period.den() as f64,
            ppm,
            wander,
            anchor_t: 0.0,
            anchor_k: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    fn slot_ns(&self) -> f64 {
        self.period_ns / (1.0 + self.ppm * 1e-6)
    }

    /// The oscillator's current frequency error, ppm.
    pub fn ppm(&self) -> f64 {
        self.ppm
    }

    /// The slot on the wire at true time `t` (ns since the epoch); `t` must not precede the last re-anchoring.
    pub fn slot_at(&self, t: f64) -> u64 {
        self.anchor_k + ((t - self.anchor_t).max(0.0) / self.slot_ns()).floor() as u64
    }

    /// True start time of slot `k` (at or after the last re-anchoring).
    pub fn start_of(&self, k: u64) -> f64 {
        self.anchor_t + (k.saturating_sub(self.anchor_k)) as f64 * self.slot_ns()
    }

    /// Let the frequency wander up to true time `t` (one random-walk step).
    pub fn wander_to(&mut self, t: f64) {
        let k = self.slot_at(t);
        let dt = (self.start_of(k) - self.anchor_t) / 1e9;
        self.anchor_t = self.start_of(k);
        self.anchor_k = k;
        if self.wander > 0.0 && dt > 0.0 {
            // Sum of 12 uniforms − 6: a seeded, platform-independent approximately normal draw.
            let z: f64 = (0..12).map(|_| self.rng.gen::<f64>()).sum::<f64>() - 6.0;
            self.ppm += self.wander * dt.sqrt() * z;
        }
    }
}

/// Parameters of one simulation run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimConfig {
    /// Slot period δ (the EPHC's granularity).
    pub period: SlotPeriod,
    /// Initial oscillator error of the slave, ppm.
    pub ppm: f64,
    /// Oscillator wander, ppm/√s.
    pub wander: f64,
    /// The slave EPHC's initial offset from the master.
    pub initial_offset: Nanos,
    /// Sync interval.
    pub interval: Nanos,
    /// One-way path delay (symmetric).
    pub delay: Nanos,
    /// Uniform software RX jitter at the slave, `[0, rx_jitter]`.
    pub rx_jitter: Nanos,
    /// Constant RX latency at the slave (added to every arrival).
    pub rx_latency: Nanos,
    /// RX latency correction subtracted from `t2` (calibration).
    pub rx_correction: Nanos,
    /// Simulated duration.
    pub duration: Nanos,
    /// A master phase jump: at this true time the master's clock jumps by the amount.
    pub master_jump: Option<(Nanos, Nanos)>,
    /// Seed of the random streams.
    pub seed: u64,
}

/// One row of a run's record: the true error at a sync instant, and the servo's view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimRow {
    /// True time of the sample since the start.
    pub t: Nanos,
    /// True error of the EPHC at the current slot (`time_of(k) − master(t_k)`), before this sample's correction.
    pub true_error: Nanos,
    /// The servo after this sample.
    pub status: ServoStatus,
    /// The oscillator's frequency error then (ppm).
    pub osc_ppm: f64,
    /// The EPHC's frequency adjustment then (ppm).
    pub freq_ppm: f64,
}

/// Run the simulation with `servo`; one row per Sync.
pub fn run<S: Servo>(cfg: &SimConfig, servo: &mut S) -> Result<Vec<SimRow>, ClockError> {
    let mut osc = Oscillator::new(cfg.period, cfg.ppm, cfg.wander, cfg.seed);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5eed_5eed);
    let mut clock = EphcClock::new(Ephc::new(cfg.period, 0, EPOCH + cfg.initial_offset), 0);
    // The master's clock relative to EPOCH (f64 ns since EPOCH: exact to far below a ns over hours; absolute
    // TAI values are only formed in i64).
    let master = |t: f64| -> f64 {
        let jump = match cfg.master_jump {
            Some((at, by)) if t >= at.0 as f64 => by.0 as f64,
            _ => 0.0,
        };
        t + jump
    };
    let since_epoch = |t: Tai| (t.0 - EPOCH.0) as f64;
    let interval = cfg.interval.0.max(1) as f64;
    let mut rows = Vec::new();
    let mut n = 1u64;
    while (n as f64) * interval <= cfg.duration.0 as f64 {
        let ts = n as f64 * interval;
        osc.wander_to(ts);
        // Timers the servo asked for, in the slave's time.
        let k_now = osc.slot_at(ts);
        clock.advance_to(k_now);
        if servo.update_due().is_some_and(|due| due <= clock.now()) {
            servo.update(&mut clock)?;
        }
        let true_error = Nanos((since_epoch(clock.ephc().time_of(k_now)) - master(osc.start_of(k_now))).round() as i64);
        // Sync.
        let t1 = EPOCH.0 + master(ts).round() as i64;
        let arrive =
            ts + cfg.delay.0 as f64 + cfg.rx_latency.0 as f64 + rng.gen_range(0.0..=cfg.rx_jitter.0.max(0) as f64);
        clock.advance_to(osc.slot_at(arrive));
        let t2 = clock.now().0 - cfg.rx_correction.0;
        let status = servo.sample(
            Sample { at: clock.now(), sync_raw: Some(Nanos(t2 - t1)), delay_raw: None, peer_delay: None },
            &mut clock,
        )?;
        rows.push(SimRow {
            t: Nanos(ts as i64),
            true_error,
            status,
            osc_ppm: osc.ppm(),
            freq_ppm: clock.freq_ppt() as f64 / 1e6,
        });
        // Delay_Req half an interval later, in the next whole slot.
        let k3 = osc.slot_at(ts + interval / 2.0) + 1;
        clock.advance_to(k3);
        let t3 = clock.ephc().time_of(k3).0;
        let t4 = EPOCH.0 + master(osc.start_of(k3) + cfg.delay.0 as f64).round() as i64;
        servo.sample(
            Sample { at: clock.now(), sync_raw: None, delay_raw: Some(Nanos(t3 - t4)), peer_delay: None },
            &mut clock,
        )?;
        n += 1;
    }
    Ok(rows)
}
