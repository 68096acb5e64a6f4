//! The simulated NIC's oscillator: slots last `δ/(1 + ppm·10⁻⁶)` of true time, exactly on average (the
//! remainder is carried), the wander is a seeded random walk, and the default is the exact grid.

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassSpec, Ownership};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::NoFrames;
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::sim::{Oscillator, SimConfig, SimNic};
use keepon_nic::Nic;

/// Wire start times of the first `n` slots (fillers kept) and the oscillator's final ppm.
fn wire(osc: Oscillator, seed: u64, n: usize) -> (Vec<Tai>, f64) {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 300).unwrap(); // δ = 2.56 µs
    let mut sim = SimConfig::new(geometry, Tai(1_000_000_000));
    sim.keep_fillers = true;
    sim.oscillator = osc;
    sim.seed = seed;
    let station = StationConfig {
        geometry,
        ownership: Ownership::new(64, &[ClassSpec { name: "a".into(), slots: vec![0] }]).unwrap(),
        batch: 32,
        policy: Policy::Strict,
        max_pending: 8,
        max_advance: Nanos::from_ms(1),
        post_latency: Nanos::ZERO,
        base_time: Tai(1_000_000_000),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    };
    let cfg = LoopConfig { poll_period: Nanos::from_us(20), max_duration: Nanos::from_ms(1_000) };
    let mut d = Driver::new(SimNic::new(sim), station, cfg).unwrap();
    let mut starts = Vec::new();
    while starts.len() < n {
        d.step(&mut NoFrames, &mut |e: Event| {
            if let Event::Wire(w) = e {
                if let Some(t) = w.start {
                    starts.push((w.nic_slot, t));
                }
            }
        })
        .unwrap();
        d.nic.wait(Nanos::from_us(20));
    }
    starts.sort();
    for (i, (k, _)) in starts.iter().enumerate() {
        assert_eq!(*k, i as u64, "every slot left, in order");
    }
    (starts.into_iter().take(n).map(|(_, t)| t).collect(), d.nic.oscillator_ppm())
}

#[test]
fn default_oscillator_is_the_exact_grid() {
    let (s, ppm) = wire(Oscillator::default(), 1, 20_000);
    for (k, t) in s.iter().enumerate() {
        assert_eq!(t.0 - s[0].0, k as i64 * 2560);
    }
    assert_eq!(ppm, 0.0);
}

#[test]
fn a_fast_oscillator_shortens_every_slot_exactly() {
    for ppm in [100.0, -37.5] {
        let (s, _) = wire(Oscillator { ppm, wander: 0.0 }, 1, 20_000);
        for (k, t) in s.iter().enumerate() {
            let expect = k as f64 * 2560.0 / (1.0 + ppm * 1e-6);
            // Starts are floored to whole ns; the grid itself is exact in ticks.
            assert!(((t.0 - s[0].0) as f64 - expect).abs() < 1.0, "slot {k}: {} vs {expect}", t.0 - s[0].0);
        }
    }
}

#[test]
fn wander_is_a_seeded_random_walk() {
    // 40 000 slots ≈ 102 ms: about 100 wander steps.
    let osc = Oscillator { ppm: 5.0, wander: 2.0 };
    let (a, pa) = wire(osc, 9, 40_000);
    let (b, pb) = wire(osc, 9, 40_000);
    let (_, pc) = wire(osc, 10, 40_000);
    assert_eq!(a, b, "same seed, same wire");
    assert_eq!(pa, pb);
    assert!(pa != 5.0 && pa != pc, "the frequency wandered ({pa}, {pc}) and depends on the seed");
    // The wire follows the wandering frequency: the mean slot length over the run differs from 5 ppm's.
    let mean = (a[a.len() - 1].0 - a[0].0) as f64 / (a.len() - 1) as f64;
    assert!((mean - 2560.0 / (1.0 + 5e-6)).abs() > 1e-6);
}
