//! Synchronisation adjustments move the EPHC and the schedule's grid together: a frame is never sent at a time
//! other than its outcome says, a strict frame leaves in the slot its txtime maps to when it is posted, frames in
//! the insertion window are re-placed or rejected `clock-step`, and the slot count never changes.

use std::collections::HashMap;

use proptest::prelude::*;

use keepon_core::ephc::ClockAdjust;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId, Outcome, Reason};
use keepon_core::ring::SlotKind;
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};

const T0: Tai = Tai(1_000_000);

fn station(ring: u32, batch: u32, specs: &[ClassSpec], policy: Policy, slot_bytes: u32) -> Station<Vec<u8>> {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), slot_bytes).unwrap();
    let cfg = StationConfig {
        geometry,
        ownership: Ownership::new(ring, specs).unwrap(),
        batch,
        policy,
        max_pending: 100_000,
        max_advance: Nanos::from_ms(10),
        post_latency: Nanos(0),
        base_time: T0,
        max_filler: 1518,
    };
    Station::new(cfg, T0).unwrap()
}

/// Poll from `from` consumed slots to `to`, four at a time, collecting the outcomes.
fn poll_through(st: &mut Station<Vec<u8>>, from: u64, to: u64) -> Vec<Outcome> {
    let mut outs = Vec::new();
    let mut c = from;
    while c < to {
        c += 4;
        let _ = poll(st, c);
        outs.extend(st.drain_outcomes());
    }
    outs
}

fn frame(id: u64, class: u8, t: Tai) -> Frame<Vec<u8>> {
    Frame { id: FrameId(id), class: ClassId(class), txtime: Some(t), data: vec![0; 60] }
}

/// Poll with `now` the host time just before slot `consumed` starts (the slot just consumed is still on the
/// wire); adjustments move the EPHC away from the host clock.
fn poll(st: &mut Station<Vec<u8>>, consumed: u64) -> std::ops::Range<u64> {
    let now = Tai(st.host_time_of(consumed).0 - 1);
    let p = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
    assert!(p.underruns.is_empty());
    p.post
}

#[test]
fn a_step_moves_a_waiting_frame_to_the_slot_its_txtime_now_maps_to() {
    // δ = 10 µs, ring 32, class 0 owns every slot.
    let all = ClassSpec { name: "a".into(), slots: (0..32).collect() };
    let mut st = station(32, 4, &[all], Policy::Strict, 1230);
    let _ = poll(&mut st, 0);
    let t = T0 + Nanos(20 * 10_000 + 3_000); // slot 20
    st.submit(frame(1, 0, t), T0).unwrap();
    let _ = poll(&mut st, 4);
    assert!(matches!(st.ring().kind(20), SlotKind::Real { .. }));
    // The clock was 10 µs behind: step it forward. Slot 19 now starts at t's old slot start.
    let done = st.adjust_clock(ClockAdjust::Step(Nanos(10_000))).unwrap();
    assert_eq!(done.rejected, 0);
    assert_eq!(done.from_slot, st.ring().posted());
    assert!(matches!(st.ring().kind(19), SlotKind::Real { .. }));
    assert!(matches!(st.ring().kind(20), SlotKind::Filler));
    let outs = poll_through(&mut st, 4, 40);
    let sent = outs[0].result.unwrap();
    assert_eq!(sent.slot, 19);
    assert!(sent.time <= t && t < sent.time + Nanos(10_000), "{sent:?} for txtime {t:?}");
    assert_eq!(st.ephc().slot_of(sent.time), Some(st.wire_position(19)), "the count did not change");
    assert_eq!(sent.ring_slot, 20, "the frame keeps its schedule slot: the class window stays on network time");
}

/// A step keeps the class windows on network time: class 0 owns ring slot 20 only, and after a one-slot step its
/// frame moves to the wire slot that now carries schedule slot 20 (wire slot 19) and leaves at its time. (Before
/// the schedule was on network time, ownership stayed with the wire slots and the step moved the window.)
#[test]
fn a_step_keeps_a_class_window_on_network_time() {
    let one = ClassSpec { name: "a".into(), slots: vec![20] };
    let mut st = station(32, 4, &[one], Policy::Strict, 1230);
    let _ = poll(&mut st, 0);
    let t = T0 + Nanos(20 * 10_000);
    st.submit(frame(1, 0, t), T0).unwrap();
    let _ = poll(&mut st, 4);
    let done = st.adjust_clock(ClockAdjust::Step(Nanos(10_000))).unwrap();
    assert_eq!(done.rejected, 0);
    let outs = poll_through(&mut st, 4, 40);
    let sent = outs[0].result.unwrap();
    assert_eq!((sent.slot, sent.ring_slot), (19, 20));
    // The link came up 1 ns before T0 (the test's host polls 1 ns before each slot), so the wire's bytes sit 1 ns
    // off the schedule's nanoseconds: the slot starts on the first byte at or after its time.
    assert!(sent.time >= t && sent.time.0 - t.0 < 8, "{sent:?} for {t:?}");
}

/// A step that moves a frame's schedule slot onto a slot already posted rejects it `clock-step`; one that leaves
/// the next slots off their schedule time by more than the lengths absorb at once makes them spacers, and a
/// frame waiting in one is rejected `clock-step` rather than sent off its time.
#[test]
fn a_frame_a_step_makes_impossible_is_rejected_clock_step() {
    let all = ClassSpec { name: "a".into(), slots: (0..32).collect() };
    // Posted up to slot 8; the frame is in slot 10; a step of three slots forward puts schedule slot 10 at wire
    // slot 7, already posted.
    let mut st = station(32, 4, std::slice::from_ref(&all), Policy::Strict, 1230);
    let _ = poll(&mut st, 0);
    st.submit(frame(1, 0, T0 + Nanos(10 * 10_000)), T0).unwrap();
    let _ = poll(&mut st, 4);
    let done = st.adjust_clock(ClockAdjust::Step(Nanos(30_000))).unwrap();
    assert_eq!(done.rejected, 1);
    let o: Vec<Outcome> = st.drain_outcomes().collect();
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].result, Err(Reason::ClockStep));
    assert_eq!(st.counters().rejected[Reason::ClockStep.index()], 1);
    // A step of 1.2 µs forward with 300-byte slots (δ = 2.56 µs): the next slot to post, which holds a frame,
    // now starts 1.2 µs after its schedule time, and no length can change that (its start is fixed by the slots
    // already posted). The frame stays in it and leaves late, its outcome saying by how much; the slots after it
    // are back on time within three slots (a quarter of the 236 bytes of slack, 59 bytes, per slot).
    let mut st = station(32, 4, &[all], Policy::Strict, 300);
    let _ = poll(&mut st, 0);
    let t = T0 + Nanos(8 * 2_560);
    st.submit(frame(2, 0, t), T0).unwrap();
    let _ = poll(&mut st, 4);
    assert!(matches!(st.ring().kind(8), SlotKind::Real { .. }));
    let done = st.adjust_clock(ClockAdjust::Step(Nanos(1_200))).unwrap();
    assert_eq!(done.rejected, 0);
    let mut outs = Vec::new();
    for c in [8, 12, 16] {
        let _ = poll(&mut st, c);
        outs.extend(st.drain_outcomes());
    }
    let sent = outs[0].result.unwrap();
    assert_eq!((sent.slot, sent.scheduled), (8, Some(t)));
    assert!((1_200..1_208).contains(&(sent.time - t).0), "{sent:?}");
    assert!(!st.carried(9).is_some_and(|c| c.locked), "not yet re-acquired one slot later");
    assert!(st.carried(12).is_some_and(|c| c.locked), "re-acquired within four slots");
}

#[test]
fn a_refused_adjustment_changes_nothing() {
    let all = ClassSpec { name: "a".into(), slots: (0..32).collect() };
    let mut st = station(32, 4, &[all], Policy::Strict, 1230);
    let _ = poll(&mut st, 0);
    let before = (st.ephc().clone(), st.schedule().clone());
    assert!(st.adjust_clock(ClockAdjust::Rate(2_000_000_000)).is_err());
    assert_eq!((st.ephc().clone(), st.schedule().clone()), before);
}

#[derive(Debug, Clone)]
struct Case {
    ring: u32,
    batch: u32,
    step: u32,
    strict: bool,
    owner: Vec<u8>,
    frames: Vec<(u8, u32, u32)>,         // (class, target slot offset, lead in slots)
    adjusts: Vec<(u32, bool, i64, i64)>, // (at consumed, is step, step ns, rate ppt)
}

fn case() -> impl Strategy<Value = Case> {
    (4u32..40)
        .prop_flat_map(|ring| {
            (
                Just(ring),
                1..ring,
                any::<bool>(),
                prop::collection::vec(prop_oneof![2 => 0u8..2, 1 => Just(255u8)], ring as usize),
                prop::collection::vec((0u8..2, 0u32..400, 1u32..80), 1..150),
                prop::collection::vec(
                    (0u32..500, any::<bool>(), -6_000i64..6_000, -200_000_000i64..200_000_000),
                    0..12,
                ),
            )
        })
        .prop_flat_map(|(ring, batch, strict, owner, frames, adjusts)| {
            (Just((ring, batch, strict, owner, frames, adjusts)), 1..=batch)
        })
        .prop_map(|((ring, batch, strict, owner, frames, adjusts), step)| Case {
            ring,
            batch,
            step,
            strict,
            owner,
            frames,
            adjusts,
        })
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let specs: Vec<ClassSpec> = (0..2u8)
        .map(|i| ClassSpec {
            name: format!("tc-{i}"),
            slots: (0..c.ring).filter(|&s| c.owner[s as usize] == i).collect(),
        })
        .collect();
    let own = Ownership::new(c.ring, &specs).unwrap();
    let policy = if c.strict { Policy::Strict } else { Policy::Relaxed };
    let mut st = station(c.ring, c.batch, &specs, policy, 105); // δ = 1 µs
    let _ = poll(&mut st, 0);
    let schedule = st.schedule().clone();
    let mut frames: Vec<(u64, Frame<Vec<u8>>)> = c
        .frames
        .iter()
        .enumerate()
        .map(|(i, &(class, off, lead))| {
            let target = 2 * u64::from(c.ring) + u64::from(off);
            let submit = target.saturating_sub(u64::from(c.batch + c.step) + u64::from(lead));
            (submit, frame(i as u64, class, T0 + Nanos(target as i64 * 1000 + i as i64 % 1000)))
        })
        .filter(|(_, f)| !own.owned(f.class).is_empty())
        .collect();
    frames.sort_by_key(|(s, f)| (*s, f.id));
    let mut adjusts = c.adjusts.clone();
    adjusts.sort_by_key(|a| a.0);
    let n_frames = frames.len();
    // Per posted real frame: (slot, the time the EPHC gave that slot when it was posted).
    let mut posted_at: HashMap<FrameId, (u64, Tai)> = HashMap::new();
    let mut outcomes: HashMap<FrameId, Outcome> = HashMap::new();
    let (mut consumed, mut next, mut next_adj) = (0u64, 0usize, 0usize);
    let end = 2 * u64::from(c.ring) + 480 + 3 * u64::from(c.ring) + 8;
    while consumed < end {
        while next_adj < adjusts.len() && u64::from(adjusts[next_adj].0) <= consumed {
            let (_, is_step, ns, ppt) = adjusts[next_adj];
            let (posted, done) = (st.ring().posted(), st.ring().consumed());
            let adj = if is_step { ClockAdjust::Step(Nanos(ns)) } else { ClockAdjust::Rate(ppt) };
            let r = st.adjust_clock(adj).unwrap();
            prop_assert_eq!(r.from_slot, posted);
            prop_assert_eq!((st.ring().posted(), st.ring().consumed()), (posted, done));
            // The schedule never moves: it is on network time.
            prop_assert_eq!(st.schedule(), &schedule);
            next_adj += 1;
        }
        let now = Tai(st.host_time_of(consumed).0 - 1);
        while next < frames.len() && frames[next].0 <= consumed {
            let _ = st.submit(frames[next].1.clone(), now);
            next += 1;
        }
        let post = poll(&mut st, consumed);
        for k in post {
            if let SlotKind::Real { id, txtime: Some(t), .. } = st.view(k).kind {
                // The slot carries a schedule slot and starts within a byte (8 ns) of its schedule time (at or
                // after it, unless an adjustment moved the clock under the slot after its position was fixed).
                let want = schedule.slot_of(t).unwrap();
                let j = st.carried(k);
                prop_assert!(j.is_some(), "frame {:?} in a spacer", id);
                let j = j.unwrap();
                // Within a byte of it when locked; while the lengths catch up after a step (±6 µs), early by less
                // than half a slot (0.5 µs) or late by at most the step.
                let (time, start) = (st.slot_time(k), schedule.time_of(j.slot));
                let e = time.0 - start.0;
                let ok = if j.locked { e.abs() <= 8 } else { (-500..=6_000 + 1_000).contains(&e) };
                prop_assert!(ok, "{:?}: slot {} at {:?}, schedule {:?}, {:?}", id, k, time, start, j);
                if c.strict {
                    prop_assert_eq!(j.slot, want, "strict frame {:?} posted in slot {} for txtime {:?}", id, k, t);
                } else {
                    prop_assert!(want <= j.slot && j.slot < want + u64::from(c.ring));
                }
                posted_at.insert(id, (k, time));
            }
        }
        for o in st.drain_outcomes() {
            prop_assert!(outcomes.insert(o.id, o).is_none(), "two outcomes for {:?}", o.id);
        }
        consumed += u64::from(c.step);
    }
    prop_assert_eq!(outcomes.len(), n_frames, "every frame has exactly one outcome");
    for (id, o) in &outcomes {
        match o.result {
            Ok(s) => prop_assert_eq!(Some(&(s.slot, s.time)), posted_at.get(id), "{:?}", id),
            Err(Reason::Late | Reason::ClockStep | Reason::SlotTaken | Reason::NotOwned) => {}
            Err(why) => prop_assert!(false, "{id:?}: unexpected rejection {why:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    /// Random PTP steps (±6 slots) and frequency changes (±200 ppm) at random times, strict and relaxed.
    #[test]
    fn adjustments_never_misreport_a_send_time(c in case()) {
        run(&c)?;
    }
}
