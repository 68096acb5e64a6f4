//! Unit tests of the station: underruns, clock steps, budgets, untrusted txtimes, shutdown.
use super::*;
use crate::ephc::ClockAdjust;
use crate::isolation::ClassSpec;
use crate::time::LinkRate;

const DATA: [u8; 60] = [0; 60];

fn station() -> Station<&'static [u8]> {
    station_of(&[ClassSpec { name: "a".into(), slots: vec![0] }], 64)
}

/// A station of `classes` on a 32-slot ring of δ = 10 µs at 1 Gb/s, `max_pending` frames per class.
fn station_of(classes: &[ClassSpec], max_pending: usize) -> Station<&'static [u8]> {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap(); // δ = 10 µs
    let cfg = StationConfig {
        geometry,
        ownership: Ownership::new(32, classes).unwrap(),
        batch: 8,
        policy: Policy::Strict,
        max_pending,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos(1_000),
        base_time: Tai(1_000_000),
        max_filler: 1518,
    };
    Station::new(cfg, Tai(1_000_000)).unwrap()
}

fn poll(s: &mut Station<&'static [u8]>, consumed: u64, now: i64) -> Poll {
    s.poll(Observation { consumed, now: Tai(now), gaps: &[] }).unwrap()
}

/// Poll on from (`consumed`, `now`), 4 slots per 40 µs, until the first outcome, which must be `Sent`.
fn poll_until_sent(s: &mut Station<&'static [u8]>, mut consumed: u64, mut now: i64) -> Sent {
    loop {
        consumed += 4;
        now += 40_000;
        let _ = poll(s, consumed, now);
        if let Some(o) = s.drain_outcomes().next() {
            return o.result.unwrap();
        }
    }
}

/// After an underrun the schedule's ring slots keep their TAI times: a frame for ring slot 0 of a later
/// cycle (by the original grid) still lands in ring slot 0, no later than its txtime and less than a slot
/// earlier.
#[test]
fn underrun_keeps_ownership_aligned_with_the_schedule() {
    let mut s = station();
    let _ = poll(&mut s, 0, 999_000); // anchors slot 0 at 1 ms
    assert_eq!(s.ephc().time_of(0), Tai(1_000_000));
    let _ = poll(&mut s, 4, 1_040_000);
    // The host stalls 1.234 ms: every posted slot is gone when it polls again.
    let p = poll(&mut s, 12, 2_274_000);
    assert_eq!(p.underruns.len(), 1);
    assert_eq!(s.counters().underruns, 1);
    // Ring slot 0 of the cycle starting at 1 ms + 10·320 µs, by the original grid.
    let t = Tai(1_000_000 + 10 * 320_000);
    let f = Frame { id: FrameId(1), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
    assert_eq!(s.submit(f, Tai(2_274_000)), Ok(()));
    let sent = poll_until_sent(&mut s, 12, 2_274_000);
    assert_eq!(sent.ring_slot, 0);
    assert!(sent.time <= t && t.0 - sent.time.0 < 10_000, "{:?} vs {:?}", sent.time, t);
}

/// Once synchronisation steps the EPHC far from the host clock (−1 s, +1 s), the station still judges
/// admission, idleness and underrun restarts in EPHC time: a txtime a few ms ahead in network time is
/// placed and sent at its time, one a second ahead by the host clock is too far ahead, steady polling
/// finds no underrun, a real stall finds exactly one, and the re-anchored EPHC keeps its offset.
#[test]
fn host_times_are_converted_to_ephc_time_after_a_clock_step() {
    for step in [-1_000_000_000i64, 1_000_000_000] {
        let mut s = station();
        let _ = poll(&mut s, 0, 999_000);
        let _ = poll(&mut s, 4, 1_040_000);
        s.adjust_clock(ClockAdjust::Step(Nanos(step))).unwrap();
        // Slots already posted (up to 12, at 1.12 ms) keep their times; later ones have the stepped clock.
        assert_eq!(s.ephc_at(Tai(1_080_000)), Tai(1_080_000));
        assert_eq!(s.ephc_at(Tai(1_205_000)), Tai(1_205_000 + step));
        assert_eq!(s.host_at(Tai(1_205_000 + step)), Tai(1_205_000));
        let host = 1_080_000i64;
        // Steady polling: no underrun, whichever way the clock went.
        let mut consumed = 4;
        let mut now = host;
        while now < 1_300_000 {
            consumed += 4;
            let _ = poll(&mut s, consumed, now);
            now += 40_000;
        }
        assert_eq!(s.counters().underruns, 0, "step {step}");
        // Ring slot 0 of a cycle 3 ms ahead in network time (EPHC time) is admitted and leaves at its time.
        let cycle = s.cycle_start_at_or_after(s.ephc_at(Tai(now)) + Nanos::from_ms(3)).unwrap();
        let f = Frame { id: FrameId(1), class: ClassId(0), txtime: Some(cycle), data: &DATA[..] };
        assert_eq!(s.submit(f, Tai(now)), Ok(()), "step {step}");
        // 50 ms ahead by the host clock is 1 s away in network time for the −1 s step: too far ahead.
        let far = if step < 0 { now + 50_000_000 } else { now + step + 200_000_000 };
        let f = Frame { id: FrameId(2), class: ClassId(0), txtime: Some(Tai(far)), data: &DATA[..] };
        assert_eq!(s.submit(f, Tai(now)), Err(Reason::TooFarAhead), "step {step}");
        let sent = loop {
            consumed += 4;
            now += 40_000;
            let _ = poll(&mut s, consumed, now);
            let o: Vec<Outcome> = s.drain_outcomes().filter(|o| o.id == FrameId(1)).collect();
            if let Some(o) = o.first() {
                break o.result.unwrap();
            }
            assert!(now < host + 10_000_000, "step {step}: frame never sent");
        };
        assert_eq!(sent.time, cycle, "step {step}");
        assert_eq!(s.counters().underruns, 0, "step {step}");
        // A stall of 1.2 ms: one underrun, and the EPHC stays `step` away from the host clock.
        now += 1_200_000;
        consumed = s.ring().posted();
        let p = poll(&mut s, consumed, now);
        assert_eq!(p.underruns.len(), 1, "step {step}");
        let off = s.ephc_at(Tai(now)).0 - now;
        assert!((off - step).abs() < 10_000, "step {step}: offset after re-anchoring {off}");
        consumed += 4;
        now += 40_000;
        let _ = poll(&mut s, consumed, now);
        assert_eq!(s.counters().underruns, 1, "step {step}");
    }
}

/// A gap the backend reports after a synchronisation adjustment (which split the clock at the slots then
/// posted, later than the gap's slot) moves the whole wire from the gap on: the EPHC keeps its offset from
/// the host clock. (It used to move only the older clock piece, so the EPHC jumped by the refinement.)
#[test]
fn a_gap_reported_after_an_adjustment_keeps_the_ephc_offset() {
    for adj in [ClockAdjust::Rate(1_000_000), ClockAdjust::Step(Nanos(-7_000))] {
        let mut s = station();
        let _ = poll(&mut s, 0, 999_000);
        let mut consumed = 4;
        let mut now = 1_040_000;
        while now < 1_200_000 {
            let _ = poll(&mut s, consumed, now);
            consumed += 4;
            now += 40_000;
        }
        // A stall: the station finds the ring drained and restarts the wire itself, at an estimate.
        now += 1_200_000;
        consumed = s.ring().posted();
        let p = poll(&mut s, consumed, now);
        assert_eq!(p.underruns.len(), 1);
        let gap_at = p.underruns[0].at_slot;
        let estimate = p.underruns[0].restart;
        // The servo adjusts the clock (from the slots posted now on)...
        s.adjust_clock(adj).unwrap();
        let later = Tai(now + 500_000);
        let before = s.ephc_at(later).0 - later.0;
        // ...and then the backend reports when the wire really restarted: 30 µs after the estimate.
        let gaps = [Gap { at: gap_at, restart: estimate + Nanos(30_000) }];
        let _ = s.poll(Observation { consumed, now: Tai(now + 10_000), gaps: &gaps }).unwrap();
        let after = s.ephc_at(later).0 - later.0;
        assert!((after - before).abs() <= 2, "{adj:?}: EPHC − host {before} ns before the report, {after} ns after");
    }
}

/// An underrun does not cost a steered clock its frequency correction: through the gap the EPHC runs at its
/// own rate, as it does slot by slot. (It used to run through every gap at the oscillator's rate: 100 ns of
/// a +50 ppm correction lost per 2 ms gap.) The same holds for a gap the backend reports.
#[test]
fn a_steered_clock_keeps_its_rate_through_a_gap() {
    for reported in [false, true] {
        let mut s = station();
        let _ = poll(&mut s, 0, 999_000);
        s.adjust_clock(ClockAdjust::Rate(50_000_000)).unwrap(); // +50 ppm
        let (mut consumed, mut now) = (4, 1_040_000);
        while now < 1_400_000 {
            let _ = poll(&mut s, consumed, now);
            consumed += 4;
            now += 40_000;
        }
        let h1 = Tai(now - 20_000);
        let e1 = s.ephc_at(h1);
        // A 2 ms stall: every posted slot went out, the wire idled.
        now += 2_000_000;
        consumed = s.ring().posted();
        let p = poll(&mut s, consumed, now);
        assert_eq!(p.underruns.len(), 1);
        if reported {
            let gaps = [Gap { at: p.underruns[0].at_slot, restart: p.underruns[0].restart + Nanos(30_000) }];
            let _ = s.poll(Observation { consumed, now: Tai(now + 10_000), gaps: &gaps }).unwrap();
        }
        let h2 = Tai(now + 200_000);
        let e2 = s.ephc_at(h2);
        let want = (h2.0 - h1.0) + (h2.0 - h1.0) * 50 / 1_000_000;
        assert!(
            ((e2.0 - e1.0) - want).abs() <= 2,
            "reported {reported}: EPHC advanced {} ns over {} ns, want {want}",
            e2.0 - e1.0,
            h2.0 - h1.0
        );
    }
}

/// `max_pending` is a budget per class: a best-effort backlog that fills its own budget leaves a real-time
/// class's admission untouched.
#[test]
fn a_best_effort_flood_cannot_take_the_real_time_budget() {
    let classes = [ClassSpec { name: "rt".into(), slots: vec![0] }, ClassSpec { name: "be".into(), slots: vec![] }];
    let mut s = station_of(&classes, 16);
    let _ = poll(&mut s, 0, 999_000);
    let be = |i: u64| Frame { id: FrameId(i), class: ClassId(1), txtime: None, data: &DATA[..] };
    let mut full = 0;
    for i in 0..1000 {
        full += usize::from(s.submit(be(i), Tai(999_000)) == Err(Reason::QueueFull));
    }
    assert_eq!(s.queued(ClassId(1)), 16);
    assert_eq!(full, 1000 - 16);
    // Every real-time frame within the horizon is admitted: 16 cycles' worth of ring slot 0.
    for i in 0..16u64 {
        let t = Tai(1_000_000 + (i as i64 + 2) * 320_000);
        let f = Frame { id: FrameId(10_000 + i), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
        assert_eq!(s.submit(f, Tai(999_000)), Ok(()), "real-time frame {i}");
    }
    assert_eq!(s.queued(ClassId(0)), 16);
    let f = Frame { id: FrameId(20_000), class: ClassId(0), txtime: Some(Tai(9_000_000)), data: &DATA[..] };
    assert_eq!(s.submit(f, Tai(999_000)), Err(Reason::QueueFull), "its own budget still binds");
}

/// Untrusted txtimes anywhere in the i64 range get a typed outcome, never an overflow (this runs in debug
/// builds, where an overflow panics).
#[test]
fn extreme_txtimes_are_late_or_too_far_ahead() {
    let mut s = station();
    let _ = poll(&mut s, 0, 999_000);
    let now = Tai(999_000);
    let cases = [
        (i64::MIN, Reason::Late),
        (i64::MIN + 1, Reason::Late),
        (-1, Reason::Late),
        (0, Reason::Late),
        (500_000, Reason::Late),
        (i64::MAX, Reason::TooFarAhead),
        (i64::MAX - 1, Reason::TooFarAhead),
        (999_000 + 100_000_001, Reason::TooFarAhead),
    ];
    for (i, (t, want)) in cases.into_iter().enumerate() {
        let f = Frame { id: FrameId(i as u64), class: ClassId(0), txtime: Some(Tai(t)), data: &DATA[..] };
        assert_eq!(s.submit(f, now), Err(want), "txtime {t}");
    }
    // The same at the far ends of the host clock.
    for now in [i64::MIN, i64::MAX] {
        let f = Frame { id: FrameId(99), class: ClassId(0), txtime: Some(Tai(0)), data: &DATA[..] };
        assert!(s.submit(f, Tai(now)).is_err());
    }
    assert_eq!(s.drain_outcomes().count(), cases.len() + 2);
}

#[test]
fn every_frame_gets_one_outcome_on_shutdown() {
    let mut s = station();
    let _ = poll(&mut s, 0, 999_000);
    for i in 0..5u64 {
        let t = Tai(1_000_000 + (i as i64 + 3) * 320_000);
        let f = Frame { id: FrameId(i), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
        assert_eq!(s.submit(f, Tai(999_000)), Ok(()));
    }
    let f = Frame { id: FrameId(9), class: ClassId(0), txtime: Some(Tai(1_000_000)), data: &[0u8; 2000][..] };
    assert_eq!(s.submit(f, Tai(999_000)), Err(Reason::Oversize));
    s.shutdown();
    let outcomes: Vec<Outcome> = s.drain_outcomes().collect();
    assert_eq!(outcomes.len(), 6);
    assert_eq!(outcomes.iter().filter(|o| o.result == Err(Reason::Shutdown)).count(), 5);
    assert_eq!(s.in_flight(), 0);
}

/// The backend's report of when the link really came up may arrive after slots have already been consumed
/// (a wall-clock backend reports completions first). Its restart is still snapped onto the schedule's byte
/// grid, so every later slot starts on a whole byte time from `base_time`. (It used to be snapped only while
/// no slot had been consumed: a clean-clone CI run saw a frame leave 21 ns after its txtime on the
/// simulated NIC, with no underrun.)
#[test]
fn a_late_report_of_the_link_up_keeps_the_byte_grid_on_the_schedule() {
    let mut s = station(); // 1 Gb/s: a byte is 8 ns; base_time 1 ms
    let _ = poll(&mut s, 0, 999_000);
    let _ = poll(&mut s, 4, 1_040_000);
    // The wire really started 3 ns after the estimate, and the backend says so only now.
    let gaps = [Gap { at: 0, restart: Tai(1_000_003) }];
    let p = s.poll(Observation { consumed: 8, now: Tai(1_080_000), gaps: &gaps }).unwrap();
    assert!(p.underruns.is_empty(), "the link-up is not an underrun: {:?}", p.underruns);
    assert_eq!(s.counters().underruns, 0);
    let off = (s.ephc().time_of(0).0 - 1_000_000).rem_euclid(8);
    assert_eq!(off, 0, "slot 0 at {:?}: {off} ns off the byte grid", s.ephc().time_of(0));
    // A frame for ring slot 0 of a later cycle leaves on its schedule time to the byte.
    let t = Tai(1_000_000 + 10 * 320_000);
    let f = Frame { id: FrameId(1), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
    assert_eq!(s.submit(f, Tai(1_080_000)), Ok(()));
    let sent = poll_until_sent(&mut s, 8, 1_080_000);
    let scheduled = sent.scheduled.unwrap();
    let lead = sent.time.0 - scheduled.0;
    assert!((0..8).contains(&lead), "sent {:?}, scheduled {:?}: {lead} ns", sent.time, scheduled);
    assert_eq!(lead, 0, "on the byte grid the slot starts exactly on its schedule time");
}

/// Best effort is FIFO per class and round-robin over classes, as on the byte clock
/// (`bytes::tests::best_effort_classes_take_turns`): a flood of one class does not hold back another's frame.
#[test]
fn best_effort_classes_take_turns() {
    let classes = [
        ClassSpec { name: "rt".into(), slots: vec![0] },
        ClassSpec { name: "be".into(), slots: vec![] },
        ClassSpec { name: "be2".into(), slots: vec![] },
    ];
    let mut s = station_of(&classes, 64);
    let _ = poll(&mut s, 0, 999_000);
    let be = |i: u64, c: u8| Frame { id: FrameId(i), class: ClassId(c), txtime: None, data: &DATA[..] };
    for i in 0..40 {
        assert_eq!(s.submit(be(i, 1), Tai(999_000)), Ok(()));
    }
    assert_eq!(s.submit(be(40, 2), Tai(999_000)), Ok(()));
    let (mut consumed, mut now, mut order) = (0u64, 999_000i64, Vec::new());
    while order.len() < 41 && consumed < 400 {
        consumed += 4;
        now += 40_000;
        let _ = poll(&mut s, consumed, now);
        order.extend(s.drain_outcomes().map(|o| (o.id.0, o.result.map(|r| r.slot))));
    }
    order.sort_by_key(|(_, r)| r.map_or(u64::MAX, |slot| slot));
    let at = order.iter().position(|(id, _)| *id == 40).unwrap();
    assert!(at <= 1, "class 2's frame went out {at}th, behind class 1's flood: {order:?}");
}

/// Host times inside a restart's gap read back from the restart, on its clock: the EPHC is continuous and runs at
/// the host's rate through the gap, as on the byte clock (`bytes::tests::host_times_inside_a_gap_read_back_from_the_
/// restart`).
#[test]
fn host_times_inside_a_gap_read_back_from_the_restart() {
    let mut s = station();
    let _ = poll(&mut s, 0, 999_000);
    let _ = poll(&mut s, 4, 1_040_000);
    // The host stalls: every posted slot is gone; the wire restarts `post_latency` (1 µs) after this poll.
    let now = 2_274_000;
    let p = poll(&mut s, 12, now);
    assert_eq!(p.underruns.len(), 1);
    let base = s.ephc_at(Tai(now));
    for ns in (0..=1_500).step_by(100) {
        assert_eq!(s.ephc_at(Tai(now + ns)), base + Nanos(ns), "{ns} ns into the gap");
    }
}

/// The same inside a gap the backend saw (`bytes::tests::host_times_inside_a_reported_gap_read_back_from_the_restart`).
#[test]
fn host_times_inside_a_reported_gap_read_back_from_the_restart() {
    let mut s = station();
    let _ = poll(&mut s, 0, 999_000);
    let _ = poll(&mut s, 2, 1_020_000);
    // The backend saw slot 3 start 70 µs later than the host's view had it.
    let restart = s.host_time_of(3) + Nanos::from_us(70);
    let gaps = [Gap { at: 3, restart }];
    let _ = s.poll(Observation { consumed: 3, now: Tai(1_100_000), gaps: &gaps }).unwrap();
    let at_restart = s.ephc_at(restart);
    for us in (0..=60).step_by(5) {
        let t = restart - Nanos::from_us(us);
        assert_eq!(s.ephc_at(t), at_restart - Nanos::from_us(us), "{us} µs before the restart");
    }
}
