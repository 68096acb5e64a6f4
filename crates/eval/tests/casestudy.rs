//! The network model and a small §7 case study: the qualitative claims, measured.

use keepon_eval::casestudy::{self, delay_stats, FrameDelay, Params, GATEWAY_FLOWS, GRID};
use keepon_eval::network::{forward, schedule, Schedule};

fn windows_never_overlap(s: &Schedule, period: f64) {
    for (port, w) in &s.gcl {
        for pair in w.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "{port:?}: {pair:?}");
        }
        if let (Some(first), Some(last)) = (w.first(), w.last()) {
            assert!(last.1 <= first.0 + period, "{port:?} wraps onto its first window");
        }
    }
}

#[test]
fn the_schedule_is_conflict_free_and_exact_talkers_see_only_path_delay() {
    let p = Params::new(10);
    let routes = casestudy::routes();
    let s = schedule(&p.net, &routes, GRID).expect("schedulable");
    windows_never_overlap(&s, p.net.period);
    assert!(s.offsets.iter().all(|o| (o / GRID).fract() == 0.0), "offsets on keepon's slot grid");
    // Talkers that send exactly at their offsets: every frame meets every window, no waiting anywhere.
    let sent: Vec<Vec<(u64, f64)>> =
        s.offsets.iter().map(|o| (0..10).map(|k| (k, o + k as f64 * p.net.period)).collect()).collect();
    let got = forward(&p.net, &routes, &s, &sent);
    assert_eq!(got.len(), 12 * 10);
    for d in got {
        let want = s.offsets[d.flow]
            + d.seq as f64 * p.net.period
            + routes[d.flow].switches() as f64 * p.net.hop()
            + p.net.propagation;
        assert!((d.arrival - want).abs() < 1e-6, "flow {} seq {}: {} vs {want}", d.flow + 1, d.seq, d.arrival);
    }
    // The taprio form covers each cycle exactly.
    let text = s.taprio(p.net.period);
    let mut sum = 0u64;
    for line in text.lines() {
        if line.starts_with('#') {
            assert!(sum == 0 || sum == 1_000_000, "{sum}");
            sum = 0;
        } else {
            sum += line.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).expect("interval");
        }
    }
    assert_eq!(sum, 1_000_000);
}

#[test]
fn one_late_frame_displaces_the_next_flow_in_a_shared_queue_by_a_hyperperiod() {
    let p = Params::new(3);
    let routes = casestudy::routes();
    let s = schedule(&p.net, &routes, GRID).expect("schedulable");
    let mut sent: Vec<Vec<(u64, f64)>> =
        s.offsets.iter().map(|o| (0..3).map(|k| (k, o + k as f64 * p.net.period)).collect()).collect();
    // F2 (index 1) leaves 1 µs late in hyperperiod 0: beyond its window's guard.
    sent[1][0].1 += 1_000.0;
    let got = forward(&p.net, &routes, &s, &sent);
    let delay = |f: usize, k: u64| {
        let d = got.iter().find(|d| d.flow == f && d.seq == k).expect("delivered");
        d.arrival - (s.offsets[f] + k as f64 * p.net.period)
    };
    let ideal = |f: usize| routes[f].switches() as f64 * p.net.hop() + p.net.propagation;
    assert!(delay(1, 0) > ideal(1) + 1_000.0, "F2 missed its window");
    // Somebody behind F2 in the shared queue waited a whole hyperperiod.
    let worst = (0..12).map(|f| delay(f, 0) - ideal(f)).fold(0.0, f64::max);
    assert!(worst > p.net.period * 0.9, "worst extra delay {worst}");
}

fn gateway_stats(frames: &[FrameDelay], flow: usize) -> [f64; 3] {
    let v: Vec<f64> = frames.iter().filter(|f| f.flow == flow).filter_map(|f| f.delay).collect();
    delay_stats(&v)
}

#[test]
fn keepon_gateways_keep_the_schedule_and_stock_gateways_cascade() {
    let p = Params::new(400);
    let mut csv = Vec::new();
    let (_, all) = casestudy::run(&p, &mut csv, &mut |_| {}).expect("runs");
    let get = |name: &str| &all.iter().find(|(s, _)| *s == name).expect("scenario").1;
    let (keepon, stock) = (get("keepon"), get("stock-etf"));
    assert!(keepon.iter().chain(stock).all(|f| f.delay.is_some()), "nothing is lost in the network");
    let mut stock_worst = 0.0f64;
    for f in GATEWAY_FLOWS {
        let k = gateway_stats(keepon, f);
        let v: Vec<f64> = keepon.iter().filter(|x| x.flow == f).filter_map(|x| x.delay).collect();
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(k[2] - min < 1_000.0, "F{f}: keepon's delay varies by {} ns", k[2] - min);
        stock_worst = stock_worst.max(gateway_stats(stock, f)[1]);
    }
    // The stock driver's displaced frames wait for the next hyperperiod: a P99 near a whole period.
    assert!(stock_worst > 0.9 * p.net.period, "stock P99 {stock_worst}");
    assert_eq!(csv.iter().filter(|&&b| b == b'\n').count(), 1 + 3 * 12 * 400);
}

#[test]
fn bad_network_timing_and_oversized_runs_are_refused() {
    let mut p = Params::new(1);
    p.net.guard = -1.0;
    let e = schedule(&p.net, &casestudy::routes(), GRID).unwrap_err();
    assert!(e.contains("guard -1"), "{e}");
    let dir = std::env::temp_dir().join(format!("keepon-eval-cli-{}", std::process::id()));
    let opts = keepon_eval::cli::EvalOptions { frames: Some(keepon_eval::cli::MAX_HYPERPERIODS + 1), seed: None };
    let e = keepon_eval::cli::run("casestudy", &dir, &opts).unwrap_err();
    assert!(e.contains("at most"), "{e}");
    let e = keepon_eval::cli::run("nonesuch", &dir, &keepon_eval::cli::EvalOptions { frames: None, seed: None })
        .unwrap_err();
    assert!(e.contains("fig15") && e.contains("casestudy"), "{e}");
    let e = keepon_eval::cli::run("fig15", &dir, &keepon_eval::cli::EvalOptions { frames: Some(1), seed: None })
        .unwrap_err();
    assert!(e.contains("--frames 1"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The topologies the sweep tries keep the paper's hop counts (F2–F4 and F7 three switches, F1 and F8 two, F12
/// one), the chain is the report's, and every window order gives a conflict-free schedule; an order that is not a
/// permutation of the flows is refused.
#[test]
fn every_topology_keeps_the_hop_counts_and_every_window_order_schedules() {
    let p = Params::new(10);
    let switches = |r: &keepon_eval::network::Route| r.nodes.len() - 2;
    assert_eq!(casestudy::routes_on("SW3", "SW2"), casestudy::routes());
    let orders = casestudy::window_orders(12);
    assert_eq!(orders.len(), 2 + casestudy::SHUFFLED_ORDERS as usize);
    let mut distinct = orders.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), orders.len(), "the orders differ");
    for (name, b, near) in casestudy::TOPOLOGIES {
        let routes = casestudy::routes_on(b, near);
        let hops: Vec<usize> = routes.iter().map(switches).collect();
        assert_eq!(hops, [2, 3, 3, 3, 2, 3, 3, 2, 2, 3, 1, 1], "{name}");
        for order in &orders {
            let s = keepon_eval::network::schedule_in_order(&p.net, &routes, GRID, order).expect(name);
            windows_never_overlap(&s, p.net.period);
        }
    }
    let routes = casestudy::routes();
    assert!(keepon_eval::network::schedule_in_order(&p.net, &routes, GRID, &[0, 1, 2]).is_err());
    assert!(keepon_eval::network::schedule_in_order(&p.net, &routes, GRID, &[0; 12]).is_err());
    // The flows' own order is `schedule`'s.
    let own = keepon_eval::network::schedule_in_order(&p.net, &routes, GRID, &orders[0]).unwrap();
    assert_eq!(own.offsets, schedule(&p.net, &routes, GRID).unwrap().offsets);
}
