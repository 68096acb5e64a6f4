//! The one face of a keepon station, whatever its timing: what a backend's driver, a PTP port and the daemon drive.
//!
//! keepon has two timings over one wire: the slot station ([`Station`]: one ring slot per schedule slot) and the
//! byte clock ([`ByteStation`]: frames at any byte, unpadded). Everything above the core — the NIC driver loop,
//! the PTP port that places its event messages and steers the EPHC, the daemon that serves clients — is written
//! once against [`StationFace`], and each timing answers every method for itself (no method is a stub for one kind).
//!
//! ```text
//!   Driver (nic) ─┐
//!   PtpPort (ptp) ─┼─ StationFace ─┬─ Station      (slot grid)
//!   daemon ───────┘          └─ ByteStation  (byte clock)
//! ```

use alloc::vec::Vec;

use crate::bytes::windows::{Rat, Windows};
use crate::bytes::ByteStation;
use crate::ephc::{ClockAdjust, Ephc, EphcError};
use crate::isolation::ClassId;
use crate::outcome::{Counters, Frame, Outcome, Reason};
use crate::ring::{Ring, RingError, SlotView};
use crate::station::{Alignment, Observation, Poll, Station};
use crate::time::{Nanos, Tai};

/// Where the next frame of a class can go, found before it is handed in: what a PTP port writes into an event
/// message (its TX time) and hands the frame in with (its txtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextPlace {
    /// The txtime to hand the frame in with.
    pub txtime: Tai,
    /// When it will start on the wire, on the EPHC as it is now (its `Sent` time unless the clock is adjusted
    /// before it is posted).
    pub tx: Tai,
    /// Where it ends, as the timing counts: the wire slot (slots) or the end of its wire time in ns (bytes). The
    /// next frame of the class is asked for after it ([`StationFace::next_place`]'s `after`).
    pub mark: i128,
}

/// A keepon station on either timing (see the module doc). `B` is the frames' data.
pub trait StationFace<B: AsRef<[u8]> = Vec<u8>> {
    /// Hand in a frame at host time `now`: admitted (its outcome comes later) or rejected now, with the reason.
    fn submit(&mut self, frame: Frame<B>, now: Tai) -> Result<(), Reason>;
    /// One poll: observe the NIC, end the frames that left, detect underruns, post ahead.
    fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError>;
    /// Posted slot or descriptor `k`, as the NIC must get it.
    fn view(&self, k: u64) -> SlotView<'_>;
    /// The outcomes since the last call.
    fn drain_outcomes(&mut self) -> alloc::vec::Drain<'_, Outcome>;
    /// The ring.
    fn ring(&self) -> &Ring;
    /// Counters.
    fn counters(&self) -> &Counters;
    /// The EPHC: network time of every byte on the wire.
    fn ephc(&self) -> &Ephc;
    /// The EPHC's time at host time `host`, on the clock that governs the byte going out then.
    fn ephc_at(&self, host: Tai) -> Tai;
    /// The current clock at host time `host` (every adjustment applied, also those not yet on the wire): the time a
    /// synchronisation servo reasons in.
    fn clock_at(&self, host: Tai) -> Tai;
    /// EPHC start time of slot or descriptor `k`.
    fn slot_time(&self, k: u64) -> Tai;
    /// The byte position slot or descriptor `k` starts at.
    fn wire_position(&self, k: u64) -> u64;
    /// The start of the schedule slot posted slot `k` carried, and whether the wire was locked to the schedule when
    /// it was posted; `None` where `k` carried none: a spacer, a slot no longer tracked, and every descriptor of
    /// the byte clock (which has no schedule slots: its frames' alignment is [`StationFace::alignment`]).
    fn carried_time(&self, k: u64) -> Option<(Tai, bool)>;
    /// The link is up and its anchor final (and, on the slot grid, the grid acquired).
    fn schedule_settled(&self) -> bool;
    /// Stop: frames not yet posted are rejected `shutdown`; nothing more is posted.
    fn shutdown(&mut self);
    /// Shut down and every posted frame has left.
    fn drained(&self) -> bool;
    /// Frames handed in without an outcome yet.
    fn in_flight(&self) -> usize;
    /// One ring of the longest slots or descriptors: how long a healthy NIC takes to finish what is posted.
    fn ring_span(&self) -> Nanos;
    /// Apply a synchronisation adjustment from the first slot or byte not yet posted.
    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError>;
    /// How far the wire kept to the schedule (slots) or frames to their txtimes (bytes).
    fn alignment(&self) -> &Alignment;
    /// The schedule's base time: a cycle starts there.
    fn base_time(&self) -> Tai;
    /// The schedule's cycle, exact.
    fn cycle(&self) -> Rat;
    /// The first cycle start at or after `t` (`None` beyond the clock's range).
    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai>;
    /// Every class's windows in force (Qbv's oper list; on the slot grid, its slot mask as windows of whole slots).
    fn schedule_windows(&self) -> Windows;
    /// A change waiting for its time, if any: when it takes effect and the windows it brings (Qbv's admin list).
    fn pending_windows(&self) -> Option<(Tai, Windows)>;
    /// When a change waiting for its time takes effect, if one is (without building its windows: the daemon asks
    /// every poll while one waits).
    fn pending_change_time(&self) -> Option<Tai>;
    /// The first place, at least `lead` after the wire's current position (and after `after`, a previous
    /// [`NextPlace::mark`]), for a frame of `len` data bytes of `class`; `None` if the class has no room for it.
    fn next_place(&self, class: ClassId, lead: Nanos, len: usize, after: Option<i128>) -> Option<NextPlace>;
    /// The data length every frame is padded to (the slot's; 0 on the byte clock, which sends frames unpadded).
    fn pad_to(&self) -> usize;
    /// How far ahead a PTP port places its messages: enough that a message is never `late` for a healthy loop.
    fn ptp_lead(&self) -> Nanos;
}

/// The methods both stations have under the same name and meaning.
macro_rules! same_on_both {
    () => {
        fn submit(&mut self, frame: Frame<B>, now: Tai) -> Result<(), Reason> {
            Self::submit(self, frame, now)
        }
        fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError> {
            Self::poll(self, obs)
        }
        fn view(&self, k: u64) -> SlotView<'_> {
            Self::view(self, k)
        }
        fn drain_outcomes(&mut self) -> alloc::vec::Drain<'_, Outcome> {
            Self::drain_outcomes(self)
        }
        fn ring(&self) -> &Ring {
            Self::ring(self)
        }
        fn counters(&self) -> &Counters {
            Self::counters(self)
        }
        fn ephc(&self) -> &Ephc {
            Self::ephc(self)
        }
        fn ephc_at(&self, host: Tai) -> Tai {
            Self::ephc_at(self, host)
        }
        fn slot_time(&self, k: u64) -> Tai {
            Self::slot_time(self, k)
        }
        fn wire_position(&self, k: u64) -> u64 {
            Self::wire_position(self, k)
        }
        fn schedule_settled(&self) -> bool {
            Self::schedule_settled(self)
        }
        fn shutdown(&mut self) {
            Self::shutdown(self)
        }
        fn drained(&self) -> bool {
            Self::drained(self)
        }
        fn in_flight(&self) -> usize {
            Self::in_flight(self)
        }
        fn alignment(&self) -> &Alignment {
            Self::alignment(self)
        }
        fn pending_change_time(&self) -> Option<Tai> {
            Self::pending_change(self).map(|(t, _)| t)
        }
    };
}

impl<B: AsRef<[u8]>> StationFace<B> for Station<B> {
    same_on_both!();

    fn clock_at(&self, host: Tai) -> Tai {
        Station::clock_at(self, host)
    }

    fn carried_time(&self, k: u64) -> Option<(Tai, bool)> {
        self.carried(k).map(|c| (self.schedule().time_of(c.slot), c.locked))
    }

    fn ring_span(&self) -> Nanos {
        let p = self.config().geometry.period();
        Nanos(i64::try_from(p.floor_mul(self.ring().len())).unwrap_or(i64::MAX))
    }

    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        Station::adjust_clock(self, adj).map(|_| ())
    }

    fn base_time(&self) -> Tai {
        Station::base_time(self)
    }

    fn cycle(&self) -> Rat {
        let c = self.cycle_time();
        Rat { num: i128::from(c.num()), den: i128::from(c.den()) }
    }

    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai> {
        Station::cycle_start_at_or_after(self, t)
    }

    fn schedule_windows(&self) -> Windows {
        Windows::from_slots(Station::base_time(self), self.config().geometry, self.ownership())
    }

    fn pending_windows(&self) -> Option<(Tai, Windows)> {
        let (t, own) = self.pending_change()?;
        Some((t, Windows::from_slots(Station::base_time(self), self.config().geometry, own)))
    }

    /// The first slot of `class` (by the map that governs it: a pending change's from its slot on) that starts
    /// `lead` after the slot the NIC is on, and after slot `after`.
    fn next_place(&self, class: ClassId, lead: Nanos, _len: usize, after: Option<i128>) -> Option<NextPlace> {
        let n = self.ring().len();
        let phase = self.phase();
        let soon = self.ephc().time_of(self.wire_position(self.ring().consumed())) + lead;
        let mut k = self.slot_of(soon)?;
        if let Some(last) = after {
            k = k.max(u64::try_from(last).ok()? + 1);
        }
        // Two cycles: across a pending change the class's next slot under the new map can be up to 2N away.
        let k = (k..k + 2 * n).find(|&j| self.own_for(j).owner_of((j + phase) % n) == Some(class))?;
        let j = u64::try_from(i128::from(k) + i128::from(self.schedule_shift())).ok()?;
        Some(NextPlace { txtime: self.schedule().time_of(j), tx: self.slot_time(k), mark: i128::from(k) })
    }

    fn pad_to(&self) -> usize {
        self.ring().data_bytes()
    }

    /// Two batches and two slots: the message is placed beyond what the loop has posted or will post next.
    fn ptp_lead(&self) -> Nanos {
        let c = self.config();
        Nanos(i64::try_from(c.geometry.period().ceil_mul(u64::from(c.batch) * 2 + 2)).unwrap_or(i64::MAX))
    }
}

impl<B: AsRef<[u8]>> StationFace<B> for ByteStation<B> {
    same_on_both!();

    /// The byte clock applies an adjustment from the next descriptor on, and the host reads the wire there too:
    /// the servo's clock is the wire's.
    fn clock_at(&self, host: Tai) -> Tai {
        ByteStation::ephc_at(self, host)
    }

    fn carried_time(&self, _k: u64) -> Option<(Tai, bool)> {
        None
    }

    fn ring_span(&self) -> Nanos {
        ByteStation::ring_span(self)
    }

    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        ByteStation::adjust_clock(self, adj)
    }

    fn base_time(&self) -> Tai {
        self.windows().base_time()
    }

    fn cycle(&self) -> Rat {
        self.windows().cycle()
    }

    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai> {
        i64::try_from(self.windows().cycle_start_at_or_after(t).ceil()).ok().map(Tai)
    }

    fn schedule_windows(&self) -> Windows {
        self.windows().clone()
    }

    fn pending_windows(&self) -> Option<(Tai, Windows)> {
        self.pending_change().map(|(t, w)| (t, w.clone()))
    }

    /// The first place inside a window of `class`, `lead` beyond the posted wire (and after the end `after` of
    /// the previous one, ns).
    fn next_place(&self, class: ClassId, lead: Nanos, len: usize, after: Option<i128>) -> Option<NextPlace> {
        let soon = self.posted_until() + lead;
        let from = match after {
            Some(end) => soon.max(Tai(i64::try_from(end).ok()?)),
            None => soon,
        };
        let p = self.first_place(class, from, len)?;
        Some(NextPlace { txtime: p.txtime, tx: p.tx, mark: i128::from(p.end.0) })
    }

    fn pad_to(&self) -> usize {
        0
    }

    /// The lead and two of the longest descriptors: the message is placed beyond what is posted.
    fn ptp_lead(&self) -> Nanos {
        let c = self.config();
        let longest = c.rate.wire_time(c.max_frame);
        Nanos(c.lead.0.saturating_add(i64::try_from(longest.ceil_mul(2)).unwrap_or(i64::MAX)))
    }
}
