//! A small instance of Fig 18: best effort follows the configured share, measured on keepon's real station.

use keepon_eval::fig18::{self, line_bound, share_bound, Params};

#[test]
fn best_effort_follows_its_share_and_keepon_at_100_percent_matches_the_line() {
    let mut p = Params::paper(200);
    p.packets = vec![600, 1400];
    p.offered_mbps = vec![100, 1000];
    let mut csv = Vec::new();
    let pts = fig18::run(&p, &mut csv, &mut |_| {}).expect("runs");
    for b in [600, 1400] {
        for share in [25, 50, 100] {
            let at = |r: u32| {
                pts.iter()
                    .find(|x| x.packet == b && x.share == share && x.offered == r && x.model == "keepon")
                    .expect("point")
            };
            // Below its share, what is offered goes out (within 1 %: the run's edges).
            let low = at(100);
            assert!((low.throughput - 100.0).abs() < 1.0, "{b} B {share} %: {low:?}");
            // Offered beyond its share, best effort gets its share — never more — and the excess is refused.
            let high = at(1000);
            let bound = share_bound(b, share).min(line_bound(b));
            assert!(
                high.throughput <= bound + 1e-6 && high.throughput > 0.98 * bound,
                "{b} B {share} %: {high:?} vs {bound}"
            );
            assert!(high.refused > 0, "{high:?}");
        }
        let stock = pts.iter().find(|x| x.packet == b && x.offered == 1000 && x.model == "stock").expect("stock");
        let k100 = pts
            .iter()
            .find(|x| x.packet == b && x.offered == 1000 && x.share == 100 && x.model == "keepon")
            .expect("keepon");
        assert!((k100.throughput - stock.throughput).abs() < 0.02 * stock.throughput, "{k100:?} vs {stock:?}");
    }
    assert_eq!(csv.iter().filter(|&&c| c == b'\n').count(), 1 + 2 * (3 * 2 + 2));
    let mut bad = Params::paper(10);
    bad.shares = vec![0];
    assert!(fig18::run(&bad, &mut std::io::sink(), &mut |_| {}).unwrap_err().contains("share 0"));
}
