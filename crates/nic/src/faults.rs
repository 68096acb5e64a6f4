//! The simulated NIC's own failure modes — each **off by default** — for robustness experiments.
//!
//! keepon's precision rests on one assumption: once a slot is posted, the NIC sends it back to back with the
//! previous one. The simulator honours that exactly unless told otherwise. These are the mechanisms that break
//! it on real hardware, each with its physical basis. Magnitudes below are orders of size from the literature;
//! every default is *off*, and the values an experiment uses are its own (chosen) sweep, not measurements.
//!
//! **DMA stalls** ([`DmaStalls`]). To send slot `j` the NIC reads its descriptor and then its buffer from host
//! memory over PCIe (a DMA read). A read normally completes in well under a slot: a PCIe read round trip is of
//! the order of 0.5–1 µs (Neugebauer et al., *Understanding PCIe performance for end host networking*,
//! SIGCOMM 2018, the KeepON paper's ref. 40). It can take much longer: an IOMMU IOTLB miss adds a page walk,
//! and contention on the PCIe fabric or the memory controller (another device's DMA, a core streaming through
//! memory) can delay an access by "the order of 10 µs" (KeepON paper, A.2, citing refs. 12, 40, 61). In the
//! model a fetch is stalled with probability `ppm/10⁶`: the buffer arrives `stall` after the descriptor was
//! fetched. The NIC fetches slot `j` while slot `j − fetch_ahead` is on the wire, so a stall shorter than what
//! that prefetch covers is hidden; a longer one **starves the TX FIFO**: the wire idles until the data is there
//! (a wire gap), and every later slot leaves that much later. The host is not told at once: like a real NIC,
//! the simulator reveals the gap through the slot's completion (its TX timestamp), once the slot has left the
//! wire — so frames posted meanwhile leave late, and outcomes already reported for them said otherwise.
//!
//! **Completion latency spikes** ([`CompletionSpikes`]). The host learns how far the NIC got from the
//! consumer index the NIC writes back (head write-back, completion entries) — another DMA transaction, a
//! posted PCIe write queued behind the NIC's other traffic. With probability `ppm/10⁶` per slot that write-back
//! is `delay` late; write-backs are in order, so every later one waits for it too. The wire is not affected
//! directly, but keepon's poll loop posts only `batch` slots past the consumer index it sees: a stale index
//! stalls its refill and, if the delay exceeds what is posted ahead, the ring drains (an underrun, which the
//! backend then reports as any host-side gap).
//!
//! **Host preemption** is not here: it is the host's, [`HostModel::spike_ppm`](crate::sim::HostModel) and
//! `spike` (a poll-loop iteration preempted for `spike`), and [`HostModel::jitter`](crate::sim::HostModel).
//!
//! Every draw comes from one stream of its own (seeded from the simulator's seed), and nothing is drawn while a
//! mechanism is off: with both off a run is identical, draw for draw, to one without this module.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use keepon_core::time::Nanos;

/// Stalled descriptor/buffer fetches (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaStalls {
    /// Probability that one slot's fetch stalls, parts per million (0 = off).
    pub ppm: u32,
    /// How late a stalled fetch's data arrives, counted from when its descriptor was fetched.
    pub stall: Nanos,
}

/// Late completion write-backs (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompletionSpikes {
    /// Probability that one slot's completion write-back is late, parts per million (0 = off).
    pub ppm: u32,
    /// How late it is.
    pub delay: Nanos,
}

/// The NIC's failure modes; the default is all off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Stalled fetches that starve the TX FIFO.
    pub dma: DmaStalls,
    /// Late completion write-backs.
    pub completion: CompletionSpikes,
}

impl Faults {
    /// Everything off (the default).
    pub const OFF: Faults =
        Faults { dma: DmaStalls { ppm: 0, stall: Nanos(0) }, completion: CompletionSpikes { ppm: 0, delay: Nanos(0) } };

    /// Nothing is injected.
    pub fn is_off(&self) -> bool {
        (self.dma.ppm == 0 || self.dma.stall.0 <= 0) && (self.completion.ppm == 0 || self.completion.delay.0 <= 0)
    }
}

/// What the faults did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Fetches that stalled.
    pub stalls: u64,
    /// Of those, stalls that left the wire idle (longer than the prefetch covered).
    pub wire_gaps: u64,
    /// Completion write-backs that were late.
    pub late_completions: u64,
}

/// The seeded draws of [`Faults`], one stream of their own.
pub(crate) struct FaultDraws {
    cfg: Faults,
    rng: ChaCha8Rng,
    pub(crate) stats: FaultStats,
}

impl FaultDraws {
    /// Draws for `cfg` from the simulator's `seed` (a stream distinct from the host's and the oscillator's).
    pub(crate) fn new(cfg: Faults, seed: u64) -> FaultDraws {
        FaultDraws { cfg, rng: ChaCha8Rng::seed_from_u64(seed ^ 0xfa17_5eed_d3a5_0001), stats: FaultStats::default() }
    }

    fn hit(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.rng.gen_range(0..1_000_000u32) < ppm
    }

    /// The extra time one slot's data takes to arrive after its descriptor was fetched (0 unless it stalls).
    pub(crate) fn fetch_stall(&mut self) -> Nanos {
        let s = self.cfg.dma;
        if s.stall.0 > 0 && self.hit(s.ppm) {
            self.stats.stalls += 1;
            s.stall
        } else {
            Nanos(0)
        }
    }

    /// How late one slot's completion write-back is (0 unless it spikes).
    pub(crate) fn completion_delay(&mut self) -> Nanos {
        let c = self.cfg.completion;
        if c.delay.0 > 0 && self.hit(c.ppm) {
            self.stats.late_completions += 1;
            c.delay
        } else {
            Nanos(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_draws_nothing_and_on_hits_at_its_rate() {
        let mut off = FaultDraws::new(Faults::OFF, 7);
        assert!(Faults::OFF.is_off() && Faults::default() == Faults::OFF);
        for _ in 0..1000 {
            assert_eq!((off.fetch_stall(), off.completion_delay()), (Nanos(0), Nanos(0)));
        }
        assert_eq!(off.stats, FaultStats::default());
        let cfg = Faults {
            dma: DmaStalls { ppm: 10_000, stall: Nanos(30_000) },
            completion: CompletionSpikes { ppm: 1_000, delay: Nanos(50_000) },
        };
        let mut on = FaultDraws::new(cfg, 7);
        for _ in 0..100_000 {
            let _ = on.fetch_stall();
            let _ = on.completion_delay();
        }
        // 1 % and 0.1 % of 10⁵ draws, within a generous binomial band.
        assert!((800..1200).contains(&on.stats.stalls), "{:?}", on.stats);
        assert!((60..140).contains(&on.stats.late_completions), "{:?}", on.stats);
    }
}
