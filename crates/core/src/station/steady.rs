//! Phase 4 in the steady state: posting slots while the wire is on its schedule, a few adds and compares each.
//!
//! The general loop of [`Station::post_to`] decides every case a slot can be in: acquiring the schedule after
//! link-up, a step or a restart, lengths clamped at their bounds, skips, spacers, early slots, re-mapping. Once
//! the wire follows the schedule, every slot is the same case: the O(1) step ([`crate::wire::step`]) gives its
//! length and the next slot's error, and no slot is early, clamped, skipped or re-mapped. This loop posts those
//! slots with exactly the bookkeeping the general loop would do for them (alignment, what each carried), and
//! hands any other slot back to the general loop. Identical outputs: `tests/golden.rs`.
//!
//! ```text
//!   per slot k (schedule slot j = k + shift, starting at byte p = the step's):
//!     e = ⌊E(p)⌋ − ⌊S(j)⌋          the step's error, no division
//!     n = next boundary − p         boundary mode: n₀ or n₀ + 1 (one compare); nominal: the slot size
//!     hand back if e < −early, or the slot cannot be n − 20 bytes long (its bounds), or the step leaves its piece
//!     post: length n − 20, carried (j, locked), alignment e; re-map after it if the next error passes half a slot
//! ```

use super::grid::Carried;
use super::{sat_i64, Station};
use crate::outcome::Reason;
use crate::time::{MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES};

impl<B: AsRef<[u8]>> Station<B> {
    /// Post slots from the next unposted one towards `end` while each is the steady-state case (see the module
    /// doc) and the step is at it. Returns how many it posted.
    pub(super) fn post_steady(&mut self, end: u64) -> u64 {
        let start = self.ring.posted();
        let mut j = self.schedule_slot_of(start);
        let at = self.track.end();
        if j < self.j_end || !self.step.as_ref().is_some_and(|s| s.is_at(at, j)) {
            return 0;
        }
        // Small (a byte time, half a slot): i64 throughout.
        let tol = sat_i64(self.tolerance());
        let early = sat_i64(self.early_limit());
        let remap_at = sat_i64(2 * self.half_slot());
        let slot = self.cfg.geometry.slot_bytes();
        let overhead = u64::from(WIRE_OVERHEAD_BYTES);
        // Wire bytes (length + 20) a slot may have: a filler's, and the bounds a real frame's length narrows.
        let (lo, hi) = self.ring.len_range_filler();
        let floor = slot - if self.discipline { self.shrink_cap() } else { 0 };
        let filler = if self.discipline {
            (u64::from(lo.max(floor).min(hi)) + overhead, u64::from(hi) + overhead)
        } else {
            (0, u64::MAX)
        };
        let any_real = self.ring.real_frames() > 0;
        let discipline = self.discipline;
        let acquire_since = self.acquire_since;
        let Some(step) = self.step.as_mut() else { return 0 };
        let mut acquiring = self.acquiring;
        let mut run = self.align.run();
        let mut k = start;
        let mut remap = false;
        while k < end {
            let e = step.error();
            if e < -early {
                break;
            }
            let (lo, hi) = match any_real.then(|| self.ring.real_len(k)).flatten() {
                Some(len) if discipline => {
                    let lo = (len + 4).max(MIN_FRAME_BYTES).max(floor).min(slot);
                    (u64::from(lo) + overhead, u64::from(slot) + overhead)
                }
                _ => filler,
            };
            let Some((n, e_next)) = step.next_if(|n| lo <= n && n <= hi) else { break };
            let near = -tol <= e && e <= tol;
            if acquiring && near {
                acquiring = false;
                run.acquired(k - acquire_since.min(k));
            }
            if acquiring {
                run.acquiring();
            } else {
                run.record(e);
            }
            // A disciplined slot that started within a byte of its time ends within a byte of the next one's: no
            // skip to consider (the general loop's case `e_next > tol`).
            debug_assert!(!discipline || e_next <= tol, "a stepped slot ends {e_next} ns late");
            self.ring.set_len(k, (n - overhead) as u32);
            self.track.push(n, Some(Carried { slot: j, locked: !acquiring && near }));
            k += 1;
            j += 1;
            if e_next.unsigned_abs() > remap_at.unsigned_abs() {
                // A whole slot off (the nominal wire drifting): re-choose the mapping, as the general loop does.
                remap = true;
                break;
            }
        }
        run.finish();
        self.acquiring = acquiring;
        if k > start {
            self.j_end = j;
        }
        let _ = self.ring.post_to(k);
        if remap {
            self.remap(false, Reason::ClockStep);
        }
        k - start
    }
}
