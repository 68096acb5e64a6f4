//! Live change of the byte clock's windows, IEEE 802.1Qbv's admin → oper, as the slot station changes its slot
//! map ([`crate::station::ScheduleChange`]): new windows take effect at the first cycle start at or after a given
//! network time (`AdminBaseTime`), without a restart.
//!
//! ```text
//!   time ───────────────┬──────────────────────────────
//!        oper windows    │ admin windows                 switch: the first cycle start ≥ the requested time
//!        (frames ending  │ (frames starting at or after
//!         by the switch) │  the switch)
//! ```
//!
//! Until the switch the running windows govern, from it the new ones; a frame lies wholly on one side (a window
//! open across the switch closes there for the frames before it). Frames already waiting are decided again: one
//! the new windows leave without a window is rejected [`Reason::ScheduleChange`] — as is a frame submitted later for
//! a time at or after the switch that the old windows gave its class and the new ones do not (the client still
//! follows the old schedule). A best-effort frame longer than every stretch the new windows leave free is rejected
//! `schedule-change` when they take effect. The cycle and the classes stay as configured (a change of cycle time
//! moves the schedule grid itself, which takes a restart); a switch the wire has already passed is refused (Qbv's
//! `config-change-error`); a new change replaces one still pending.

use super::windows::{Rat, Windows};
use super::ByteStation;
use crate::isolation::ClassId;
use crate::outcome::Reason;
use crate::schedule::{same_classes, ChangeError, ScheduleChange};
use crate::time::Tai;

/// The change waiting for its switch (a cycle start), and the last done with the windows before it (to name the
/// frames they displaced) ([`crate::schedule::Admin`]).
pub(super) type Changes = crate::schedule::Admin<Rat, Windows>;

impl<B: AsRef<[u8]>> ByteStation<B> {
    /// Take `windows` from the first cycle start at or after network time `at` on. Frames already submitted for
    /// times from then on are decided again; those the new windows leave without a window are rejected
    /// [`Reason::ScheduleChange`] (their outcomes come with the next [`ByteStation::drain_outcomes`]).
    pub fn change_windows(&mut self, at: Tai, windows: Windows) -> Result<ScheduleChange, ChangeError> {
        let running = &self.cfg.windows;
        if windows.cycle() != running.cycle() {
            return Err(ChangeError::Cycle { running: running.cycle().ceil(), new: windows.cycle().ceil() });
        }
        same_classes(running, &windows)?;
        // On the running grid (the cycle is the same, the base time may name any cycle of it).
        let switch = running.cycle_start_at_or_after(at);
        let posted = self.time_at(self.next_pos());
        if switch < posted {
            let earliest = running.cycle_start_at_or_after(Tai(i64::try_from(posted.ceil()).unwrap_or(i64::MAX)));
            return Err(ChangeError::InThePast {
                at,
                earliest: Tai(i64::try_from(earliest.ceil()).unwrap_or(i64::MAX)),
            });
        }
        let before = self.counters.rejected[Reason::ScheduleChange.index()];
        // From the earlier of this switch and one it replaces: frames decided under that one are decided again.
        let from = self.changes.pending.as_ref().map_or(switch, |p| p.at.min(switch));
        self.changes.set(switch, windows);
        self.redecide_waiting(from);
        let rejected = self.counters.rejected[Reason::ScheduleChange.index()] - before;
        Ok(ScheduleChange { slot: 0, time: Tai(i64::try_from(switch.ceil()).unwrap_or(i64::MAX)), rejected })
    }

    /// The change waiting for its switch, if any: when it takes effect and the windows it brings (Qbv's admin
    /// list while `ConfigPending`).
    pub fn pending_change(&self) -> Option<(Tai, &Windows)> {
        self.changes.pending.as_ref().map(|p| (Tai(i64::try_from(p.at.ceil()).unwrap_or(i64::MAX)), &p.list))
    }

    /// Real-time frames waiting: each in its window again under the windows as they now stand (cached bytes
    /// found afresh), or rejected `schedule-change`. Only frames due from a cycle before `at` (the switch, or an
    /// earlier one it replaced) on can be touched (a window is at most a cycle long): those before keep their
    /// windows, and are not looked at.
    fn redecide_waiting(&mut self, at: Rat) {
        self.checked = None;
        let from = Tai(i64::try_from((at - self.cfg.windows.cycle()).floor()).unwrap_or(i64::MIN));
        let keys = self.rt.keys_from(&(from, crate::outcome::FrameId(0)));
        for key in keys {
            let Some(w) = self.rt.get(&key) else { continue };
            let start = Rat::ns(i128::from(key.0 .0));
            let end = start + self.span_of(w.wire);
            match self.window_of(w.frame.class, start, end) {
                Some((open, close)) => {
                    if let Some(w) = self.rt.get_mut(&key) {
                        (w.open, w.close, w.target) = (open, close, None);
                    }
                }
                None => {
                    if let Some(w) = self.rt.remove(&key) {
                        self.queued[usize::from(w.frame.class.0)] -= 1;
                        self.reject(w.frame.id, w.frame.class, Reason::ScheduleChange);
                    }
                }
            }
        }
    }

    /// Once the wire is posted up to the switch, the new windows are the running ones; best-effort frames they
    /// leave no stretch long enough for are rejected `schedule-change`.
    pub(super) fn promote_change(&mut self) {
        if self.changes.pending.is_none() {
            return;
        }
        let posted = self.time_at(self.next_pos());
        if !self.changes.promote(&mut self.cfg.windows, |at| posted >= at) {
            return;
        }
        let free = self.cfg.windows.longest_free();
        let mut waiting = alloc::vec::Vec::with_capacity(self.be.len());
        while let Some(f) = self.be.pop() {
            waiting.push(f);
        }
        // Back into their queues in the order they had there.
        for f in waiting {
            let wire = super::place::wire_bytes(f.data.as_ref().len());
            if free.is_some_and(|free| self.span_of(wire + 2) > free) {
                self.queued[usize::from(f.class.0)] -= 1;
                self.reject(f.id, f.class, Reason::ScheduleChange);
            } else {
                self.be.push(usize::from(f.class.0), f);
            }
        }
    }

    /// The windows that govern time `t`.
    #[inline]
    pub(super) fn windows_at(&self, t: Rat) -> &Windows {
        self.changes.governing(&self.cfg.windows, t)
    }

    /// The window of class `c` that holds all of `[start, end)` under the windows that govern `start`, as its
    /// absolute `(open, close)`; a window open across a pending switch closes there.
    pub(super) fn window_of(&self, c: ClassId, start: Rat, end: Rat) -> Option<(Rat, Rat)> {
        let (open, close) = self.windows_at(start).admitting(c, start, end)?;
        match &self.changes.pending {
            Some(p) if start < p.at && p.at < close => (end <= p.at).then_some((open, p.at)),
            _ => Some((open, close)),
        }
    }

    /// The opening of the first window of class `c` at or after `t` under the windows that govern it.
    pub(super) fn opening_after(&self, c: ClassId, t: Rat) -> Option<Rat> {
        match &self.changes.pending {
            Some(p) if t < p.at => match self.cfg.windows.next_opening(c, t) {
                Some(o) if o < p.at => Some(o),
                _ => p.list.next_opening(c, p.at),
            },
            _ => self.windows_at(t).next_opening(c, t),
        }
    }

    /// The first window of any class that `[start, end)` enters ([`Windows::first_reserved`]), either side of a
    /// pending switch.
    pub(super) fn reserved_in(&self, start: Rat, end: Rat) -> Option<Rat> {
        match &self.changes.pending {
            Some(p) if start < p.at && p.at < end => {
                self.cfg.windows.first_reserved(start, p.at).or_else(|| p.list.first_reserved(p.at, end))
            }
            _ => self.windows_at(start).first_reserved(start, end),
        }
    }

    /// The earliest time at or after `start` from which `span` is free of windows ([`Windows::next_free`]): before a
    /// pending switch if a stretch ends by it, else from the switch on.
    pub(super) fn free_from(&self, start: Rat, span: Rat) -> Option<Rat> {
        match &self.changes.pending {
            Some(p) if start < p.at => match self.cfg.windows.next_free(start, span) {
                Some(t) if t + span <= p.at => Some(t),
                _ => p.list.next_free(p.at, span),
            },
            _ => self.windows_at(start).next_free(start, span),
        }
    }

    /// A frame of class `c` for `[start, end)` that no window admits: `schedule-change` if the windows before the
    /// last switch (pending or done) gave it one, else `not-owned`.
    pub(super) fn refused_window(&self, c: ClassId, start: Rat, end: Rat) -> Reason {
        let before = self.changes.last_change(&self.cfg.windows).filter(|&(_, _, at)| start >= at).map(|(b, _, _)| b);
        if before.is_some_and(|w| w.admitting(c, start, end).is_some()) {
            Reason::ScheduleChange
        } else {
            Reason::NotOwned
        }
    }
}
