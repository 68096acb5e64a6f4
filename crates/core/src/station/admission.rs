//! Admission: the checks a frame passes on its way in, before any slot is looked at, and the per-class budget.

use super::{Station, MAX_PAST, MIN_FRAME_DATA};
use crate::isolation::ClassId;
use crate::outcome::{Frame, Reason};

impl<B: AsRef<[u8]>> Station<B> {
    /// Hand a frame to the station. Every frame gets exactly one outcome in [`Station::drain_outcomes`]; the
    /// return value repeats an immediate rejection for convenience.
    pub fn submit(&mut self, frame: Frame<B>, now: crate::time::Tai) -> Result<(), Reason> {
        self.counters.submitted += 1;
        let why = self.admit(&frame, now);
        if let Err(why) = why {
            self.reject(frame.id, frame.class, why);
            return Err(why);
        }
        if self.cfg.ownership.is_best_effort(frame.class) {
            self.queued[usize::from(frame.class.0)] += 1;
            self.be.push(frame.class.0 as usize, frame);
            return Ok(());
        }
        let target = match frame.txtime.ok_or(Reason::Late).and_then(|t| self.target_of(t)) {
            Ok(k) => k,
            Err(why) => {
                self.reject(frame.id, frame.class, why);
                return Err(why);
            }
        };
        self.insert(frame, target, target)
    }

    /// The checks that need no slot: class, length, txtime presence and horizon, capacity.
    fn admit(&mut self, frame: &Frame<B>, now: crate::time::Tai) -> Result<(), Reason> {
        let own = &self.cfg.ownership;
        if self.life.is_draining() {
            return Err(Reason::Shutdown);
        }
        if !own.has_class(frame.class) {
            return Err(Reason::UnknownClass);
        }
        let len = frame.data.as_ref().len();
        if len > self.ring.data_bytes() {
            return Err(Reason::Oversize);
        }
        if len < MIN_FRAME_DATA {
            return Err(Reason::Runt);
        }
        if own.is_best_effort(frame.class) {
            if frame.txtime.is_some() {
                return Err(Reason::UnexpectedTxtime);
            }
            if own.unowned().is_empty() {
                return Err(Reason::NoCapacity);
            }
        } else {
            let t = frame.txtime.ok_or(Reason::MissingTxtime)?;
            // The txtime is EPHC time, `now` the host's: compare in EPHC time.
            within_horizon(t, self.ephc_now(now), self.cfg.max_advance)?;
        }
        if self.queued[usize::from(frame.class.0)] >= self.cfg.max_pending {
            return Err(Reason::QueueFull);
        }
        Ok(())
    }

    /// A frame of `class` left the queues (into the ring, or to be re-decided).
    pub(super) fn dequeued(&mut self, class: ClassId) {
        let q = &mut self.queued[usize::from(class.0)];
        debug_assert!(*q > 0, "queued count of class {} underflows", class.0);
        *q = q.saturating_sub(1);
    }
}

/// A txtime (EPHC time) neither further ahead of `now` (EPHC time) than `max_advance` (`too-far-ahead`) nor more
/// than [`MAX_PAST`] behind it (`late`). Untrusted times are compared in i128: no txtime (i64::MIN included) can
/// wrap.
pub(crate) fn within_horizon(
    t: crate::time::Tai,
    now: crate::time::Tai,
    max_advance: crate::time::Nanos,
) -> Result<(), Reason> {
    let ahead = i128::from(t.0) - i128::from(now.0);
    if ahead > i128::from(max_advance.0) {
        return Err(Reason::TooFarAhead);
    }
    if ahead < -i128::from(MAX_PAST.0) {
        return Err(Reason::Late);
    }
    Ok(())
}
