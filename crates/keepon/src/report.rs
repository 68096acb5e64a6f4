//! `keepon report`: per-flow statistics of a records file.
//!
//! Inter-arrival times are taken between consecutive *received* frames of a flow in arrival order (receiver timestamps,
//! `rx_ns`; the wire start `tx_ns` where there is no receiver timestamp). Deviation from schedule is
//! `tx_ns − sched_ns` (the start of the schedule slot that holds the txtime; `tx_ns − txtime_ns` for records
//! without it), and frames flagged `off_schedule` (beyond `run.tolerance`) are counted. Times stay integer
//! nanoseconds; only the mean and standard deviation are fractional. Differences of times near the i64 limits
//! saturate instead of wrapping.
//!
//! A listener's records of R-TAGged frames (IEEE 802.1CB FRER) hold every copy: the copies its sequence recovery
//! eliminated (`frer` = `discarded` or `rogue`) are left out of the statistics and counted on a line of their own,
//! with the copies each interface received.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::record::Record;

/// Summary statistics of a set of integer nanosecond values.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Samples.
    pub n: usize,
    /// Minimum.
    pub min: i64,
    /// Maximum.
    pub max: i64,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// 99th percentile (nearest rank).
    pub p99: i64,
    /// 99.9th percentile (nearest rank).
    pub p999: i64,
}

/// Nearest-rank percentile of sorted values, `q` in per-mille.
fn percentile(sorted: &[i64], q_permille: usize) -> i64 {
    let rank = (q_permille * sorted.len()).div_ceil(1000).max(1);
    sorted[rank - 1]
}

impl Stats {
    /// Statistics of `v` (`None` if empty).
    pub fn of(v: &[i64]) -> Option<Stats> {
        if v.is_empty() {
            return None;
        }
        let mut s = v.to_vec();
        s.sort_unstable();
        let n = s.len();
        let sum: i128 = s.iter().map(|&x| i128::from(x)).sum();
        let mean = sum as f64 / n as f64;
        let var = s.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        Some(Stats {
            n,
            min: s[0],
            max: s[n - 1],
            mean,
            stddev: var.sqrt(),
            p99: percentile(&s, 990),
            p999: percentile(&s, 999),
        })
    }
}

/// Per-flow analysis.
#[derive(Clone, Debug)]
pub struct FlowReport {
    /// Flow name.
    pub flow: String,
    /// Class name.
    pub class: String,
    /// Frames recorded.
    pub count: usize,
    /// Frames sent.
    pub sent: usize,
    /// Rejections by reason.
    pub rejected: BTreeMap<String, usize>,
    /// Inter-arrival times (ns) of consecutive received frames, in arrival order.
    pub inter_arrival: Vec<i64>,
    /// Deviation from schedule (ns) of sent real-time frames.
    pub deviation: Vec<i64>,
    /// Sent frames flagged beyond the tolerance from their schedule slot.
    pub off_schedule: usize,
    /// Host-paced links: `released_ns − ephc_ns` (ns) of sent frames, how late the host released them.
    pub release_lag: Vec<i64>,
    /// R-TAGged frames a listener recorded: what its sequence recovery did with the copies.
    pub frer: Option<FrerCopies>,
}

/// What a listener's FRER sequence recovery did with one flow's copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrerCopies {
    /// Copies passed (the first of each sequence number).
    pub passed: usize,
    /// Copies discarded as duplicates.
    pub discarded: usize,
    /// Copies discarded as rogue.
    pub rogue: usize,
    /// Copies received per interface.
    pub per_iface: BTreeMap<String, usize>,
}

/// Group records by flow and compute the series.
pub fn analyse(records: &[Record]) -> Vec<FlowReport> {
    let mut by_flow: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    let mut frer: BTreeMap<&str, FrerCopies> = BTreeMap::new();
    for r in records {
        if !r.frer.is_empty() {
            let f = frer.entry(&r.flow).or_default();
            match r.frer.as_str() {
                "discarded" => f.discarded += 1,
                "rogue" => f.rogue += 1,
                _ => f.passed += 1,
            }
            *f.per_iface.entry(r.iface.clone()).or_default() += 1;
        }
        if !r.eliminated() {
            by_flow.entry(&r.flow).or_default().push(r);
        }
    }
    by_flow
        .into_iter()
        .map(|(flow, mut rs)| {
            rs.sort_by_key(|r| r.seq);
            let mut rejected = BTreeMap::new();
            for r in rs.iter().filter(|r| !r.sent()) {
                *rejected.entry(r.reason.clone()).or_insert(0) += 1;
            }
            // In arrival order (a listener may see a flow out of sequence order).
            let mut arrivals: Vec<i64> = rs.iter().filter(|r| r.sent()).filter_map(|r| r.rx_ns.or(r.tx_ns)).collect();
            arrivals.sort_unstable();
            let deviation =
                rs.iter().filter_map(|r| r.deviation().or_else(|| r.tx_ns?.checked_sub(r.txtime_ns?))).collect();
            FlowReport {
                flow: flow.to_string(),
                class: rs[0].class.clone(),
                count: rs.len(),
                sent: rs.iter().filter(|r| r.sent()).count(),
                rejected,
                inter_arrival: arrivals.windows(2).map(|w| w[1].saturating_sub(w[0])).collect(),
                deviation,
                off_schedule: rs.iter().filter(|r| r.off_schedule == Some(true)).count(),
                release_lag: rs
                    .iter()
                    .filter(|r| r.sent())
                    .filter_map(|r| r.released_ns?.checked_sub(r.ephc_ns?))
                    .collect(),
                frer: frer.remove(flow),
            }
        })
        .collect()
}

fn stats_line(name: &str, v: &[i64]) -> String {
    match Stats::of(v) {
        None => format!("  {name:<14} (no samples)\n"),
        Some(s) => format!(
            "  {name:<14} n={} min={} max={} mean={:.1} stddev={:.1} p99={} p99.9={} (ns)\n",
            s.n, s.min, s.max, s.mean, s.stddev, s.p99, s.p999
        ),
    }
}

/// A text histogram of `v` with up to `buckets` equal-width buckets.
pub fn histogram(v: &[i64], buckets: usize) -> String {
    let Some(s) = Stats::of(v) else { return String::new() };
    let span = i128::from(s.max) - i128::from(s.min);
    let width = (span / buckets as i128 + 1).max(1);
    let mut counts = vec![0usize; buckets];
    for &x in v {
        counts[(((i128::from(x) - i128::from(s.min)) / width) as usize).min(buckets - 1)] += 1;
    }
    let top = *counts.iter().max().unwrap_or(&1);
    let mut out = String::new();
    for (i, c) in counts.iter().enumerate() {
        if *c == 0 && span / width < i as i128 {
            break;
        }
        let lo = i128::from(s.min) + i as i128 * width;
        let bar = "#".repeat((c * 50).div_ceil(top.max(1)));
        let _ = writeln!(out, "    [{lo:>12}, {:>12}) {c:>8} {bar}", lo + width);
    }
    out
}

/// The text of `keepon report`.
pub fn render(records: &[Record]) -> String {
    let mut out = String::new();
    for f in analyse(records) {
        let _ = writeln!(
            out,
            "flow {} (class {}): {} frames, {} sent, {} rejected",
            f.flow,
            f.class,
            f.count,
            f.sent,
            f.count - f.sent
        );
        for (why, n) in &f.rejected {
            let _ = writeln!(out, "  rejected {why}: {n}");
        }
        out.push_str(&stats_line("inter-arrival", &f.inter_arrival));
        out.push_str(&stats_line("deviation", &f.deviation));
        if !f.release_lag.is_empty() {
            out.push_str(&stats_line("release lag", &f.release_lag));
        }
        if let Some(c) = &f.frer {
            let each: Vec<String> = c.per_iface.iter().map(|(i, n)| format!("{i} {n}")).collect();
            let _ = writeln!(
                out,
                "  frer           {} copies passed, {} discarded, {} rogue; copies per interface: {}",
                c.passed,
                c.discarded,
                c.rogue,
                each.join(", ")
            );
        }
        if f.off_schedule > 0 {
            let _ = writeln!(
                out,
                "  off schedule   {} sent frames beyond the tolerance from their schedule slot",
                f.off_schedule
            );
        }
        if !f.inter_arrival.is_empty() {
            out.push_str("  inter-arrival histogram (ns):\n");
            out.push_str(&histogram(&f.inter_arrival, 10));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_exact_on_known_values() {
        let s = Stats::of(&[320_000, 320_000, 319_992, 320_008]).unwrap();
        assert_eq!((s.min, s.max, s.n), (319_992, 320_008, 4));
        assert!((s.mean - 320_000.0).abs() < 1e-9);
        assert!((s.stddev - 32f64.sqrt()).abs() < 1e-9);
        let v: Vec<i64> = (1..=1000).collect();
        let s = Stats::of(&v).unwrap();
        assert_eq!((s.p99, s.p999), (990, 999));
        assert!(Stats::of(&[]).is_none());
    }

    /// Times at the ends of the i64 range give saturated, not wrapped, statistics.
    #[test]
    fn extreme_times_do_not_wrap() {
        let mk = |seq: u64, t: i64| {
            let mut r = Record::new(seq, "f", "c", Some(t));
            r.sent_at(seq, 0, t);
            r
        };
        let recs = vec![mk(0, i64::MIN), mk(1, i64::MAX), mk(2, 0)];
        let f = &analyse(&recs)[0];
        assert!(f.inter_arrival.iter().all(|&d| d >= 0), "{:?}", f.inter_arrival);
        assert!(f.inter_arrival.contains(&i64::MAX));
        let text = render(&recs);
        assert!(!text.contains("-9223372036854775"), "{text}");
    }

    /// Records with release times (host-paced links) get a release-lag line; records without none.
    #[test]
    fn release_lag_is_reported_where_recorded() {
        let mk = |seq: u64, lag: Option<i64>| {
            let mut r = Record::new(seq, "f", "c", Some(1_000 * seq as i64));
            r.sent_at(seq, 0, 1_000 * seq as i64);
            r.released_ns = lag.map(|l| 1_000 * seq as i64 + l);
            r
        };
        let recs = vec![mk(1, Some(20_000)), mk(2, Some(3_000_000)), mk(3, None)];
        assert_eq!(analyse(&recs)[0].release_lag, vec![20_000, 3_000_000]);
        assert!(render(&recs).contains("release lag    n=2 min=20000 max=3000000"), "{}", render(&recs));
        assert!(!render(&[mk(4, None)]).contains("release lag"));
    }

    /// Copies a listener's FRER recovery eliminated are counted apart, not as frames of the flow.
    #[test]
    fn eliminated_copies_are_counted_apart() {
        let mk = |seq: u64, iface: &str, frer: &str| {
            let mut r = Record::new(seq, "f", "c", Some(1_000 * seq as i64));
            r.outcome = "sent".into();
            r.rx_ns = Some(1_000 * seq as i64 + 7);
            (r.iface, r.rtag_seq, r.frer) = (iface.into(), Some(seq as u16), frer.into());
            r
        };
        let recs = vec![mk(1, "a", "passed"), mk(1, "b", "discarded"), mk(2, "b", "passed"), mk(1, "a", "rogue")];
        let f = &analyse(&recs)[0];
        assert_eq!((f.count, f.inter_arrival.clone()), (2, vec![1_000]));
        let c = f.frer.as_ref().unwrap();
        assert_eq!((c.passed, c.discarded, c.rogue), (2, 1, 1));
        let text = render(&recs);
        assert!(text.contains("2 copies passed, 1 discarded, 1 rogue; copies per interface: a 2, b 2"), "{text}");
        assert!(analyse(&[mk(3, "", "")])[0].frer.is_none());
    }

    #[test]
    fn histogram_counts_every_sample() {
        let v = vec![1, 2, 2, 3, 10];
        let h = histogram(&v, 3);
        let count = |l: &str| l.split(')').nth(1).and_then(|r| r.split_whitespace().next()).unwrap().parse::<usize>();
        let total: usize = h.lines().map(|l| count(l).unwrap()).sum();
        assert_eq!(total, 5);
    }
}
