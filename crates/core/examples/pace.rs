//! The pacing loop alone, for counting instructions (not a timed benchmark): `RATE_MBPS` link, `SLOT_BYTES`
//! slots, a 1024-slot ring with no real-time slot, batch 32, the "NIC" consuming 31 slots between polls, `SLOTS`
//! slots in all (`PER_POLL`, default 31, between polls if given); `DISCIPLINE` 1 sizes every slot to its schedule
//! time (the default), 0 keeps them nominal; `PPT` (default 0) sets the EPHC's rate that many parts per trillion
//! off nominal, as PTP would (then a disciplined slot is now and then a byte shorter or longer).
//!
//! ```sh
//! cargo build --release -p keepon-core --example pace
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/pace 1 1000 1230 200000
//! ```
//!
//! Instructions per slot = callgrind's total ÷ `SLOTS` (start-up is under 0.1 % of it): a measure that does not
//! depend on what else the machine runs, unlike `cargo bench -p keepon --bench core`'s wall-clock figures.

use keepon_core::ephc::ClockAdjust;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassSpec, Ownership};
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai, MAX_SLOT_BYTES};

fn main() {
    let arg = |i: usize, what: &str| -> u64 {
        std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
            panic!("usage: pace DISCIPLINE RATE_MBPS SLOT_BYTES SLOTS [PER_POLL [PPT]] (bad or missing {what})")
        })
    };
    let (discipline, mbps, bytes, slots) =
        (arg(1, "DISCIPLINE") == 1, arg(2, "RATE_MBPS"), arg(3, "SLOT_BYTES"), arg(4, "SLOTS"));
    let per_poll = std::env::args().nth(5).and_then(|a| a.parse().ok()).unwrap_or(31u64);
    let ppt: i64 = std::env::args().nth(6).and_then(|a| a.parse().ok()).unwrap_or(0);
    let geometry = SlotGeometry::new(LinkRate::from_mbps(mbps).expect("rate"), bytes as u32).expect("slot size");
    let cfg = StationConfig {
        geometry,
        ownership: Ownership::new(1024, &[ClassSpec { name: "rt".into(), slots: vec![] }]).expect("ring"),
        batch: 32,
        policy: Policy::Strict,
        max_pending: 1 << 20,
        max_advance: Nanos::from_ms(1000),
        post_latency: Nanos(0),
        base_time: Tai(0),
        max_filler: MAX_SLOT_BYTES,
    };
    let mut st: Station<&'static [u8]> = Station::new(cfg, Tai(0)).expect("station");
    st.set_discipline(discipline);
    if ppt != 0 {
        st.adjust_clock(ClockAdjust::Rate(ppt)).expect("rate");
    }
    let mut consumed = 0;
    let _ = st.poll(Observation { consumed: 0, now: Tai(0), gaps: &[] }).expect("poll");
    while consumed < slots {
        consumed += per_poll;
        let p = st.poll(Observation { consumed, now: Tai(0), gaps: &[] }).expect("poll");
        std::hint::black_box(&p);
    }
    assert_eq!(st.counters().underruns, 0, "the pacing loop must not underrun");
    println!("{} slots posted", st.counters().slots_posted);
}
