//! What a request may cost the poll loop, per user: a rate limit on the requests that cost more than a small
//! reply, and refusals said on stderr at most once per user and kind per interval, with counts.
//!
//! A local user can send requests as fast as the socket takes them. Whatever the daemon does per request must
//! then be O(1) and small — a refused request is answered and counted, never written to stderr one line each
//! (1.1 M lines in 7 s cost root's real-time class most of its frames before this). The first refusal of a
//! kind from a uid is said at once; the ones after it within [`SAY_EVERY`] are counted and said in one line
//! when the interval ends.
//!
//! Users other than root and the daemon's own are held to rates by **not reading** their connection while their
//! rate is used up (the request waits in the daemon's buffer, the rest in the kernel's, and the client's writes
//! block): a flood costs the poll loop O(1) per connection per poll, however fast the client writes.
//!
//! | request | limit |
//! |---|---|
//! | `Submit` | as before: `requests_per_poll` (best-effort-only peers), `max_in_flight`, `max_queued` |
//! | `Info`, `Time`, `Subscribe`, `Schedule`, malformed | [`CONTROL_PER_S`] per second per user (burst as many) |
//! | `Stats` | one per connection per poll; [`EXPENSIVE_PER_S`] per second per user (burst as many) |
//! | `Schedule` | refused at once (and counted) for these users; for root one queued per connection, one applied per poll |

use std::collections::HashMap;

use keepon_core::time::{Nanos, Tai};

/// Rate of the costly requests (`Stats`) a user other than root and the daemon's own may make, per second; also
/// the burst.
pub const EXPENSIVE_PER_S: i64 = 20;

/// Rate of the other requests that are not frames (`Info`, `Time`, …) a user other than root and the daemon's
/// own may make, per second; also the burst.
pub const CONTROL_PER_S: i64 = 1000;

/// Which rate a request counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rate {
    /// `Stats`: [`EXPENSIVE_PER_S`].
    Expensive,
    /// Every other request but `Submit`: [`CONTROL_PER_S`].
    Control,
}

impl Rate {
    fn per_s(self) -> i64 {
        match self {
            Rate::Expensive => EXPENSIVE_PER_S,
            Rate::Control => CONTROL_PER_S,
        }
    }
}

/// A kind of refusal is said at most once per user per this interval.
pub const SAY_EVERY: Nanos = Nanos::from_ms(10_000);

/// Root or the daemon's own user: trusted with the schedule and not rate-limited.
pub fn privileged(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// One user's token bucket: `credit` ns (one request costs `1 s / rate`, the bucket holds one second's worth).
#[derive(Clone, Copy)]
struct Bucket {
    credit: i64,
    at: Tai,
}

/// What was refused of one kind from one user since it was last said.
struct Tally {
    /// Refusals not yet said.
    unsaid: u64,
    /// The first of them: why.
    why: String,
    /// Nothing of this kind is said for this user before this time.
    quiet_until: Tai,
}

/// The per-user rate limits and refusal tallies of one daemon.
#[derive(Default)]
pub struct Guard {
    buckets: HashMap<(u32, Rate), Bucket>,
    tallies: HashMap<(u32, &'static str), Tally>,
    /// Next time the tallies are looked at for lines due.
    next_look: Option<Tai>,
}

const BURST: i64 = 1_000_000_000;

impl Guard {
    /// May `uid` make one request counted against `rate` at `now`? (Privileged users always may.)
    pub fn allow(&mut self, uid: u32, rate: Rate, now: Tai) -> bool {
        if privileged(uid) {
            return true;
        }
        let cost = BURST / rate.per_s();
        let b = self.buckets.entry((uid, rate)).or_insert(Bucket { credit: BURST, at: now });
        let elapsed = (now - b.at).0.max(0);
        b.credit = b.credit.saturating_add(elapsed).min(BURST);
        b.at = now;
        if b.credit >= cost {
            b.credit -= cost;
            true
        } else {
            false
        }
    }

    /// Note one event (mostly a refusal) of kind `what` (e.g. "schedule changes refused") from `uid`: said at once if nothing of
    /// the kind was said for this user within [`SAY_EVERY`], else counted for one line later. O(1); `why` is
    /// formatted only when kept.
    pub fn note(&mut self, uid: u32, what: &'static str, why: impl FnOnce() -> String, now: Tai) {
        let t = self.tallies.entry((uid, what)).or_insert_with(|| Tally {
            unsaid: 0,
            why: String::new(),
            quiet_until: now,
        });
        if t.unsaid == 0 {
            t.why = why();
        }
        t.unsaid += 1;
        if now >= t.quiet_until {
            say(uid, what, t, now);
        }
        // Looked at again when its interval ends: to say what was counted, or to forget it.
        if self.next_look.is_none_or(|l| l > t.quiet_until) {
            self.next_look = Some(t.quiet_until);
        }
    }

    /// Say the tallies whose interval ended by `now` (call once per poll: costs nothing until one is due).
    pub fn tick(&mut self, now: Tai) {
        if self.next_look.is_none_or(|l| now < l) {
            return;
        }
        self.next_look = None;
        let mut next: Option<Tai> = None;
        self.tallies.retain(|&(uid, what), t| {
            if t.unsaid > 0 && now >= t.quiet_until {
                say(uid, what, t, now);
            }
            // Keep an entry while its quiet interval runs (a new refusal then waits for it).
            let keep = now < t.quiet_until;
            if keep {
                next = Some(next.map_or(t.quiet_until, |n| n.min(t.quiet_until)));
            }
            keep
        });
        self.next_look = next;
        // Buckets of users idle for a while are full again: forget them (bounded by the users seen meanwhile).
        self.buckets.retain(|_, b| (now - b.at).0 < BURST);
    }

    /// Say every tally not yet said (at shutdown).
    pub fn flush(&mut self, now: Tai) {
        for (&(uid, what), t) in &mut self.tallies {
            if t.unsaid > 0 {
                say(uid, what, t, now);
            }
        }
    }
}

fn say(uid: u32, what: &'static str, t: &mut Tally, now: Tai) {
    if t.unsaid == 1 {
        eprintln!("keepon daemon: uid {uid}: {what}: {}", t.why);
    } else {
        eprintln!(
            "keepon daemon: uid {uid}: {} {what} in the last {} s (the first: {}); said at most once per {} s",
            t.unsaid,
            SAY_EVERY.0 / 1_000_000_000,
            t.why,
            SAY_EVERY.0 / 1_000_000_000
        );
    }
    t.unsaid = 0;
    t.quiet_until = now + SAY_EVERY;
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOBODY: u32 = 65_534;

    #[test]
    fn unprivileged_users_get_the_rate_and_the_burst() {
        let mut g = Guard::default();
        let t = Tai(1_000_000_000_000);
        const COST: i64 = BURST / EXPENSIVE_PER_S;
        let allowed = (0..1000).filter(|_| g.allow(NOBODY, Rate::Expensive, t)).count();
        assert_eq!(allowed, EXPENSIVE_PER_S as usize, "the burst");
        assert!(!g.allow(NOBODY, Rate::Expensive, t + Nanos(COST - 1)));
        assert!(g.allow(NOBODY, Rate::Expensive, t + Nanos(2 * COST)), "one more per 1/rate");
        // Over 10 s of constant asking, about the rate.
        let mut n = 0;
        for k in 0..100_000 {
            n += usize::from(g.allow(NOBODY, Rate::Expensive, t + Nanos(2 * COST) + Nanos(k * 100_000)));
        }
        assert!((195..=201).contains(&n), "{n} in 10 s");
        // The other rate is its own.
        assert_eq!((0..5000).filter(|_| g.allow(NOBODY, Rate::Control, t)).count(), CONTROL_PER_S as usize);
        assert!((0..5000).all(|_| g.allow(0, Rate::Expensive, t)), "root is not limited");
    }

    #[test]
    fn refusals_are_counted_and_said_once_per_interval() {
        let mut g = Guard::default();
        let t = Tai(5_000_000_000);
        for k in 0..100_000 {
            g.note(NOBODY, "schedule changes refused", || format!("refusal {k}"), t + Nanos(k));
        }
        let tally = &g.tallies[&(NOBODY, "schedule changes refused")];
        assert_eq!(tally.unsaid, 99_999, "the first said at once, the rest counted");
        assert_eq!(tally.why, "refusal 1", "the first unsaid one's reason, formatted once");
        g.tick(t + Nanos(1_000_000)); // not due
        assert_eq!(g.tallies[&(NOBODY, "schedule changes refused")].unsaid, 99_999);
        g.tick(t + SAY_EVERY);
        assert_eq!(g.tallies[&(NOBODY, "schedule changes refused")].unsaid, 0);
        // Long after, the entry is gone.
        g.tick(t + SAY_EVERY + SAY_EVERY + Nanos(1));
        g.note(NOBODY, "x", String::new, t + Nanos(3 * SAY_EVERY.0));
        g.tick(t + Nanos(5 * SAY_EVERY.0));
        assert!(g.tallies.is_empty());
    }
}
