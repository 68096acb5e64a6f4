//! What a PTP port needs of a station, and both stations that carry PTP: the slot station (an event message
//! leaves at the start of a slot its class owns) and the byte clock (it leaves on the byte nearest its txtime,
//! inside a window of its class, unpadded). Either way its TX time is known exactly before it is handed in.

use keepon_core::bytes::ByteStation;
use keepon_core::ephc::{ClockAdjust, EphcError};
use keepon_core::isolation::ClassId;
use keepon_core::outcome::{Frame, Reason};
use keepon_core::station::Station;
use keepon_core::time::{Nanos, Tai};

use crate::clock::EphcClock;

/// Where a PTP frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The txtime it is handed in with.
    pub txtime: Tai,
    /// When it starts on the wire, on the EPHC as it is now (its `Sent` time, unless the clock is adjusted
    /// before it is posted).
    pub tx: Tai,
    /// Where the next PTP frame may go at the earliest (opaque to the port: a slot, or a time).
    pub mark: i128,
}

/// A station a PTP port runs on.
pub trait PtpStation {
    /// The EPHC as the servo sees it at host time `now`.
    fn servo_clock(&self, now: Tai) -> EphcClock;
    /// The current clock (every adjustment applied) at host time `host`: RX times are read on it.
    fn clock_at(&self, host: Tai) -> Tai;
    /// The EPHC's time at host time `host`, as the wire has it: release times are read on it.
    fn wire_clock_at(&self, host: Tai) -> Tai;
    /// Apply a servo's adjustment (the station's `adjust_clock`).
    fn steer(&mut self, adj: ClockAdjust) -> Result<(), EphcError>;
    /// The next place for a frame of `len` data bytes in `class`, at least `lead` ahead of the wire and not
    /// before `after` (the last place's mark). `None` if the class has none within a cycle.
    fn next_place(&self, class: ClassId, lead: Nanos, len: usize, after: Option<i128>) -> Option<Place>;
    /// The data bytes a frame fills anyway (a slot's), which a message may pad itself to; 0 for none.
    fn pad_to(&self) -> usize;
    /// Hand a frame in (the station's `submit`).
    fn hand_in(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason>;
    /// How far ahead of the wire a PTP frame should be placed: beyond what is posted, and one poll.
    fn ptp_lead(&self) -> Nanos;
}

impl PtpStation for Station<Vec<u8>> {
    fn servo_clock(&self, now: Tai) -> EphcClock {
        EphcClock::new(self.ephc().clone(), self.wire_position(self.ring().consumed())).reading(self.clock_at(now))
    }
    fn clock_at(&self, host: Tai) -> Tai {
        Station::clock_at(self, host)
    }
    fn wire_clock_at(&self, host: Tai) -> Tai {
        Station::ephc_at(self, host)
    }
    fn steer(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        Station::adjust_clock(self, adj).map(|_| ())
    }
    /// The first slot the class owns whose start is at least `lead` ahead, after the last one taken.
    fn next_place(&self, class: ClassId, lead: Nanos, _len: usize, after: Option<i128>) -> Option<Place> {
        let own = &self.config().ownership;
        let n = self.ring().len();
        let phase = self.phase();
        // On the current clock (slots in flight keep the clock they were posted under, which a step has left).
        let soon = self.ephc().time_of(self.wire_position(self.ring().consumed())) + lead;
        let mut k = self.slot_of(soon)?;
        if let Some(last) = after {
            k = k.max(u64::try_from(last).ok()? + 1);
        }
        let k = (k..k + n).find(|&j| own.owner_of((j + phase) % n) == Some(class))?;
        let j = u64::try_from(i128::from(k) + i128::from(self.schedule_shift())).ok()?;
        Some(Place { txtime: self.schedule().time_of(j), tx: self.slot_time(k), mark: i128::from(k) })
    }
    fn pad_to(&self) -> usize {
        self.ring().data_bytes()
    }
    fn hand_in(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason> {
        Station::submit(self, frame, now)
    }
    /// `2·batch + 2` slots: the insertion window starts `batch` slots ahead, and the frame must be placed
    /// before its slot is posted.
    fn ptp_lead(&self) -> Nanos {
        let c = self.config();
        Nanos(i64::try_from(c.geometry.period().ceil_mul(u64::from(c.batch) * 2 + 2)).unwrap_or(i64::MAX))
    }
}

impl PtpStation for ByteStation<Vec<u8>> {
    fn servo_clock(&self, now: Tai) -> EphcClock {
        EphcClock::new(self.ephc().clone(), self.wire_position(self.ring().consumed())).reading(self.ephc_at(now))
    }
    /// (The byte clock applies an adjustment from the next byte it posts, and has no separate host grid: the
    /// current clock is the EPHC.)
    fn clock_at(&self, host: Tai) -> Tai {
        ByteStation::ephc_at(self, host)
    }
    fn wire_clock_at(&self, host: Tai) -> Tai {
        ByteStation::ephc_at(self, host)
    }
    fn steer(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        ByteStation::adjust_clock(self, adj)
    }
    /// The first time inside a window of the class, at least `lead` after the end of the posted wire (on the
    /// clock as it is now: a servo's step moves what is not yet posted) and after the last PTP frame's end, and
    /// the byte it will leave on.
    fn next_place(&self, class: ClassId, lead: Nanos, len: usize, after: Option<i128>) -> Option<Place> {
        let soon = self.posted_until() + lead;
        let from = match after {
            Some(end) => soon.max(Tai(i64::try_from(end).ok()?)),
            None => soon,
        };
        let p = self.first_place(class, from, len)?;
        Some(Place { txtime: p.txtime, tx: p.tx, mark: i128::from(p.end.0) })
    }
    fn pad_to(&self) -> usize {
        0
    }
    fn hand_in(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason> {
        ByteStation::submit(self, frame, now)
    }
    /// Beyond the posted wire by the posted lead (what one poll after a stall may post at once) and two longest
    /// frames: placed before the wire is posted that far.
    fn ptp_lead(&self) -> Nanos {
        let c = self.config();
        let longest = c.rate.wire_time(c.max_frame);
        Nanos(c.lead.0.saturating_add(i64::try_from(longest.ceil_mul(2)).unwrap_or(i64::MAX)))
    }
}
