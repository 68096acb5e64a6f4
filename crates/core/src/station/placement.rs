//! Placement: real-time frames into the slot that carries their schedule slot (or, relaxed, the next one their
//! class owns), best effort into free unowned slots, and re-placement when the mapping of wire slots to
//! schedule slots changes.

use alloc::vec::Vec;

use super::{Displaced, Station};
use crate::insert::{decide, Decision, Policy};
use crate::isolation::ClassId;
use crate::outcome::{Frame, FrameId, Reason};
use crate::ring::{Placed, SlotKind};
use crate::time::Tai;

impl<B: AsRef<[u8]>> Station<B> {
    /// Place a real-time frame now, queue it, or reject it.
    pub(super) fn insert(&mut self, frame: Frame<B>, target: u64, from: u64) -> Result<(), Reason> {
        let own = self.own_for(target);
        let mut d = decide(&self.ring, own, self.phase, self.cfg.policy, frame.class, target, from);
        if self.changes.pending.is_some() {
            d = self.across_change(d, frame.class, target);
        }
        if d == Decision::Reject(Reason::NotOwned) && self.taken_by_change(frame.class, target) {
            d = Decision::Reject(Reason::ScheduleChange);
        }
        match d {
            Decision::Place(k) => {
                let placed =
                    Placed { id: frame.id, class: frame.class, txtime: frame.txtime, ring_slot: self.ring_slot(k) };
                self.ring.place(k, placed, frame.data.as_ref());
                Ok(())
            }
            Decision::Wait(k) if k == target => {
                self.queued[usize::from(frame.class.0)] += 1;
                self.rt.push(frame);
                Ok(())
            }
            Decision::Wait(k) => {
                self.queued[usize::from(frame.class.0)] += 1;
                self.displaced.push_back(Displaced { frame, target, from: k });
                Ok(())
            }
            Decision::Reject(why) => {
                self.reject(frame.id, frame.class, why);
                Err(why)
            }
        }
    }

    /// With a schedule change pending, a decision taken on one map must hold on the map of the slot it chose: a
    /// relaxed search that crossed the change goes on from there on the new map.
    fn across_change(&self, d: Decision, class: ClassId, target: u64) -> Decision {
        let Some(change) = self.change_at() else { return d };
        let owns = |k: u64| {
            let own = self.own_for(k);
            if own.is_best_effort(class) {
                own.owner_of(k + self.phase).is_none()
            } else {
                own.owner_of(k + self.phase) == Some(class)
            }
        };
        match d {
            Decision::Place(k) | Decision::Wait(k) if !owns(k) => {
                let new = self.own_for(change);
                decide(&self.ring, new, self.phase, self.cfg.policy, class, target, change.max(target))
            }
            d => d,
        }
    }

    /// The ownership map's ring slot for unposted slot `k` under the current phase.
    pub(super) fn ring_slot(&self, k: u64) -> u32 {
        self.cfg.ownership.ring_slot(k + self.phase)
    }

    /// The mapping of wire slots to schedule slots changed: put every real-time frame waiting in the window back
    /// into the slot its txtime now maps to (or reject it with `why` if that slot is gone, taken or not its
    /// class's), and let relaxed frames displaced beyond the window search again from their new slot. Frames in
    /// the window are not yet posted, so moving them is free; without this, a frame would leave at another time
    /// than its schedule slot's.
    pub(super) fn follow_mapping(&mut self, why: Reason) {
        let window = self.ring.window();
        let mut moved: Vec<(Option<Tai>, FrameId, ClassId, Vec<u8>)> = Vec::new();
        for k in window {
            if let SlotKind::Real { id, class, txtime, ring_slot, .. } = self.ring.kind(k) {
                let same_ring_slot = ring_slot == self.ring_slot(k) && k >= self.first_placeable();
                // Under the map that governs the slot (a schedule change may have given it away).
                let owner = self.own_for(k).owner_of(k + self.phase);
                let keep = match txtime {
                    Some(t) => {
                        same_ring_slot
                            && owner == Some(class)
                            && self.target_of(t) == Ok(k)
                            && self.cfg.policy == Policy::Strict
                    }
                    None => same_ring_slot && owner.is_none(),
                };
                if !keep {
                    moved.push((txtime, id, class, self.ring.frame_data(k).unwrap_or_default().to_vec()));
                    let _ = self.ring.take(k);
                }
            }
        }
        moved.sort_by_key(|m| (m.0.is_none(), m.0, m.1));
        for (txtime, id, class, bytes) in moved {
            let k = match txtime {
                Some(t) => match self.target_of(t) {
                    Ok(target) => {
                        let (own, phase, policy) = (self.own_for(target), self.phase, self.cfg.policy);
                        let mut d = decide(&self.ring, own, phase, policy, class, target, target);
                        if self.changes.pending.is_some() {
                            d = self.across_change(d, class, target);
                        }
                        match d {
                            Decision::Place(k) => Some(k),
                            Decision::Wait(_) | Decision::Reject(_) => None,
                        }
                    }
                    Err(_) => None,
                },
                None => self.free_unowned(self.ring.window().start),
            };
            match k {
                Some(k) => {
                    let placed = Placed { id, class, txtime, ring_slot: self.ring_slot(k) };
                    self.ring.place(k, placed, &bytes);
                }
                None => self.reject(id, class, why),
            }
        }
        // Relaxed frames waiting beyond the window searched from a slot of the old mapping: search again.
        let displaced: Vec<Displaced<B>> = self.displaced.drain(..).collect();
        for d in displaced {
            self.dequeued(d.frame.class);
            match d.frame.txtime.map(|t| self.target_of(t)) {
                Some(Ok(k)) => {
                    let _ = self.insert(d.frame, k, k);
                }
                _ => self.reject(d.frame.id, d.frame.class, why),
            }
        }
    }

    /// The first free unowned slot of the window at or after `k` that carries a schedule slot.
    pub(super) fn free_unowned(&self, k: u64) -> Option<u64> {
        let end = self.ring.window().end;
        let change = self.change_at();
        let mut k = k.max(self.first_placeable());
        loop {
            let own = self.own_for(k);
            let next = own.next_in(own.unowned(), k + self.phase).map(|n| n - self.phase);
            // A search on the old map that reaches the change goes on from there on the new one.
            if let Some(c) = change.filter(|c| k < *c && next.is_none_or(|n| n >= *c)) {
                k = c;
                continue;
            }
            let next = next?;
            if next >= end {
                return None;
            }
            if self.ring.is_free(next) {
                return Some(next);
            }
            k = next + 1;
        }
    }

    /// Move frames whose slot entered the window into the ring.
    pub(super) fn place_waiting(&mut self) {
        let end = self.ring.window().end;
        for _ in 0..self.displaced.len() {
            let Some(d) = self.displaced.pop_front() else { break };
            if d.from >= end {
                self.displaced.push_back(d);
                continue;
            }
            self.dequeued(d.frame.class);
            let _ = self.insert(d.frame, d.target, d.from);
        }
        while let Some(t) = self.rt.peek_txtime() {
            let target = self.target_of(t);
            if target.is_ok_and(|k| k >= end) {
                break;
            }
            let Some(frame) = self.rt.pop() else { break };
            self.dequeued(frame.class);
            match target {
                Ok(k) => {
                    let _ = self.insert(frame, k, k);
                }
                Err(why) => self.reject(frame.id, frame.class, why),
            }
        }
    }

    /// Fill free unowned slots of the window with best-effort frames, in order.
    pub(super) fn place_best_effort(&mut self) {
        let mut k = self.ring.window().start;
        while !self.be.is_empty() {
            let Some(next) = self.free_unowned(k) else { return };
            if let Some(f) = self.be.pop() {
                self.dequeued(f.class);
                let placed = Placed { id: f.id, class: f.class, txtime: None, ring_slot: self.ring_slot(next) };
                self.ring.place(next, placed, f.data.as_ref());
            }
            k = next + 1;
        }
    }
}
