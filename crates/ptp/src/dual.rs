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
//! - An interval in which no reading agreed and the TX clock lagged beyond 2τ steps the EPHC to the RX clock
//!   (the merge rule's "the lagging clock is set to the leading one"; a TX clock that leads instead is handled by
//!   the merge, which renumbers the RX clock).
//! - A step handed to the EPHC shows in the TX readings only once the slots posted before it have left: until
//!   the readings agree again (at most 50 ms) they are not merged, so the merge does not undo the step.
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

impl DualGains {
    /// The default gains with an interval of at least 390 slots (1 ms at the paper's 2.56 µs slots): the readings'
    /// quantization is a slot, so an interval of a fixed number of slots averages it as well at any slot size.
    pub fn for_period(period: SlotPeriod) -> DualGains {
        let slots = Nanos(i64::try_from(period.ceil_mul(390)).unwrap_or(i64::MAX));
        let d = DualGains::default();
        DualGains { interval: d.interval.max(slots), ..d }
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
    /// Sum and number of `T_rx − T_tx` of the readings where the TX clock lagged beyond 2τ, since the last
    /// steering.
    behind_sum: i64,
    behind_n: i64,
    /// Steps of the EPHC to the RX clock (a whole interval of TX readings lagging).
    tx_steps: u64,
    /// After a step handed to the EPHC: until then (or until the readings agree again) they are not merged —
    /// the station applies a step from the next slot it posts, so the TX reading shows it only once the slots
    /// already posted have left, and merging meanwhile would renumber the RX clock back by the step.
    settling: Option<Tai>,
    /// The EPHC is right to the slot (see [`DualSteer::trust_tx_to_the_slot`]).
    tx_slots_trusted: bool,
    last_steer: Tai,
}

/// The longest wait for the EPHC's step to show in the TX readings (posted slots leave well within it).
const SETTLE: Nanos = Nanos::from_ms(50);

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
            behind_sum: 0,
            behind_n: 0,
            tx_steps: 0,
            settling: None,
            tx_slots_trusted: false,
            last_steer: now,
        })
    }

    /// The EPHC is already synchronised (a single clock acquired it): from now on it is trusted to the slot and
    /// the RX clock gives the phase within one. PTP's steps move only the RX clock, whatever their size (one
    /// beyond τ is the count's error: slots its master did not fill, or lost frames), and an interval whose TX
    /// readings all lag the RX clock beyond 2τ renumbers the RX clock by whole slots instead of stepping the
    /// EPHC. The EPHC follows the RX clock only through the loop's frequency.
    pub fn trust_tx_to_the_slot(&mut self) {
        self.tx_slots_trusted = true;
    }

    /// Start the loop from the EPHC's frequency adjustment `ppt` (one a servo already found), instead of none.
    pub fn seed_rate(&mut self, ppt: i64) {
        self.integral_ppb = (ppt as f64 / 1000.0).clamp(-500_000.0, 500_000.0);
    }

    /// The RX clock's time of RX count `count` (a received frame's place in the count): a Sync's `t2`.
    pub fn rx_time_of(&self, count: u64) -> Option<Tai> {
        self.clock.rx_time_of(count)
    }

    /// One poll at host time `now`: the TX reading `t_tx` (the EPHC at the slot on the wire) and the RX count.
    /// Returns the frequency to give the EPHC when an interval ends clean.
    pub fn poll(&mut self, now: Tai, t_tx: Tai, count: u64) -> Option<ClockAdjust> {
        if let Some(until) = self.settling {
            let apart = self.clock.rx_time_of(count).map_or(0, |t_rx| (t_tx - t_rx).0.abs());
            if now < until && apart > 2 * self.clock.tau().0 {
                self.last_steer = now;
                return None;
            }
            self.settling = None;
        }
        match self.clock.read(t_tx, count) {
            // The interval's readings straddle the renumbering: start again.
            Merge::RxLagging(_) => (self.sum, self.n) = (0, 0),
            Merge::Agree(_) => {
                if let Some(t_rx) = self.clock.rx_time_of(count) {
                    self.sum += (t_tx - t_rx).0;
                    self.n += 1;
                }
            }
            Merge::TxLagging(_) => {
                if let Some(t_rx) = self.clock.rx_time_of(count) {
                    self.behind_sum += (t_rx - t_tx).0;
                    self.behind_n += 1;
                }
            }
        }
        if now - self.last_steer < self.gains.interval {
            return None;
        }
        let mut out = None;
        if self.n == 0 && self.behind_n > 0 {
            // Not one reading agreed and the TX clock lagged: not a stale reading but the EPHC itself behind (a
            // host stall, a step it missed). The merge rule sets the lagging clock to the leading one: the EPHC
            // is stepped to the RX clock.
            let behind = self.behind_sum / self.behind_n;
            if self.tx_slots_trusted {
                let slots = behind.signum() * ((2 * behind.abs() + self.period) / (2 * self.period));
                self.clock.step(Nanos(-slots * self.period));
                self.slot_fixes += 1;
                // Only the RX clock moved: `T_tx − T_rx` moves the other way (as for PTP's steps).
                if let Some(r) = &mut self.reference {
                    *r += slots * self.period;
                }
            } else {
                out = Some(ClockAdjust::Step(Nanos(behind)));
                self.tx_steps += 1;
                self.settling = Some(now + SETTLE);
            }
        } else if self.n > 0 {
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
        (self.sum, self.n, self.behind_sum, self.behind_n) = (0, 0, 0, 0);
        out
    }

    /// The PTP servo's held adjustments: steps set the RX clock's phase; those beyond τ are returned for the
    /// EPHC too (lock-in). Frequency adjustments are dropped.
    pub fn ptp(&mut self, adj: impl IntoIterator<Item = ClockAdjust>) -> Vec<ClockAdjust> {
        let mut out = Vec::new();
        for a in adj {
            let ClockAdjust::Step(by) = a else { continue };
            self.clock.step(by);
            (self.sum, self.n, self.behind_sum, self.behind_n) = (0, 0, 0, 0);
            if by.0.abs() > self.clock.tau().0 && !self.tx_slots_trusted {
                out.push(ClockAdjust::Step(by));
                self.settling = Some(self.last_steer + SETTLE);
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

    /// Steps of the EPHC to the RX clock (intervals in which every TX reading lagged beyond 2τ).
    pub fn tx_steps(&self) -> u64 {
        self.tx_steps
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

    /// A TX clock a millisecond behind the RX clock for a whole interval is stepped onto it; one stale reading
    /// among agreeing ones is not.
    #[test]
    fn a_tx_clock_left_behind_is_stepped_to_the_rx_clock() {
        let t0 = Tai(1_000_000_000);
        let mut s = DualSteer::new(period(), DualGains::default(), t0).unwrap();
        let at = |i: i64| Tai(t0.0 + i * P);
        let mut out = Vec::new();
        for i in 0..300i64 {
            let now = t0 + Nanos(i * 12_304);
            // Anchored on the first reading; one stale reading at i = 10; behind by 1 ms from i = 100.
            let t_tx = match i {
                10 => at(i) - Nanos(3 * P),
                100.. => at(i) - Nanos(1_000_000),
                _ => at(i),
            };
            out.extend(s.poll(now, t_tx, i as u64).map(|a| (i, a)));
        }
        let steps: Vec<_> = out.iter().filter(|(_, a)| matches!(a, ClockAdjust::Step(_))).collect();
        assert_eq!(steps.len(), 1, "{out:?}");
        assert!(steps[0].0 > 100, "{steps:?}");
        assert_eq!(steps[0].1, ClockAdjust::Step(Nanos(1_000_000)));
        assert_eq!(s.tx_steps(), 1);
    }

    /// Trusting the EPHC to the slot: PTP's large steps and TX readings that lag by whole slots move only the RX
    /// clock.
    #[test]
    fn a_trusted_tx_clock_is_never_stepped() {
        let t0 = Tai(1_000_000_000);
        let mut s = DualSteer::new(period(), DualGains::default(), t0).unwrap();
        s.trust_tx_to_the_slot();
        let at = |i: i64| Tai(t0.0 + i * P);
        assert_eq!(s.poll(t0, at(0), 0), None); // anchored
        assert!(s.ptp([ClockAdjust::Step(Nanos(50_000))]).is_empty(), "the count's error: RX only");
        assert_eq!(s.rx_time_of(0), Some(at(0) + Nanos(50_000)));
        // The RX clock now leads the (right) TX readings by 50 µs ≈ 4 slots: a whole interval of them renumbers
        // it back by 4 slots, and the EPHC gets no step.
        let mut out = Vec::new();
        for i in 1..300i64 {
            out.extend(s.poll(t0 + Nanos(i * P), at(i), i as u64));
        }
        assert!(out.iter().all(|a| matches!(a, ClockAdjust::Rate(_))), "{out:?}");
        assert_eq!(s.tx_steps(), 0);
        assert_eq!(s.rx_time_of(0), Some(at(0) + Nanos(50_000 - 4 * P)));
    }
}
