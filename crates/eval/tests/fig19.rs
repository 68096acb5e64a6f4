//! Fig 19 on small instances: the poll core's CPU shows the paper's threshold — 100 % while `batch·δ` is within
//! the prototype's 100 µs overhead budget (busy poll), a sharp drop just beyond it, then falling further — and the
//! link never underruns under that policy.

use keepon_core::time::Nanos;
use keepon_eval::fig19::{point, Params, SLOT_SWEEP_BATCH};

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
    assert_eq!(pts.len(), 3);
    assert_eq!(String::from_utf8(csv).unwrap().lines().count(), 4);
    assert!(point("batch", 0, 300, SPAN).is_err());
    assert!(point("batch", 300, 300, SPAN).is_err());
    assert!(point("slot", 32, 10, SPAN).is_err());
}
