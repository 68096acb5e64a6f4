//! Posting on the byte clock: the length of each descriptor, so that every real-time frame starts on its byte.

use core::ops::Range;

use super::windows::Rat;
use super::{ByteStation, MIN_WIRE};
use crate::outcome::{FrameId, Reason};
use crate::ring::Placed;
use crate::time::{Tai, WIRE_OVERHEAD_BYTES};

const OVERHEAD: u64 = WIRE_OVERHEAD_BYTES as u64;

/// What the next descriptor is.
enum Next {
    /// The real-time frame with this key.
    RealTime((Tai, FrameId), u32),
    /// The best-effort frame at the head of its queue, with this wire length.
    BestEffort(u32),
    /// A filler of this wire length.
    Filler(u32),
}

impl<B: AsRef<[u8]>> ByteStation<B> {
    /// Post descriptors until the lead's worth of bytes lies beyond the next descriptor the NIC will fetch, or
    /// the ring is full. Counted in bytes from the consumer index, not in host time: a NIC whose oscillator
    /// runs fast or slow against the host's consumes its bytes sooner or later, and the lead stays what was
    /// configured (as the slot station keeps `batch` slots beyond it).
    pub(super) fn post_ahead(&mut self) -> Range<u64> {
        let start = self.ring.posted();
        let until = self.wire_position(self.ring.consumed()) + self.lead_bytes;
        loop {
            let (p, room) = (self.next_pos(), self.ring.consumed() + self.ring.len() - self.ring.posted());
            if room == 0 || p >= until {
                break;
            }
            if self.be.is_empty() {
                // Nothing but the longest fillers until the next real-time frame's byte is near: posted in a run.
                let longest = self.max_wire();
                let run = match self.rt_head(p) {
                    Some((_, b)) => (b - p).saturating_sub(MIN_WIRE) / longest,
                    None => u64::MAX,
                };
                let run = run.min((until - p).div_ceil(longest)).min(room);
                if run > 0 {
                    self.post_fillers(run);
                    continue;
                }
            }
            self.post_one();
        }
        start..self.ring.posted()
    }

    /// Post `n` of the longest fillers: each one's length, EPHC time and the cursor's stride.
    fn post_fillers(&mut self, n: u64) {
        let (k0, len, wire) = (self.ring.posted(), self.cfg.max_frame, self.max_wire());
        if let Some(stride) = self.stride.filter(|s| s.len() == wire) {
            let (ring, track, mut k) = (&mut self.ring, &mut self.track, k0);
            let after = stride.run(&self.cursor, n, |t| {
                ring.set_len(k, len);
                track.push(wire, t);
                k += 1;
            });
            if let Some(after) = after {
                self.cursor = after;
                let _ = self.ring.post_to(k0 + n);
                return;
            }
        }
        for k in k0..k0 + n {
            self.ring.set_len(k, len);
            self.track.push(wire, self.cursor.time());
            self.cursor_to(self.next_pos());
        }
        let _ = self.ring.post_to(k0 + n);
    }

    fn post_one(&mut self) {
        let p = self.next_pos();
        let k = self.ring.posted();
        let next = match self.rt_head(p) {
            Some((key, b)) if b == p => Next::RealTime(key, self.padded(key, p)),
            Some((_, b)) => {
                let gap = b - p;
                if gap < MIN_WIRE {
                    // The frame cannot start on its byte (it came after the descriptor before it was posted, or
                    // the frame before could not pad): it moves by the least amount, a minimum filler.
                    Next::Filler(MIN_WIRE as u32 - WIRE_OVERHEAD_BYTES)
                } else if self.be.is_empty() {
                    Next::Filler(self.filler_towards(gap))
                } else {
                    match self.best_effort_fits(p, Some(gap)) {
                        Some(len) => Next::BestEffort(len),
                        // Towards the best-effort frame's next free place if it ends before the real-time
                        // frame's byte (exactly, or with room for a filler), else towards that byte.
                        None => {
                            let be = self.be_aim(p).filter(|&(t, wire)| {
                                let left = b.checked_sub(t + wire);
                                t < b && left.is_some_and(|l| l == 0 || l >= MIN_WIRE)
                            });
                            Next::Filler(self.filler_towards(be.map_or(gap, |(t, _)| t - p)))
                        }
                    }
                }
            }
            None if self.be.is_empty() => Next::Filler(self.cfg.max_frame),
            None => match self.best_effort_fits(p, None) {
                Some(len) => Next::BestEffort(len),
                None => Next::Filler(match self.be_aim(p) {
                    Some((t, _)) => self.filler_towards(t - p),
                    None => self.cfg.max_frame,
                }),
            },
        };
        let len = match next {
            Next::RealTime(key, len) => {
                let w = self.rt.remove(&key).expect("the head was just found");
                self.queued[usize::from(w.frame.class.0)] -= 1;
                let f = w.frame;
                let ring_slot = self.windows_at(self.cursor_time()).ring_slot_at(self.cursor_time());
                let placed = Placed { id: f.id, class: f.class, txtime: f.txtime, ring_slot };
                self.ring.place(k, placed, f.data.as_ref());
                len
            }
            Next::BestEffort(len) => {
                let f = self.be.pop().expect("the head was just found");
                self.queued[usize::from(f.class.0)] -= 1;
                let ring_slot = self.windows_at(self.cursor_time()).ring_slot_at(self.cursor_time());
                let placed = Placed { id: f.id, class: f.class, txtime: None, ring_slot };
                self.ring.place(k, placed, f.data.as_ref());
                len
            }
            Next::Filler(len) => len,
        };
        self.ring.set_len(k, len);
        let _ = self.ring.post_to(k + 1);
        self.track.push(u64::from(len) + OVERHEAD, self.cursor.time());
        self.cursor_to(self.next_pos());
    }

    /// Move the cursor (the exact EPHC time of `next_pos`) to byte `p`: by the longest filler's stride where that
    /// is the step (most descriptors), else by the clock.
    fn cursor_to(&mut self, p: u64) {
        let n = p.wrapping_sub(self.cursor.count());
        if let Some(next) = self.stride.filter(|s| s.len() == n).and_then(|s| s.step(&self.cursor)) {
            self.cursor = next;
            return;
        }
        self.cursor = self.ephc.exact_from(&self.cursor, p);
        if self.stride.is_none_or(|s| s.step(&self.cursor).is_none()) {
            // A new piece of the clock (or none yet): its stride, once.
            self.stride = self.ephc.stride(p, self.max_wire());
        }
    }

    /// The cursor's exact time.
    fn cursor_time(&self) -> Rat {
        let (num, den) = self.cursor.fraction();
        Rat { num, den }
    }

    /// The longest descriptor's wire bytes.
    fn max_wire(&self) -> u64 {
        u64::from(self.cfg.max_frame) + OVERHEAD
    }

    /// The first real-time frame still to go and the byte it starts at (at `p` or later), rejecting those the
    /// wire has passed beyond their window.
    fn rt_head(&mut self, p: u64) -> Option<((Tai, FrameId), u64)> {
        loop {
            let key = self.rt.first_key()?;
            if let Some((k, gen, b)) = self.checked {
                if k == key && gen == self.clock_gen && b >= p {
                    // Found and checked against its window under this clock already.
                    return Some((key, b));
                }
            }
            let (mut b, mut start) = self.target_of(key);
            let w = self.rt.get(&key).expect("the head");
            let span = self.span_of(w.wire);
            let why = if b < p {
                // The wire passed its byte: it leaves late, at `p`, if that is still inside its window.
                b = p;
                start = self.time_at(b);
                self.passed(key.0)
            } else {
                // No byte puts all of it inside its window (one narrower than the frame plus a byte, or a
                // clock step since it was admitted).
                Reason::NotOwned
            };
            if start >= w.open && start + span <= w.close {
                self.checked = Some((key, self.clock_gen, b));
                return Some((key, b));
            }
            let w = self.rt.remove(&key).expect("just seen");
            self.queued[usize::from(w.frame.class.0)] -= 1;
            self.reject(w.frame.id, w.frame.class, why);
        }
    }

    /// The byte the waiting frame `key` starts at and its exact EPHC start (see [`ByteStation::byte_in_window`]),
    /// found once per clock generation.
    fn target_of(&mut self, key: (Tai, FrameId)) -> (u64, Rat) {
        let gen = self.clock_gen;
        let w = self.rt.get(&key).expect("a waiting frame");
        if let Some((g, b, t)) = w.target {
            if g == gen {
                return (b, t);
            }
        }
        let (b, t) = self.byte_in_window(key.0, w.open, w.close, self.span_of(w.wire));
        if let Some(w) = self.rt.get_mut(&key) {
            w.target = Some((gen, b, t));
        }
        (b, t)
    }

    /// The byte nearest `t` at which a frame of `span` lies inside `[open, close)`: the nearest byte, or the
    /// one after it if that starts before the window, or the one before it if the frame would run past it; and
    /// that byte's exact EPHC start.
    pub(super) fn byte_in_window(&self, t: Tai, open: Rat, close: Rat, span: Rat) -> (u64, Rat) {
        let (b, at, before) = self.nearest_byte(t);
        if at < open {
            return (b + 1, self.time_at(b + 1));
        }
        if at + span > close && b > 0 {
            let prev = before.unwrap_or_else(|| self.time_at(b - 1));
            if prev >= open {
                return (b - 1, prev);
            }
        }
        (b, at)
    }

    /// The byte whose EPHC start is nearest `t` (the later one on a tie), its exact start, and the start of the
    /// byte before it where that was found on the way.
    fn nearest_byte(&self, t: Tai) -> (u64, Rat, Option<Rat>) {
        // From the cursor (a future time, the usual case: no 128-bit division), or by the clock.
        let (after, t1) = if t >= self.cursor.time() {
            let e = self.ephc.first_at_or_after_from(&self.cursor, t);
            let (num, den) = e.fraction();
            (e.count(), Rat { num, den })
        } else {
            let after = self.ephc.slot_at_or_after(t).unwrap_or(0);
            (after, self.time_at(after))
        };
        if after == 0 {
            return (0, t1, None);
        }
        let t0 = self.time_at(after - 1);
        let t = Rat::ns(i128::from(t.0));
        if t - t0 < t1 - t {
            (after - 1, t0, None)
        } else {
            (after, t1, Some(t0))
        }
    }

    /// The wire length for the real-time frame `key` starting at `p`: its own, padded by the gap to the next
    /// real-time frame's byte if that gap is too short for a filler (and the padding fits the longest frame).
    fn padded(&mut self, key: (Tai, FrameId), p: u64) -> u32 {
        let w = self.rt.get(&key).expect("a waiting frame");
        let own = (w.wire - OVERHEAD) as u32;
        let end = p + w.wire;
        let next = self.rt.first_above(&key);
        let Some((&key2, _)) = next else { return own };
        let (b2, _) = self.target_of(key2);
        let gap = b2.saturating_sub(end);
        if gap > 0 && gap < MIN_WIRE && u64::from(own) + gap <= u64::from(self.cfg.max_frame) {
            own + gap as u32
        } else {
            own
        }
    }

    /// The wire length of the best-effort frame at the head of its queue if it may go at `p`: within `gap`
    /// bytes (filling it exactly or leaving room for a filler) and in no window.
    fn best_effort_fits(&self, p: u64, gap: Option<u64>) -> Option<u32> {
        let f = self.be.front()?;
        let len = (f.data.as_ref().len() as u64 + 4).max(MIN_WIRE - OVERHEAD);
        let wire = len + OVERHEAD;
        if let Some(gap) = gap {
            if wire > gap || (wire < gap && gap - wire < MIN_WIRE) {
                return None;
            }
        }
        let start = self.time_at(p);
        let span = self.span_of(wire);
        let end = start + span;
        self.reserved_in(start, end).is_none().then_some(len as u32)
    }

    /// The byte at least a minimum filler after `p` where the best-effort frame at the head of its queue first
    /// lies in no window, and its wire bytes (`None` without one, or none within two cycles): fillers are sized
    /// to land it there, as they land real-time frames on their bytes.
    fn be_aim(&self, p: u64) -> Option<(u64, u64)> {
        let f = self.be.front()?;
        let wire = (f.data.as_ref().len() as u64 + 4).max(MIN_WIRE - OVERHEAD) + OVERHEAD;
        let span = self.span_of(wire);
        let mut from = self.time_at(p + MIN_WIRE);
        for _ in 0..4 {
            let t = self.free_from(from, span)?;
            // The first byte at or after `t` (a byte starts at a whole ns or between: the one after its floor
            // may be the first at or after it).
            let mut b = self.ephc.slot_at_or_after(Tai(i64::try_from(t.floor()).ok()?))?.max(p + MIN_WIRE);
            while self.time_at(b) < t {
                b += 1;
            }
            let start = self.time_at(b);
            if self.reserved_in(start, start + span).is_none() {
                return Some((b, wire));
            }
            // Rounded up to its byte, it runs into the next window: the stretch after that.
            from = start;
        }
        None
    }

    /// A filler's wire length towards a real-time frame `gap` bytes on: all of it if one filler can, else as
    /// long as possible while leaving at least a minimum frame's room.
    fn filler_towards(&self, gap: u64) -> u32 {
        let longest = u64::from(self.cfg.max_frame) + OVERHEAD;
        let wire = if gap <= longest {
            gap
        } else if gap - longest < MIN_WIRE {
            gap - MIN_WIRE
        } else {
            longest
        };
        (wire - OVERHEAD) as u32
    }
}
