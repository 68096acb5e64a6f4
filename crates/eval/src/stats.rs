//! Inter-arrival statistics, the paper's measure of TX determinism.
//!
//! **Jitter** is the standard deviation of the inter-arrival times of consecutive instances (seq `k` and
//! `k + 1`, both received) at the receiver. The paper does not define its "inter-arrival jitter" further; the
//! standard deviation is the common reading, and the reports also give the range.

/// Inter-arrival statistics of one stream at the receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Jitter {
    /// Inter-arrival samples.
    pub n: u64,
    /// Mean inter-arrival, ns.
    pub mean: f64,
    /// Standard deviation, ns: the jitter.
    pub sd: f64,
    /// Smallest inter-arrival, ns.
    pub min: f64,
    /// Largest inter-arrival, ns.
    pub max: f64,
}

impl Jitter {
    /// From `(seq, arrival)` pairs in seq order; only consecutive instances make a sample.
    pub fn of(arrivals: &[(u64, f64)]) -> Jitter {
        let ia: Vec<f64> = arrivals.windows(2).filter(|w| w[1].0 == w[0].0 + 1).map(|w| w[1].1 - w[0].1).collect();
        if ia.is_empty() {
            return Jitter::default();
        }
        let n = ia.len() as f64;
        let mean = ia.iter().sum::<f64>() / n;
        let var = ia.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        Jitter {
            n: ia.len() as u64,
            mean,
            sd: var.sqrt(),
            min: ia.iter().copied().fold(f64::INFINITY, f64::min),
            max: ia.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_consecutive_instances_count() {
        let a = [(0, 0.0), (1, 10.0), (2, 20.0), (4, 100.0), (5, 118.0)];
        let j = Jitter::of(&a);
        assert_eq!(j.n, 3);
        assert!((j.mean - 38.0 / 3.0).abs() < 1e-9);
        assert_eq!((j.min, j.max), (10.0, 18.0));
        assert!(j.sd > 3.7 && j.sd < 3.8, "{}", j.sd);
        assert_eq!(Jitter::of(&[(0, 1.0)]), Jitter::default());
    }
}
