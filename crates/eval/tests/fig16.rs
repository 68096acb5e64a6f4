//! Small instances of Fig 16: the qualitative claims, measured.

use keepon_eval::fig16::{self, Params, Point};

fn point<'a>(pts: &'a [Point], sweep: &str, x: i64, model: &str) -> &'a Point {
    pts.iter().find(|p| p.sweep == sweep && p.x_us == x && p.model == model).expect("point")
}

#[test]
fn keepon_takes_frames_5_us_ahead_and_20_us_periods_where_launchtime_needs_30_us() {
    let mut p = Params::paper(300);
    p.advances_us = vec![3, 5, 10, 30, 50];
    p.periods_us = vec![20, 100];
    let mut csv = Vec::new();
    let pts = fig16::run(&p, &mut csv, &mut |_| {}).expect("runs");
    for x in [5, 10, 30, 50] {
        let k = point(&pts, "advance", x, "keepon");
        assert_eq!((k.m.sent, k.m.late, k.m.lost), (300, 0, 0), "keepon at {x} µs: {:?}", k.m);
        assert!(k.m.rx.sd <= p.realism.rx_quantum / 2.0, "{:?}", k.m);
    }
    // Below its insertion horizon (one posted slot + the post latency) keepon refuses rather than sends late.
    let k3 = point(&pts, "advance", 3, "keepon");
    assert!(k3.m.lost > 0 && k3.m.late == 0, "{:?}", k3.m);
    for x in [5, 10] {
        let l = point(&pts, "advance", x, "launchtime");
        assert!(l.m.late > 150, "LaunchTime at {x} µs: {:?}", l.m);
        assert!(l.m.rx.sd > 100.0 * point(&pts, "advance", x, "keepon").m.rx.sd);
    }
    assert_eq!(point(&pts, "advance", 50, "launchtime").m.late, 0);
    for x in [20, 100] {
        let k = point(&pts, "period", x, "keepon");
        assert_eq!(k.m.sent, 300, "keepon at a {x} µs period: {:?}", k.m);
        assert!(k.m.rx.sd < point(&pts, "period", x, "launchtime").m.rx.sd);
    }
    let rows = csv.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(rows, 1 + 2 * 7 * 300);
}
