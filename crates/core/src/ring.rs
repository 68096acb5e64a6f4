//! The slot ring and the CP-PMD phases (paper §3.1, Fig. 5).
//!
//! ```text
//!   absolute slot:  … consumed ─────────── posted ───────────────── consumed + N …
//!                     │  on the NIC: fetched,  │  insertion window:       │
//!                     │  may not change        │  not yet posted, may     │
//!                     │                        │  still be rewritten      │
//! ```
//!
//! Invariant: `consumed ≤ posted ≤ consumed + N`. Ring slot `k mod N` holds absolute slot `k` for the unique
//! `k ∈ [consumed, consumed + N)`. Userspace cannot rewrite a descriptor it has posted, so insertion is allowed
//! only in the window `[posted, consumed + N)`.
//!
//! A poll runs the phases in order: **observe** the consumer count, **reclaim** consumed real-frame slots back
//! to fillers (zeroing their bytes here, off the insertion path), **place** frames into the window, **post** up
//! to `consumed + batch` (the lazy doorbell: only the poll loop posts).

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use crate::isolation::ClassId;
use crate::outcome::FrameId;
use crate::time::Tai;

/// What a ring slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    /// A filler frame (dropped by the first hop).
    Filler,
    /// A real frame.
    Real {
        /// The frame.
        id: FrameId,
        /// Its class.
        class: ClassId,
        /// Its requested transmission time, if any.
        txtime: Option<Tai>,
        /// Bytes of frame data (without FCS) at the start of the slot buffer; the rest is zero padding.
        len: u32,
        /// The ring slot of the ownership map this slot had when the frame was placed.
        ring_slot: u32,
    },
}

/// What is placed in a slot besides the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The frame.
    pub id: FrameId,
    /// Its class.
    pub class: ClassId,
    /// Its requested transmission time, if any.
    pub txtime: Option<Tai>,
    /// The ownership map's ring slot for this slot.
    pub ring_slot: u32,
}

/// A slot ready to be handed to the NIC.
#[derive(Clone, Copy, Debug)]
pub struct SlotView<'a> {
    /// Absolute slot number.
    pub slot: u64,
    /// Filler or real frame.
    pub kind: SlotKind,
    /// The slot's L2 bytes without the FCS: the frame and its zero padding, or all zero for a filler. Its length
    /// is the slot's wire length minus 4 — `slot_bytes − 4` unless the station trimmed the slot to keep the
    /// wire on its schedule (fillers: anything from 60 bytes to the link's largest frame; real frames: their
    /// padding). Set once the slot is posted.
    pub bytes: &'a [u8],
}

/// A violation of the ring protocol by a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The backend reported consuming slots that were never posted.
    ConsumedUnposted {
        /// Reported count.
        consumed: u64,
        /// Posted count.
        posted: u64,
    },
    /// The consumer count went backwards.
    ConsumerWentBack {
        /// Reported count.
        consumed: u64,
        /// Previous count.
        previous: u64,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::ConsumedUnposted { consumed, posted } => {
                write!(f, "NIC reports {consumed} slots consumed but only {posted} were posted")
            }
            RingError::ConsumerWentBack { consumed, previous } => {
                write!(f, "NIC consumer count went back from {previous} to {consumed}")
            }
        }
    }
}

/// The ring of `N` slot buffers and its consumer/producer positions.
#[derive(Clone, Debug)]
pub struct Ring {
    n: u64,
    /// `n − 1` if `n` is a power of two, else 0.
    mask: u64,
    data_bytes: usize,
    /// L2 bytes (with FCS) of each ring entry as it will be or was posted.
    lens: Vec<u32>,
    /// Zeros to view fillers longer than a slot buffer.
    zeros: Vec<u8>,
    consumed: u64,
    posted: u64,
    kinds: Vec<SlotKind>,
    bufs: Vec<u8>,
    /// Real frames currently in the ring (lets an all-filler reclaim skip its scan).
    real: usize,
}

impl Ring {
    /// A ring of `n` fillers with slots of `slot_bytes` (including the 4-byte FCS).
    pub fn new(n: u32, slot_bytes: u32) -> Ring {
        Self::with_max_filler(n, slot_bytes, slot_bytes)
    }

    /// A ring of `n` fillers with slots of `slot_bytes` whose fillers may be posted with any length up to
    /// `max_filler` bytes (including FCS).
    pub fn with_max_filler(n: u32, slot_bytes: u32, max_filler: u32) -> Ring {
        let data_bytes = slot_bytes as usize - 4;
        Ring {
            n: u64::from(n),
            mask: if n.is_power_of_two() { u64::from(n) - 1 } else { 0 },
            data_bytes,
            lens: vec![slot_bytes; n as usize],
            zeros: vec![0; max_filler.max(slot_bytes) as usize - 4],
            consumed: 0,
            posted: 0,
            kinds: vec![SlotKind::Filler; n as usize],
            bufs: vec![0; data_bytes * n as usize],
            real: 0,
        }
    }

    /// Ring size `N`.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Never empty (`N ≥ 2`); for clippy's benefit.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bytes of frame data a slot holds (slot size minus FCS).
    pub fn data_bytes(&self) -> usize {
        self.data_bytes
    }

    /// Slots the NIC has consumed.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Slots posted to the NIC.
    pub fn posted(&self) -> u64 {
        self.posted
    }

    /// The insertion window `[posted, consumed + N)`.
    pub fn window(&self) -> Range<u64> {
        self.posted..self.consumed + self.n
    }

    /// Real frames held in the ring.
    pub fn real_frames(&self) -> usize {
        self.real
    }

    #[inline]
    fn idx(&self, k: u64) -> usize {
        // A mask for the usual power-of-two ring: a 64-bit division per slot access costs more than the rest of
        // posting a slot.
        if self.mask != 0 {
            (k & self.mask) as usize
        } else {
            (k % self.n) as usize
        }
    }

    fn check_invariant(&self) {
        debug_assert!(self.consumed <= self.posted && self.posted <= self.consumed + self.n);
    }

    /// Phase 1, observe: accept the NIC's consumer count and return the newly consumed slots.
    pub fn observe(&mut self, consumed: u64) -> Result<Range<u64>, RingError> {
        if consumed < self.consumed {
            return Err(RingError::ConsumerWentBack { consumed, previous: self.consumed });
        }
        if consumed > self.posted {
            return Err(RingError::ConsumedUnposted { consumed, posted: self.posted });
        }
        let done = self.consumed..consumed;
        Ok(done)
    }

    /// Phase 2, reclaim: turn the consumed slots `done` (from [`Ring::observe`]) back into zeroed fillers,
    /// calling `sent(slot, kind)` for each real frame. Then the consumer position moves to `done.end`.
    pub fn reclaim(&mut self, done: Range<u64>, mut sent: impl FnMut(u64, SlotKind)) {
        debug_assert_eq!(done.start, self.consumed);
        if self.real > 0 {
            for k in done.clone() {
                let i = self.idx(k);
                if let SlotKind::Real { len, .. } = self.kinds[i] {
                    sent(k, self.kinds[i]);
                    let start = i * self.data_bytes;
                    self.bufs[start..start + len as usize].fill(0);
                    self.kinds[i] = SlotKind::Filler;
                    self.real -= 1;
                }
            }
        }
        self.consumed = done.end;
        self.check_invariant();
    }

    /// [`Ring::reclaim`] of a ring that holds no real frame: only the consumer position moves.
    #[inline]
    pub fn reclaim_fillers(&mut self, done: Range<u64>) {
        debug_assert!(done.start == self.consumed && self.real == 0);
        self.consumed = done.end;
        self.check_invariant();
    }

    /// True if absolute slot `k` is in the insertion window and holds a filler.
    #[inline]
    pub fn is_free(&self, k: u64) -> bool {
        self.window().contains(&k) && self.kinds[self.idx(k)] == SlotKind::Filler
    }

    /// Phase 3, place: copy `data` into free slot `k` of the window. The padding is already zero.
    ///
    /// The caller has checked [`Ring::is_free`] and the length; both are asserted in debug builds.
    #[inline]
    pub fn place(&mut self, k: u64, frame: Placed, data: &[u8]) {
        debug_assert!(self.is_free(k) && data.len() <= self.data_bytes);
        let i = self.idx(k);
        let start = i * self.data_bytes;
        self.bufs[start..start + data.len()].copy_from_slice(data);
        let Placed { id, class, txtime, ring_slot } = frame;
        self.kinds[i] = SlotKind::Real { id, class, txtime, len: data.len() as u32, ring_slot };
        self.lens[i] = self.data_bytes as u32 + 4; // padded to the slot until the station sets its length
        self.real += 1;
    }

    /// Remove a real frame from unposted slot `k`, zeroing it, and return what it was.
    pub fn take(&mut self, k: u64) -> SlotKind {
        debug_assert!(self.window().contains(&k));
        let i = self.idx(k);
        let kind = self.kinds[i];
        if let SlotKind::Real { len, .. } = kind {
            let s = i * self.data_bytes;
            self.bufs[s..s + len as usize].fill(0);
            self.kinds[i] = SlotKind::Filler;
            self.real -= 1;
        }
        kind
    }

    /// The frame data (without padding) of slot `k`, if it holds a real frame.
    pub fn frame_data(&self, k: u64) -> Option<&[u8]> {
        let i = self.idx(k);
        match self.kinds[i] {
            SlotKind::Real { len, .. } => Some(&self.bufs[i * self.data_bytes..i * self.data_bytes + len as usize]),
            SlotKind::Filler => None,
        }
    }

    /// The frame data bytes of slot `k` if it holds a real frame (`None`: a filler).
    #[inline]
    pub fn real_len(&self, k: u64) -> Option<u32> {
        match self.kinds[self.idx(k)] {
            SlotKind::Real { len, .. } => Some(len),
            SlotKind::Filler => None,
        }
    }

    /// What unposted or in-flight slot `k` holds.
    pub fn kind(&self, k: u64) -> SlotKind {
        self.kinds[self.idx(k)]
    }

    /// Phase 4, post: advance the producer to `min(target, consumed + N)`; returns the slots to hand to the
    /// NIC (empty if the producer is already there).
    pub fn post_to(&mut self, target: u64) -> Range<u64> {
        let end = target.min(self.consumed + self.n);
        let from = self.posted;
        if end > from {
            self.posted = end;
        }
        self.check_invariant();
        from..self.posted
    }

    /// The contents of slot `k` (posted or in the window) for handing to the NIC: as long as its wire length
    /// ([`Ring::set_len`]) minus the FCS.
    #[inline]
    pub fn view(&self, k: u64) -> SlotView<'_> {
        let i = self.idx(k);
        let data = self.lens[i] as usize - 4;
        let bytes = match self.kinds[i] {
            SlotKind::Real { .. } => {
                let start = i * self.data_bytes;
                &self.bufs[start..start + data.min(self.data_bytes)]
            }
            SlotKind::Filler => &self.zeros[..data.min(self.zeros.len())],
        };
        SlotView { slot: k, kind: self.kinds[i], bytes }
    }

    /// Set the wire length (L2 bytes with FCS) slot `k` will be posted with. A real frame's length stays
    /// between its data plus FCS (at least 64) and the slot size; a filler's between 64 and the largest filler.
    /// The station chooses it as it posts the slot; the caller keeps to those bounds (asserted in debug builds).
    #[inline]
    pub fn set_len(&mut self, k: u64, len: u32) {
        let i = self.idx(k);
        debug_assert!(self.window().contains(&k), "slot {k} is posted already");
        debug_assert!(len as usize - 4 <= self.len_max(k) && len >= crate::time::MIN_FRAME_BYTES);
        self.lens[i] = len;
    }

    /// The wire length slot `k` has (or will be posted with, if unchanged).
    #[inline]
    pub fn len_of(&self, k: u64) -> u32 {
        self.lens[self.idx(k)]
    }

    /// Most data bytes (without FCS) slot `k` can be posted with.
    fn len_max(&self, k: u64) -> usize {
        match self.kinds[self.idx(k)] {
            SlotKind::Real { .. } => self.data_bytes,
            SlotKind::Filler => self.zeros.len(),
        }
    }

    /// The range of wire lengths (L2 bytes with FCS) slot `k` can be posted with, as it holds now.
    pub fn len_range(&self, k: u64) -> (u32, u32) {
        let max = self.len_max(k) as u32 + 4;
        match self.kinds[self.idx(k)] {
            SlotKind::Real { len, .. } => ((len + 4).max(crate::time::MIN_FRAME_BYTES), max),
            SlotKind::Filler => (crate::time::MIN_FRAME_BYTES, max),
        }
    }

    /// For setting many slots' lengths in one go (the steady state of the pacing loop): the lengths (slot `k` at
    /// index `k mod N`) and what each slot holds. Only slots of the window may be written (as [`Ring::set_len`]).
    #[inline]
    pub(crate) fn lens_mut(&mut self) -> (&mut [u32], &[SlotKind]) {
        (&mut self.lens, &self.kinds)
    }

    /// The index of slot `k` in [`Ring::lens_mut`].
    #[inline]
    pub(crate) fn index(&self, k: u64) -> usize {
        self.idx(k)
    }

    /// The range of wire lengths a filler can be posted with ([`Ring::len_range`] of a filler slot).
    pub fn len_range_filler(&self) -> (u32, u32) {
        (crate::time::MIN_FRAME_BYTES, self.zeros.len() as u32 + 4)
    }

    /// True if every byte of every filler slot is zero (no stale payload can leak).
    pub fn fillers_are_zero(&self) -> bool {
        self.zeros.iter().all(|b| *b == 0)
            && self.kinds.iter().enumerate().all(|(i, k)| {
                *k != SlotKind::Filler
                    || self.bufs[i * self.data_bytes..(i + 1) * self.data_bytes].iter().all(|b| *b == 0)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_keep_the_invariant_and_zero_reclaimed_slots() {
        let mut r = Ring::new(8, 64);
        assert_eq!(r.post_to(3), 0..3);
        assert_eq!(r.window(), 3..8);
        r.place(5, Placed { id: FrameId(1), class: ClassId(0), txtime: None, ring_slot: 5 }, &[0xab; 60]);
        assert!(!r.is_free(5));
        assert!(!r.is_free(2), "posted slots are outside the window");
        assert_eq!(r.post_to(100), 3..8, "the producer never passes consumed + N");
        let done = r.observe(6).unwrap();
        let mut seen = vec![];
        r.reclaim(done, |k, _| seen.push(k));
        assert_eq!(seen, vec![5]);
        assert!(r.fillers_are_zero());
        assert_eq!(r.observe(9), Err(RingError::ConsumedUnposted { consumed: 9, posted: 8 }));
        assert_eq!(r.observe(5), Err(RingError::ConsumerWentBack { consumed: 5, previous: 6 }));
    }
}
