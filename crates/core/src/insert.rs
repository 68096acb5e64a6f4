//! Scheduled insertion (paper §3.3): which slot a real-time frame goes into, or why it cannot go anywhere.
//!
//! The target slot of a frame scheduled at `t` is `k = slot_of(t)`, the slot whose interval contains `t`
//! (`⌊(t − offset)/δ⌋` in the paper). Three checks decide whether it can be used:
//!
//! 1. the slot still holds a filler,
//! 2. it lies in the insertion window `[posted, consumed + N)` — at least `batch` slots ahead of the consumer
//!    and less than one ring ahead,
//! 3. the frame's class owns it.
//!
//! Policies: [`Policy::Strict`] rejects the frame if check 1 or 3 fails; [`Policy::Relaxed`] takes the
//! earliest free slot the class owns *not earlier* than `k`, within one ring cycle (`[k, k + N)`). A target slot
//! already before the window when the frame arrives (check 2) is late under both policies: relaxed mode trades
//! precision for delivery when slots collide, it never sends a frame that missed its time. A relaxed frame that
//! arrived in time keeps its claim while it waits for a later owned slot to enter the window: it is rejected
//! only if no owned slot of its class is free within its cycle (`slot-taken`), never `late` because its original
//! target has passed meanwhile.

use core::fmt;

use crate::isolation::{ClassId, Ownership};
use crate::outcome::Reason;
use crate::ring::Ring;

/// What to do when a frame's slot is taken or not owned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// Reject the frame.
    #[default]
    Strict,
    /// Use the earliest free owned slot not earlier than requested.
    Relaxed,
}

impl Policy {
    /// Parse `strict` / `relaxed`.
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "strict" => Some(Policy::Strict),
            "relaxed" => Some(Policy::Relaxed),
            _ => None,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Strict => "strict",
            Policy::Relaxed => "relaxed",
        })
    }
}

/// The decision for one frame whose target slot is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Put it in this slot now.
    Place(u64),
    /// Its slot (or, relaxed, the next candidate) is beyond the window: wait, and retry from this slot.
    Wait(u64),
    /// Reject.
    Reject(Reason),
}

/// Decide where a real-time frame of `class` with target slot `target` goes, searching relaxed candidates
/// from `from` (normally `target`; later when retrying). Slot `k` is ring slot `(k + phase) mod N` of the
/// ownership map (the phase moves only when an underrun shifts the grid).
pub fn decide(
    ring: &Ring,
    own: &Ownership,
    phase: u64,
    policy: Policy,
    class: ClassId,
    target: u64,
    from: u64,
) -> Decision {
    let window = ring.window();
    match policy {
        Policy::Strict => {
            if target < window.start {
                Decision::Reject(Reason::Late)
            } else if own.owner_of(target + phase) != Some(class) {
                Decision::Reject(Reason::NotOwned)
            } else if target >= window.end {
                Decision::Wait(target)
            } else if ring.is_free(target) {
                Decision::Place(target)
            } else {
                Decision::Reject(Reason::SlotTaken)
            }
        }
        Policy::Relaxed => {
            // A frame whose own slot was posted before it arrived missed its time. A frame already displaced
            // (`from > target`) was in time: slots `target..from` were taken or not its class's when it was
            // checked, so the search goes on from `from` (or from the window, if the poll loop let `from`
            // pass), up to one ring cycle after its target.
            if from <= target && target < window.start {
                return Decision::Reject(Reason::Late);
            }
            let limit = target.saturating_add(ring.len());
            let mut k = from.max(target).max(window.start);
            if k >= limit {
                return Decision::Reject(Reason::Late);
            }
            loop {
                let Some(next) = own.next_usable(class, k + phase).map(|s| s - phase) else {
                    return Decision::Reject(Reason::NoCapacity);
                };
                if next >= limit {
                    return Decision::Reject(Reason::SlotTaken);
                }
                if next >= window.end {
                    return Decision::Wait(next);
                }
                if ring.is_free(next) {
                    return Decision::Place(next);
                }
                k = next + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::ClassSpec;
    use crate::outcome::FrameId;

    fn setup() -> (Ring, Ownership) {
        let own = Ownership::new(
            8,
            &[ClassSpec { name: "a".into(), slots: vec![1, 5] }, ClassSpec { name: "b".into(), slots: vec![2] }],
        )
        .unwrap();
        let mut ring = Ring::new(8, 64);
        let _ = ring.post_to(2); // window [2, 8)
        (ring, own)
    }

    #[test]
    fn strict_checks() {
        let (mut ring, own) = setup();
        let a = ClassId(0);
        assert_eq!(decide(&ring, &own, 0, Policy::Strict, a, 1, 1), Decision::Reject(Reason::Late));
        assert_eq!(decide(&ring, &own, 0, Policy::Strict, a, 2, 2), Decision::Reject(Reason::NotOwned));
        assert_eq!(decide(&ring, &own, 0, Policy::Strict, a, 5, 5), Decision::Place(5));
        ring.place(5, crate::ring::Placed { id: FrameId(1), class: a, txtime: None, ring_slot: 5 }, &[1; 20]);
        assert_eq!(decide(&ring, &own, 0, Policy::Strict, a, 5, 5), Decision::Reject(Reason::SlotTaken));
        assert_eq!(decide(&ring, &own, 0, Policy::Strict, a, 9, 9), Decision::Wait(9));
    }

    #[test]
    fn relaxed_never_goes_earlier() {
        let (mut ring, own) = setup();
        let a = ClassId(0);
        ring.place(5, crate::ring::Placed { id: FrameId(1), class: a, txtime: None, ring_slot: 5 }, &[1; 20]);
        // Slot 3 is not a's: the next owned slot is 5 (taken), then 9 (beyond the window): wait.
        assert_eq!(decide(&ring, &own, 0, Policy::Relaxed, a, 3, 3), Decision::Wait(9));
        assert_eq!(decide(&ring, &own, 0, Policy::Relaxed, a, 1, 1), Decision::Reject(Reason::Late));
    }
}
