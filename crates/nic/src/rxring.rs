//! The dual clock's RX core on the simulator (paper §4.2, A.3 "Dual Clock Mode"): a second poll loop that drains
//! the receive ring a peer streaming at line rate fills, one frame per slot period, so that every one of the
//! peer's slots is counted.
//!
//! - **The ring** ([`RxRing`]): `size` descriptors; the peer's frame `i` is in memory once its last byte has
//!   arrived, at `start + (i+1)·δ` (exactly: the peer keeps nominal slots, and its oscillator is the reference
//!   here). A frame arriving to a full ring is dropped by the NIC and counted (DPDK's `imissed`): the count-based
//!   RX clock then loses it for good, unless the driver reads that counter (keepon's daemon does, from
//!   `PACKET_STATISTICS`).
//! - **The loop** ([`run`]): each iteration takes at most `batch` frames (an `rx_burst` of `batch`), costs
//!   `poll_overhead + per_slot·frames` of the [`HostModel`], and sleeps `poll_period` (0 = busy poll) with the
//!   model's overshoot — the same model, and the same draws, as the station's TX loop on [`crate::sim::SimNic`].
//!   The CPU time is the work, or everything while it busy-polls: what `mpstat` shows for an isolated core.
//! - **A stall** (optional): the core loses `len` once, at `at` after the start (a preemption the isolated core
//!   should not see, or an SMI). The ring must hold the frames that arrive meanwhile.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use keepon_core::time::{Nanos, SlotPeriod, Tai};

use crate::sim::HostModel;

/// A receive ring a line-rate peer fills.
#[derive(Clone, Debug)]
pub struct RxRing {
    period: SlotPeriod,
    start: Tai,
    size: u64,
    /// Arrivals accounted so far (held, taken or dropped).
    seen: u64,
    held: u64,
    taken: u64,
    dropped: u64,
}

impl RxRing {
    /// An empty ring of `size` descriptors; the peer's first frame is in at `start + δ`.
    pub fn new(period: SlotPeriod, start: Tai, size: u32) -> RxRing {
        RxRing { period, start, size: u64::from(size.max(1)), seen: 0, held: 0, taken: 0, dropped: 0 }
    }

    /// Account the arrivals up to `now`: the ring fills, and what does not fit is dropped.
    fn arrive(&mut self, now: Tai) {
        let arrived = self.period.slots_in(now - self.start);
        let new = arrived.saturating_sub(self.seen);
        self.seen = self.seen.max(arrived);
        let fit = new.min(self.size - self.held);
        self.held += fit;
        self.dropped += new - fit;
    }

    /// An `rx_burst` at `now`: up to `max` frames, oldest first; how many.
    pub fn burst(&mut self, now: Tai, max: u32) -> u64 {
        self.arrive(now);
        let n = self.held.min(u64::from(max));
        self.held -= n;
        self.taken += n;
        n
    }

    /// Frames taken by the loop.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Frames the NIC dropped for want of a free descriptor.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Frames in the ring, not yet taken.
    pub fn held(&self) -> u64 {
        self.held
    }
}

/// How the RX core is run: see the module docs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RxCore {
    /// The host's costs and sleep shape (`per_slot` is the cost per frame taken).
    pub host: HostModel,
    /// Frames per `rx_burst`.
    pub batch: u32,
    /// Sleep per iteration (0 = busy poll).
    pub poll_period: Nanos,
    /// Descriptors in the ring.
    pub ring: u32,
    /// One stall of the core: `(at, len)` after the start.
    pub stall: Option<(Nanos, Nanos)>,
    /// Seed of the host model's draws (jitter, spikes; none at their defaults).
    pub seed: u64,
}

/// What a run of the RX core did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxRun {
    /// Simulated time the run covered.
    pub elapsed: Nanos,
    /// CPU time the core used.
    pub busy: Nanos,
    /// Frames the loop took (counted by the RX clock).
    pub taken: u64,
    /// Frames the NIC dropped: the ring was full.
    pub dropped: u64,
    /// Frames still in the ring at the end.
    pub held: u64,
    /// The most frames the ring held at a burst.
    pub max_backlog: u64,
}

impl RxRun {
    /// CPU utilisation, %.
    pub fn cpu_percent(&self) -> f64 {
        (self.busy.0 as f64 / self.elapsed.0.max(1) as f64 * 100.0).min(100.0)
    }
}

/// Run the RX core for `span` against a peer whose slots are `period` long.
pub fn run(core: RxCore, period: SlotPeriod, span: Nanos) -> RxRun {
    let start = Tai(0);
    let mut ring = RxRing::new(period, start, core.ring);
    let mut rng = ChaCha8Rng::seed_from_u64(core.seed);
    let mut stall = core.stall;
    let (mut now, mut busy, mut max_backlog) = (start, Nanos(0), 0u64);
    while now - start < span {
        let n = ring.burst(now, core.batch);
        max_backlog = max_backlog.max(ring.held() + n);
        let work = Nanos(core.host.poll_overhead.0 + core.host.per_slot.0 * n as i64);
        let it = core.host.iteration(work, core.poll_period, &mut rng);
        busy = busy + it.busy;
        now += it.length;
        if let Some((_, len)) = stall.filter(|&(at, _)| now - start >= at) {
            now += len;
            stall = None;
        }
    }
    ring.arrive(now);
    RxRun { elapsed: now - start, busy, taken: ring.taken(), dropped: ring.dropped(), held: ring.held(), max_backlog }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: SlotPeriod = SlotPeriod::new(2_560, 1);

    fn host(overhead: i64) -> HostModel {
        HostModel { poll_overhead: Nanos(overhead), wake_latency: Nanos(0), ..HostModel::default() }
    }

    /// Frames arrive one per δ; a full ring drops the rest, and every arrival is held, taken or dropped.
    #[test]
    fn the_ring_holds_what_fits_and_drops_the_rest() {
        let mut r = RxRing::new(D, Tai(0), 4);
        assert_eq!(r.burst(Tai(2_559), 8), 0, "the first frame is in at δ");
        assert_eq!(r.burst(Tai(2_560), 8), 1);
        assert_eq!(r.burst(Tai(3 * 2_560), 1), 1, "a burst takes at most its batch");
        assert_eq!(r.held(), 1);
        // Ten more slots with one held: three fit, seven are dropped.
        assert_eq!(r.burst(Tai(13 * 2_560), 0), 0);
        assert_eq!((r.held(), r.dropped()), (4, 7));
        assert_eq!(r.taken() + r.held() + r.dropped(), 13);
    }

    /// A busy-polling core takes every frame at 100 % CPU; one sleeping `batch·δ − 100 µs` keeps up and uses the
    /// work's share; a stall longer than the ring's reach drops the frames the ring cannot hold.
    #[test]
    fn the_loop_keeps_up_sleeps_and_drops_only_past_the_rings_reach() {
        let span = Nanos::from_ms(20);
        let busy = run(
            RxCore { host: host(2_900), batch: 32, poll_period: Nanos(0), ring: 256, stall: None, seed: 1 },
            D,
            span,
        );
        assert_eq!((busy.cpu_percent(), busy.dropped), (100.0, 0));
        assert!(busy.taken + 2 >= D.slots_in(busy.elapsed), "{busy:?}");
        let period = Nanos(54 * 2_560 - 100_000);
        let sleeping = run(rx(period), D, span);
        assert_eq!(sleeping.dropped, 0);
        assert!(sleeping.cpu_percent() > 1.0 && sleeping.cpu_percent() < 20.0, "{sleeping:?}");
        assert!(sleeping.max_backlog <= 54, "it never falls behind: {sleeping:?}");
        // The ring reaches 256·δ = 655 µs: a stall of 500 µs is absorbed, one of 2 ms is not.
        let short = run(RxCore { stall: Some((Nanos::from_ms(5), Nanos::from_us(500))), ..rx(period) }, D, span);
        assert_eq!(short.dropped, 0, "{short:?}");
        let long = run(RxCore { stall: Some((Nanos::from_ms(5), Nanos::from_ms(2))), ..rx(period) }, D, span);
        let lost = long.dropped as i64;
        // At the stall the ring held at most one batch; the rest of the 2 ms overflowed it.
        let expect = D.slots_in(Nanos::from_ms(2)) as i64 - 256;
        assert!((lost - expect).abs() <= 60, "lost {lost}, expected about {expect}: {long:?}");
        assert_eq!(long.taken + long.held + long.dropped, D.slots_in(long.elapsed), "every arrival accounted");
    }

    fn rx(period: Nanos) -> RxCore {
        RxCore { host: host(2_900), batch: 54, poll_period: period, ring: 256, stall: None, seed: 1 }
    }
}
