//! The dual clock (paper §4.2, A.3; REFERENCE A.8): a second, RX slot clock and the merge rule.
//!
//! When the peer also streams at line rate (fillers included, and the NIC told to keep bad-FCS frames), every
//! received frame is one slot of the peer's clock: counting them gives an **RX slot clock** with the same
//! granularity τ = δ as the TX EPHC, whose ticks come from the peer's oscillator. Each reading of either clock
//! lags the truth by up to τ (a count is read once per update), so the truth lies in `[T, T + τ]` for both:
//!
//! ```text
//!   |T_tx − T_rx| ≤ 2τ:  merged = [max(T_tx, T_rx) + min(T_tx + τ, T_rx + τ)] / 2   (middle of the overlap)
//!   |T_tx − T_rx| > 2τ:  the lagging clock is faulty: use (snap to) the leading one
//! ```
//!
//! What a snap does differs by path, because the clocks fail differently in a polling driver:
//! - a lagging **TX** reading is a stale consumer index (the next poll catches up by itself — the TX EPHC is a
//!   function of the count and must not be stepped for it): the merged reading is the RX one, nothing changes;
//! - a lagging **RX** clock has lost frames (an RX ring overflow loses counts for good): the RX clock is
//!   renumbered by the nearest whole number of slots to the TX reading (lost frames are whole slots, and the
//!   TX reading is only good to τ, so this keeps the RX clock's sub-slot phase).
//!
//! The RX clock runs at the nominal period: its rate is the peer's. Phase steps of the local timescale (a PTP
//! servo's steps) apply to both clocks ([`DualClock::step`]); frequency corrections apply to the TX EPHC only,
//! which after lock runs at the peer's (master's) rate like the RX clock does natively.

use crate::ephc::Ephc;
use crate::time::{Nanos, SlotPeriod, Tai};

/// The merge rule's verdict on one pair of readings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// The readings agree within 2τ: the middle of their overlap.
    Agree(Tai),
    /// TX lagged by more than 2τ: the RX reading stands.
    TxLagging(Tai),
    /// RX lagged by more than 2τ: the TX reading stands (and the RX clock must be re-anchored).
    RxLagging(Tai),
}

impl Merge {
    /// The merged time.
    pub fn time(self) -> Tai {
        match self {
            Merge::Agree(t) | Merge::TxLagging(t) | Merge::RxLagging(t) => t,
        }
    }
}

/// The paper's merge rule with granularity `tau`.
pub fn merge(t_tx: Tai, t_rx: Tai, tau: Nanos) -> Merge {
    let d = i128::from(t_tx.0) - i128::from(t_rx.0);
    let two_tau = 2 * i128::from(tau.0);
    if d > two_tau {
        return Merge::RxLagging(t_tx);
    }
    if -d > two_tau {
        return Merge::TxLagging(t_rx);
    }
    let lo = i128::from(t_tx.0.max(t_rx.0));
    let hi = i128::from(t_tx.0.min(t_rx.0)) + i128::from(tau.0);
    Merge::Agree(Tai(((lo + hi).div_euclid(2)) as i64))
}

/// Counters of the dual clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DualCounters {
    /// Readings merged normally.
    pub agreed: u64,
    /// Readings where TX lagged (RX used).
    pub tx_lagging: u64,
    /// Readings where RX lagged (RX re-anchored).
    pub rx_lagging: u64,
}

/// The RX slot clock and the merge with the TX EPHC.
#[derive(Clone, Debug)]
pub struct DualClock {
    period: SlotPeriod,
    tau: Nanos,
    /// The RX slot clock: RX count → local time; anchored at the first reading.
    rx: Option<Ephc>,
    counters: DualCounters,
}

impl DualClock {
    /// A dual clock for slots of `period` (τ = one slot, rounded up to whole ns).
    pub fn new(period: SlotPeriod) -> DualClock {
        DualClock { period, tau: Nanos(period.ceil_mul(1) as i64), rx: None, counters: DualCounters::default() }
    }

    /// τ, the clocks' granularity.
    pub fn tau(&self) -> Nanos {
        self.tau
    }

    /// Counters of merge outcomes.
    pub fn counters(&self) -> DualCounters {
        self.counters
    }

    /// The RX clock's time of RX count `n` (the local time at which received slot `n` started), once anchored.
    pub fn rx_time_of(&self, n: u64) -> Option<Tai> {
        self.rx.as_ref().map(|c| c.time_of(n))
    }

    /// Merge one pair of readings: the TX EPHC's `t_tx` and the RX clock at RX count `rx_count` (all frames
    /// received so far). The first reading anchors the RX clock at `t_tx`. An RX clock lagging by more than 2τ
    /// has lost frames: it is renumbered by the nearest whole number of slots.
    pub fn read(&mut self, t_tx: Tai, rx_count: u64) -> Merge {
        let rx = self.rx.get_or_insert_with(|| Ephc::new(self.period, rx_count, t_tx));
        let m = merge(t_tx, rx.time_of(rx_count), self.tau);
        match m {
            Merge::Agree(_) => self.counters.agreed += 1,
            Merge::TxLagging(_) => self.counters.tx_lagging += 1,
            Merge::RxLagging(t) => {
                // Lost frames are whole slots: renumber by the nearest whole number of slots, which keeps the
                // RX clock's phase (the TX reading itself is only good to τ).
                self.counters.rx_lagging += 1;
                let lag = i128::from(t.0) - i128::from(rx.time_of(rx_count).0);
                let (num, den) = (i128::from(self.period.num()), i128::from(self.period.den()));
                let m = ((2 * lag * den + num).div_euclid(2 * num)).max(1);
                let target = rx_count.saturating_add(u64::try_from(m).unwrap_or(0));
                let at = rx.time_of(target);
                rx.set_time(at, rx_count);
            }
        }
        rx.advance(rx_count);
        m
    }

    /// The local timescale was stepped by `by` (a PTP servo's step): the RX clock moves with it.
    pub fn step(&mut self, by: Nanos) {
        if let Some(rx) = &mut self.rx {
            rx.step(by);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{LinkRate, SlotGeometry};
    use proptest::prelude::*;

    #[test]
    fn merge_rule_cases() {
        let tau = Nanos(10);
        // Overlap [12, 20]: middle 16.
        assert_eq!(merge(Tai(10), Tai(12), tau), Merge::Agree(Tai(16)));
        assert_eq!(merge(Tai(12), Tai(10), tau), Merge::Agree(Tai(16)));
        assert_eq!(merge(Tai(100), Tai(100), tau), Merge::Agree(Tai(105)));
        // Exactly 2τ apart still agrees (the overlap is empty; the rule gives the midpoint of the two).
        assert_eq!(merge(Tai(0), Tai(20), tau), Merge::Agree(Tai(15)));
        assert_eq!(merge(Tai(0), Tai(21), tau), Merge::TxLagging(Tai(21)));
        assert_eq!(merge(Tai(21), Tai(0), tau), Merge::RxLagging(Tai(21)));
    }

    proptest! {
        /// Both readings lag the truth by at most τ: they agree, the merged time lies in
        /// `[max reading, min reading + τ]` (where the truth is), so it is within τ/2 (+1 ns rounding) of the
        /// truth — half the error bound of either reading alone.
        #[test]
        fn merged_time_lies_in_the_overlap(truth in 0i64..1_000_000_000, tau in 1i64..20_000, a in 0.0f64..1.0, b in 0.0f64..1.0) {
            let t_tx = Tai(truth - (a * tau as f64) as i64);
            let t_rx = Tai(truth - (b * tau as f64) as i64);
            let m = merge(t_tx, t_rx, Nanos(tau));
            let Merge::Agree(t) = m else { return Err(TestCaseError::fail("lags ≤ τ must agree")) };
            prop_assert!(t >= t_tx.max(t_rx));
            prop_assert!(t.0 <= t_tx.0.min(t_rx.0) + tau);
            // The truth is in the same overlap: the merged time is within half the overlap's width of it.
            prop_assert!((t.0 - truth).abs() <= tau / 2 + 1);
        }
    }

    #[test]
    fn rx_clock_anchors_counts_and_reanchors_after_lost_frames() {
        let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap(); // δ = 10 µs
        let mut d = DualClock::new(g.period());
        assert_eq!(d.tau(), Nanos(10_000));
        assert_eq!(d.read(Tai(1_000_000), 7), Merge::Agree(Tai(1_005_000)));
        assert_eq!(d.rx_time_of(17), Some(Tai(1_100_000)));
        // 100 slots later on both sides: agree.
        assert_eq!(d.read(Tai(2_000_000), 107), Merge::Agree(Tai(2_005_000)));
        // RX lost 5 frames: it lags by 50 µs > 2τ; renumbered by 5 slots (the TX reading, 3 µs late, is only
        // good to τ: the RX phase is kept).
        assert_eq!(d.read(Tai(2_997_000), 202), Merge::RxLagging(Tai(2_997_000)));
        assert_eq!(d.rx_time_of(202), Some(Tai(3_000_000)));
        // A stale TX reading (3 slots behind): RX stands, nothing re-anchored.
        assert_eq!(d.read(Tai(3_970_000), 302), Merge::TxLagging(Tai(4_000_000)));
        assert_eq!(d.rx_time_of(302), Some(Tai(4_000_000)));
        d.step(Nanos(-500));
        assert_eq!(d.rx_time_of(302), Some(Tai(3_999_500)));
        assert_eq!(d.counters(), DualCounters { agreed: 2, tx_lagging: 1, rx_lagging: 1 });
    }
}
