//! Where the poll loop's time goes: each iteration's busy time (from waking to going back to sleep), split by
//! phase, the longest since start and since the last report, and how many iterations were busy longer than the
//! posted lead (`batch·δ`: how long the loop may be away before the ring runs dry).
//!
//! An underrun means the loop came back too late; this says why. On the development VM, for example, a
//! debug-built daemon spent 0.4–6 ms of an iteration in its PTP phase (unoptimised servo arithmetic), and an
//! optimised one up to 2.6 ms in the station phase on veth, where the kernel forwards each frame through the
//! bridge inside the send call: both longer than the 800 µs lead of 8 slots of 100 µs.
//!
//! ```text
//!   wake ─ clients (accept) ─ ptp ─ requests (read, answer, metrics) ─ station (poll, post, outcomes) ─ clients
//!   (write) ─ sleep
//! ```
//!
//! Times are the caller's (nanoseconds of a monotonic host clock, [`LoopClock`]), so the accounting is tested
//! without a clock.

use std::time::Instant;

use keepon_core::time::Nanos;

/// A phase of one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepting connections and writing replies.
    Clients = 0,
    /// The PTP node: receive, servo, transmit.
    Ptp = 1,
    /// Reading and answering requests, schedule changes, metrics.
    Requests = 2,
    /// The station and the backend: observe, poll, post, outcomes.
    Station = 3,
}

/// Phase names, by [`Phase`] index (the metrics' `phase` label).
pub const PHASES: [&str; 4] = ["clients", "ptp", "requests", "station"];

/// One iteration's busy time and where it went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    /// From waking to going back to sleep.
    pub total: Nanos,
    /// By [`Phase`] index.
    pub phases: [Nanos; 4],
}

impl Busy {
    /// "2.6 ms (station 2.5 ms, ptp 80 µs)": the total and the phases that took at least a tenth of it, longest
    /// first.
    pub fn describe(&self) -> String {
        let mut parts: Vec<(Nanos, &str)> = self
            .phases
            .iter()
            .zip(PHASES)
            .filter(|(t, _)| t.0 > 0 && t.0 * 10 >= self.total.0)
            .map(|(t, n)| (*t, n))
            .collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.0));
        let parts: Vec<String> = parts.iter().map(|(t, n)| format!("{n} {}", span(*t))).collect();
        if parts.is_empty() {
            span(self.total)
        } else {
            format!("{} ({})", span(self.total), parts.join(", "))
        }
    }
}

/// A duration in the unit that reads best: ns below 1 µs, µs below 1 ms, ms above.
pub fn span(t: Nanos) -> String {
    match t.0 {
        n if n < 1_000 => format!("{n} ns"),
        n if n < 1_000_000 => format!("{} µs", n / 1_000),
        n => format!("{:.1} ms", n as f64 / 1e6),
    }
}

/// The loop's accounting (see the module doc).
#[derive(Debug)]
pub struct LoopTime {
    /// The posted lead: an iteration busy longer than this can let the link run dry.
    lead: Nanos,
    /// This iteration so far: when it began, when the last phase ended, and the phases.
    began: Option<i64>,
    mark: i64,
    current: [Nanos; 4],
    /// The longest iteration since start.
    pub longest: Busy,
    /// The longest since the last [`LoopTime::take_report`].
    since_report: Busy,
    /// Iterations busy longer than the lead.
    pub over_lead: u64,
}

impl LoopTime {
    /// Accounting for a loop whose posted lead is `lead`.
    pub fn new(lead: Nanos) -> LoopTime {
        LoopTime {
            lead,
            began: None,
            mark: 0,
            current: [Nanos(0); 4],
            longest: Busy::default(),
            since_report: Busy::default(),
            over_lead: 0,
        }
    }

    /// The posted lead the iterations are held to.
    pub fn lead(&self) -> Nanos {
        self.lead
    }

    /// The loop woke at `at` (ns): an iteration begins.
    pub fn begin(&mut self, at: i64) {
        self.began = Some(at);
        self.mark = at;
        self.current = [Nanos(0); 4];
    }

    /// A stretch of `phase` ended at `at`: the time since the last mark is its (a phase may have several).
    pub fn mark(&mut self, phase: Phase, at: i64) {
        if self.began.is_some() {
            self.current[phase as usize].0 += (at - self.mark).max(0);
            self.mark = at;
        }
    }

    /// The loop goes to sleep at `at`: the iteration ends (time since the last mark counts to no phase).
    pub fn end(&mut self, at: i64) {
        let Some(began) = self.began.take() else { return };
        let busy = Busy { total: Nanos((at - began).max(0)), phases: self.current };
        if busy.total > self.lead {
            self.over_lead += 1;
        }
        if busy.total > self.longest.total {
            self.longest = busy;
        }
        if busy.total > self.since_report.total {
            self.since_report = busy;
        }
    }

    /// The longest iteration since the last call (or since start), and start counting afresh.
    pub fn take_report(&mut self) -> Busy {
        std::mem::take(&mut self.since_report)
    }
}

/// The host's monotonic clock in ns since the loop started: what the poll loop marks its phases with (never the
/// NIC's clock, which is simulated time on the simulated NIC).
#[derive(Debug, Clone, Copy)]
pub struct LoopClock(Instant);

impl LoopClock {
    /// Counting from now.
    pub fn start() -> LoopClock {
        LoopClock(Instant::now())
    }

    /// Nanoseconds since [`LoopClock::start`].
    pub fn now(&self) -> i64 {
        i64::try_from(self.0.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three iterations against an 800 µs lead: phases add up (clients twice in one), the longest is kept with
    /// its breakdown, iterations over the lead are counted, and the report restarts after it is taken.
    #[test]
    fn the_longest_iteration_is_kept_with_its_phases() {
        let mut t = LoopTime::new(Nanos::from_us(800));
        let us = |n: i64| n * 1_000;
        // 1: 100 µs, spread over every phase.
        t.begin(0);
        t.mark(Phase::Clients, us(5));
        t.mark(Phase::Ptp, us(25));
        t.mark(Phase::Requests, us(40));
        t.mark(Phase::Station, us(90));
        t.mark(Phase::Clients, us(99));
        t.end(us(100));
        assert_eq!(t.longest.total, Nanos::from_us(100));
        assert_eq!(t.longest.phases, [Nanos::from_us(14), Nanos::from_us(20), Nanos::from_us(15), Nanos::from_us(50)]);
        assert_eq!(t.over_lead, 0);
        // 2: 2.6 ms, nearly all of it in the station phase (the backend's send on veth).
        t.begin(us(150));
        t.mark(Phase::Clients, us(151));
        t.mark(Phase::Ptp, us(231));
        t.mark(Phase::Requests, us(232));
        t.mark(Phase::Station, us(2_750));
        t.end(us(2_750));
        assert_eq!(t.over_lead, 1, "2.6 ms > 800 µs");
        assert_eq!(t.longest.total, Nanos::from_us(2_600));
        assert_eq!(t.longest.describe(), "2.6 ms (station 2.5 ms)");
        let r = t.take_report();
        assert_eq!(r, t.longest);
        // 3: 900 µs: over the lead, not the longest; the next report has it.
        t.begin(us(3_000));
        t.mark(Phase::Ptp, us(3_900));
        t.end(us(3_900));
        assert_eq!(t.over_lead, 2);
        assert_eq!(t.longest.total, Nanos::from_us(2_600));
        assert_eq!(t.take_report().describe(), "900 µs (ptp 900 µs)");
        assert_eq!(t.take_report(), Busy::default(), "nothing since");
    }

    /// A mark or an end without a begin is ignored (the first iteration after start-up), and a clock that went
    /// backwards counts nothing rather than a negative time.
    #[test]
    fn marks_outside_an_iteration_count_nothing() {
        let mut t = LoopTime::new(Nanos::from_us(100));
        t.mark(Phase::Station, 1_000);
        t.end(2_000);
        assert_eq!(t.longest, Busy::default());
        t.begin(5_000);
        t.mark(Phase::Station, 4_000);
        t.end(4_500);
        assert_eq!(t.longest, Busy::default());
        assert_eq!(t.over_lead, 0);
    }

    #[test]
    fn spans_read_in_their_unit() {
        assert_eq!(span(Nanos(999)), "999 ns");
        assert_eq!(span(Nanos(80_500)), "80 µs");
        assert_eq!(span(Nanos(2_600_000)), "2.6 ms");
        let b = Busy { total: Nanos(500), phases: [Nanos(0); 4] };
        assert_eq!(b.describe(), "500 ns", "no phase worth naming");
    }
}
