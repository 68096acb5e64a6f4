//! How far the wire is off its schedule: each posted slot's start on the EPHC minus its schedule time.
//!
//! Slots are measured as they are posted, while the grid is locked; slots posted while it is being acquired
//! (after link-up, a step, a restart) are counted apart, with the longest acquisition. Magnitudes are kept in a
//! histogram of whole nanoseconds up to [`Alignment::RANGE`] (larger ones count as beyond it), so quantiles cost
//! nothing per slot.

use alloc::vec;
use alloc::vec::Vec;

/// Alignment statistics of one station.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alignment {
    /// Slots measured (locked, carrying a schedule slot).
    pub slots: u64,
    /// Most negative error (ns; the slot started early).
    pub min: i64,
    /// Most positive error (ns; the slot started late).
    pub max: i64,
    /// Slots posted while the grid was being acquired.
    pub acquiring_slots: u64,
    /// Acquisitions completed (link-up, steps, restarts).
    pub acquisitions: u64,
    /// Longest acquisition, in slots.
    pub acquire_max_slots: u64,
    /// Spacers posted (fillers that carried no schedule slot: the wire waited for the schedule).
    pub spacers: u64,
    /// Schedule slots skipped (a filler spanned two: the wire was late and its slots could not shrink).
    pub skips: u64,
    hist: Vec<u64>,
}

impl Default for Alignment {
    fn default() -> Self {
        Alignment {
            slots: 0,
            min: 0,
            max: 0,
            acquiring_slots: 0,
            acquisitions: 0,
            acquire_max_slots: 0,
            spacers: 0,
            skips: 0,
            hist: vec![0; Self::RANGE as usize + 1],
        }
    }
}

impl Alignment {
    /// Errors up to this many ns are resolved to the nanosecond; larger ones count as beyond.
    pub const RANGE: u64 = 4096;

    /// Record one locked slot's error, ns.
    pub fn record(&mut self, e: i64) {
        if self.slots == 0 {
            (self.min, self.max) = (e, e);
        }
        self.slots += 1;
        self.min = self.min.min(e);
        self.max = self.max.max(e);
        self.hist[e.unsigned_abs().min(Self::RANGE) as usize] += 1;
    }

    /// The histogram a [`Run`] records into ([`Alignment::merge`] adds the rest).
    pub(crate) fn hist_mut(&mut self) -> &mut [u64] {
        &mut self.hist
    }

    /// Add a run recorded with [`Run::record`] into [`Alignment::hist_mut`].
    pub(crate) fn merge(&mut self, run: &Run) {
        self.acquiring_slots += run.acquiring;
        if let Some(slots) = run.acquired {
            self.acquired(slots);
        }
        if run.n == 0 {
            return;
        }
        if self.slots == 0 {
            (self.min, self.max) = (run.lo, run.hi);
        }
        self.slots += run.n;
        self.min = self.min.min(run.lo);
        self.max = self.max.max(run.hi);
    }

    /// Record `n` locked slots, `late` of them with error 1 ns and the rest 0 (as many [`Alignment::record`]s).
    #[inline]
    pub(crate) fn record_bits(&mut self, n: u64, late: u64) {
        if n == 0 {
            return;
        }
        let (lo, hi) = (i64::from(late == n), i64::from(late > 0));
        if self.slots == 0 {
            (self.min, self.max) = (lo, hi);
        }
        self.slots += n;
        self.min = self.min.min(lo);
        self.max = self.max.max(hi);
        self.hist[0] += n - late;
        self.hist[1] += late;
    }

    /// An acquisition finished after `slots` slots.
    pub fn acquired(&mut self, slots: u64) {
        self.acquisitions += 1;
        self.acquire_max_slots = self.acquire_max_slots.max(slots);
    }

    /// The quantile at `permille`/1000 of the error's magnitude, ns (`RANGE` means "at least"); `None` before
    /// any slot.
    pub fn quantile_abs(&self, permille: u32) -> Option<u64> {
        if self.slots == 0 {
            return None;
        }
        let p = u128::from(permille.min(1000));
        let rank = ((u128::from(self.slots) * p).div_ceil(1000) as u64).clamp(1, self.slots);
        let mut seen = 0;
        for (ns, n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(ns as u64);
            }
        }
        Some(Self::RANGE)
    }

    /// Largest magnitude, ns.
    pub fn max_abs(&self) -> u64 {
        self.min.unsigned_abs().max(self.max.unsigned_abs())
    }

    /// One line: `p50 … p99 … max … (n slots; acquisitions …)`.
    pub fn summary(&self) -> alloc::string::String {
        use core::fmt::Write;
        let mut s = alloc::string::String::new();
        match (self.quantile_abs(500), self.quantile_abs(990)) {
            (Some(p50), Some(p99)) => {
                let _ = write!(
                    s,
                    "|error| p50 {p50} ns, p99 {p99} ns, max {} ns (range {}…{} ns) over {} slots",
                    self.max_abs(),
                    self.min,
                    self.max,
                    self.slots
                );
            }
            _ => s.push_str("no slot measured yet"),
        }
        let _ = write!(
            s,
            "; {} acquisitions, longest {} slots; {} spacers, {} skips",
            self.acquisitions, self.acquire_max_slots, self.spacers, self.skips
        );
        s
    }
}

/// A run of slots recorded apart ([`Alignment::merge`]): what [`Alignment::record`] and its neighbours do for each,
/// with the count, extremes and acquisition kept in registers and the histogram passed in.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Run {
    n: u64,
    lo: i64,
    hi: i64,
    /// Slots posted while acquiring.
    pub(crate) acquiring: u64,
    /// An acquisition that finished after this many slots.
    pub(crate) acquired: Option<u64>,
}

impl Run {
    /// Record one locked slot's error, ns, into `hist` ([`Alignment::hist_mut`]).
    #[inline]
    pub(crate) fn record(&mut self, hist: &mut [u64], e: i64) {
        if self.n == 0 {
            (self.lo, self.hi) = (e, e);
        }
        self.n += 1;
        self.lo = self.lo.min(e);
        self.hi = self.hi.max(e);
        let i = e.unsigned_abs().min(Alignment::RANGE) as usize;
        if let Some(h) = hist.get_mut(i) {
            *h += 1;
        }
    }

    /// Record `count` locked slots with error `e`, ns (as many [`Run::record`]s).
    pub(crate) fn record_many(&mut self, hist: &mut [u64], e: i64, count: u64) {
        if count == 0 {
            return;
        }
        if self.n == 0 {
            (self.lo, self.hi) = (e, e);
        }
        self.n += count;
        self.lo = self.lo.min(e);
        self.hi = self.hi.max(e);
        let i = e.unsigned_abs().min(Alignment::RANGE) as usize;
        if let Some(h) = hist.get_mut(i) {
            *h += count;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_histogram() {
        let mut a = Alignment::default();
        assert_eq!(a.quantile_abs(500), None);
        for e in [0, 1, -2, 3, 8, 0, 0, 0, 0, -9000] {
            a.record(e);
        }
        assert_eq!(a.slots, 10);
        assert_eq!(a.quantile_abs(500), Some(0));
        assert_eq!(a.quantile_abs(800), Some(3));
        assert_eq!(a.quantile_abs(900), Some(8));
        assert_eq!(a.quantile_abs(1000), Some(Alignment::RANGE));
        assert_eq!((a.min, a.max, a.max_abs()), (-9000, 8, 9000));
    }
}
