//! The sequence generation function of IEEE 802.1CB: each stream numbers its frames 0, 1, …, 65535, 0, …
//!
//! [`SequenceGenerator`] is the standard's per-stream counter (`GenSeqNum`), for a talker that numbers frames as
//! it sends them. A talker that numbers *scheduled instances* instead — keepon's flows, whose instance `n` is due
//! at a fixed network time — takes [`sequence_of`] of the instance number: two talkers that number the same
//! schedule the same way put the same sequence number on the same instance, whenever each was started, which is
//! what lets two independent stations (or two ports) send copies that a listener can eliminate.

/// Sequence numbers wrap after this many (2¹⁶).
pub const SEQUENCE_SPACE: u32 = 1 << 16;

/// The R-TAG sequence number of instance `n` of a stream: `n mod 2¹⁶`.
pub const fn sequence_of(n: u64) -> u16 {
    (n % SEQUENCE_SPACE as u64) as u16
}

/// One stream's sequence generation function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SequenceGenerator {
    next: u16,
}

impl SequenceGenerator {
    /// A generator whose first number is 0 (the standard's reset state).
    pub const fn new() -> SequenceGenerator {
        SequenceGenerator { next: 0 }
    }

    /// The number for the next frame; the one after 65535 is 0.
    #[must_use]
    pub fn next_seq(&mut self) -> u16 {
        let s = self.next;
        self.next = self.next.wrapping_add(1);
        s
    }

    /// Start again from 0 (`SequenceGenerationReset`).
    pub fn reset(&mut self) {
        self.next = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_wraps() {
        let mut g = SequenceGenerator::new();
        assert_eq!((g.next_seq(), g.next_seq()), (0, 1));
        for _ in 2..65_535 {
            let _ = g.next_seq();
        }
        assert_eq!((g.next_seq(), g.next_seq(), g.next_seq()), (65_535, 0, 1));
        g.reset();
        assert_eq!(g.next_seq(), 0);
        assert_eq!((sequence_of(65_535), sequence_of(65_536), sequence_of(u64::MAX)), (65_535, 0, 65_535));
    }
}
