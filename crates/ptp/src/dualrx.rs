//! The dual clock on a real receiver (paper §4.2, A.3; `ptp.dual_clock`): a slave whose master is a keepon
//! station streaming at line rate counts the master's frames — fillers included, each one of the master's slots —
//! into an RX slot clock. [`crate::node::PtpNode`] runs it; the daemon and the two-station harness on the
//! simulated NIC (`tests/link.rs`) both use this one type.
//!
//! - **Acquire on the single clock.** Until the slave is synchronised, PTP runs as without the dual clock:
//!   software receive stamps, the servo steering the EPHC (it learns the oscillator's frequency error).
//! - **Track on the dual clock.** Once synchronised, the RX clock takes over, anchored on the EPHC and with the
//!   local loop starting from the EPHC's frequency: each received PTP event message gets the RX clock's time of
//!   its place in the count as its `t2`, instead of a software stamp; PTP's measurements set the RX clock's phase
//!   (the port's adjustments are held: a step moves only the RX clock — the EPHC, acquired on the single clock,
//!   is trusted to the slot, so a step beyond τ is the count's error; frequency adjustments are dropped — the RX
//!   clock runs at the master's rate by construction); a local loop steers the EPHC's frequency to the RX clock
//!   on the merge rule's agreeing readings ([`DualSteer::trust_tx_to_the_slot`]).
//! - **Fall back** to the single clock when the slave has not been synchronised for [`FALL_BACK`] while tracking
//!   (a master whose stream had gaps the count could not absorb), and take over again once synchronised.
//!
//! The steering is [`crate::dual::DualSteer`] (tested exactly there); what this module adds is the count:
//!
//! - every frame the link's receiver hands in is one master slot, in order (a point-to-point link: the first
//!   hop is the master itself, which keeps every slot at δ — it never steers, so its fillers stay nominal);
//! - frames the receiver dropped for lack of buffer (on Linux `PACKET_STATISTICS`) were in the stream too: they
//!   are counted when the receiver reports them, after the frames it did deliver (a full buffer drops the newest);
//! - the TX reading ([`DualRx::tx_reading`]) is the EPHC time of the last slot the NIC took, on a link with a
//!   wire (the wire runs on the NIC's oscillator, not the host's clock), and on a host-paced link the start of the
//!   schedule slot the EPHC is in now as the host has it (`StationFace::ephc_at`: the clock the host releases
//!   slots by), so that it lags the truth by less than a slot as the count does (the master's slots are on the
//!   same grid); the RX reading is the start of the slot after the last one fully arrived — on a host-paced link
//!   (veth), where a frame arrives as soon as it is sent, of the last one received.
//!
//! What the count cannot see: slots the master did not fill (its host did not post them in time: an underrun
//! leaves its link idle) and frames the NIC discards (a bad FCS). Both are whole slots, which the merge rule's
//! renumbering and the loop's interval check absorb when they are few (see `DualSteer`); a master that
//! underruns often breaks the premise — the paper's dual clock needs a peer streaming at line rate.
//!
//! On a veth (host-paced, `crates/keepon/tests/netns_dual.rs`) the mode works but does not help: there is no
//! wire, so the master's frames leave when its host releases them — tens of µs late, in bursts after a stall,
//! not at all after an underrun — and counting them does not measure time; the slave then holds tens of µs
//! instead of the single clock's ~100 ns (docs/ptp.md has the figures). Its accuracy is shown where the premise
//! holds: two stations back to back on the simulated NIC (`tests/link.rs`).

use crate::dual::{DualGains, DualSteer};
use keepon_core::ephc::ClockAdjust;
use keepon_core::face::StationFace;
use keepon_core::time::{Nanos, SlotPeriod, Tai};

/// How long a tracking dual clock may go unsynchronised before the slave falls back to the single clock.
pub const FALL_BACK: Nanos = Nanos::from_ms(5_000);

/// The RX count and, while tracking, the dual clock's steering.
#[derive(Debug)]
pub struct DualRx {
    period: SlotPeriod,
    /// `Some` while tracking.
    steer: Option<DualSteer>,
    /// The master's slots counted so far (frames received, and dropped by the socket).
    count: u64,
    /// Socket drops already counted.
    drops: u64,
    /// The EPHC adjustments the loop and PTP made while tracking.
    steered: u64,
    /// Take-overs by the dual clock, and falls back to the single clock.
    takeovers: u64,
    fallbacks: u64,
    /// Frames arrive as they are sent, not after their last byte (a link without a wire clock: veth).
    unserialised: bool,
    /// Counters of the earlier tracking periods: (agreeing, TX lagging, RX lagging, renumbered, EPHC steps).
    past: [u64; 5],
}

impl DualRx {
    /// For the master's slots of `period` (whole ns: the configuration checks it), on a link with a wire (see
    /// [`DualRx::set_unserialised`] for one without).
    pub fn new(period: SlotPeriod) -> Result<DualRx, String> {
        DualSteer::new(period, DualGains::default(), Tai(0))
            .map_err(|e| format!("ptp.dual_clock: the slot period {:?} is not whole ns", e.0))?;
        Ok(DualRx {
            period,
            steer: None,
            count: 0,
            drops: 0,
            steered: 0,
            takeovers: 0,
            fallbacks: 0,
            unserialised: false,
            past: [0; 5],
        })
    }

    /// Frames arrive as soon as they are sent: a host-paced link such as veth has no wire to serialise them on.
    pub fn set_unserialised(&mut self) {
        self.unserialised = true;
    }

    /// True while the dual clock tracks (PTP's `t2` from the RX clock).
    pub fn tracking(&self) -> bool {
        self.steer.is_some()
    }

    /// Take over at host time `now` from an EPHC whose frequency adjustment is `rate_ppt`: the RX clock is
    /// anchored on the next reading.
    pub fn take_over(&mut self, now: Tai, rate_ppt: i64) {
        let Ok(mut steer) = DualSteer::new(self.period, DualGains::for_period(self.period), now) else { return };
        steer.seed_rate(rate_ppt);
        steer.trust_tx_to_the_slot();
        self.steer = Some(steer);
        self.takeovers += 1;
    }

    /// Fall back to the single clock.
    pub fn fall_back(&mut self) {
        if let Some(s) = self.steer.take() {
            let c = s.counters();
            for (p, v) in self.past.iter_mut().zip([c.agreed, c.tx_lagging, c.rx_lagging, s.slot_fixes(), s.tx_steps()])
            {
                *p += v;
            }
            self.fallbacks += 1;
        }
    }

    /// A received frame: its place in the count (the master's slot it came in), counted.
    pub fn count_frame(&mut self) -> u64 {
        self.count += 1;
        self.count - 1
    }

    /// The socket's cumulative drops: the new ones are counted as slots.
    pub fn dropped(&mut self, total: u64) {
        self.count += total.saturating_sub(self.drops);
        self.drops = self.drops.max(total);
    }

    /// While tracking, the RX clock's time of the frame at `place` in the count (`None` before the first reading
    /// anchors it).
    pub fn t2(&self, place: u64) -> Option<Tai> {
        self.steer.as_ref()?.rx_time_of(place)
    }

    /// One poll at host time `now` with the TX reading `t_tx` (see [`DualRx::tx_reading`]): while tracking, the
    /// EPHC adjustment the local loop asks for.
    pub fn poll(&mut self, now: Tai, t_tx: Tai) -> Option<ClockAdjust> {
        // Slots fully arrived: on a wire a frame is in when its last byte is (the slot after it may have started);
        // on a link without one (veth) it is in as soon as it is sent, so the last frame's slot is still on.
        let arrived = if self.unserialised { self.count.saturating_sub(1) } else { self.count };
        let a = self.steer.as_mut()?.poll(now, t_tx, arrived);
        self.steered += u64::from(a.is_some());
        a
    }

    /// The TX reading of `station` at host time `now`, lagging the truth by less than a slot as the RX count's
    /// reading does (the start of the master's slot arriving, on the same grid), as the merge rule assumes:
    /// - on a link with a wire, the EPHC time of the slot on the wire: the first of the `unfinished` slots the
    ///   NIC took but has not finished sending (`keepon_nic::Nic::unfinished`; 0 where the backend counts a slot
    ///   taken only once sent). Not the host's view of the wire (`StationFace::ephc_at`): the wire runs on the
    ///   NIC's oscillator, which drifts from the host's clock by its error — 20 ppm is 20 µs a second, and the
    ///   merge rule's band is two slots;
    /// - on a host-paced link (veth), where the host releases each slot at its time, the start of the schedule
    ///   slot the EPHC is in now, as the host has it.
    pub fn tx_reading<S: StationFace>(&self, station: &S, now: Tai, unfinished: u64) -> Tai {
        if !self.unserialised {
            let k = station.ring().consumed().saturating_sub(unfinished);
            return station.ephc().time_of(station.wire_position(k));
        }
        let (ephc, base) = (station.ephc_at(now), station.base_time());
        let p = i128::from(self.period.num() / self.period.den());
        let since = i128::from((ephc - base).0);
        Tai(i64::try_from(i128::from(base.0) + since.div_euclid(p) * p).unwrap_or(ephc.0))
    }

    /// PTP's held adjustments: what the EPHC gets of them.
    pub fn ptp(&mut self, held: Vec<ClockAdjust>) -> Vec<ClockAdjust> {
        let Some(steer) = &mut self.steer else { return Vec::new() };
        let out = steer.ptp(held);
        self.steered += out.len() as u64;
        out
    }

    /// The merge rule's and the loop's counts over every tracking period so far.
    pub fn totals(&self) -> DualTotals {
        let mut c = self.past;
        if let Some(s) = &self.steer {
            let n = s.counters();
            for (p, v) in c.iter_mut().zip([n.agreed, n.tx_lagging, n.rx_lagging, s.slot_fixes(), s.tx_steps()]) {
                *p += v;
            }
        }
        DualTotals {
            agreed: c[0],
            tx_lagging: c[1],
            rx_lagging: c[2],
            renumbered: c[3],
            tx_steps: c[4],
            adjustments: self.steered,
            takeovers: self.takeovers,
            fallbacks: self.fallbacks,
            counted: self.count,
            dropped: self.drops,
        }
    }

    /// For the status line.
    pub fn describe(&self) -> String {
        let t = self.totals();
        format!(
            "dual clock {} ({} take-overs, {} falls back): {} master slots counted ({} dropped by the socket), \
             readings {} agreeing, {} TX lagging, {} RX lagging, {} renumbered by the loop, {} EPHC steps to the \
             RX clock, {} EPHC adjustments",
            if self.tracking() { "tracking" } else { "acquiring on the single clock" },
            t.takeovers,
            t.fallbacks,
            t.counted,
            t.dropped,
            t.agreed,
            t.tx_lagging,
            t.rx_lagging,
            t.renumbered,
            t.tx_steps,
            t.adjustments
        )
    }
}

/// What the dual clock did, over every tracking period so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DualTotals {
    /// Readings merged normally.
    pub agreed: u64,
    /// Readings where the TX reading lagged.
    pub tx_lagging: u64,
    /// Readings where the RX count lagged (re-anchored by whole slots).
    pub rx_lagging: u64,
    /// Slots renumbered by the loop's mean difference.
    pub renumbered: u64,
    /// EPHC steps to the RX clock.
    pub tx_steps: u64,
    /// EPHC adjustments made while tracking.
    pub adjustments: u64,
    /// Take-overs by the dual clock.
    pub takeovers: u64,
    /// Falls back to the single clock.
    pub fallbacks: u64,
    /// The master's slots counted.
    pub counted: u64,
    /// Of those, dropped by the receiver.
    pub dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count follows frames and drops in order; while tracking, a frame's `t2` is its slot on the RX clock,
    /// which the first reading anchors to the TX reading; PTP moves the RX clock; falling back ends it.
    #[test]
    fn frames_and_drops_are_slots_of_the_rx_clock() {
        let p = 100_000;
        let mut d = DualRx::new(SlotPeriod::new(p, 1)).unwrap();
        assert!(DualRx::new(SlotPeriod::new(9168, 10)).is_err());
        for i in 0..10 {
            assert_eq!(d.count_frame(), i);
        }
        d.dropped(3);
        d.dropped(3); // cumulative: nothing new
        assert_eq!(d.count_frame(), 13);
        // Acquiring: no RX clock, no steering.
        let t0 = Tai(5_000_000_000);
        assert_eq!((d.poll(Tai(0), t0), d.t2(13)), (None, None));
        assert!(d.ptp(vec![ClockAdjust::Step(Nanos(500))]).is_empty());
        d.take_over(Tai(0), -50_000_000);
        assert!(d.tracking());
        // The first reading anchors the RX clock: the count (14) is the TX reading's time.
        assert_eq!(d.poll(Tai(0), t0), None);
        assert_eq!(d.t2(14), Some(t0));
        assert_eq!((d.t2(13).unwrap() - t0).0, -(p as i64), "one slot apart");
        // A PTP step below τ moves the RX clock only; beyond τ the EPHC too.
        assert!(d.ptp(vec![ClockAdjust::Step(Nanos(500))]).is_empty());
        assert_eq!(d.t2(14).unwrap() - t0, Nanos(500));
        // The EPHC was acquired on the single clock: PTP's steps, even beyond τ, move only the RX clock.
        assert!(d.ptp(vec![ClockAdjust::Step(Nanos(200_000))]).is_empty());
        assert_eq!(d.t2(14).unwrap() - t0, Nanos(200_500));
        let text = d.describe();
        assert!(text.contains("tracking (1 take-overs, 0 falls back): 14 master slots counted (3 dropped"), "{text}");
        d.fall_back();
        assert!(!d.tracking() && d.t2(14).is_none());
        assert!(
            d.describe().contains("acquiring on the single clock (1 take-overs, 1 falls back)"),
            "{}",
            d.describe()
        );
    }
}
