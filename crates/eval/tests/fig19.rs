//! Fig 19 on small instances: the poll core's CPU shows the paper's threshold — 100 % while `batch·δ` is within
//! the prototype's 100 µs overhead budget (busy poll), a sharp drop just beyond it, then falling further — and the
//! link never underruns under that policy. The dual clock's RX core (Fig 19 b/d) shows the same threshold and
//! never drops a frame under that policy, unless stalled past its ring's reach.

use keepon_core::time::Nanos;
use keepon_eval::fig19::{host_model, point, rx_point, Params, RX_RING, SLOT_SWEEP_BATCH};

const SPAN: Nanos = Nanos::from_ms(5);

#[test]
fn cpu_shows_the_threshold_in_batch() {
    // 300 B slots: δ = 2.56 µs, so the budget passes 100 µs between batch 39 and 40.
    let pts: Vec<_> = (36..=60).step_by(4).map(|b| point("batch", b, 300, SPAN).unwrap()).collect();
    for p in &pts {
        assert_eq!(p.underruns, 0, "{p:?}");
        assert!(p.wire_busy > 99.99, "{p:?}");
        if p.batch <= 39 {
            assert!(p.cpu > 99.9, "busy poll below the threshold: {p:?}");
        } else {
            assert!(p.cpu < 40.0, "sleeps above the threshold: {p:?}");
        }
    }
    for w in pts.windows(2) {
        assert!(w[1].cpu <= w[0].cpu + 1e-9, "CPU never rises with the batch: {w:?}");
    }
    let at = |b| pts.iter().find(|p| p.batch == b).unwrap().cpu;
    assert!(at(60) < at(44) / 2.0, "the drop continues: {} vs {}", at(60), at(44));
}

#[test]
fn cpu_shows_the_threshold_in_slot_size() {
    let pts: Vec<_> =
        [340, 370, 380, 450, 600, 790].iter().map(|&s| point("slot", SLOT_SWEEP_BATCH, s, SPAN).unwrap()).collect();
    for p in &pts {
        assert_eq!(p.underruns, 0, "{p:?}");
        // 32 slots of δ = (slot + 20)·8 ns within 100 µs up to 370 B.
        if p.slot <= 370 {
            assert!(p.cpu > 99.9, "{p:?}");
        } else {
            assert!(p.cpu < 40.0, "{p:?}");
        }
    }
    for w in pts.windows(2) {
        assert!(w[1].cpu <= w[0].cpu + 1e-9, "{w:?}");
    }
}

#[test]
fn the_csv_has_one_row_per_point_and_bad_input_is_refused() {
    let p = Params { span: SPAN, batches: vec![38, 54], slots: vec![400] };
    let mut csv = Vec::new();
    let pts = keepon_eval::fig19::run(&p, &mut csv, &mut |_| {}).unwrap();
    assert_eq!(pts.len(), 6, "a TX and an RX core per point");
    let csv = String::from_utf8(csv).unwrap();
    assert_eq!(csv.lines().count(), 7);
    assert_eq!(csv.lines().filter(|l| l.contains(",rx,")).count(), 3, "{csv}");
    assert!(point("batch", 0, 300, SPAN).is_err());
    assert!(point("batch", 300, 300, SPAN).is_err());
    assert!(point("slot", 32, 10, SPAN).is_err());
    assert!(rx_point(host_model(), "batch", 0, 300, SPAN, RX_RING, None).is_err());
    assert!(rx_point(host_model(), "batch", 300, 300, SPAN, RX_RING, None).is_err());
}

/// The RX core: busy below the threshold, sleeping above it at about the TX core's share (the same rule and host
/// model, one per-frame cost instead of reclaim + post), and it keeps every frame — until a stall outlasts what
/// its ring can hold (256 frames of 2.56 µs: 655 µs).
#[test]
fn the_rx_core_shows_the_same_threshold_and_drops_only_when_stalled_past_its_ring() {
    for b in [36, 38, 40, 48, 54, 60] {
        let rx = rx_point(host_model(), "batch", b, 300, SPAN, RX_RING, None).unwrap();
        let tx = point("batch", b, 300, SPAN).unwrap();
        assert_eq!(rx.rx_dropped, 0, "{rx:?}");
        if b <= 39 {
            assert!(rx.cpu > 99.9, "{rx:?}");
        } else {
            assert!(rx.cpu < tx.cpu && rx.cpu > tx.cpu * 0.9, "RX {rx:?} vs TX {tx:?}");
        }
    }
    let stalled = |us, ring| {
        rx_point(host_model(), "batch", 54, 300, SPAN, ring, Some((Nanos::from_ms(1), Nanos::from_us(us))))
            .unwrap()
            .rx_dropped
    };
    assert_eq!(stalled(500, RX_RING), 0, "within the ring's reach");
    let lost = stalled(2_000, RX_RING);
    assert!(lost > 400 && lost < 600, "2 ms is 781 frames, the ring holds 256 less the backlog: {lost}");
    assert_eq!(stalled(2_000, 1024), 0, "a bigger ring absorbs it");
}
