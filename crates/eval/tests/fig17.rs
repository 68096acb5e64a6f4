//! A small instance of Fig 17: padding costs exactly what one packet per slot predicts; the byte clock pads nothing.

use keepon_eval::fig17::{self, Params};

#[test]
fn throughput_falls_with_slot_size_as_one_packet_per_slot() {
    let mut p = Params::paper(150);
    p.sweeps = vec![(100, vec![146, 400, 1518]), (500, vec![546, 1518])];
    let mut csv = Vec::new();
    let pts = fig17::run(&p, &mut csv, &mut |_| {}).expect("runs");
    for w in pts.windows(2).filter(|w| w[0].payload == w[1].payload) {
        assert!(w[1].throughput < w[0].throughput, "{w:?}");
    }
    for pt in &pts {
        assert!(pt.throughput <= pt.bound + 1e-6 && pt.throughput > 0.98 * pt.bound, "{pt:?}");
        assert!(pt.refused > 0, "offered beyond the slots' capacity: {pt:?}");
        // The byte clock pads nothing: the line's bound for these packets, whatever the slot size.
        let line = f64::from(pt.payload) / f64::from(pt.payload + 66) * 1e3;
        assert!(pt.bytes <= line + 1e-6 && pt.bytes > 0.98 * line, "{pt:?}: line bound {line:.1}");
        assert!(pt.bytes >= pt.throughput - 1e-6, "{pt:?}");
    }
    assert_eq!(csv.iter().filter(|&&c| c == b'\n').count(), 1 + 5);
    let mut bad = Params::paper(10);
    bad.sweeps = vec![(500, vec![300])];
    assert!(fig17::run(&bad, &mut std::io::sink(), &mut |_| {}).unwrap_err().contains("546"));
}
