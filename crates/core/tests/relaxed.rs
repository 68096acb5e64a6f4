//! The relaxed policy keeps its promise: on a host that never underruns, a real-time frame submitted before
//! its slot was posted is sent in the earliest owned slot free within one ring cycle of its target — never
//! rejected `late` because it waited — and is rejected (`slot-taken`) only when every slot its class owns in
//! that cycle carried another frame.

use std::collections::HashMap;

use proptest::prelude::*;

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId, Outcome, Reason};
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};

#[derive(Debug, Clone)]
struct Case {
    ring: u32,
    batch: u32,
    step: u32,
    owner: Vec<u8>,
    frames: Vec<(u8, u32, u32)>, // (class, target slot offset, lead beyond the window in slots)
}

fn case() -> impl Strategy<Value = Case> {
    (4u32..40)
        .prop_flat_map(|ring| {
            (
                Just(ring),
                1..ring,
                prop::collection::vec(prop_oneof![2 => 0u8..2, 1 => Just(255u8)], ring as usize),
                prop::collection::vec((0u8..2, 0u32..400, 1u32..80), 1..150),
            )
        })
        .prop_flat_map(|(ring, batch, owner, frames)| (Just((ring, batch, owner, frames)), 1..=batch))
        .prop_map(|((ring, batch, owner, frames), step)| Case { ring, batch, step, owner, frames })
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 105).unwrap(); // δ = 1 µs
    let specs: Vec<ClassSpec> = (0..2u8)
        .map(|i| ClassSpec {
            name: format!("tc-{i}"),
            slots: (0..c.ring).filter(|&s| c.owner[s as usize] == i).collect(),
        })
        .collect();
    let own = Ownership::new(c.ring, &specs).unwrap();
    let cfg = StationConfig {
        geometry,
        ownership: own.clone(),
        batch: c.batch,
        policy: Policy::Relaxed,
        max_pending: 100_000,
        max_advance: Nanos::from_ms(10),
        post_latency: Nanos(0),
        base_time: Tai(1_000_000),
        max_filler: 1518,
    };
    let t0 = Tai(1_000_000);
    let mut st: Station<Vec<u8>> = Station::new(cfg, t0).unwrap();
    let delta = |k: u64| Nanos(k as i64 * 1000);
    // The first poll brings the link up at t0; the ideal host then consumes `step ≤ batch` slots per poll, so the
    // wire never runs dry.
    let _ = st.poll(Observation { consumed: 0, now: t0, gaps: &[] }).unwrap();
    let mut frames: Vec<(u64, u64, Frame<Vec<u8>>)> = c
        .frames
        .iter()
        .enumerate()
        .map(|(i, &(class, off, lead))| {
            let target = 2 * u64::from(c.ring) + u64::from(off);
            // Submitted while its target is still beyond the posted slots: `lead` slots before the window reaches it.
            let submit = target.saturating_sub(u64::from(c.batch + c.step) + u64::from(lead));
            let txtime = t0 + delta(target) + Nanos(i as i64 % 1000);
            (
                submit,
                target,
                Frame { id: FrameId(i as u64), class: ClassId(class), txtime: Some(txtime), data: vec![0; 60] },
            )
        })
        .filter(|(_, _, f)| !own.owned(f.class).is_empty())
        .collect();
    frames.sort_by_key(|(s, _, f)| (*s, f.id));
    let targets: HashMap<FrameId, (u64, ClassId)> = frames.iter().map(|(_, t, f)| (f.id, (*t, f.class))).collect();
    let mut outcomes: HashMap<FrameId, Outcome> = HashMap::new();
    let mut consumed = 0u64;
    let mut next = 0usize;
    let end = 2 * u64::from(c.ring) + 400 + 3 * u64::from(c.ring) + 8;
    while consumed < end {
        let now = t0 + delta(consumed) - Nanos(1); // the slot just consumed is still on the wire
        while next < frames.len() && frames[next].0 <= consumed {
            let f = frames[next].2.clone();
            prop_assert!(st.ring().posted() <= frames[next].1, "test setup: submitted after its slot was posted");
            let _ = st.submit(f, now);
            next += 1;
        }
        let p = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
        prop_assert!(p.underruns.is_empty(), "the ideal host never underruns");
        for o in st.drain_outcomes() {
            prop_assert!(outcomes.insert(o.id, o).is_none());
        }
        consumed += u64::from(c.step);
    }
    prop_assert_eq!(outcomes.len(), frames.len(), "every frame has its outcome");
    // Which wire slot carried which class's frame.
    let mut used: HashMap<u64, ClassId> = HashMap::new();
    for o in outcomes.values() {
        if let Ok(s) = o.result {
            prop_assert!(used.insert(s.slot, o.class).is_none());
        }
    }
    for (id, o) in &outcomes {
        let (target, class) = targets[id];
        match o.result {
            Ok(s) => {
                prop_assert!(
                    s.slot >= target && s.slot < target + u64::from(c.ring),
                    "{id:?}: slot {} for target {target}",
                    s.slot
                );
                prop_assert_eq!(own.owner_of(s.slot), Some(class));
            }
            Err(Reason::SlotTaken) => {
                for k in target..target + u64::from(c.ring) {
                    if own.owner_of(k) == Some(class) {
                        prop_assert!(
                            used.contains_key(&k),
                            "{id:?} rejected slot-taken, but its owned slot {k} stayed free"
                        );
                    }
                }
            }
            Err(why) => prop_assert!(false, "{id:?} submitted in time, rejected {why:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn relaxed_sends_every_in_time_frame_with_a_free_owned_slot_in_its_cycle(c in case()) {
        run(&c)?;
    }
}
