//! Scheduled insertion alone, for counting instructions (not a timed benchmark): 64 B real-time frames into every
//! slot of the insertion window of a 1024-slot ring at 100 Gb/s (every slot the class's), `FRAMES` in all, as
//! `cargo bench -p keepon --bench core` inserts them (31 polls of 31 slots between window refills).
//!
//! ```sh
//! cargo build --release -p keepon-core --example insert
//! valgrind --tool=callgrind --toggle-collect='*Station*submit*' target/release/examples/insert 200000
//! ```
//!
//! Instructions per insertion = callgrind's total (collected inside `submit` only) ÷ `FRAMES`.

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId};
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai, MAX_SLOT_BYTES};

fn main() {
    static DATA: [u8; 60] = [0u8; 60];
    let frames: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).expect("usage: insert FRAMES");
    let geometry = SlotGeometry::new(LinkRate::from_mbps(100_000).expect("rate"), 64).expect("slot size");
    let cfg = StationConfig {
        geometry,
        ownership: Ownership::new(1024, &[ClassSpec { name: "rt".into(), slots: (0..1024).collect() }]).expect("ring"),
        batch: 32,
        policy: Policy::Strict,
        max_pending: 1 << 20,
        max_advance: Nanos::from_ms(1000),
        post_latency: Nanos(0),
        base_time: Tai(0),
        max_filler: MAX_SLOT_BYTES,
    };
    let mut st: Station<&'static [u8]> = Station::new(cfg, Tai(0)).expect("station");
    let mut consumed = 0;
    let _ = st.poll(Observation { consumed: 0, now: Tai(0), gaps: &[] }).expect("poll");
    let (mut n, mut id) = (0, 0);
    while n < frames {
        for k in st.ring().window() {
            if !st.ring().is_free(k) {
                continue;
            }
            let t = st.slot_time(k);
            let f = Frame { id: FrameId(id), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
            id += 1;
            std::hint::black_box(st.submit(f, Tai(0))).expect("insertion must succeed");
            n += 1;
        }
        for _ in 0..31 {
            consumed += 31;
            let _ = st.poll(Observation { consumed, now: Tai(0), gaps: &[] }).expect("poll");
        }
        st.drain_outcomes().for_each(drop);
    }
    println!("{n} frames inserted");
}
