//! What the station loop ([`crate::driver::Driver`]) needs of a station: the slot station
//! ([`keepon_core::station::Station`]) and the byte clock ([`keepon_core::bytes::ByteStation`]) both drive a NIC
//! the same way — frames in, a consumer count observed, descriptors posted, outcomes out.

use keepon_core::bytes::ByteStation;
use keepon_core::ephc::{ClockAdjust, EphcError};
use keepon_core::outcome::{Counters, Frame, Outcome, Reason};
use keepon_core::ring::{Ring, RingError, SlotView};
use keepon_core::station::{Observation, Poll, Station};
use keepon_core::time::{Nanos, Tai};

/// A station the loop can drive.
pub trait Engine {
    /// Hand a frame in (exactly one outcome follows).
    fn submit(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason>;
    /// One poll: observe, end frames, post.
    fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError>;
    /// Descriptor `k` for the NIC.
    fn view(&self, k: u64) -> SlotView<'_>;
    /// Outcomes since the last call.
    fn drain_outcomes(&mut self) -> std::vec::Drain<'_, Outcome>;
    /// The descriptor ring.
    fn ring(&self) -> &Ring;
    /// Where descriptor `k` was meant to start on the schedule, and whether the wire was locked to it (the
    /// slot station's grid); `None` where there is no grid.
    fn grid_of(&self, k: u64) -> Option<(Tai, bool)>;
    /// The EPHC's time at host time `host`.
    fn ephc_at(&self, host: Tai) -> Tai;
    /// The EPHC time descriptor `k` starts at.
    fn slot_time(&self, k: u64) -> Tai;
    /// The link is up and its anchor final.
    fn schedule_settled(&self) -> bool;
    /// Stop taking frames; those not yet posted are rejected `shutdown`.
    fn shutdown(&mut self);
    /// Shut down and every posted frame has left.
    fn drained(&self) -> bool;
    /// Frames handed in and not yet ended.
    fn in_flight(&self) -> usize;
    /// Counters.
    fn counters(&self) -> &Counters;
    /// How long a healthy NIC needs for one ring of descriptors.
    fn ring_span(&self) -> Nanos;
    /// Apply a synchronisation adjustment to the EPHC (from the next descriptor not yet posted on).
    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError>;
}

impl Engine for Station<Vec<u8>> {
    fn submit(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason> {
        Station::submit(self, frame, now)
    }
    fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError> {
        Station::poll(self, obs)
    }
    fn view(&self, k: u64) -> SlotView<'_> {
        Station::view(self, k)
    }
    fn drain_outcomes(&mut self) -> std::vec::Drain<'_, Outcome> {
        Station::drain_outcomes(self)
    }
    fn ring(&self) -> &Ring {
        Station::ring(self)
    }
    fn grid_of(&self, k: u64) -> Option<(Tai, bool)> {
        self.carried(k).map(|c| (self.schedule().time_of(c.slot), c.locked))
    }
    fn ephc_at(&self, host: Tai) -> Tai {
        Station::ephc_at(self, host)
    }
    fn slot_time(&self, k: u64) -> Tai {
        Station::slot_time(self, k)
    }
    fn schedule_settled(&self) -> bool {
        Station::schedule_settled(self)
    }
    fn shutdown(&mut self) {
        Station::shutdown(self)
    }
    fn drained(&self) -> bool {
        Station::drained(self)
    }
    fn in_flight(&self) -> usize {
        Station::in_flight(self)
    }
    fn counters(&self) -> &Counters {
        Station::counters(self)
    }
    fn ring_span(&self) -> Nanos {
        let p = self.config().geometry.period();
        Nanos(i64::try_from(p.floor_mul(Station::ring(self).len())).unwrap_or(i64::MAX))
    }
    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        Station::adjust_clock(self, adj).map(|_| ())
    }
}

impl Engine for ByteStation<Vec<u8>> {
    fn submit(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason> {
        ByteStation::submit(self, frame, now)
    }
    fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError> {
        ByteStation::poll(self, obs)
    }
    fn view(&self, k: u64) -> SlotView<'_> {
        ByteStation::view(self, k)
    }
    fn drain_outcomes(&mut self) -> std::vec::Drain<'_, Outcome> {
        ByteStation::drain_outcomes(self)
    }
    fn ring(&self) -> &Ring {
        ByteStation::ring(self)
    }
    fn grid_of(&self, _k: u64) -> Option<(Tai, bool)> {
        None
    }
    fn ephc_at(&self, host: Tai) -> Tai {
        ByteStation::ephc_at(self, host)
    }
    fn slot_time(&self, k: u64) -> Tai {
        ByteStation::slot_time(self, k)
    }
    fn schedule_settled(&self) -> bool {
        ByteStation::schedule_settled(self)
    }
    fn shutdown(&mut self) {
        ByteStation::shutdown(self)
    }
    fn drained(&self) -> bool {
        ByteStation::drained(self)
    }
    fn in_flight(&self) -> usize {
        ByteStation::in_flight(self)
    }
    fn counters(&self) -> &Counters {
        ByteStation::counters(self)
    }
    fn ring_span(&self) -> Nanos {
        ByteStation::ring_span(self)
    }
    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        ByteStation::adjust_clock(self, adj)
    }
}
