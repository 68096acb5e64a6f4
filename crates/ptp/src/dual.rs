//! The dual clock's steering (paper §4.2, A.3), sans-IO: what a slave whose master streams at line rate does
//! with the RX slot count ([`keepon_core::dualclock`]) and its PTP port.
//!
//! - Every poll: the TX reading (the EPHC at the slot on the wire) and the RX count go through the merge rule
//!   ([`DualClock::read`]); the first pair anchors the RX clock; an RX clock lagging by more than 2τ (lost
//!   frames) is renumbered by whole slots.
//! - A Sync's `t2` is the RX clock's time of the Sync's place in the RX count ([`DualSteer::rx_time_of`]).
//! - PTP sets the RX clock's phase: the port's servo adjustments are held
//!   ([`crate::port::PtpPort::hold_adjustments`]) and handed here ([`DualSteer::ptp`]); a step moves the RX
//!   clock, and the EPHC too when it exceeds τ (lock-in). Frequency adjustments are dropped: the RX clock runs at
//!   the master's rate by construction.
//! - A local PI loop steers the EPHC's frequency to the RX clock every [`DualGains::interval`], on the mean
//!   `T_tx − T_rx` of the polls whose readings agreed (their ±τ quantizations average out as the poll phase moves
//!   across the two slot grids).
//! - Lost counts are whole slots. The merge rule renumbers from one reading pair, good only to a slot, and
//!   losses of one or two slots hide in its 2τ band. The interval's mean is compared with the last clean
//!   interval's (the reference, moved with PTP's steps of the RX clock): beyond τ/2 off, the RX clock is
//!   renumbered by the nearest whole number of slots; beyond τ/4 (a loss during the interval) the interval is not
//!   used. Only clean intervals steer and become the reference.
//!
//! The caller applies what [`DualSteer::poll`] and [`DualSteer::ptp`] return to its station
//! (`adjust_clock`).

use keepon_core::dualclock::{DualClock, DualCounters, Merge};
use keepon_core::ephc::ClockAdjust;
use keepon_core::time::{Nanos, SlotPeriod, Tai};

/// The local loop's gains and interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualGains {
    /// Proportional and integral gain while acquiring (per interval, on the interval's frequency offset).
    pub acquire: (f64, f64),
    /// The same once tracking: less bandwidth, less of the readings' quantization noise passed on.
    pub track: (f64, f64),
    /// Clean intervals before tracking.
    pub acquired: u32,
    /// The steering interval.
    pub interval: Nanos,
}

impl Default for DualGains {
    /// `keepon_ptp::dualsim`'s acquisition gains (kp 0.002, ki 1e-5 per 1 ms sample: a 20 ppm error learnt
    /// within seconds, damping ≈ 0.3), then a quarter of the bandwidth (damping ≈ 0.7) after 10 000 clean
    /// intervals of 1 ms. Chosen, not fitted to a figure.
    fn default() -> Self {
        DualGains {
            acquire: (0.002, 0.000_01),
            track: (0.0005, 0.000_000_125),
            acquired: 10_000,
            interval: Nanos::from_ms(1),
        }
    }
}

/// The dual clock's state and local loop.
#[derive(Clone, Debug)]
pub struct DualSteer {
    clock: DualClock,
    gains: DualGains,
    /// The slot period, ns (whole).
    period: i64,
    /// Renumberings by the interval's mean difference.
    slot_fixes: u64,
    /// The last clean interval's mean `T_tx − T_rx`.
    reference: Option<i64>,
    /// Clean intervals so far, up to `gains.acquired`.
    clean: u32,
    integral_ppb: f64,
    /// Sum and number of agreeing `T_tx − T_rx` since the last steering.
    sum: i64,
    n: i64,
    last_steer: Tai,
}

/// A slot period that is not a whole number of ns: the RX count's slots would not be whole ns apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotWholeNs(pub SlotPeriod);

impl DualSteer {
    /// For slots of `period` (whole ns), starting at host time `now`.
    pub fn new(period: SlotPeriod, gains: DualGains, now: Tai) -> Result<DualSteer, NotWholeNs> {
        if !period.num().is_multiple_of(period.den()) {
            return Err(NotWholeNs(period));
        }
        Ok(DualSteer {
            clock: DualClock::new(period),
            gains,
            period: (period.num() / period.den()) as i64,
            slot_fixes: 0,
            reference: None,
            clean: 0,
            integral_ppb: 0.0,
            sum: 0,
            n: 0,
            last_steer: now,
        })
    }

    /// The RX clock's time of RX count `count` (a received frame's place in the count): a Sync's `t2`.
    pub fn rx_time_of(&self, count: u64) -> Option<Tai> {
        self.clock.rx_time_of(count)
    }

    /// One poll at host time `now`: the TX reading `t_tx` (the EPHC at the slot on the wire) and the RX count.
    /// Returns the frequency to give the EPHC when an interval ends clean.
    pub fn poll(&mut self, now: Tai, t_tx: Tai, count: u64) -> Option<ClockAdjust> {
        match self.clock.read(t_tx, count) {
            // The interval's readings straddle the renumbering: start again.
            Merge::RxLagging(_) => (self.sum, self.n) = (0, 0),
            Merge::Agree(_) => {
                if let Some(t_rx) = self.clock.rx_time_of(count) {
                    self.sum += (t_tx - t_rx).0;
                    self.n += 1;
                }
            }
            Merge::TxLagging(_) => {}
        }
        if now - self.last_steer < self.gains.interval {
            return None;
        }
        let mut out = None;
        if self.n > 0 {
            let mean = self.sum / self.n;
            let (tau, off) = (self.clock.tau().0, mean - self.reference.unwrap_or(mean));
            if 2 * off.abs() > tau {
                let slots = off.signum() * ((2 * off.abs() + self.period) / (2 * self.period));
                self.clock.step(Nanos(slots * self.period));
                self.slot_fixes += 1;
            } else if 4 * off.abs() <= tau {
                self.reference = Some(mean);
                self.clean = (self.clean + 1).min(self.gains.acquired);
                let (kp, ki) = if self.clean < self.gains.acquired { self.gains.acquire } else { self.gains.track };
                // PI on the mean difference as a frequency offset over the interval (ppb); the EPHC's absolute
                // frequency adjustment is the result.
                let o_ppb = mean as f64 / ((now - self.last_steer).0 as f64 / 1e9);
                self.integral_ppb = (self.integral_ppb - ki * o_ppb).clamp(-500_000.0, 500_000.0);
                let f = (self.integral_ppb - kp * o_ppb).clamp(-500_000.0, 500_000.0);
                out = Some(ClockAdjust::Rate((f * 1000.0).round() as i64));
            }
        }
        self.last_steer = now;
        (self.sum, self.n) = (0, 0);
        out
    }

    /// The PTP servo's held adjustments: steps set the RX clock's phase; those beyond τ are returned for the
    /// EPHC too (lock-in). Frequency adjustments are dropped.
    pub fn ptp(&mut self, adj: impl IntoIterator<Item = ClockAdjust>) -> Vec<ClockAdjust> {
        let mut out = Vec::new();
        for a in adj {
            let ClockAdjust::Step(by) = a else { continue };
            self.clock.step(by);
            (self.sum, self.n) = (0, 0);
            if by.0.abs() > self.clock.tau().0 {
                out.push(ClockAdjust::Step(by));
            } else if let Some(r) = &mut self.reference {
                // Only the RX clock moved: `T_tx − T_rx` moves the other way.
                *r -= by.0;
            }
        }
        out
    }

    /// The merge rule's counters.
    pub fn counters(&self) -> DualCounters {
        self.clock.counters()
    }

    /// Renumberings by the interval's mean difference.
    pub fn slot_fixes(&self) -> u64 {
        self.slot_fixes
    }

    /// τ.
    pub fn tau(&self) -> Nanos {
        self.clock.tau()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: i64 = 12_304;

    fn period() -> SlotPeriod {
        SlotPeriod::new(P as u64, 1)
    }

    /// A TX clock `ppm` fast against an RX clock that counts true slots: the loop returns frequencies that pull
    /// the mean difference towards the reference, and PTP's small steps move only the RX clock.
    #[test]
    fn the_loop_steers_the_tx_clock_onto_the_rx_clock() {
        let t0 = Tai(1_000_000_000);
        let mut s = DualSteer::new(period(), DualGains::default(), t0).unwrap();
        assert!(DualSteer::new(SlotPeriod::new(9168, 10), DualGains::default(), t0).is_err());
        // TX reading: the EPHC runs 10 ppm fast before the loop's (absolute) rate; RX count: true slots.
        let mut rate_ppt = 0i64;
        let mut tx_offset = 0f64; // ns, TX − true
        let mut last = t0;
        let mut steered = 0;
        for i in 1..=120_000i64 {
            let now = t0 + Nanos(i * 250_000); // a poll every 250 µs, 30 s
            tx_offset += (now - last).0 as f64 * (10e-6 + rate_ppt as f64 * 1e-12);
            last = now;
            let count = ((now - t0).0 / P) as u64;
            let t_tx = Tai(t0.0 + count as i64 * P + tx_offset as i64);
            if let Some(ClockAdjust::Rate(r)) = s.poll(now, t_tx, count) {
                rate_ppt = r;
                steered += 1;
            }
        }
        assert!(steered > 20_000, "{steered} clean steering intervals");
        assert!((rate_ppt + 10_000_000).abs() < 200_000, "the loop cancels the +10 ppm: {rate_ppt} ppt");
        assert!(tx_offset.abs() < (P / 2) as f64, "the TX clock stays within τ/2 of the RX clock: {tx_offset:.0} ns");
        assert_eq!(s.counters().rx_lagging, 0);
        // A PTP step below τ moves the RX clock only; one beyond τ moves the EPHC too.
        assert_eq!(s.ptp([ClockAdjust::Step(Nanos(500)), ClockAdjust::Rate(7)]), vec![]);
        assert_eq!(s.ptp([ClockAdjust::Step(Nanos(50_000))]), vec![ClockAdjust::Step(Nanos(50_000))]);
    }
}
