//! Benchmark of the schedule on network time (not a test): on the simulated NIC, an oscillator off by −100 … +100
//! ppm (with a 1 ppm/√s wander) against the ideal network clock, the EPHC steered by the simulator's oracle servo,
//! a strict class owning one ring slot of 32 and sending one frame per cycle at a fixed network-time phase.
//! Reports, per rate and error: how far each wire slot started from its schedule time (true wire times, every
//! slot posted locked: p50 / p99 / max), frames sent and `not-owned`, and the poll loop's wall time per slot with
//! the discipline and without it (the same run with nominal slots), measured side by side.
//!
//! ```sh
//! cargo run --release -p keepon-nic --example gridsweep -- 600 60   # simulated seconds per point at 1 and
//!                                                                    # at 10 Gb/s (default 10 and 2)
//! ```

use std::time::Instant;

use keepon_core::ephc::ClockAdjust;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId, Reason};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig, NoFrames, Source};
use keepon_nic::sim::{Oracle, Oscillator, SimConfig, SimNic};
use keepon_nic::Nic;

/// One frame per cycle at `first + i` cycles, a third into ring slot 4.
struct EveryCycle {
    times: Box<dyn Fn(u64) -> Tai>,
    i: u64,
}

impl Source for EveryCycle {
    fn next_due(&self) -> Option<Tai> {
        Some((self.times)(self.i) - Nanos::from_ms(1))
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        self.i += 1;
        Some(Frame {
            id: FrameId(self.i - 1),
            class: ClassId(0),
            txtime: Some((self.times)(self.i - 1)),
            data: vec![0; 60],
        })
    }
}

#[derive(Default)]
struct Point {
    /// |error| histogram, 1 ns bins up to 4095 ns (the last bin: beyond).
    hist: Vec<u64>,
    max: i64,
    sent: u64,
    not_owned: u64,
    other: u64,
    slots: u64,
    ns_per_slot: f64,
}

fn run(mbps: u64, slot: u32, ppm: f64, seconds: u64, discipline: bool) -> Point {
    let g = SlotGeometry::new(LinkRate::from_mbps(mbps).unwrap(), slot).unwrap();
    let mut sim = SimConfig::new(g, Tai(1_700_000_000_000_000_000));
    sim.oscillator = Oscillator { ppm, wander: 1.0 };
    sim.keep_fillers = true;
    sim.seed = 11;
    let cfg = StationConfig {
        geometry: g,
        ownership: Ownership::new(32, &[ClassSpec { name: "rt".into(), slots: vec![4] }]).unwrap(),
        batch: 16,
        policy: Policy::Strict,
        max_pending: 64,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos::ZERO,
        base_time: Tai(0),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    };
    let poll = Nanos(g.period().floor_mul(8) as i64);
    let mut d =
        Driver::new(SimNic::new(sim), cfg, LoopConfig { poll_period: poll, max_duration: Nanos(i64::MAX) }).unwrap();
    d.station.set_discipline(discipline);
    d.station.adjust_clock(ClockAdjust::Rate(Oracle::frequency_ppt(&d.nic))).unwrap();
    d.bring_up(&mut |_| {}).unwrap();
    let sched = d.station.schedule().clone();
    let first = sched.slot_of(d.nic.now() + Nanos::from_ms(3)).unwrap().div_ceil(32);
    let third = Nanos(g.period().floor_mul(1) as i64 / 3);
    let mut src = EveryCycle { times: Box::new(move |i| sched.time_of((first + i) * 32 + 4) + third), i: 0 };
    let mut oracle = Oracle::new(Nanos::from_ms(1));
    let mut p = Point { hist: vec![0; 4096], ..Point::default() };
    let end = d.nic.now() + Nanos(seconds as i64 * 1_000_000_000);
    let wall = Instant::now();
    while d.nic.now() < end {
        d.step(&mut src, &mut |e| match e {
            Event::Wire(w) => {
                oracle.observe(&w);
                p.slots += 1;
                if let (Some(start), Some(grid), true) = (w.start, w.grid, w.locked) {
                    let e = start.0 - grid.0;
                    p.max = p.max.max(e.abs());
                    p.hist[e.unsigned_abs().min(4095) as usize] += 1;
                }
            }
            Event::Outcome(o) => match o.result {
                Ok(_) => p.sent += 1,
                Err(Reason::NotOwned) => p.not_owned += 1,
                Err(_) => p.other += 1,
            },
            Event::Underrun(_) => {}
        })
        .unwrap();
        oracle.steer(&d.nic, &mut d.station);
        d.nic.wait(poll);
    }
    p.ns_per_slot = wall.elapsed().as_nanos() as f64 / p.slots.max(1) as f64;
    let _ = d.step(&mut NoFrames, &mut |_| {});
    p
}

/// The `permille`/1000 quantile of a histogram of 1-ns bins.
fn q(hist: &[u64], permille: u64) -> usize {
    let n: u64 = hist.iter().sum();
    let rank = (n * permille).div_ceil(1000).max(1);
    let mut seen = 0;
    hist.iter()
        .position(|c| {
            seen += c;
            seen >= rank
        })
        .unwrap_or(0)
}

fn main() {
    let arg = |i: usize, d: u64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (s1, s10) = (arg(1, 10), arg(2, 2));
    println!(
        "{s1} simulated s per point at 1 Gb/s, {s10} s at 10 Gb/s (nominal runs at most 10 s); true wire start − \
         schedule time of every slot posted locked (ns)"
    );
    println!("rate      slot  ppm    p50  p99  max   sent   not-owned other  ns/slot disc  ns/slot nominal  ratio");
    for (mbps, slot, seconds) in [(1000u64, 1230u32, s1), (10_000, 1500, s10)] {
        for ppm in [-100.0, -50.0, 0.0, 50.0, 100.0] {
            let p = run(mbps, slot, ppm, seconds, true);
            let n = run(mbps, slot, ppm, seconds.min(10), false);
            let (p50, p99) = (q(&p.hist, 500), q(&p.hist, 990));
            println!(
                "{:<9} {slot:<5} {ppm:<+6} {p50:<4} {p99:<4} {:<5} {:<6} {:<9} {:<5} {:<12.1} {:<16.1} {:.2}",
                format!("{} Gb/s", mbps / 1000),
                p.max,
                p.sent,
                p.not_owned,
                p.other,
                p.ns_per_slot,
                n.ns_per_slot,
                p.ns_per_slot / n.ns_per_slot
            );
        }
    }
}
