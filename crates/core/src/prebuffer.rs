//! Pre-buffering (paper §5.2): frames that arrive before their slot enters the insertion window wait here.
//!
//! Real-time frames wait in a min-heap ordered by txtime (ties by arrival), so they are inserted earliest
//! deadline first. Best-effort frames wait FIFO per class and take free unowned slots in order.

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::outcome::Frame;
use crate::time::Tai;

/// A real-time frame waiting for its slot.
#[derive(Debug)]
pub struct Waiting<B> {
    /// The frame (its txtime is `Some`).
    pub frame: Frame<B>,
    /// Arrival order, for ties.
    pub seq: u64,
}

impl<B> Waiting<B> {
    fn key(&self) -> (Tai, u64) {
        (self.frame.txtime.unwrap_or(Tai(i64::MIN)), self.seq)
    }
}

impl<B> PartialEq for Waiting<B> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<B> Eq for Waiting<B> {}
impl<B> PartialOrd for Waiting<B> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<B> Ord for Waiting<B> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest txtime on top.
        other.key().cmp(&self.key())
    }
}

/// Real-time frames ordered by txtime.
#[derive(Debug)]
pub struct RtQueue<B> {
    heap: BinaryHeap<Waiting<B>>,
    seq: u64,
    /// At least the latest txtime waiting (`None`: nothing waits).
    latest: Option<Tai>,
}

impl<B> Default for RtQueue<B> {
    fn default() -> Self {
        RtQueue { heap: BinaryHeap::new(), seq: 0, latest: None }
    }
}

impl<B> RtQueue<B> {
    /// Queue a frame (it must have a txtime).
    pub fn push(&mut self, frame: Frame<B>) {
        self.seq += 1;
        self.latest = self.latest.max(frame.txtime);
        self.heap.push(Waiting { frame, seq: self.seq });
    }
    /// The earliest txtime waiting.
    pub fn peek_txtime(&self) -> Option<Tai> {
        self.heap.peek().and_then(|w| w.frame.txtime)
    }
    /// Take the earliest frame.
    pub fn pop(&mut self) -> Option<Frame<B>> {
        let w = self.heap.pop()?;
        if self.heap.is_empty() {
            self.latest = None;
        }
        Some(w.frame)
    }
    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    /// True if none wait.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Take every frame (for shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = Frame<B>> + '_ {
        self.latest = None;
        self.heap.drain().map(|w| w.frame)
    }
    /// Take out the frames due at or after `from` that `lost` picks; the others keep their order. When every frame
    /// waiting is due before `from` (a schedule change beyond all of them) nothing is looked at.
    pub fn take_from(&mut self, from: Tai, mut lost: impl FnMut(&Frame<B>) -> bool) -> Vec<Frame<B>> {
        if self.latest.is_none_or(|l| l < from) {
            return Vec::new();
        }
        let all = core::mem::take(&mut self.heap).into_vec();
        let (gone, kept): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|w| w.frame.txtime.is_some_and(|t| t >= from) && lost(&w.frame));
        self.heap = BinaryHeap::from(kept);
        if self.heap.is_empty() {
            self.latest = None;
        }
        gone.into_iter().map(|w| w.frame).collect()
    }
}

/// Best-effort frames, FIFO per class.
#[derive(Debug)]
pub struct BeQueues<B> {
    queues: Vec<VecDeque<Frame<B>>>,
    total: usize,
    /// Round-robin start among classes.
    next: usize,
}

impl<B> BeQueues<B> {
    /// Queues for `classes` classes.
    pub fn new(classes: usize) -> Self {
        BeQueues { queues: (0..classes).map(|_| VecDeque::new()).collect(), total: 0, next: 0 }
    }
    /// Queue a frame of class index `c`.
    pub fn push(&mut self, c: usize, frame: Frame<B>) {
        self.queues[c].push_back(frame);
        self.total += 1;
    }
    /// Put a frame back at the head of its queue.
    pub fn push_front(&mut self, c: usize, frame: Frame<B>) {
        self.queues[c].push_front(frame);
        self.total += 1;
    }
    /// Next frame, round-robin over classes.
    pub fn pop(&mut self) -> Option<Frame<B>> {
        if self.total == 0 {
            return None;
        }
        let n = self.queues.len();
        for i in 0..n {
            let c = (self.next + i) % n;
            if let Some(f) = self.queues[c].pop_front() {
                self.next = (c + 1) % n;
                self.total -= 1;
                return Some(f);
            }
        }
        None
    }
    /// The frame [`BeQueues::pop`] would take next.
    pub fn front(&self) -> Option<&Frame<B>> {
        let n = self.queues.len();
        (0..n).find_map(|i| self.queues[(self.next + i) % n].front())
    }
    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.total
    }
    /// True if none wait.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::ClassId;
    use crate::outcome::FrameId;

    fn f(id: u64, t: i64) -> Frame<()> {
        Frame { id: FrameId(id), class: ClassId(0), txtime: Some(Tai(t)), data: () }
    }

    /// A schedule change takes out the frames it leaves without a slot: only frames due from its time on are
    /// looked at (none when every frame waiting is due before it), and the rest keep their order.
    #[test]
    fn take_from_looks_only_at_frames_from_its_time_on() {
        let mut q = RtQueue::default();
        for (id, t) in [(1, 50), (2, 10), (3, 30), (4, 30), (5, 70)] {
            q.push(f(id, t));
        }
        let mut looked = 0;
        assert!(q
            .take_from(Tai(71), |_| {
                looked += 1;
                true
            })
            .is_empty());
        assert_eq!(looked, 0, "every frame is due before the change");
        let mut seen = Vec::new();
        let gone = q.take_from(Tai(30), |fr| {
            seen.push(fr.id.0);
            fr.id.0 != 4
        });
        seen.sort_unstable();
        assert_eq!(seen, [1, 3, 4, 5]);
        let mut gone: Vec<u64> = gone.iter().map(|fr| fr.id.0).collect();
        gone.sort_unstable();
        assert_eq!(gone, [1, 3, 5]);
        let order: Vec<u64> = core::iter::from_fn(|| q.pop()).map(|fr| fr.id.0).collect();
        assert_eq!(order, [2, 4]);
        assert!(q.take_from(Tai(i64::MIN), |_| panic!("empty: nothing to look at")).is_empty());
    }

    #[test]
    fn earliest_txtime_first_ties_by_arrival() {
        let mut q = RtQueue::default();
        for (id, t) in [(1, 50), (2, 10), (3, 50), (4, 30)] {
            q.push(f(id, t));
        }
        let order: Vec<u64> = core::iter::from_fn(|| q.pop()).map(|f| f.id.0).collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }

    #[test]
    fn best_effort_is_fifo_and_round_robin() {
        let mut q = BeQueues::new(2);
        q.push(0, f(1, 0));
        q.push(0, f(2, 0));
        q.push(1, f(3, 0));
        let order: Vec<u64> = core::iter::from_fn(|| q.pop()).map(|f| f.id.0).collect();
        assert_eq!(order, vec![1, 3, 2]);
    }

    #[test]
    fn the_head_is_what_pop_takes() {
        let mut q = BeQueues::new(3);
        for (c, id) in [(0, 1), (0, 2), (2, 3), (2, 5)] {
            q.push(c, f(id, 0));
        }
        let mut order = Vec::new();
        while let Some(head) = q.front().map(|f| f.id.0) {
            let popped = q.pop().map(|f| f.id.0);
            assert_eq!(popped, Some(head), "front is what pop takes");
            order.push(head);
        }
        assert_eq!(order, vec![1, 3, 2, 5]);
        assert!(q.is_empty() && q.pop().is_none());
    }
}
