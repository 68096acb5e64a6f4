//! Property tests of ARCHITECTURE.md §4 over random configurations, hosts and frame streams, on the
//! simulated NIC: exact timing, one outcome per frame, isolation, underruns detected, no stale bytes.

mod support;

use std::collections::HashMap;

use proptest::prelude::*;

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId, Reason};
use keepon_core::station::StationConfig;
use keepon_core::testframe::TestHeader;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, DriverError, Event, LoopConfig};
use keepon_nic::sim::{HostModel, SimConfig, SimNic};
use keepon_nic::source::Listed;

#[derive(Debug, Clone)]
struct Case {
    mbps: u64,
    slot_bytes: u32,
    ring: u32,
    batch: u32,
    owner: Vec<u8>, // per ring slot: class index, or 255 = unowned
    classes: u8,
    be_class: bool,
    relaxed: bool,
    poll_period_slots: u32,
    jitter: i64,
    spike_ppm: u32,
    post_jitter: i64,
    fetch_ahead: u32,
    frames: Vec<(u8, u32, u32, i32)>, // (class, offset in slots, lead in slots, len delta)
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![100u64, 1000, 2500, 10_000]),
        64u32..1518,
        4u32..48,
        1u8..4,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(mbps, slot_bytes, ring, classes, be_class, relaxed)| {
            (
                Just((mbps, slot_bytes, ring, classes, be_class, relaxed)),
                1..ring,
                prop::collection::vec(prop_oneof![3 => 0..classes, 2 => Just(255u8)], ring as usize),
                prop_oneof![3 => Just(0u32), 3 => 0u32..8, 1 => 0u32..200],
                0i64..3_000,
                prop_oneof![3 => Just(0u32), 1 => 0u32..50_000],
                (0i64..2_000, 0u32..4),
                prop::collection::vec((0u8..5, 0u32..3000, 0u32..400, -80i32..40), 1..120),
                any::<u64>(),
            )
        })
        .prop_map(|(base, batch, owner, pp, jitter, spike_ppm, (post_jitter, fetch_ahead), frames, seed)| Case {
            mbps: base.0,
            slot_bytes: base.1,
            ring: base.2,
            classes: base.3,
            be_class: base.4,
            relaxed: base.5,
            batch,
            owner,
            poll_period_slots: pp,
            jitter,
            spike_ppm,
            post_jitter,
            fetch_ahead,
            frames,
            seed,
        })
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(c.mbps).unwrap(), c.slot_bytes).unwrap();
    let period = geometry.period();
    let mut specs: Vec<ClassSpec> = (0..c.classes)
        .map(|i| ClassSpec {
            name: format!("tc-{i}"),
            slots: (0..c.ring).filter(|&s| c.owner[s as usize] == i).collect(),
        })
        .collect();
    if c.be_class {
        specs.push(ClassSpec { name: "be".into(), slots: vec![] });
    }
    let own = Ownership::new(c.ring, &specs).unwrap();
    let t0 = Tai(1_700_000_000_000_000_000);
    let mut sim = SimConfig::new(geometry, t0);
    sim.seed = c.seed;
    sim.host = HostModel {
        jitter: Nanos(c.jitter),
        spike_ppm: c.spike_ppm,
        spike: Nanos(period.floor_mul(u64::from(c.ring) * 2) as i64),
        ..HostModel::default()
    };
    sim.post_jitter = Nanos(c.post_jitter);
    sim.fetch_ahead = c.fetch_ahead;
    let station = StationConfig {
        geometry,
        ownership: own.clone(),
        batch: c.batch,
        policy: if c.relaxed { Policy::Relaxed } else { Policy::Strict },
        max_pending: 64,
        max_advance: Nanos::from_ms(50),
        post_latency: Nanos(0),
        base_time: t0,
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    };
    let poll_period = Nanos(period.floor_mul(u64::from(c.poll_period_slots)) as i64);
    let loop_cfg = LoopConfig { poll_period, max_duration: Nanos::from_ms(500) };
    let mut d = Driver::new(SimNic::new(sim), station, loop_cfg).unwrap();

    // Frames: class index may be out of range (unknown class); lengths around the slot size.
    let slot = |k: u32| Nanos(period.floor_mul(u64::from(k)) as i64);
    let n_classes = specs.len() as u8;
    let mut frames = Vec::new();
    for (i, &(cls, off, lead, dlen)) in c.frames.iter().enumerate() {
        let class = ClassId(cls % (n_classes + 1));
        let be = own.has_class(class) && own.is_best_effort(class);
        let txtime = t0 + slot(64 + off) + Nanos((i as i64 * 7919) % 1000);
        let submit = if be { txtime } else { txtime - slot(lead) };
        let len = (i64::from(c.slot_bytes) - 4 + i64::from(dlen)).max(0) as usize;
        let mut data = vec![0u8; len];
        if len >= TestHeader::buffer_len() {
            TestHeader { dst: [2; 6], src: [4; 6], flow: 0, seq: i as u64, txtime: txtime.0 }
                .emit(&mut data[..TestHeader::buffer_len()]);
        }
        let frame = Frame { id: FrameId(i as u64), class, txtime: (!be).then_some(txtime), data };
        frames.push((submit, frame));
    }
    frames.sort_by_key(|(t, f)| (*t, f.id));
    let submitted: HashMap<FrameId, Frame<Vec<u8>>> = frames.iter().map(|(_, f)| (f.id, f.clone())).collect();
    let mut source = Listed::new(frames);

    let mut outcomes = HashMap::new();
    let mut wire = HashMap::new();
    let mut underruns = 0u64;
    let r = d.run(&mut source, &mut |e| match e {
        Event::Outcome(o) => {
            let dup = outcomes.insert(o.id, o);
            assert!(dup.is_none(), "frame {:?} got two outcomes", o.id);
        }
        Event::Wire(w) => {
            if let Some(id) = w.frame {
                assert!(wire.insert(id, w).is_none(), "frame {id:?} on the wire twice");
            }
        }
        Event::Underrun(_) => underruns += 1,
    });
    // A run may time out only on a link that keeps underrunning (a poll period far beyond `batch` slots can
    // starve a class whose slots never come round); even then every frame must have its outcome.
    if let Err(e) = &r {
        prop_assert!(matches!(e, DriverError::Timeout(_)) && underruns >= 10, "run failed: {e}");
    }

    // No silent loss: every frame handed in has exactly one outcome.
    prop_assert_eq!(outcomes.len(), submitted.len());
    let stats = d.nic.stats();
    let half = (period.ceil_mul(1) / 2) as i64;
    let mut off_schedule = 0u64;
    let mut max_dev = 0i64;
    for (id, o) in &outcomes {
        let f = &submitted[id];
        match o.result {
            Ok(sent) => {
                let w = wire.get(id).ok_or_else(|| TestCaseError::fail(format!("{id:?} sent but not on the wire")))?;
                // Exact timing: the EPHC time reported is the simulated wire start.
                prop_assert_eq!(w.start, Some(sent.time), "frame {:?} slot {}", id, sent.slot);
                // The bytes that left are the frame's, never another's.
                prop_assert_eq!(w.bytes.as_deref(), Some(f.data.as_slice()));
                // Isolation: the ownership map's ring slot the frame occupied is its class's (or unowned for
                // best effort); it is `slot mod N` until an underrun shifts the grid.
                let ring_slot = u64::from(sent.ring_slot);
                if underruns == 0 {
                    prop_assert_eq!(ring_slot, sent.slot % u64::from(c.ring));
                }
                if own.is_best_effort(f.class) {
                    prop_assert_eq!(own.owner_of(ring_slot), None);
                } else {
                    prop_assert_eq!(own.owner_of(ring_slot), Some(f.class));
                    let tx = f.txtime.unwrap();
                    // Never earlier than the slot of the requested time: the schedule slot containing the txtime
                    // (exactly its wire slot until an underrun; after one, the wire runs within half a slot of
                    // the schedule's grid).
                    let sched = d.station.schedule();
                    let start = sched.time_of(sched.slot_of(tx).unwrap());
                    let slack = if underruns == 0 { 0 } else { (period.ceil_mul(1) / 2) as i64 + 1 };
                    prop_assert!(
                        sent.time.0 >= start.0 - slack,
                        "{:?} sent at {:?}, before its schedule slot {:?} (txtime {:?})",
                        id,
                        sent.time,
                        start,
                        tx
                    );
                    if !c.relaxed && underruns == 0 {
                        prop_assert!(sent.time <= tx, "strict frame {:?} late: {:?} > {:?}", id, sent.time, tx);
                    }
                    // The outcome carries the frame's deviation from its schedule slot, exactly.
                    prop_assert_eq!(sent.scheduled, Some(start));
                    let dev = sent.time.0 - start.0;
                    if !c.relaxed && dev > half {
                        off_schedule += 1;
                        max_dev = max_dev.max(dev);
                    }
                }
            }
            Err(Reason::Oversize) => prop_assert!(f.data.len() > c.slot_bytes as usize - 4),
            Err(Reason::Runt) => prop_assert!(f.data.len() < 14),
            Err(Reason::UnknownClass) => prop_assert!(!own.has_class(f.class)),
            Err(_) => prop_assert!(!wire.contains_key(id), "rejected frame {id:?} reached the wire"),
        }
    }
    // Strict frames leave more than half a slot after their schedule slot only because of an underrun, and only
    // those in flight around it: at most `batch` per underrun.
    prop_assert!(
        off_schedule <= underruns * u64::from(c.batch),
        "{} strict frames beyond δ/2 (max {} ns, δ/2 = {} ns) with {} underruns, batch {}",
        off_schedule,
        max_dev,
        half,
        underruns,
        c.batch
    );
    // Underruns are detected whenever the wire saw a gap.
    if stats.gaps > 0 {
        prop_assert!(underruns > 0, "{} gaps on the wire, no underrun reported", stats.gaps);
    }
    prop_assert_eq!(d.station.counters().underruns, underruns);
    // Fillers and padding are zero.
    prop_assert!(d.station.ring().fillers_are_zero());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: support::cases(160), ..ProptestConfig::default() })]
    #[test]
    fn station_invariants_hold_on_the_simulated_nic(c in case()) {
        run_case(&c)?;
    }
}
