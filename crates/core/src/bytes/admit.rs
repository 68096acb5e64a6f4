//! Admission on the byte clock: class, length, txtime, window and overlap checks, before a frame waits for its
//! byte.

use super::windows::Rat;
use super::{ByteStation, Waiting, MIN_WIRE};
use crate::outcome::{Frame, Reason};
use crate::station::admission::within_horizon;
use crate::station::MIN_FRAME_DATA;
use crate::time::{Tai, WIRE_OVERHEAD_BYTES};

impl<B: AsRef<[u8]>> ByteStation<B> {
    /// Hand a frame to the station. Every frame gets exactly one outcome in [`ByteStation::drain_outcomes`];
    /// the return value repeats an immediate rejection.
    pub fn submit(&mut self, frame: Frame<B>, now: Tai) -> Result<(), Reason> {
        self.counters.submitted += 1;
        match self.admit(&frame, now) {
            Err(why) => {
                self.reject(frame.id, frame.class, why);
                Err(why)
            }
            Ok(None) => {
                self.queued[usize::from(frame.class.0)] += 1;
                self.be.push_back(frame);
                Ok(())
            }
            Ok(Some((open, close, wire))) => {
                self.queued[usize::from(frame.class.0)] += 1;
                let key = (frame.txtime.unwrap_or(Tai(0)), frame.id);
                self.rt.insert(key, Waiting { frame, open, close, wire, target: None });
                Ok(())
            }
        }
    }

    /// The checks; for a real-time frame, its window and wire bytes.
    #[allow(clippy::type_complexity)]
    fn admit(&self, frame: &Frame<B>, now: Tai) -> Result<Option<(Rat, Rat, u64)>, Reason> {
        let windows = &self.cfg.windows;
        if self.draining {
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
            // Longer than any stretch the windows leave free: it could never go.
            let wire = (len as u64 + 4).max(MIN_WIRE - u64::from(WIRE_OVERHEAD_BYTES)) + u64::from(WIRE_OVERHEAD_BYTES);
            if windows.longest_free().is_some_and(|free| self.span_of(wire) > free) {
                return Err(Reason::NoCapacity);
            }
            return Ok(None);
        }
        let t = frame.txtime.ok_or(Reason::MissingTxtime)?;
        within_horizon(t, self.ephc_at(now), self.cfg.max_advance)?;
        let wire = (len as u64 + 4).max(MIN_WIRE - u64::from(WIRE_OVERHEAD_BYTES)) + u64::from(WIRE_OVERHEAD_BYTES);
        let (start, span) = (Rat::ns(i128::from(t.0)), self.span_of(wire));
        let end = start + span;
        let Some((open, close)) = windows.admitting(frame.class, start, end) else {
            // Longer than any window of the class: it can never go; otherwise this time is not the class's.
            return Err(if span > windows.longest(frame.class) { Reason::Oversize } else { Reason::NotOwned });
        };
        // The wire is posted up to `next_pos`: a frame due before that is late.
        if start < self.time_at(self.next_pos) {
            return Err(Reason::Late);
        }
        // No other real-time frame may hold any of its wire time.
        let before = self.rt.range(..(t, frame.id)).next_back();
        if let Some((_, w)) = before {
            let ends = Rat::ns(i128::from(w.frame.txtime.unwrap_or(Tai(0)).0));
            let s = self.span_of(w.wire);
            if ends + s > start {
                return Err(Reason::SlotTaken);
            }
        }
        if let Some((_, w)) = self.rt.range((t, frame.id)..).next() {
            if Rat::ns(i128::from(w.frame.txtime.unwrap_or(Tai(0)).0)) < end {
                return Err(Reason::SlotTaken);
            }
        }
        Ok(Some((open, close, wire)))
    }
}
