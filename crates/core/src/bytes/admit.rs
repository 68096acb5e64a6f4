//! Admission on the byte clock: class, length, txtime, window and overlap checks, before a frame waits for its
//! byte.

use super::place::wire_bytes;
use super::windows::Rat;
use super::{ByteStation, Waiting};
use crate::insert::Policy;
use crate::outcome::{Frame, FrameId, Reason};
use crate::station::admission::within_horizon;
use crate::station::MIN_FRAME_DATA;
use crate::time::Tai;

impl<B: AsRef<[u8]>> ByteStation<B> {
    /// Hand a frame to the station. Every frame gets exactly one outcome in [`ByteStation::drain_outcomes`];
    /// the return value repeats an immediate rejection.
    pub fn submit(&mut self, frame: Frame<B>, now: Tai) -> Result<(), Reason> {
        self.counters.submitted += 1;
        // The EPHC's `now`, for a frame with a txtime (its horizon).
        let ephc_now = frame.txtime.map(|_| self.ephc_now(now));
        match self.admit(&frame, ephc_now) {
            Err(why) => {
                self.reject(frame.id, frame.class, why);
                Err(why)
            }
            Ok(None) => {
                self.queued[usize::from(frame.class.0)] += 1;
                self.be.push(usize::from(frame.class.0), frame);
                Ok(())
            }
            Ok(Some((at, open, close, wire))) => {
                self.queued[usize::from(frame.class.0)] += 1;
                // Keyed by where it goes (its txtime, or later under the relaxed policy); the outcome reports the
                // txtime as `scheduled`, so the move shows as its deviation.
                let key = (at, frame.id);
                self.rt.insert(key, Waiting { frame, open, close, wire, target: None });
                Ok(())
            }
        }
    }

    /// The checks (`ephc_now`: the EPHC at the submission, given with a txtime); for a real-time frame, where it
    /// goes, its window and its wire bytes.
    #[allow(clippy::type_complexity)]
    fn admit(&self, frame: &Frame<B>, ephc_now: Option<Tai>) -> Result<Option<(Tai, Rat, Rat, u64)>, Reason> {
        let windows = &self.cfg.windows;
        if self.life.is_draining() {
            return Err(Reason::Shutdown);
        }
        if !windows.has_class(frame.class) {
            return Err(Reason::UnknownClass);
        }
        let len = frame.data.as_ref().len();
        if len + 4 > self.cfg.max_frame as usize {
            return Err(Reason::Oversize);
        }
        if len < MIN_FRAME_DATA {
            return Err(Reason::Runt);
        }
        if self.queued[usize::from(frame.class.0)] >= self.cfg.max_pending {
            return Err(Reason::QueueFull);
        }
        if windows.is_best_effort(frame.class) {
            if frame.txtime.is_some() {
                return Err(Reason::UnexpectedTxtime);
            }
            // Longer than any stretch the windows leave free, with a byte to spare on either side (bytes start where
            // the clock puts them, not where a stretch opens): it could never go.
            let wire = wire_bytes(len);
            // While a change waits, a frame that fits either side's stretches may go.
            let free = match &self.changes.pending {
                Some(p) => windows.longest_free().zip(p.list.longest_free()).map(|(a, b)| a.max(b)),
                None => windows.longest_free(),
            };
            if free.is_some_and(|free| self.span_of(wire + 2) > free) {
                return Err(Reason::NoCapacity);
            }
            return Ok(None);
        }
        let (t, ephc_now) = frame.txtime.zip(ephc_now).ok_or(Reason::MissingTxtime)?;
        within_horizon(t, ephc_now, self.cfg.max_advance)?;
        let wire = wire_bytes(len);
        let span = self.span_of(wire);
        // Where it goes: its txtime, or (relaxed) the first free time after it in a window of its class, within a
        // cycle of it — as the slot station's relaxed policy takes the earliest free owned slot within a ring cycle.
        let relaxed = self.cfg.policy == Policy::Relaxed;
        let first = Rat::ns(i128::from(t.0));
        let last = first + windows.cycle();
        // The candidate start, exact (a window may open between nanoseconds); the frame is keyed by its floor and
        // placed on the byte nearest it inside the window, after the frame before it.
        // Time first, as ETF and the slot station do: a txtime the posted wire has passed is late, whatever
        // its window.
        let posted = self.time_at(self.next_pos());
        if first < posted {
            return Err(self.passed(t));
        }
        let mut start = first;
        let spans = windows.spans().max(self.changes.pending.as_ref().map_or(0, |p| p.list.spans()));
        for _ in 0..=self.rt.len() + 2 * spans {
            let end = start + span;
            let moved = start != first;
            let Some((open, close)) = self.window_of(frame.class, start, end) else {
                if !moved && span > self.windows_at(start).longest(frame.class) {
                    return Err(Reason::Oversize); // longer than any window of the class: it can never go
                }
                if !moved && !relaxed {
                    return Err(self.refused_window(frame.class, start, end));
                }
                // Moved past the frames that held its time and out of a window (or never in one): the next window.
                match self.opening_after(frame.class, start + Rat { num: 1, den: 1_000 }) {
                    Some(o) if o <= last => start = o,
                    _ => return Err(if moved { Reason::SlotTaken } else { Reason::NotOwned }),
                }
                continue;
            };
            // The wire is posted up to `next_pos`: a frame due before that is late.
            if start < posted {
                return Err(Reason::Late);
            }
            // The real-time frame that starts last before this one would end: the only one that can hold any of
            // its wire time (they never overlap each other; frames start on whole ns, so those before `end` start
            // before its ceiling).
            let until = Tai(i64::try_from(-((-end.num).div_euclid(end.den))).unwrap_or(i64::MAX));
            let held = self.rt.last_below(&(until, FrameId(0))).and_then(|(&(s2, _), w)| {
                let end2 = Rat::ns(i128::from(s2.0)) + self.span_of(w.wire);
                (Rat::ns(i128::from(s2.0)) < end && end2 > start).then_some(end2)
            });
            match held {
                None => {
                    let at = Tai(i64::try_from(start.floor()).unwrap_or(i64::MAX));
                    return Ok(Some((at, open, close, wire)));
                }
                Some(end2) if relaxed => start = end2,
                Some(_) => return Err(Reason::SlotTaken),
            }
        }
        Err(Reason::SlotTaken)
    }
}
