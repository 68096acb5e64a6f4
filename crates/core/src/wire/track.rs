//! The wire's record of posted slots: the byte each starts at and what it carried, from the oldest still asked
//! about to the next one to post, in a fixed ring of power-of-two size (posting a slot is two stores).
//!
//! ```text
//!   slot:   base ───────────────────────────── last        (last: the next slot to post)
//!   start:  P_base    P_base+1    …             P_last     (P_last = where the next slot starts)
//!   tag:    T_base    T_base+1    …   T_last−1
//!   invariant: last − base < capacity
//! ```

use alloc::vec;
use alloc::vec::Vec;

/// Start bytes and tags of the slots `base..=last` (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Track<T> {
    starts: Vec<u64>,
    tags: Vec<T>,
    mask: u64,
    base: u64,
    last: u64,
}

impl<T: Copy> Track<T> {
    /// A track that keeps at least `span` slots before the next to post, the first starting at byte 0; `empty`
    /// fills tags not yet written.
    pub(crate) fn new(span: u64, empty: T) -> Track<T> {
        let cap = (span + 1).next_power_of_two();
        Track { starts: vec![0; cap as usize], tags: vec![empty; cap as usize], mask: cap - 1, base: 0, last: 0 }
    }

    /// The oldest slot tracked.
    #[inline]
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// The next slot to post.
    #[inline]
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Where slot `k` starts, for `base ≤ k ≤ last`.
    #[inline]
    pub(crate) fn start(&self, k: u64) -> Option<u64> {
        (self.base..=self.last).contains(&k).then(|| self.starts[(k & self.mask) as usize])
    }

    /// Where the next slot to post starts.
    #[inline]
    pub(crate) fn end(&self) -> u64 {
        self.starts[(self.last & self.mask) as usize]
    }

    /// The tag of posted slot `k`, for `base ≤ k < last`.
    #[inline]
    pub(crate) fn tag(&self, k: u64) -> Option<T> {
        (self.base..self.last).contains(&k).then(|| self.tags[(k & self.mask) as usize])
    }

    /// Set the tag of posted slot `k`, for `base ≤ k < last` (others are not tracked: ignored).
    #[inline]
    pub(crate) fn set_tag(&mut self, k: u64, tag: T) {
        if (self.base..self.last).contains(&k) {
            self.tags[(k & self.mask) as usize] = tag;
        }
    }

    /// Post the next slot: `wire` bytes long (preamble and gap included), tagged `tag`.
    #[inline]
    pub(crate) fn push(&mut self, wire: u64, tag: T) {
        let i = (self.last & self.mask) as usize;
        let next = self.starts[i] + wire;
        self.tags[i] = tag;
        self.last += 1;
        if self.last - self.base > self.mask {
            // Never reached by a station that forgets as it goes (asserted in debug builds); keeps the invariant.
            debug_assert!(false, "track overflow: {} slots", self.last - self.base);
            self.base += 1;
        }
        self.starts[(self.last & self.mask) as usize] = next;
    }

    /// For posting many slots in one go: the start and tag arrays (slot `k` at index `k mod len`, their length a
    /// power of two); then [`Track::posted`].
    #[inline]
    pub(crate) fn arrays_mut(&mut self) -> (&mut [u64], &mut [T]) {
        (&mut self.starts, &mut self.tags)
    }

    /// `n` more slots were written through [`Track::arrays_mut`] (their tags, and the start of the slot after each).
    #[inline]
    pub(crate) fn posted(&mut self, n: u64) {
        self.last += n;
        debug_assert!(self.last - self.base <= self.mask, "track overflow: {} slots", self.last - self.base);
        self.base = self.base.max(self.last.saturating_sub(self.mask));
    }

    /// Forget slots before `k` (never the next to post).
    #[inline]
    pub(crate) fn forget_before(&mut self, k: u64) {
        self.base = self.base.max(k.min(self.last));
    }

    /// Apply `f` to the tag of every posted slot from `k` on.
    pub(crate) fn update_tags_from(&mut self, k: u64, mut f: impl FnMut(&mut T)) {
        for k in k.max(self.base)..self.last {
            f(&mut self.tags[(k & self.mask) as usize]);
        }
    }
}
