//! What `keepon run` prints at the end, accumulated record by record as the run writes them (constant memory per
//! flow, whatever the run's length).
//!
//! For real-time frames it reports what a user of a schedule needs: how many left **in the slot that holds their
//! txtime** (deviation 0: the slot's start, at or before the txtime, less than a slot earlier), and the
//! distribution of the deviation `tx − scheduled slot start` — with the frames beyond the tolerance
//! (`run.tolerance`, default half a slot) counted apart: they are the frames an underrun or the relaxed policy
//! moved off their schedule slot.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::config::Config;
use crate::record::Record;

/// Running statistics of integer nanosecond values: count, min, max, sum (exact, i128).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Running {
    /// Samples.
    pub n: u64,
    /// Minimum.
    pub min: i64,
    /// Maximum.
    pub max: i64,
    /// Sum.
    pub sum: i128,
}

impl Running {
    /// Add a sample.
    pub fn add(&mut self, v: i64) {
        if self.n == 0 {
            self.min = v;
            self.max = v;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += i128::from(v);
        self.n += 1;
    }

    /// The mean, if any samples.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }
}

/// Per-flow counters.
#[derive(Clone, Debug, Default)]
pub struct FlowSummary {
    /// Class name.
    pub class: String,
    /// Frames recorded.
    pub frames: u64,
    /// Frames sent.
    pub sent: u64,
    /// Rejections by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Gaps between consecutive received (or, without a receiver, sent) frames, in the order they were recorded.
    pub inter_arrival: Running,
    last_rx: Option<i64>,
}

/// Deviation bins of sent real-time frames, relative to the slot period δ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviationBins {
    /// Left before their schedule slot's start (never expected; counted to show it).
    pub early: u64,
    /// Exactly at the schedule slot's start: in the slot that holds their txtime.
    pub in_slot: u64,
    /// Later, within half a slot.
    pub within_half: u64,
    /// Later than half a slot, within one slot.
    pub within_slot: u64,
    /// More than a slot late.
    pub beyond_slot: u64,
}

/// The whole run's summary.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Per flow, by name.
    pub flows: BTreeMap<String, FlowSummary>,
    /// Sent frames whose reported wire time is exactly their EPHC slot time.
    pub exact_ephc: u64,
    /// Sent frames.
    pub sent: u64,
    /// Sent real-time frames.
    pub sent_rt: u64,
    /// Deviation `tx − scheduled` of sent real-time frames.
    pub deviation: Running,
    /// Deviation bins.
    pub bins: DeviationBins,
    /// Sent real-time frames beyond the tolerance.
    pub off_schedule: u64,
    /// Host-paced links: `released − slot time` of sent frames (the host's release lag).
    pub release_lag: Running,
    /// Of these, released later than the ring's lead (batch·δ) after their slot time: the host fell behind by more
    /// than the ring keeps (a stall).
    pub released_late: u64,
    /// batch·δ, ns.
    lead: i64,
    /// Slot period δ in whole ns (floored), for the bins.
    delta: i64,
    /// One byte time in whole ns (rounded up): a slot starts within this of its schedule time once the grid is
    /// locked, so a deviation below it counts as "in the slot".
    byte: i64,
    /// The byte clock (`link.timing = "bytes"`): deviations are from the txtime itself.
    bytes: bool,
}

impl Summary {
    /// An empty summary for this configuration's flows.
    pub fn new(cfg: &Config) -> Summary {
        let flows = cfg
            .flows
            .iter()
            .map(|f| (f.name.clone(), FlowSummary { class: f.class_name.clone(), ..FlowSummary::default() }))
            .collect();
        Summary {
            flows,
            exact_ephc: 0,
            sent: 0,
            sent_rt: 0,
            deviation: Running::default(),
            bins: DeviationBins::default(),
            off_schedule: 0,
            release_lag: Running::default(),
            released_late: 0,
            lead: i64::try_from(cfg.lead()).unwrap_or(i64::MAX),
            delta: i64::try_from(cfg.geometry.period().floor_mul(1)).unwrap_or(i64::MAX),
            byte: i64::try_from(cfg.geometry.rate().byte_time().ceil_mul(1)).unwrap_or(1),
            bytes: cfg.timing == crate::config::WireTiming::Bytes,
        }
    }

    /// Count one final record.
    pub fn add(&mut self, r: &Record) {
        let f = self.flows.entry(r.flow.clone()).or_default();
        f.frames += 1;
        if !r.sent() {
            *f.rejected.entry(r.reason.clone()).or_default() += 1;
            return;
        }
        f.sent += 1;
        if let Some(t) = r.rx_ns.or(r.tx_ns) {
            if let Some(prev) = f.last_rx {
                f.inter_arrival.add(t.saturating_sub(prev));
            }
            f.last_rx = Some(t);
        }
        self.sent += 1;
        self.exact_ephc += u64::from(r.tx_ns.is_some() && r.tx_ns == r.ephc_ns);
        if let Some(lag) = r.released_ns.zip(r.ephc_ns).and_then(|(rel, slot)| rel.checked_sub(slot)) {
            self.release_lag.add(lag);
            self.released_late += u64::from(lag > self.lead);
        }
        if let Some(d) = r.deviation() {
            self.sent_rt += 1;
            self.deviation.add(d);
            let b = &mut self.bins;
            match d {
                // The byte clock puts a frame on the byte nearest its txtime: up to half a byte before it.
                d if self.bytes && d.abs() < self.byte => b.in_slot += 1,
                d if d < 0 => b.early += 1,
                d if d < self.byte => b.in_slot += 1,
                d if d <= self.delta / 2 => b.within_half += 1,
                d if d <= self.delta => b.within_slot += 1,
                _ => b.beyond_slot += 1,
            }
            self.off_schedule += u64::from(r.off_schedule == Some(true));
        }
    }

    /// Host-paced links: how late the host released the sent frames, as printed (`None` where the NIC paces).
    pub fn render_release(&self) -> Option<String> {
        let l = &self.release_lag;
        let mean = l.mean()?;
        Some(format!(
            "release: {} sent frames handed to the kernel {:.1} µs after their slot time on average (min {:.1}, \
             max {:.1} µs); {} later than the ring's lead ({:.1} µs: host stalls; see `released_ns`)\n",
            l.n,
            mean / 1e3,
            l.min as f64 / 1e3,
            l.max as f64 / 1e3,
            self.released_late,
            self.lead as f64 / 1e3
        ))
    }

    /// The real-time part of the summary, as printed.
    pub fn render_schedule(&self, tolerance_ns: i64) -> String {
        let mut s = String::new();
        let b = &self.bins;
        let (at, from) = if self.bytes {
            ("on the byte of their txtime", "txtime")
        } else {
            ("at the start of the slot that holds their txtime", "scheduled slot start")
        };
        let _ = writeln!(
            s,
            "schedule: {}/{} real-time frames {at} (within a byte, {} ns); {} beyond the tolerance (±{} ns)",
            b.in_slot, self.sent_rt, self.byte, self.off_schedule, tolerance_ns
        );
        if let Some(mean) = self.deviation.mean() {
            let _ = writeln!(
                s,
                "  deviation tx − {from}: min {} ns, max {} ns, mean {:.1} ns · early {} · < a byte: {} · \
                 ≤ δ/2: {} · ≤ δ: {} · > δ: {}",
                self.deviation.min,
                self.deviation.max,
                mean,
                b.early,
                b.in_slot,
                b.within_half,
                b.within_slot,
                b.beyond_slot
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Host-paced release lags are summed up, and the frames released later than the ring's lead (host stalls)
    /// are counted; a run whose NIC paces prints no release line.
    #[test]
    fn release_lags_are_summarised_and_stalls_counted() {
        let cfg = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/example2.toml")).unwrap();
        let (flow, class) = (&cfg.flows[0].name, &cfg.flows[0].class_name);
        let mut s = Summary::new(&cfg);
        let mut paced = Record::new(0, flow, class, None);
        paced.sent_at(10, 0, 1_000_000);
        s.add(&paced);
        assert_eq!(s.render_release(), None);
        let lead = s.lead;
        for (i, lag) in [s.delta / 2, lead, 500 * lead].into_iter().enumerate() {
            let mut r = Record::new(i as u64 + 1, flow, class, None);
            r.sent_at(11 + i as u64, 0, 2_000_000);
            r.released_ns = Some(2_000_000 + lag);
            s.add(&r);
        }
        assert_eq!((s.release_lag.n, s.release_lag.max, s.released_late), (3, 500 * lead, 1));
        let line = s.render_release().unwrap();
        assert!(line.contains("3 sent frames") && line.contains("; 1 later than the ring's lead"), "{line}");
    }
}
