//! The disciplined grid on exact (simulated) wire times: the NIC's oscillator runs off by up to ±100 ppm with a
//! seeded wander against an ideal network clock (the simulator's virtual time), a synchronisation servo steers
//! the EPHC (an oracle that knows the oscillator's frequency and measures the EPHC's true error from the wire,
//! standing in for PTP), steps are injected, the host stalls (underruns). The schedule is on network time
//! (`base_time + j·δ`), and the station sizes every slot so the next starts on its schedule time.
//!
//! What must hold: every slot posted while the grid is locked starts within one byte time of its schedule time
//! on the EPHC, and so on the true wire within one byte plus the EPHC's own error; no filler is shorter than 64
//! bytes or longer than the NIC's largest frame; a strict real-time frame at a fixed network phase is sent in its
//! class's slot, every cycle, however far the oscillator drifts — rejected only around an injected step or an
//! underrun, and then with that reason.

mod support;

use std::collections::HashMap;

use proptest::prelude::*;

use keepon_core::ephc::ClockAdjust;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId, Outcome, Reason};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai, MIN_FRAME_BYTES};
use keepon_nic::driver::{Driver, Event, LoopConfig, Source};
use keepon_nic::sim::{HostModel, Oracle, Oscillator, SimConfig, SimNic};
use keepon_nic::Nic;

#[derive(Clone, Debug)]
struct Case {
    mbps: u64,
    slot_bytes: u32,
    ring: u32,
    batch: u32,
    owned: u32,
    ppm: f64,
    wander: f64,
    base_time: i64,
    /// Injected steps of the EPHC: (after this many µs, by this many ns).
    steps: Vec<(u32, i64)>,
    /// Host preemptions per million poll iterations (underruns).
    spike_ppm: u32,
    run_us: u32,
    keep_fillers: bool,
    seed: u64,
}

/// One strict frame per cycle, at a fixed network-time phase inside the owned ring slot: schedule slot
/// `n·N + owned` plus a third of a slot, computed once from the schedule.
struct PerCycle {
    next: u64,
    last: u64,
    lead: Nanos,
    at: Box<dyn Fn(u64) -> Tai>,
}

impl Source for PerCycle {
    fn next_due(&self) -> Option<Tai> {
        (self.next < self.last).then(|| (self.at)(self.next) - self.lead)
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        let n = self.next;
        self.next += 1;
        let mut data = vec![0u8; 60];
        data[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        Some(Frame { id: FrameId(n), class: ClassId(0), txtime: Some((self.at)(n)), data })
    }
}

#[derive(Debug, Default)]
struct Seen {
    slots: u64,
    locked: u64,
    /// Largest |EPHC − schedule| and |true start − schedule| of locked slots, and largest |EPHC error|.
    max_view: i64,
    max_true: i64,
    max_eps: i64,
    outcomes: HashMap<FrameId, Outcome>,
    underruns: u64,
}

fn run(c: &Case) -> Result<Seen, TestCaseError> {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(c.mbps).unwrap(), c.slot_bytes).unwrap();
    let period = geometry.period();
    let byte = geometry.rate().byte_time();
    let byte_ns = byte.ceil_mul(1) as i64;
    let t0 = Tai(1_700_000_000_000_000_000 + (c.seed % 1_000_000_007) as i64);
    let mut sim = SimConfig::new(geometry, t0);
    sim.seed = c.seed;
    sim.keep_fillers = c.keep_fillers;
    sim.oscillator = Oscillator { ppm: c.ppm, wander: c.wander };
    let slot_ns = period.floor_mul(1) as i64;
    sim.host = HostModel {
        spike_ppm: c.spike_ppm,
        spike: Nanos(period.floor_mul(u64::from(c.batch) * 3) as i64),
        ..HostModel::default()
    };
    let max_frame = sim.max_frame;
    let station = StationConfig {
        geometry,
        ownership: Ownership::new(c.ring, &[ClassSpec { name: "rt".into(), slots: vec![c.owned] }]).unwrap(),
        batch: c.batch,
        policy: Policy::Strict,
        max_pending: 4096,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos::ZERO,
        base_time: Tai(c.base_time),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    };
    let poll = Nanos(period.floor_mul(u64::from(c.batch / 2)) as i64);
    let loop_cfg = LoopConfig { poll_period: poll, max_duration: Nanos::from_ms(60_000) };
    let mut d = Driver::new(SimNic::new(sim), station, loop_cfg).unwrap();
    let mut seen = Seen::default();
    let mut nothing = keepon_nic::driver::NoFrames;
    // The servo knows the oscillator's frequency from the start (a slave that was already locked).
    d.station.adjust_clock(ClockAdjust::Rate(Oracle::frequency_ppt(&d.nic))).unwrap();
    d.bring_up(&mut |_| {}).map_err(|e| TestCaseError::fail(format!("bring-up: {e}")))?;

    // The frames: cycle starts from the schedule (base_time + n·cycle), computed once.
    let sched = d.station.schedule().clone();
    let n = u64::from(c.ring);
    // The first cycle that starts 2 ms after the slots already posted (`batch` of them) end.
    let posted_ahead = Nanos(period.floor_mul(u64::from(c.batch)) as i64);
    let first = sched.slot_of(d.nic.now() + posted_ahead + Nanos::from_ms(2)).unwrap().div_ceil(n);
    let third = slot_ns / 3;
    let owned = u64::from(c.owned);
    let at = move |i: u64| sched.time_of((first + i) * n + owned) + Nanos(third);
    let cycles = u64::from(c.run_us) * 1_000 / (slot_ns as u64 * n).max(1);
    let lead = Nanos(period.floor_mul(u64::from(c.ring) * 2) as i64 + 200_000);
    let mut src = PerCycle { next: 0, last: cycles, lead, at: Box::new(at) };

    let start = d.nic.now();
    let end = start + Nanos(i64::from(c.run_us) * 1_000);
    let mut steps = c.steps.clone();
    steps.sort();
    let mut next_step = 0;
    // Every millisecond, or twice the posting lead if that is longer: a correction reaches the wire only after
    // the slots already posted (a servo faster than that delay oscillates: 270 ns off with 3.4 ms of lead).
    let lead_ns = period.floor_mul(u64::from(c.batch)) as i64;
    let mut oracle = Oracle::new(Nanos((2 * lead_ns).max(1_000_000)));
    let sink = |e: Event, seen: &mut Seen, oracle: &mut Oracle| match e {
        Event::Outcome(o) => {
            assert!(seen.outcomes.insert(o.id, o).is_none(), "two outcomes for {:?}", o.id);
        }
        Event::Underrun(_) => seen.underruns += 1,
        Event::Wire(w) => {
            seen.slots += 1;
            if let Some(b) = &w.bytes {
                if w.frame.is_none() {
                    let len = b.len() as u32 + 4;
                    assert!(
                        (MIN_FRAME_BYTES..=max_frame).contains(&len),
                        "filler of {len} B outside 64..={max_frame} B"
                    );
                    assert!(b.iter().all(|x| *x == 0), "filler bytes are zero");
                }
            }
            oracle.observe(&w);
            let (Some(start), Some(ephc)) = (w.start, w.ephc) else { return };
            let eps = ephc.0 - start.0;
            if let (Some(grid), true) = (w.grid, w.locked) {
                seen.locked += 1;
                let view = ephc.0 - grid.0;
                let truth = start.0 - grid.0;
                seen.max_view = seen.max_view.max(view.abs());
                seen.max_true = seen.max_true.max(truth.abs());
                seen.max_eps = seen.max_eps.max(eps.abs());
                assert!(view.abs() <= byte_ns, "slot {} at {} ns off its schedule on the EPHC", w.nic_slot, view);
                assert!(
                    truth.abs() <= byte_ns + eps.abs(),
                    "slot {} starts {truth} ns off its schedule on the wire, EPHC error {eps} ns",
                    w.nic_slot
                );
            }
        }
    };
    loop {
        let now = d.nic.now();
        let stopping = now > end;
        if stopping && d.station.in_flight() == 0 {
            break;
        }
        let source: &mut dyn Source = if stopping { &mut nothing } else { &mut src };
        d.step(source, &mut |e| sink(e, &mut seen, &mut oracle)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // The oracle servo (see `keepon_nic::sim::Oracle`): every millisecond.
        oracle.steer(&d.nic, &mut d.station);
        if let Some(&(after, by)) = steps.get(next_step) {
            if now >= start + Nanos(i64::from(after) * 1_000) {
                d.station.adjust_clock(ClockAdjust::Step(Nanos(by))).unwrap();
                next_step += 1;
            }
        }
        d.nic.wait(poll);
    }
    // Rejections by an adjustment after the last step.
    for o in d.station.drain_outcomes() {
        prop_assert!(seen.outcomes.insert(o.id, o).is_none(), "two outcomes for {:?}", o.id);
    }
    // Exactly one outcome per frame; strict frames sent in their class's slot, at its time on the EPHC.
    prop_assert_eq!(seen.outcomes.len() as u64, src.next);
    for o in seen.outcomes.values() {
        match o.result {
            Ok(s) => {
                prop_assert_eq!(s.ring_slot, c.owned);
                // Never more than a byte before its schedule slot, also after host stalls, underruns and clock
                // steps (`SO_TXTIME`'s promise): a frame whose slot the re-acquiring wire would start earlier is
                // rejected instead.
                let dev = s.time.0 - s.scheduled.unwrap().0;
                let early = byte_ns;
                prop_assert!(
                    dev >= -early,
                    "frame {:?} left {} ns before its schedule slot (underruns {}, {:?})",
                    o.id,
                    -dev,
                    seen.underruns,
                    s
                );
            }
            Err(Reason::NotOwned) => prop_assert!(false, "frame {:?} rejected not-owned", o.id),
            // The oracle steps the EPHC back after an underrun left it off (the gap is measured in host time).
            Err(Reason::ClockStep) => {
                prop_assert!(!c.steps.is_empty() || seen.underruns > 0, "clock-step without a step")
            }
            Err(Reason::Underrun | Reason::Late) => {
                // A host stall longer than the lead makes frames late (or an underrun rejects them).
                let disturbed = seen.underruns > 0 || !c.steps.is_empty() || c.spike_ppm > 0;
                prop_assert!(disturbed, "{:?} without a disturbance ({:?})", o.result, o.id)
            }
            Err(why) => prop_assert!(false, "frame {:?} rejected {why:?}", o.id),
        }
    }
    if c.steps.is_empty() && seen.underruns == 0 && c.spike_ppm == 0 {
        let sent = seen.outcomes.values().filter(|o| o.result.is_ok()).count() as u64;
        prop_assert_eq!(sent, src.next, "undisturbed: every frame sent");
    }
    // Undisturbed: no step, no underrun, no host stall (a stall stops the servo too, and how far off the EPHC is
    // after one is the servo's recovery — the test's oracle steers every millisecond — not the wire's: 432 ns and
    // 12 of 203 slots unlocked at 100 Mb/s after a 13 ms stall. The wire's own promise, within a byte of the EPHC,
    // is asserted on every slot above, stalls or not.)
    if c.steps.is_empty() && seen.underruns == 0 && c.spike_ppm == 0 && c.keep_fillers {
        // Undisturbed, the grid is locked on nearly every slot, and the EPHC (which the oracle steers every
        // millisecond) stays within 100 ns and two byte times of the true time: the wire is on the schedule to a
        // byte plus that.
        prop_assert!(
            seen.locked * 100 >= seen.slots * 95,
            "undisturbed: {} of {} slots locked",
            seen.locked,
            seen.slots
        );
        prop_assert!(seen.max_eps <= 100 + 2 * byte_ns, "EPHC error {} ns", seen.max_eps);
    }
    Ok(seen)
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![100u64, 1000, 2500, 10_000]),
        64u32..1518,
        4u32..48,
        -100.0f64..100.0,
        prop_oneof![Just(0.0f64), 0.0f64..1.0],
        0i64..1_000_000_000_000,
        prop_oneof![2 => Just(vec![]), 1 => prop::collection::vec((1_000u32..20_000, -30_000i64..30_000), 1..3)],
        prop_oneof![3 => Just(0u32), 1 => 1u32..2_000],
        any::<u64>(),
    )
        .prop_flat_map(|t| (Just(t.clone()), 2..t.2, 0..t.2))
        .prop_map(|((mbps, slot_bytes, ring, ppm, wander, base_time, steps, spike_ppm, seed), batch, owned)| {
            Case {
                mbps,
                slot_bytes,
                ring,
                batch,
                owned,
                ppm,
                wander,
                base_time,
                steps,
                spike_ppm,
                run_us: 25_000,
                keep_fillers: true,
                seed,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: support::cases(24), ..ProptestConfig::default() })]
    #[test]
    fn every_locked_slot_starts_within_a_byte_of_its_schedule_time(c in case()) {
        let s = run(&c)?;
        prop_assert!(s.slots > 0);
    }
}

/// The drift experiment on exact wire times: a strict class owning one ring slot of 32, one frame per cycle at a
/// fixed network-time phase, the oscillator at ±100 ppm with wander. Without the discipline the windows slide a
/// whole slot in a few hundred ms at this error; with it every frame is sent in its slot. (docs/measured.md's sweep
/// runs the same for ten simulated minutes.)
#[test]
fn a_drifting_oscillator_never_costs_a_strict_one_slot_class_a_frame() {
    for (mbps, slot_bytes, ppm, run_us) in
        [(1000, 1230, 100.0, 1_000_000), (1000, 1230, -100.0, 1_000_000), (10_000, 1500, 87.0, 200_000)]
    {
        let c = Case {
            mbps,
            slot_bytes,
            ring: 32,
            batch: 8,
            owned: 4,
            ppm,
            wander: 1.0,
            base_time: 0,
            steps: vec![],
            spike_ppm: 0,
            run_us,
            keep_fillers: false,
            seed: 7,
        };
        let s = run(&c).unwrap();
        let sent = s.outcomes.values().filter(|o| o.result.is_ok()).count();
        assert_eq!(sent, s.outcomes.len(), "{mbps} Mb/s {ppm} ppm");
        eprintln!(
            "{mbps} Mb/s, {ppm:+} ppm: {sent} frames sent of {}, {} slots ({} locked); max |EPHC − schedule| {} ns, \
             max |wire − schedule| {} ns, max |EPHC error| {} ns",
            s.outcomes.len(),
            s.slots,
            s.locked,
            s.max_view,
            s.max_true,
            s.max_eps
        );
    }
}
