//! Servo tests on the seeded simulation: each servo converges from a known offset and frequency error, and
//! re-locks after a phase jump of the master.

use keepon_core::time::{LinkRate, Nanos, SlotGeometry};

use super::*;
use crate::sim::{run, SimConfig, SimRow};

fn cfg(ppm: f64, offset: Nanos) -> SimConfig {
    // 10 Gb/s, 64 B slots: δ = 67.2 ns.
    let g = SlotGeometry::new(LinkRate::from_mbps(10_000).unwrap(), 64).unwrap();
    SimConfig {
        period: g.period(),
        ppm,
        wander: 0.0,
        initial_offset: offset,
        interval: Nanos::from_ms(125),
        delay: Nanos::from_us(10),
        rx_jitter: Nanos(200),
        rx_latency: Nanos::ZERO,
        rx_correction: Nanos::ZERO,
        duration: Nanos::from_ms(60_000),
        master_jump: None,
        seed: 7,
    }
}

fn after(rows: &[SimRow], t: Nanos) -> Vec<&SimRow> {
    rows.iter().filter(|r| r.t.0 >= t.0).collect()
}

fn max_abs(rows: &[&SimRow]) -> i64 {
    rows.iter().map(|r| r.true_error.0.abs()).max().unwrap_or(i64::MAX)
}

fn servos() -> Vec<(&'static str, AnyServo)> {
    let i = Nanos::from_ms(125);
    vec![
        ("kalman", AnyServo::new(ServoKind::Kalman, i)),
        ("pi", AnyServo::new(ServoKind::Pi, i)),
        ("ma", AnyServo::new(ServoKind::MovingAverage, i)),
    ]
}

#[test]
fn every_servo_converges_from_offset_and_frequency_error() {
    for (ppm, offset) in [(50.0, Nanos::from_ms(3)), (-50.0, Nanos::from_us(-700)), (1.0, Nanos::from_us(5))] {
        for (name, mut servo) in servos() {
            assert_eq!(servo.status().state, ServoState::Unlocked);
            let c = cfg(ppm, offset);
            let rows = run(&c, &mut servo).unwrap();
            let late = after(&rows, Nanos::from_ms(30_000));
            // The RX granularity (a floored slot reading) and jitter bias the offset by up to (δ + jitter)/2;
            // the bound leaves room for that and the servos' noise, far below the initial error.
            let bound = 600;
            assert!(max_abs(&late) < bound, "{name} {ppm} ppm {offset}: max |error| {} ns", max_abs(&late));
            let last = rows.last().unwrap();
            assert_eq!(last.status.state, ServoState::Locked, "{name}");
            // The learned frequency (averaged over the locked half: the PI servo's proportional term is noisy)
            // cancels the oscillator's error.
            let freq = late.iter().map(|r| r.freq_ppm).sum::<f64>() / late.len() as f64;
            assert!((freq + ppm).abs() < 0.05, "{name}: freq {freq} ppm for oscillator {ppm} ppm");
            // Before any correction the error was the injected one.
            assert!((rows[0].true_error.0 - offset.0).abs() < 10_000, "{name}");
        }
    }
}

#[test]
fn every_servo_relocks_after_a_master_phase_jump() {
    for jump in [Nanos::from_us(10), Nanos::from_us(-100)] {
        for (name, mut servo) in servos() {
            let mut c = cfg(20.0, Nanos::from_us(40));
            c.master_jump = Some((Nanos::from_ms(30_000), jump));
            c.duration = Nanos::from_ms(70_000);
            let rows = run(&c, &mut servo).unwrap();
            let before =
                max_abs(&rows.iter().filter(|r| r.t.0 > 20_000_000_000 && r.t.0 < 30_000_000_000).collect::<Vec<_>>());
            // The jump shows: in the true error, or in the servo's measured offset (the PI servo corrects 70 %
            // within the interval, so the true error at the sampling instants can hide it).
            let just_after = rows
                .iter()
                .filter(|r| r.t.0 >= 30_000_000_000 && r.t.0 <= 31_000_000_000)
                .map(|r| r.true_error.0.abs().max(r.status.offset.map_or(0, |o| o.0.abs())))
                .max()
                .unwrap_or(0);
            assert!(before < 600, "{name}: {before}");
            assert!(just_after > jump.0.abs() / 2, "{name}: the jump is visible ({just_after} ns)");
            let relocked = max_abs(&after(&rows, Nanos::from_ms(60_000)));
            assert!(relocked < 600, "{name} jump {jump}: max |error| {relocked} ns 30 s after the jump");
        }
    }
}

#[test]
fn servos_track_a_wandering_oscillator() {
    for (name, mut servo) in servos() {
        let mut c = cfg(10.0, Nanos::from_us(3));
        c.wander = 0.05; // ppm/√s
        c.duration = Nanos::from_ms(120_000);
        let rows = run(&c, &mut servo).unwrap();
        let late = after(&rows, Nanos::from_ms(40_000));
        let drift = (rows.last().unwrap().osc_ppm - 10.0).abs();
        assert!(drift > 0.05, "the oscillator did wander ({drift} ppm)");
        assert!(max_abs(&late) < 2_000, "{name}: max |error| {} ns under wander", max_abs(&late));
    }
}

#[test]
fn uncorrected_rx_latency_biases_the_slave_by_half_and_calibration_removes_it() {
    // Exact TX, a constant 4 µs RX latency: without correction the servo settles L/2 behind.
    let mut c = cfg(5.0, Nanos::from_us(2));
    c.rx_jitter = Nanos::ZERO;
    c.rx_latency = Nanos::from_us(4);
    let mean = |c: &SimConfig| {
        let mut s = AnyServo::new(ServoKind::Pi, c.interval);
        let rows = run(c, &mut s).unwrap();
        let late = after(&rows, Nanos::from_ms(30_000));
        late.iter().map(|r| r.true_error.0).sum::<i64>() / late.len() as i64
    };
    let biased = mean(&c);
    assert!((biased + 2_000).abs() < 100, "uncorrected: mean error {biased} ns, expected ≈ −2000");
    c.rx_correction = c.rx_latency;
    let calibrated = mean(&c);
    assert!(calibrated.abs() < 100, "calibrated: mean error {calibrated} ns");
}

#[test]
fn offset_estimator_pairs_sync_and_delay() {
    let mut e = OffsetEstimator::new(2);
    let at = keepon_core::time::Tai(0);
    // o = 300, d = 1000: sync_raw 1300, delay_raw −700.
    assert_eq!(e.absorb(&Sample { at, sync_raw: Some(Nanos(1300)), delay_raw: None, peer_delay: None }), None);
    assert_eq!(e.absorb(&Sample { at, sync_raw: None, delay_raw: Some(Nanos(-700)), peer_delay: None }), None);
    assert_eq!(e.mean_delay(), Some(Nanos(1000)));
    assert_eq!(
        e.absorb(&Sample { at, sync_raw: Some(Nanos(1350)), delay_raw: None, peer_delay: None }),
        Some(Nanos(350))
    );
    e.after_step(Nanos(-350));
    e.absorb(&Sample { at, sync_raw: None, delay_raw: Some(Nanos(-1000)), peer_delay: None });
    assert_eq!(e.mean_delay(), Some(Nanos(1000)));
}

#[test]
fn peer_delays_set_the_mean_delay_and_never_steer() {
    // P2P: the link delay comes measured on its own; a Sync's offset is (t2 − t1) − mean delay.
    let mut e = OffsetEstimator::new(2);
    let at = keepon_core::time::Tai(0);
    let peer = |d| Sample { at, sync_raw: None, delay_raw: None, peer_delay: Some(Nanos(d)) };
    assert_eq!(e.absorb(&peer(900)), None);
    assert_eq!(e.absorb(&peer(1100)), None);
    assert_eq!(e.mean_delay(), Some(Nanos(1000)));
    assert_eq!(
        e.absorb(&Sample { at, sync_raw: Some(Nanos(1300)), delay_raw: None, peer_delay: None }),
        Some(Nanos(300))
    );
    e.absorb(&peer(1300));
    assert_eq!(e.mean_delay(), Some(Nanos(1200)), "a window of two");
    // No servo adjusts the clock on a peer delay alone, also once it is steering (statime's Kalman filter would
    // steer on its last estimate).
    let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 64).unwrap();
    for kind in [ServoKind::Kalman, ServoKind::Pi, ServoKind::MovingAverage] {
        let mut s = AnyServo::new(kind, Nanos::from_ms(125));
        let mut c = crate::clock::EphcClock::new(keepon_core::ephc::Ephc::new(g.period(), 0, crate::sim::EPOCH), 0);
        let mut k = 0;
        for (sync, delay) in [(1300, -700), (1350, -650), (1400, -600)] {
            k += 1_000_000;
            c.advance_to(k);
            let at = c.now();
            s.sample(Sample { at, sync_raw: Some(Nanos(sync)), delay_raw: None, peer_delay: None }, &mut c).unwrap();
            s.sample(Sample { at, sync_raw: None, delay_raw: Some(Nanos(delay)), peer_delay: None }, &mut c).unwrap();
        }
        assert!(!c.take_adjustments().is_empty(), "{kind:?} steers on Sync and Delay_Req");
        c.advance_to(k + 1000);
        let before = (c.now(), c.freq_ppt());
        let st =
            s.sample(Sample { at: c.now(), sync_raw: None, delay_raw: None, peer_delay: Some(Nanos(1000)) }, &mut c);
        assert!(st.is_ok_and(|st| st.mean_delay.is_some()), "{kind:?}: {st:?}");
        assert_eq!((c.now(), c.freq_ppt()), before, "{kind:?} adjusted the clock on a peer delay");
        assert!(c.take_adjustments().is_empty(), "{kind:?}");
    }
}
