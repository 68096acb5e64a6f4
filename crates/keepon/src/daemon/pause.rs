//! How long the poll loop sleeps: as long as the posted lead allows, not one fixed period.
//!
//! Each wake-up of a `SCHED_FIFO` thread costs the host several microseconds of kernel time (measured on the
//! development VM: an idle daemon woken every 20 µs took half a core, all of it in the sleep/wake cycle, not in
//! keepon's code). The NIC needs a poll only before the slots already posted run out, so after its poll the loop
//! sleeps half of the lead, but at most four poll periods (the margin the configuration chose, `lead −
//! poll_period`, shrinks at most to the larger of half the lead and `lead − 4·poll_period`) and at most
//! [`MAX_PAUSE`]; and it wakes at once when a client writes (epoll), so a request waits at most one `poll_period`,
//! not the pause.
//!
//! Host-paced links (veth, `--pacing host`) keep the fixed period: there the poll loop itself releases each
//! frame at its time. So does the dual clock (it counts the master's frames as they arrive), and a stopping
//! daemon.
//!
//! ```text
//!   poll ─┬─ posted lead L (batch·δ after a poll) ─────────────────────────┐
//!         │◄── poll_period ──►│◄─ extra: up to L/2 − poll_period, or a client writes ─►│ next poll
//! ```

use keepon_core::time::{Nanos, Tai};

/// Longest pause between polls (bounds the latency of what has no epoll event: PTP timers, the metrics file).
pub const MAX_PAUSE: Nanos = Nanos::from_ms(1);

/// Wake-ups of the poll loop, counted per second for `keepon status` and the metrics.
#[derive(Debug, Default)]
pub struct Wakeups {
    count: u64,
    since: Option<Tai>,
    /// Wake-ups in the last whole second counted.
    pub per_s: u64,
}

impl Wakeups {
    /// One more wake-up at host time `now`.
    pub fn tick(&mut self, now: Tai) {
        self.count += 1;
        let since = *self.since.get_or_insert(now);
        let span = now - since;
        if span.0 >= 1_000_000_000 {
            self.per_s = (u128::from(self.count) * 1_000_000_000 / span.0 as u128) as u64;
            self.count = 0;
            self.since = Some(now);
        }
    }
}

/// The pause beyond `poll_period` the loop may take now: half the posted lead `lead`, at most four periods and
/// [`MAX_PAUSE`], less the period; `None` when there is nothing to gain.
pub fn extra(lead: Nanos, poll_period: Nanos) -> Option<Nanos> {
    let pause = (lead.0 / 2).min(poll_period.0.saturating_mul(4)).min(MAX_PAUSE.0);
    (pause > poll_period.0).then(|| Nanos(pause - poll_period.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_lead_within_the_bounds() {
        let p = Nanos::from_us(20);
        assert_eq!(extra(Nanos::from_us(80), p), Some(Nanos::from_us(20)), "example 2: 40 µs between polls");
        assert_eq!(extra(Nanos::from_us(40), p), None, "nothing beyond the period");
        assert_eq!(extra(Nanos(-5), p), None, "an underrun: poll at once");
        assert_eq!(extra(Nanos::from_us(800), p), Some(Nanos::from_us(60)), "four periods");
        assert_eq!(extra(Nanos::from_ms(10), Nanos::from_us(500)), Some(MAX_PAUSE - Nanos::from_us(500)));
    }

    #[test]
    fn wakeups_are_counted_per_second() {
        let mut w = Wakeups::default();
        for k in 0..=25_000 {
            w.tick(Tai(k * 40_000));
        }
        assert!((24_999..=25_001).contains(&w.per_s), "{}", w.per_s);
    }
}
