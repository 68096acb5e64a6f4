//! One station with two placement policies, or two stations? (issue 30 point 3.) The byte clock given a slot
//! mask's windows (`Windows::from_slots`) against the slot station with that mask, driven through the one face
//! both implement (`StationFace`) on the same ideal NIC, with the same frames:
//!
//! - a frame whose txtime is a slot start of its class: both send it at exactly its txtime — the byte clock
//!   reproduces the slot station's outcome;
//! - a frame whose txtime falls inside such a slot: the slot station sends it at the slot's start (its contract:
//!   `Sent::scheduled` is the start of the schedule slot holding the txtime), the byte clock at the txtime itself,
//!   to the byte.
//!
//! So the byte clock reproduces slot-mode outcomes only where txtimes are slot starts; elsewhere the two answer
//! differently by design, and keepon keeps them as two placement policies (slot grid; byte target with filler
//! sizing) over the shared wire (`wire::`: the step, the track, the lifecycle, the host view, the link-up snap)
//! and the shared schedule (`schedule::`), behind one face.

use keepon_core::bytes::windows::Windows;
use keepon_core::bytes::{ByteConfig, ByteStation};
use keepon_core::face::StationFace;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId, Outcome};
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};

const BASE: Tai = Tai(1_700_000_000_000_000_000);
/// 1 230-byte slots at 1 Gb/s.
const DELTA: i64 = 10_000;

fn ownership() -> Ownership {
    let rt = (0..32).filter(|i| i % 4 == 0).collect();
    Ownership::new(32, &[ClassSpec { name: "rt".into(), slots: rt }, ClassSpec { name: "be".into(), slots: vec![] }])
        .unwrap()
}

fn geometry() -> SlotGeometry {
    SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap()
}

/// Submit `frames` at `BASE` and run an ideal NIC (it takes each posted slot or descriptor when its EPHC start has
/// come; without synchronisation the EPHC is the host's clock) for 8 ms: every frame's outcome, by id.
fn run(mut st: impl StationFace<Vec<u8>>, frames: &[(u64, Tai)]) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut now = BASE;
    let _ = st.poll(Observation { consumed: 0, now, gaps: &[] }).unwrap();
    for &(id, t) in frames {
        let f = Frame { id: FrameId(id), class: ClassId(0), txtime: Some(t), data: vec![0x5a; 100] };
        st.submit(f, now).unwrap_or_else(|e| panic!("frame {id}: {e:?}"));
    }
    while now < BASE + Nanos::from_ms(8) {
        now += Nanos(2_000);
        let posted = st.ring().posted();
        let consumed =
            (st.ring().consumed()..posted).take_while(|&k| st.slot_time(k) <= now).last().map_or(0, |k| k + 1);
        let consumed = consumed.max(st.ring().consumed());
        let _ = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
        outcomes.extend(st.drain_outcomes());
    }
    outcomes.sort_by_key(|o| o.id);
    outcomes
}

#[test]
fn the_byte_clock_reproduces_slot_outcomes_only_at_slot_starts() {
    // Frames at the starts of class rt's slots (ring slots 0, 4, 8, …: every other one of them), and 3 µs into the
    // others.
    let at_start: Vec<(u64, Tai)> = (0..40).map(|m| (m, BASE + Nanos(DELTA * (40 + 8 * m as i64)))).collect();
    let inside: Vec<(u64, Tai)> = at_start.iter().map(|&(id, t)| (100 + id, t + Nanos(4 * DELTA + 3_000))).collect();
    let frames: Vec<(u64, Tai)> = at_start.iter().chain(&inside).copied().collect();

    let slots = Station::new(
        StationConfig {
            geometry: geometry(),
            ownership: ownership(),
            batch: 8,
            policy: Policy::Strict,
            max_pending: 256,
            max_advance: Nanos::from_ms(100),
            post_latency: Nanos(0),
            base_time: BASE,
            max_filler: 1518,
        },
        BASE,
    )
    .unwrap();
    let bytes = ByteStation::new(
        ByteConfig {
            rate: LinkRate::from_mbps(1000).unwrap(),
            windows: Windows::from_slots(BASE, geometry(), &ownership()),
            ring: 256,
            max_frame: 1518,
            lead: Nanos::from_us(200),
            max_pending: 256,
            max_advance: Nanos::from_ms(100),
            post_latency: Nanos(0),
            policy: Policy::Strict,
        },
        BASE,
    )
    .unwrap();
    let (by_slots, by_bytes) = (run(slots, &frames), run(bytes, &frames));
    assert_eq!((by_slots.len(), by_bytes.len()), (80, 80), "every frame has its outcome");
    for ((o1, o2), &(id, t)) in by_slots.iter().zip(&by_bytes).zip(&frames) {
        assert_eq!((o1.id, o2.id), (FrameId(id), FrameId(id)));
        let (s1, s2) = (o1.result.unwrap(), o2.result.unwrap());
        if id < 100 {
            assert_eq!((s1.time, s2.time), (t, t), "frame {id} at a slot start: the same outcome");
        } else {
            assert_eq!(s1.time, t - Nanos(3_000), "frame {id}: the slot station sends at its slot's start");
            assert_eq!(s1.scheduled, Some(s1.time));
            assert_eq!(s2.time, t, "frame {id}: the byte clock at its txtime");
        }
    }
}
