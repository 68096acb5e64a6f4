//! The daemon's own queues, one per class, between the clients and the station.
//!
//! Each class may have at most `share` frames in the station (handed in, no outcome yet: pre-buffered,
//! queued or posted), `share` being the station's budget per class, `max_pending`; frames beyond wait here,
//! at most `max_queued` per class (more are rejected `queue-full` when submitted). The station is thus never
//! handed a frame it would reject for want of room, and one class — best effort flooded by many clients,
//! say — can never take the daemon's queue space from another, whatever its clients do.

use std::collections::VecDeque;

use keepon_core::isolation::ClassId;
use keepon_core::outcome::{Frame, FrameId};
use keepon_core::time::Tai;
use keepon_nic::driver::Source;

/// Per-class queues feeding the station within each class's share.
pub struct Feed {
    queues: Vec<VecDeque<(Tai, Frame<Vec<u8>>)>>,
    in_station: Vec<usize>,
    share: usize,
    max_queued: usize,
}

impl Feed {
    /// Queues for `classes` classes, each allowed `share` frames in the station and `max_queued` here.
    pub fn new(classes: usize, share: usize, max_queued: usize) -> Feed {
        Feed { queues: vec![VecDeque::new(); classes], in_station: vec![0; classes], share: share.max(1), max_queued }
    }

    /// Queue a frame received at `now`; `Err(frame)` when its class's queue is full.
    pub fn push(&mut self, now: Tai, f: Frame<Vec<u8>>) -> Result<(), Frame<Vec<u8>>> {
        match self.queues.get_mut(usize::from(f.class.0)) {
            Some(q) if q.len() < self.max_queued => {
                q.push_back((now, f));
                Ok(())
            }
            _ => Err(f),
        }
    }

    /// A frame of `class` handed to the station got its outcome.
    pub fn settled(&mut self, class: ClassId) {
        if let Some(n) = self.in_station.get_mut(usize::from(class.0)) {
            *n = n.saturating_sub(1);
        }
    }

    /// Frames waiting here.
    pub fn queued(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// Per class: frames waiting here or handed to the station without an outcome yet.
    pub fn per_class(&self) -> Vec<usize> {
        self.queues.iter().zip(&self.in_station).map(|(q, n)| q.len() + n).collect()
    }

    /// Take every frame still waiting here (at shutdown).
    pub fn take_all(&mut self) -> Vec<(FrameId, ClassId)> {
        self.queues.iter_mut().flat_map(|q| q.drain(..)).map(|(_, f)| (f.id, f.class)).collect()
    }

    /// The first class with a frame waiting and room in the station.
    fn ready(&self) -> Option<usize> {
        (0..self.queues.len()).find(|&c| !self.queues[c].is_empty() && self.in_station[c] < self.share)
    }
}

impl Source for Feed {
    fn next_due(&self) -> Option<Tai> {
        self.ready().and_then(|c| self.queues[c].front()).map(|(t, _)| *t)
    }

    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        let c = self.ready()?;
        self.in_station[c] += 1;
        self.queues[c].pop_front().map(|(_, f)| f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(id: u64, class: u8) -> Frame<Vec<u8>> {
        Frame { id: FrameId(id), class: ClassId(class), txtime: None, data: vec![0; 64] }
    }

    #[test]
    fn a_class_at_its_share_does_not_block_another() {
        let mut feed = Feed::new(2, 2, 3);
        for i in 0..3 {
            feed.push(Tai(0), f(i, 1)).unwrap();
        }
        assert!(feed.push(Tai(0), f(9, 1)).is_err(), "queue of class 1 is full");
        assert_eq!(feed.take().map(|f| f.id), Some(FrameId(0)));
        assert_eq!(feed.take().map(|f| f.id), Some(FrameId(1)));
        assert_eq!(feed.next_due(), None, "class 1 is at its share");
        feed.push(Tai(5), f(10, 0)).unwrap();
        assert_eq!(feed.next_due(), Some(Tai(5)));
        assert_eq!(feed.take().map(|f| f.id), Some(FrameId(10)));
        feed.settled(ClassId(1));
        assert_eq!(feed.take().map(|f| f.id), Some(FrameId(2)));
        assert_eq!(feed.queued(), 0);
    }
}
