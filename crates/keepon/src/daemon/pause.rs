//! How long the poll loop sleeps: as long as the posted lead allows, not one fixed period.
//!
//! Each wake-up of a `SCHED_FIFO` thread costs the host several microseconds of kernel time (measured on the
//! development VM: an idle daemon woken every 20 µs took half a core, all of it in the sleep/wake cycle, not in
//! keepon's code). The NIC needs a poll only before the slots already posted run out, so after its poll the loop
//! sleeps half of the lead, but at most four poll periods (the margin the configuration chose, `lead −
//! poll_period`, shrinks at most to the larger of half the lead and `lead − 4·poll_period`), at most
//! [`MAX_PAUSE`], and never so long that less than [`MIN_MARGIN`] of lead is left when it wakes; and it wakes at
//! once when a client writes (epoll), so a request waits at most one `poll_period`, not the pause.
//!
//! **Opt-in** (`[daemon] idle_pause = true`): on the development VM it costs precision. The margin floor is
//! measured, not guessed: with Example 2's lead (8 slots of 10 µs = 80 µs) a pause of 40 µs
//! cut the idle daemon's CPU from 36–46 % to 29–34 % of a core but raised its underruns from 64–105 to 47–902 per
//! 4 s on the development VM (`cargo bench -p keepon --bench daemon_cost`, docs/measured.md): a `SCHED_FIFO` thread's
//! wake-up there is late by tens of µs often enough. So a short lead keeps the configured period, and the pause
//! applies where the lead leaves room (a larger `ring.batch`). Even there, with batch 16 (a 160 µs lead, pauses of
//! 60 µs) the idle daemon used 22–27 % of a core instead of 33–46 %, but underran 335–640 times per 4 s instead of
//! 1–24: this VM wakes a `SCHED_FIFO` thread late by more than 100 µs often enough that fewer wake-ups mean more
//! underruns. Precision is keepon's point, so the fixed period stays the default; a host with a tighter wake-up
//! (an isolated core, `nohz_full`) can turn the pause on and measure it with `bench daemon_cost`.
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

/// Least lead left when a pause ends.
pub const MIN_MARGIN: Nanos = Nanos::from_us(100);

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
/// [`MAX_PAUSE`], leaving [`MIN_MARGIN`], less the period; `None` when there is nothing to gain.
pub fn extra(lead: Nanos, poll_period: Nanos) -> Option<Nanos> {
    let pause = (lead.0 / 2).min(poll_period.0.saturating_mul(4)).min(MAX_PAUSE.0).min(lead.0 - MIN_MARGIN.0);
    (pause > poll_period.0).then(|| Nanos(pause - poll_period.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_lead_within_the_bounds() {
        let p = Nanos::from_us(20);
        assert_eq!(extra(Nanos::from_us(80), p), None, "example 2: its lead leaves no room beyond the period");
        assert_eq!(extra(Nanos::from_us(320), p), Some(Nanos::from_us(60)), "batch 32: 80 µs between polls");
        assert_eq!(extra(Nanos::from_us(140), p), Some(Nanos::from_us(20)), "the margin left");
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
