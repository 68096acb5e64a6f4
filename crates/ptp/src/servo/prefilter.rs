//! An outlier prefilter in front of every servo.
//!
//! Software timestamps are mostly good and sometimes very late: a receive timestamp is taken when the kernel's
//! receive softirq runs, and on a loaded host that can wait for `ksoftirqd` (hundreds of µs, even ms). One such
//! sample pulls a locked servo far off (or makes it step). Each stream of raw differences (`t2 − t1` of Syncs,
//! `t3 − t4` of Delay_Reqs, peer delays of Pdelay exchanges) is therefore compared with the median of its recent values, and a value further
//! off than a robust spread (a multiple of the median absolute deviation, never less than a floor) is
//! dropped. A real change — a master's phase jump, a path change — persists: after
//! [`PrefilterConfig::accept_after`] dropped values in a row the stream starts afresh from the new value.
//! The filter only acts while the servo is locked (before that, offsets move by design).

use window::Window;

use keepon_core::time::Nanos;

use super::Sample;

/// Settings of the prefilter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefilterConfig {
    /// Values per stream the median is taken over.
    pub window: usize,
    /// A value further than `spread` robust deviations from the median is an outlier...
    pub spread: i64,
    /// ...but never one within this distance.
    pub floor: Nanos,
    /// After this many outliers in a row, the stream restarts from the current value (a real change).
    pub accept_after: u32,
}

impl Default for PrefilterConfig {
    fn default() -> Self {
        PrefilterConfig { window: 16, spread: 5, floor: Nanos::from_us(5), accept_after: 4 }
    }
}

/// What the prefilter did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefilterStats {
    /// Values passed to the servo.
    pub passed: u64,
    /// Values dropped as outliers.
    pub dropped: u64,
    /// Streams restarted after persistent change.
    pub restarts: u64,
    /// Samples with an offset (a Sync's `t2 − t1`) handed to the servo: a fresh measurement of the offset,
    /// whether or not the servo's estimate changed.
    pub offsets: u64,
}

/// One stream of raw differences.
#[derive(Clone, Debug, Default)]
struct Stream {
    recent: Window,
    run: u32,
}

impl Stream {
    /// Pass or drop `x` (`locked`: judge it; otherwise just remember it).
    fn judge(&mut self, x: Nanos, locked: bool, cfg: &PrefilterConfig, stats: &mut PrefilterStats) -> Option<Nanos> {
        if locked && self.recent.len() >= cfg.window / 2 {
            let (median, mad) = self.recent.median_and_mad();
            // 1.4826 · MAD estimates a normal spread; in integer ns: × 3 / 2.
            let limit = (mad.saturating_mul(3) / 2).saturating_mul(cfg.spread).max(cfg.floor.0);
            if (x.0 - median).abs() > limit {
                self.run += 1;
                if self.run < cfg.accept_after {
                    stats.dropped += 1;
                    return None;
                }
                self.recent.clear();
                stats.restarts += 1;
            }
        }
        self.run = 0;
        self.recent.push(x.0, cfg.window);
        stats.passed += 1;
        Some(x)
    }
}

/// The prefilter: one stream per kind of difference.
#[derive(Clone, Debug, Default)]
pub struct Prefilter {
    cfg: PrefilterConfig,
    sync: Stream,
    delay: Stream,
    peer: Stream,
    stats: PrefilterStats,
}

impl Prefilter {
    /// A prefilter with `cfg`.
    pub fn new(cfg: PrefilterConfig) -> Prefilter {
        Prefilter { cfg, ..Prefilter::default() }
    }

    /// `s` with its outliers removed (`None` if nothing is left); `locked`: the servo is locked.
    pub fn filter(&mut self, s: Sample, locked: bool) -> Option<Sample> {
        let sync_raw = s.sync_raw.and_then(|x| self.sync.judge(x, locked, &self.cfg, &mut self.stats));
        let delay_raw = s.delay_raw.and_then(|x| self.delay.judge(x, locked, &self.cfg, &mut self.stats));
        let peer_delay = s.peer_delay.and_then(|x| self.peer.judge(x, locked, &self.cfg, &mut self.stats));
        self.stats.offsets += u64::from(sync_raw.is_some());
        (sync_raw.is_some() || delay_raw.is_some() || peer_delay.is_some()).then_some(Sample {
            at: s.at,
            sync_raw,
            delay_raw,
            peer_delay,
        })
    }

    /// What it did so far.
    pub fn stats(&self) -> PrefilterStats {
        self.stats
    }
}

mod window {
    //! A small ring of the latest values with median and median absolute deviation.

    use std::collections::VecDeque;

    #[derive(Clone, Debug, Default)]
    pub struct Window(VecDeque<i64>);

    impl Window {
        pub fn len(&self) -> usize {
            self.0.len()
        }

        pub fn clear(&mut self) {
            self.0.clear();
        }

        pub fn push(&mut self, x: i64, cap: usize) {
            while self.0.len() >= cap.max(1) {
                self.0.pop_front();
            }
            self.0.push_back(x);
        }

        fn median_of(v: &mut [i64]) -> i64 {
            v.sort_unstable();
            let n = v.len();
            if n % 2 == 1 {
                v[n / 2]
            } else {
                ((i128::from(v[n / 2 - 1]) + i128::from(v[n / 2])) / 2) as i64
            }
        }

        /// (median, median absolute deviation); the window must not be empty.
        pub fn median_and_mad(&self) -> (i64, i64) {
            let mut v: Vec<i64> = self.0.iter().copied().collect();
            let m = Self::median_of(&mut v);
            let mut d: Vec<i64> = self.0.iter().map(|x| x.saturating_sub(m).saturating_abs()).collect();
            (m, Self::median_of(&mut d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keepon_core::time::Tai;

    fn sample(sync: i64) -> Sample {
        Sample { at: Tai(0), sync_raw: Some(Nanos(sync)), delay_raw: None, peer_delay: None }
    }

    #[test]
    fn a_late_timestamp_is_dropped_while_locked_and_kept_before() {
        let mut p = Prefilter::new(PrefilterConfig::default());
        for i in 0..16 {
            assert!(p.filter(sample(5_000 + (i % 3) * 300), true).is_some());
        }
        assert_eq!(p.filter(sample(400_000), true), None, "a 400 µs late Sync is an outlier");
        assert!(p.filter(sample(5_300), true).is_some());
        assert!(p.filter(sample(400_000), false).is_some(), "unlocked: nothing is judged");
        assert_eq!(p.stats().dropped, 1);
        assert_eq!(p.stats().offsets, 18, "every Sync difference handed on is a fresh offset");
    }

    #[test]
    fn a_persistent_change_is_accepted_after_a_few_samples() {
        let cfg = PrefilterConfig::default();
        let mut p = Prefilter::new(cfg);
        for i in 0..16 {
            p.filter(sample(5_000 + (i % 2) * 100), true);
        }
        // The master jumps 30 µs: dropped `accept_after − 1` times, then taken, and the stream follows it.
        let passed: Vec<bool> = (0..8).map(|_| p.filter(sample(35_000), true).is_some()).collect();
        let first = passed.iter().position(|&x| x).unwrap();
        assert_eq!(first as u32, cfg.accept_after - 1);
        assert!(passed[first..].iter().all(|&x| x), "{passed:?}");
        assert_eq!(p.stats().restarts, 1);
    }

    #[test]
    fn small_changes_within_the_floor_always_pass() {
        let mut p = Prefilter::new(PrefilterConfig::default());
        for i in 0..100 {
            // Perfectly quiet stream (MAD 0), then values within the 5 µs floor.
            let x = if i < 16 { 5_000 } else { 5_000 + (i % 7) * 700 };
            assert!(p.filter(sample(x), true).is_some(), "value {x} at {i}");
        }
    }
}
