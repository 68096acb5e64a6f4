//! The link partner as IEEE 802.1AS sees it: the neighbour rate ratio, the neighbour propagation delay and
//! `asCapable`, from this port's own Pdelay_Req exchanges. Sans-IO: the port hands in each Pdelay_Req's exact TX
//! time and each Pdelay_Resp / Pdelay_Resp_Follow_Up with its RX time.
//!
//! One exchange (802.1AS §11.1.2): `t1` our Pdelay_Req leaves, `t2` the peer receives it (Pdelay_Resp's
//! requestReceiptTimestamp), `t3` the peer's Pdelay_Resp leaves (Pdelay_Resp_Follow_Up's
//! responseOriginTimestamp, plus its correction), `t4` it arrives here (less the Pdelay_Resp's correction).
//!
//! ```text
//!   neighborRateRatio r = (t3ₙ − t3₀) / (t4ₙ − t4₀)       over the last RATE_WINDOW complete exchanges
//!   neighborPropDelay D = (r·(t4 − t1) − (t3 − t2)) / 2    per exchange; the median of the last WINDOW is judged
//!   asCapable          ⇔ a complete exchange, D ≤ threshold, at most ALLOWED_LOST requests unanswered in a row
//! ```
//!
//! statime measures the peer delay too (for its servo), without the rate ratio and without a verdict; this is
//! the profile's own bookkeeping, kept beside it so statime stays unmodified. 802.1AS also drops asCapable when
//! responses come from several ports: statime already marks the port faulty then.

use std::collections::VecDeque;

use keepon_core::time::{Nanos, Tai};

/// Pdelay_Req in a row that may go unanswered before the port stops being asCapable (802.1AS
/// `allowedLostResponses`, default 3).
pub const ALLOWED_LOST: u32 = 3;
/// Complete exchanges the judged delay spans (their median).
pub const WINDOW: usize = 8;
/// Complete exchanges the rate ratio spans: software stamps err by microseconds, so the ratio needs seconds of
/// baseline (64 exchanges: 8 s at 8 Hz, a minute at the 802.1AS default of 1 Hz; fewer at start).
pub const RATE_WINDOW: usize = 64;

/// One complete exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exchange {
    t1: Tai,
    t2: Tai,
    t3: Tai,
    t4: Tai,
}

/// The exchange in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pending {
    seq: u16,
    t1: Option<Tai>,
    t2: Option<Tai>,
    t3: Option<Tai>,
    t4: Option<Tai>,
}

/// What is known of the neighbour now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NeighborStatus {
    /// asCapable (forced true by the automotive profile).
    pub as_capable: bool,
    /// The judged neighbour propagation delay (median of the window), if measured.
    pub delay: Option<Nanos>,
    /// The neighbour rate ratio (its frequency over ours), once two exchanges span time.
    pub rate_ratio: Option<f64>,
    /// Complete exchanges so far.
    pub exchanges: u64,
    /// Pdelay_Req unanswered in a row now.
    pub lost_in_a_row: u32,
    /// The delay threshold asCapable is judged against.
    pub threshold: Nanos,
}

/// The neighbour's bookkeeping (see the module docs).
#[derive(Clone, Debug)]
pub struct Neighbor {
    threshold: Nanos,
    forced: bool,
    pending: Option<Pending>,
    done: VecDeque<Exchange>,
    delays: VecDeque<i64>,
    exchanges: u64,
    lost: u32,
}

impl Neighbor {
    /// Judged against `threshold`; `forced`: asCapable is always true (the automotive profile).
    pub fn new(threshold: Nanos, forced: bool) -> Neighbor {
        Neighbor {
            threshold,
            forced,
            pending: None,
            done: VecDeque::new(),
            delays: VecDeque::new(),
            exchanges: 0,
            lost: 0,
        }
    }

    /// The clock `t1` and `t4` are read on was stepped, or its frequency changed by more than the ratio may be
    /// off: the exchange in flight (it straddles the change) is forgotten, and the rate ratio starts over from the
    /// next exchange. (802.1AS measures the ratio on a free-running clock; keepon reads its exchanges on the EPHC
    /// the servo steers, so after lock the ratio is the neighbour's over network time.)
    pub fn on_clock_change(&mut self) {
        self.pending = None;
        self.done.clear();
    }

    /// Our Pdelay_Req `seq` left at `t1`. An exchange still incomplete counts as lost.
    pub fn on_request_sent(&mut self, seq: u16, t1: Tai) {
        if self.pending.is_some_and(|p| p.seq != seq) {
            self.lost = self.lost.saturating_add(1);
        }
        self.pending = Some(Pending { seq, t1: Some(t1), ..Pending::default() });
    }

    /// The Pdelay_Resp to our request `seq` arrived at `t4`, saying the peer received the request at `t2`.
    pub fn on_response(&mut self, seq: u16, t2: Tai, t4: Tai) {
        if let Some(p) = self.pending.as_mut().filter(|p| p.seq == seq) {
            p.t2 = Some(t2);
            p.t4 = Some(t4);
        }
        self.complete();
    }

    /// The Pdelay_Resp_Follow_Up to our request `seq`: the response left the peer at `t3`.
    pub fn on_response_follow_up(&mut self, seq: u16, t3: Tai) {
        if let Some(p) = self.pending.as_mut().filter(|p| p.seq == seq) {
            p.t3 = Some(t3);
        }
        self.complete();
    }

    fn complete(&mut self) {
        let Some(Pending { t1: Some(t1), t2: Some(t2), t3: Some(t3), t4: Some(t4), .. }) = self.pending else {
            return;
        };
        self.pending = None;
        self.lost = 0;
        self.exchanges += 1;
        if self.done.len() == RATE_WINDOW {
            self.done.pop_front();
        }
        self.done.push_back(Exchange { t1, t2, t3, t4 });
        let r = self.rate_ratio().unwrap_or(1.0);
        // The turnaround is microseconds to milliseconds: r·(t4 − t1) in f64 keeps sub-ns precision.
        let d = (r * (t4 - t1).0 as f64 - (t3 - t2).0 as f64) / 2.0;
        if self.delays.len() == WINDOW {
            self.delays.pop_front();
        }
        self.delays.push_back(d.round() as i64);
    }

    /// The neighbour rate ratio over the window.
    fn rate_ratio(&self) -> Option<f64> {
        let (a, b) = (self.done.front()?, self.done.back()?);
        let ours = (b.t4 - a.t4).0;
        (ours > 0).then(|| (b.t3 - a.t3).0 as f64 / ours as f64)
    }

    /// The median delay of the window.
    fn delay(&self) -> Option<Nanos> {
        let mut d: Vec<i64> = self.delays.iter().copied().collect();
        d.sort_unstable();
        d.get(d.len() / 2).copied().map(Nanos)
    }

    /// asCapable now.
    pub fn as_capable(&self) -> bool {
        self.forced || (self.lost <= ALLOWED_LOST && self.delay().is_some_and(|d| d <= self.threshold))
    }

    /// Everything known now.
    pub fn status(&self) -> NeighborStatus {
        NeighborStatus {
            as_capable: self.as_capable(),
            delay: self.delay(),
            rate_ratio: self.rate_ratio(),
            exchanges: self.exchanges,
            lost_in_a_row: self.lost,
            threshold: self.threshold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer whose clock runs `ppm` fast and `offset` ahead, `delay` away, turning requests around in 50 µs:
    /// exchange `n` at our time `n` s.
    fn exchange(nb: &mut Neighbor, n: u16, delay: i64, ppm: f64, offset: i64) {
        let theirs = |ours: i64| Tai(offset + ours + (ours as f64 * ppm * 1e-6).round() as i64);
        let t1 = i64::from(n) * 1_000_000_000;
        let t2 = t1 + delay;
        let t3 = t2 + 50_000;
        let t4 = t3 + delay;
        nb.on_request_sent(n, Tai(t1));
        nb.on_response(n, theirs(t2), Tai(t4));
        nb.on_response_follow_up(n, theirs(t3));
    }

    #[test]
    fn rate_ratio_and_delay_of_a_drifting_peer() {
        let mut nb = Neighbor::new(Nanos(800), false);
        assert!(!nb.as_capable(), "nothing measured yet");
        for n in 1..=10 {
            exchange(&mut nb, n, 500, 100.0, 3_000_000);
        }
        let s = nb.status();
        assert!((s.rate_ratio.unwrap() - 1.000_1).abs() < 1e-9, "{s:?}");
        // Without the rate ratio, 50 µs of turnaround at 100 ppm would add 2.5 ns; with it, within rounding.
        assert!((s.delay.unwrap().0 - 500).abs() <= 1, "{s:?}");
        assert!(s.as_capable);
        assert_eq!((s.exchanges, s.lost_in_a_row), (10, 0));
    }

    #[test]
    fn too_far_or_silent_is_not_as_capable() {
        let mut nb = Neighbor::new(Nanos(800), false);
        for n in 1..=8 {
            exchange(&mut nb, n, 900, 0.0, 0);
        }
        assert!(!nb.as_capable(), "900 ns > 800 ns");
        let mut nb = Neighbor::new(Nanos(1_000), false);
        for n in 1..=8 {
            exchange(&mut nb, n, 900, 0.0, 0);
        }
        assert!(nb.as_capable(), "the threshold is configurable");
        // Requests nobody answers: capable while at most ALLOWED_LOST go unanswered in a row.
        for n in 9..9 + ALLOWED_LOST as u16 + 1 {
            nb.on_request_sent(n, Tai(i64::from(n) * 1_000_000_000));
        }
        assert_eq!(nb.status().lost_in_a_row, ALLOWED_LOST);
        assert!(nb.as_capable());
        nb.on_request_sent(100, Tai(100_000_000_000));
        assert!(!nb.as_capable(), "{:?}", nb.status());
        // One answered exchange restores it.
        exchange(&mut nb, 101, 900, 0.0, 0);
        assert!(nb.as_capable());
        // A response to another request, or a follow-up alone, completes nothing.
        nb.on_request_sent(102, Tai(102_000_000_000));
        nb.on_response(7, Tai(0), Tai(102_000_001_000));
        nb.on_response_follow_up(102, Tai(1));
        assert_eq!(nb.status().exchanges, 9);
    }

    #[test]
    fn a_clock_change_restarts_the_rate_ratio() {
        let mut nb = Neighbor::new(Nanos(800), false);
        for n in 1..=5 {
            exchange(&mut nb, n, 500, 50.0, 0);
        }
        assert!((nb.status().rate_ratio.unwrap() - 1.000_05).abs() < 1e-9);
        nb.on_request_sent(6, Tai(6_000_000_000));
        nb.on_clock_change();
        assert_eq!(nb.status().rate_ratio, None, "one exchange since: no ratio yet");
        nb.on_response(6, Tai(0), Tai(6_000_001_000));
        assert_eq!(nb.status().exchanges, 5, "the exchange across the change is forgotten");
        for n in 7..=9 {
            exchange(&mut nb, n, 500, 0.0, 0);
        }
        assert_eq!(nb.status().rate_ratio, Some(1.0));
        assert_eq!(nb.status().lost_in_a_row, 0);
    }

    #[test]
    fn forced_is_always_capable() {
        let nb = Neighbor::new(Nanos(800), true);
        assert!(nb.as_capable());
        assert_eq!(nb.status().delay, None);
    }
}
