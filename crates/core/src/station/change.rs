//! Live schedule change, IEEE 802.1Qbv's admin → oper: a new ownership map (the gate control list of a keepon
//! port) takes effect at the first schedule slot that starts at or after a given network time (`AdminBaseTime`),
//! without a restart.
//!
//! Until then the running map (oper) governs; from that slot on, the new one. Frames due before the change follow
//! the old windows and frames due after it the new ones, whenever they were submitted: a frame already waiting in
//! the insertion window or the pre-buffer for a slot the change gives to another class is re-decided against the
//! new map (strict: rejected; relaxed: moved to its class's next slot) and, if it has no place, rejected
//! [`Reason::ScheduleChange`] — as is any frame, whenever submitted, for a slot at or after the change that was its
//! class's before it and is not any more (the client still follows the old schedule). A change time whose slot the NIC already has is refused (Qbv's
//! `config-change-error`); a new change replaces one still pending. The ring size (cycle time), the slot size and
//! the classes stay as configured: changing those moves the schedule grid itself, which takes a restart.

use super::Station;
use crate::insert::Policy;
use crate::isolation::Ownership;
use crate::outcome::Reason;
use crate::schedule::{same_classes, ChangeError, ScheduleChange};
use crate::time::Tai;

/// The change waiting for its first schedule slot, and the last done ([`crate::schedule::Admin`]).
pub(super) type Changes = crate::schedule::Admin<u64, Ownership>;

impl<B: AsRef<[u8]>> Station<B> {
    /// Take `ownership` from the first schedule slot that starts at or after network time `at` on. Frames already
    /// submitted for slots from then on are re-decided against it; those it leaves without a slot are rejected
    /// [`Reason::ScheduleChange`] (their outcomes come with the next [`Station::drain_outcomes`]).
    pub fn change_schedule(&mut self, at: Tai, ownership: Ownership) -> Result<ScheduleChange, ChangeError> {
        let running = &self.cfg.ownership;
        if ownership.ring() != running.ring() {
            return Err(ChangeError::Ring { running: running.ring(), new: ownership.ring() });
        }
        same_classes(running, &ownership)?;
        // The first schedule slot no posted slot has carried: the earliest a change can govern.
        let earliest = self.j_end.max(self.schedule_slot_of(self.first_placeable()));
        let slot = self.schedule.slot_at_or_after(at).unwrap_or(u64::MAX);
        if slot < earliest || slot == u64::MAX {
            return Err(ChangeError::InThePast { at, earliest: self.schedule.time_of(earliest) });
        }
        let before = self.counters.rejected[Reason::ScheduleChange.index()];
        // Frames from the earlier of this change and one it replaces can lose their slot.
        let from = self.changes.pending.as_ref().map_or(slot, |p| p.at.min(slot));
        self.changes.set(slot, ownership);
        // Frames accepted under the old map: those in the window move or go now; strict frames pre-buffered for a
        // slot the change takes from their class go now too (relaxed ones search again when their slot comes).
        self.follow_mapping(Reason::ScheduleChange);
        // None if every frame waiting is due before that.
        if self.cfg.policy == Policy::Strict {
            let mut rt = core::mem::take(&mut self.rt);
            let lost = rt.take_from(self.schedule.time_of(from), |f| {
                f.txtime
                    .and_then(|t| self.slot_of(t))
                    .is_some_and(|k| self.own_for(k).owner_of(k + self.phase) != Some(f.class))
            });
            self.rt = rt;
            for f in lost {
                self.dequeued(f.class);
                self.reject(f.id, f.class, Reason::ScheduleChange);
            }
        }
        let rejected = self.counters.rejected[Reason::ScheduleChange.index()] - before;
        Ok(ScheduleChange { slot, time: self.schedule.time_of(slot), rejected })
    }

    /// The change waiting for its slot, if any: when it takes effect and the map it brings (Qbv's admin list
    /// while `ConfigPending`).
    pub fn pending_change(&self) -> Option<(Tai, &Ownership)> {
        self.changes.pending.as_ref().map(|p| (self.schedule.time_of(p.at), &p.list))
    }

    /// The map in force now (Qbv's oper list): the configured one, or the last change that took effect.
    pub fn ownership(&self) -> &Ownership {
        &self.cfg.ownership
    }

    /// The map that governs unposted slot `k`.
    pub(crate) fn own_for(&self, k: u64) -> &Ownership {
        match &self.changes.pending {
            Some(p) if self.schedule_slot_of(k) >= p.at => &p.list,
            _ => &self.cfg.ownership,
        }
    }

    /// The wire slot where a pending change starts, under the current mapping.
    pub(super) fn change_at(&self) -> Option<u64> {
        let p = self.changes.pending.as_ref()?;
        u64::try_from(i128::from(p.at) - i128::from(self.shift)).ok()
    }

    /// Once every slot before the change is posted, the new map is the running one (the old one is kept to name
    /// the frames it displaced).
    pub(super) fn promote_change(&mut self) {
        let j_end = self.j_end;
        // A map without best-effort slots leaves the best-effort frames still waiting no slot ever (new ones get
        // `no-capacity` at admission): each gets its outcome now.
        if self.changes.promote(&mut self.cfg.ownership, |slot| j_end > slot) && self.cfg.ownership.unowned().is_empty()
        {
            while let Some(f) = self.be.pop() {
                self.dequeued(f.class);
                self.reject(f.id, f.class, Reason::ScheduleChange);
            }
        }
    }

    /// Unposted slot `k` was `class`'s before the last change (pending or in force) and is not under it: a frame
    /// for it is rejected [`Reason::ScheduleChange`], not `not-owned`.
    pub(super) fn taken_by_change(&self, class: crate::isolation::ClassId, k: u64) -> bool {
        let j = self.schedule_slot_of(k);
        let Some((before, after, from)) = self.changes.last_change(&self.cfg.ownership) else { return false };
        j >= from && before.owner_of(j) == Some(class) && after.owner_of(j) != Some(class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::{ClassId, ClassSpec};
    use crate::outcome::{Frame, FrameId, Outcome};
    use crate::station::{Observation, StationConfig};
    use crate::time::{LinkRate, Nanos, SlotGeometry};

    const DATA: [u8; 60] = [0; 60];
    const CYCLE: i64 = 320_000; // 32 slots of 10 µs
    const BASE: i64 = 1_000_000;

    fn map(rt: &[u32]) -> Ownership {
        let classes =
            [ClassSpec { name: "a".into(), slots: rt.to_vec() }, ClassSpec { name: "be".into(), slots: vec![] }];
        Ownership::new(32, &classes).unwrap()
    }

    fn station() -> Station<&'static [u8]> {
        let cfg = StationConfig {
            geometry: SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap(),
            ownership: map(&[0]),
            batch: 8,
            policy: Policy::Strict,
            max_pending: 64,
            max_advance: Nanos::from_ms(100),
            post_latency: Nanos(1_000),
            base_time: Tai(BASE),
            max_filler: 1518,
        };
        Station::new(cfg, Tai(BASE)).unwrap()
    }

    fn poll(s: &mut Station<&'static [u8]>, consumed: u64, now: i64) {
        let _ = s.poll(Observation { consumed, now: Tai(now), gaps: &[] }).unwrap();
    }

    /// Ring slot `slot` of cycle `n` (from `BASE`).
    fn at(n: i64, slot: i64) -> Tai {
        Tai(BASE + n * CYCLE + slot * 10_000)
    }

    fn rt(id: u64, t: Tai) -> Frame<&'static [u8]> {
        Frame { id: FrameId(id), class: ClassId(0), txtime: Some(t), data: &DATA[..] }
    }

    /// Class `a` owns ring slot 0 until cycle 10 and ring slot 8 from then on. Frames for ring slot 0 due before
    /// the change are sent, those due after it (submitted before the change was known) are rejected
    /// `schedule-change`; frames for ring slot 8 are `not-owned` before the change and sent after it, each at its
    /// schedule slot's start. Best effort never takes a slot of `a`'s under the map in force there.
    #[test]
    fn frames_follow_the_old_windows_before_the_change_and_the_new_ones_after() {
        let mut s = station();
        poll(&mut s, 0, BASE - 1_000);
        let mut outcomes: Vec<Outcome> = Vec::new();
        for n in 3..=20 {
            assert_eq!(s.submit(rt(n as u64, at(n, 0)), Tai(BASE)), Ok(()));
        }
        let change = s.change_schedule(at(10, 0), map(&[8])).unwrap();
        assert_eq!(change.time, at(10, 0));
        assert_eq!(s.pending_change().map(|(t, _)| t), Some(at(10, 0)));
        for n in 3..=20 {
            let r = s.submit(rt(100 + n as u64, at(n, 8)), Tai(BASE));
            assert_eq!(r, if n < 10 { Err(Reason::NotOwned) } else { Ok(()) }, "cycle {n}");
        }
        let (mut consumed, mut now, mut be) = (0, BASE, 1000);
        while now < at(22, 0).0 {
            consumed += 4;
            now += 40_000;
            let f = Frame { id: FrameId(be), class: ClassId(1), txtime: None, data: &DATA[..] };
            let _ = s.submit(f, Tai(now));
            be += 1;
            poll(&mut s, consumed, now);
            outcomes.extend(s.drain_outcomes());
        }
        assert!(s.pending_change().is_none(), "the change took effect");
        assert_eq!(s.ownership().owned(ClassId(0)), &[8]);
        for o in &outcomes {
            let id = o.id.0;
            match (id, o.result) {
                (3..=9, Ok(sent)) | (110..=120, Ok(sent)) => {
                    assert_eq!(Some(sent.time), sent.scheduled, "frame {id} on its schedule");
                    assert_eq!(sent.ring_slot, if id < 100 { 0 } else { 8 }, "frame {id}");
                }
                (10..=20, Err(why)) => assert_eq!(why, Reason::ScheduleChange, "frame {id}"),
                (103..=109, Err(why)) => assert_eq!(why, Reason::NotOwned, "frame {id}"),
                (1000.., Ok(sent)) => {
                    // Best effort: never in a's slot under the map of its time.
                    let a_slot = if sent.time < at(10, 0) { 0 } else { 8 };
                    assert_ne!(sent.ring_slot, a_slot, "best-effort frame {id} in a's window at {:?}", sent.time);
                }
                (1000.., Err(_)) => {}
                (id, r) => panic!("frame {id}: {r:?}"),
            }
        }
        let count = |lo: u64, hi: u64| outcomes.iter().filter(|o| (lo..=hi).contains(&o.id.0)).count();
        assert_eq!((count(3, 20), count(103, 120)), (18, 18), "every frame has its outcome");
        assert!(outcomes
            .iter()
            .any(|o| o.id.0 >= 1000 && o.result.is_ok_and(|s| s.ring_slot == 0 && s.time >= at(10, 0))));
    }

    /// A change that replaces a pending one, later: frames admitted for the first one's slots before the second's
    /// time are the running map's again, and lose their slot at once (`schedule-change`); those from the second's
    /// time on keep it.
    #[test]
    fn a_later_change_replacing_a_pending_one_redecides_from_the_earlier() {
        let mut s = station();
        poll(&mut s, 0, BASE - 1_000);
        s.change_schedule(at(10, 0), map(&[8])).unwrap();
        for n in 10..=20 {
            assert_eq!(s.submit(rt(n as u64, at(n, 8)), Tai(BASE)), Ok(()), "cycle {n}");
        }
        let change = s.change_schedule(at(15, 0), map(&[8])).unwrap();
        assert_eq!(change.rejected, 5, "cycles 10 to 14");
        let lost: Vec<u64> =
            s.drain_outcomes().filter(|o| o.result == Err(Reason::ScheduleChange)).map(|o| o.id.0).collect();
        assert_eq!(lost, (10..15).collect::<Vec<u64>>());
    }

    /// A PTP port asks for its class's next places one after another ([`crate::face::StationFace::next_place`]):
    /// they follow the map that governs each slot — ring slot 0 until the change, ring slot 8 from its cycle on —
    /// never a slot the pending change takes away (which would be refused `schedule-change`).
    #[test]
    fn the_next_places_follow_a_pending_change() {
        use crate::face::StationFace;
        let mut s = station();
        poll(&mut s, 0, BASE - 1_000);
        s.change_schedule(at(10, 0), map(&[8])).unwrap();
        let (mut after, mut times) = (None, Vec::new());
        while times.last().is_none_or(|t| *t < at(12, 0)) {
            let p = s.next_place(ClassId(0), Nanos(0), 60, after).expect("a place");
            assert!(after.is_none_or(|a| p.mark > a));
            after = Some(p.mark);
            times.push(p.txtime);
        }
        let first = (times[0].0 - BASE) / CYCLE;
        let want: Vec<Tai> = (first..10).map(|n| at(n, 0)).chain([at(10, 8), at(11, 8), at(12, 8)]).collect();
        assert_eq!(times, want);
        assert_eq!(s.submit(rt(1, at(10, 8)), Tai(BASE)), Ok(()));
    }

    /// A frame already placed in the insertion window for a slot the change takes away is rejected when the change
    /// is made, and the change reports it.
    #[test]
    fn a_frame_in_the_window_that_the_change_displaces_is_rejected_at_once() {
        let mut s = station();
        poll(&mut s, 0, BASE - 1_000);
        // Ring slot 0 of cycle 1 is in the window (32 slots) once cycle 0's first slots are consumed.
        poll(&mut s, 4, BASE + 40_000);
        assert_eq!(s.submit(rt(1, at(1, 0)), Tai(BASE + 40_000)), Ok(()));
        let change = s.change_schedule(at(1, 0), map(&[8])).unwrap();
        assert_eq!(change.rejected, 1);
        let o: Vec<Outcome> = s.drain_outcomes().collect();
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].result, Err(Reason::ScheduleChange));
    }

    /// Issue 29 point 5: best-effort frames waiting when a change leaves best effort no slot are rejected
    /// `schedule-change` when it takes effect (they waited for ever before); until then they may still go.
    #[test]
    fn best_effort_frames_waiting_when_a_change_removes_their_slots_get_an_outcome() {
        let mut s = station();
        let (mut consumed, mut now) = (0, BASE);
        poll(&mut s, consumed, now);
        // More best-effort frames than the free slots before the change carry.
        for id in 0..60 {
            let f = Frame { id: FrameId(1000 + id), class: ClassId(1), txtime: None, data: &DATA[..] };
            s.submit(f, Tai(now)).unwrap();
        }
        let all: alloc::vec::Vec<u32> = (0..32).collect();
        let own = Ownership::new(
            32,
            &[ClassSpec { name: "a".into(), slots: all }, ClassSpec { name: "be".into(), slots: vec![] }],
        )
        .unwrap();
        let change = s.change_schedule(at(0, 20), own).unwrap();
        let (mut sent, mut changed) = (0, 0);
        while Tai(now) < change.time + Nanos::from_ms(2) {
            consumed += 4;
            now += 4 * 10_000;
            poll(&mut s, consumed, now);
            for Outcome { id, result, .. } in s.drain_outcomes() {
                assert!(id.0 >= 1000);
                match result {
                    Ok(sent_at) => {
                        assert!(sent_at.time < change.time, "a best-effort frame after the change");
                        sent += 1;
                    }
                    Err(Reason::ScheduleChange) => changed += 1,
                    Err(other) => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(sent + changed, 60, "{sent} sent, {changed} rejected: every frame has its outcome");
        assert!(changed > 0 && sent > 0, "{sent} sent, {changed} rejected");
        assert_eq!(s.in_flight(), 0);
        let late = Frame { id: FrameId(9), class: ClassId(1), txtime: None, data: &DATA[..] };
        assert_eq!(s.submit(late, Tai(now)), Err(Reason::NoCapacity));
    }

    /// Changes that cannot be made are refused, naming why, and change nothing.
    #[test]
    fn a_change_in_the_past_or_of_another_shape_is_refused() {
        let mut s = station();
        poll(&mut s, 0, BASE - 1_000);
        poll(&mut s, 4, BASE + 40_000);
        let e = s.change_schedule(at(0, 1), map(&[8])).unwrap_err();
        assert!(matches!(e, ChangeError::InThePast { earliest, .. } if earliest > at(0, 1)), "{e}");
        assert!(e.to_string().contains("earliest"), "{e}");
        let e = s
            .change_schedule(
                at(5, 0),
                Ownership::new(
                    16,
                    &[ClassSpec { name: "a".into(), slots: vec![1] }, ClassSpec { name: "be".into(), slots: vec![] }],
                )
                .unwrap(),
            )
            .unwrap_err();
        assert_eq!(e, ChangeError::Ring { running: 32, new: 16 });
        let renamed = Ownership::new(
            32,
            &[ClassSpec { name: "x".into(), slots: vec![1] }, ClassSpec { name: "be".into(), slots: vec![] }],
        )
        .unwrap();
        assert!(matches!(s.change_schedule(at(5, 0), renamed), Err(ChangeError::Classes(_))));
        let emptied = Ownership::new(
            32,
            &[ClassSpec { name: "a".into(), slots: vec![] }, ClassSpec { name: "be".into(), slots: vec![] }],
        )
        .unwrap();
        assert!(matches!(s.change_schedule(at(5, 0), emptied), Err(ChangeError::Classes(_))));
        assert!(s.pending_change().is_none());
        // A second change replaces the first.
        s.change_schedule(at(5, 0), map(&[8])).unwrap();
        s.change_schedule(at(6, 0), map(&[9])).unwrap();
        let (t, own) = s.pending_change().unwrap();
        assert_eq!((t, own.owned(ClassId(0))), (at(6, 0), &[9][..]));
    }
}
