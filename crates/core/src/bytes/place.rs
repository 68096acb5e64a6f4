//! Where a frame can go before it is handed in, and the exact time it will leave: what a PTP port needs to write
//! an event message's TX time into it (one-step Sync) or to aim it at a window of its class.

use super::windows::Rat;
use super::{ByteStation, MIN_WIRE};
use crate::isolation::ClassId;
use crate::time::{Tai, WIRE_OVERHEAD_BYTES};

/// A place on the wire for a frame of a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The txtime to hand the frame in with.
    pub txtime: Tai,
    /// When it will start on the wire, on the EPHC as it is now (the `Sent` outcome's time, unless the clock is
    /// adjusted before the frame is posted).
    pub tx: Tai,
    /// When its wire time ends (whole ns, rounded up): a later frame of the class must not start before.
    pub end: Tai,
}

/// Wire bytes of a frame of `len` data bytes (without FCS): FCS, padding to the minimum frame, preamble and gap.
pub(super) fn wire_bytes(len: usize) -> u64 {
    let overhead = u64::from(WIRE_OVERHEAD_BYTES);
    (len as u64 + 4).max(MIN_WIRE - overhead) + overhead
}

impl<B: AsRef<[u8]>> ByteStation<B> {
    /// The first place at or after `from` where a frame of `len` data bytes of class `c` lies wholly inside one
    /// of the class's windows, within a cycle of `from`: the frame handed in with [`Place::txtime`] is admitted
    /// there (unless another frame of the class holds that time, or the wire has passed it). `None` for best
    /// effort, or a frame longer than every window of the class.
    pub fn first_place(&self, c: ClassId, from: Tai, len: usize) -> Option<Place> {
        let windows = &self.cfg.windows;
        let span = self.span_of(wire_bytes(len));
        let last = Rat::ns(i128::from(from.0)) + windows.cycle();
        let mut start = Rat::ns(i128::from(from.0));
        let spans = windows.spans().max(self.changes.pending.as_ref().map_or(0, |p| p.list.spans()));
        for _ in 0..=2 * spans + 1 {
            // Frames are handed in at whole ns: the first at or after `start`.
            let at = Rat::ns(start.ceil());
            if let Some((open, close)) = self.window_of(c, at, at + span) {
                let txtime = Tai(i64::try_from(at.floor()).ok()?);
                let (_, begin) = self.byte_in_window(txtime, open, close, span);
                let tx = Tai(i64::try_from(begin.floor()).ok()?);
                let end = Tai(i64::try_from((begin + span).ceil()).ok()?);
                return Some(Place { txtime, tx, end });
            }
            // Not inside a window from `at`: the next window's opening (a nanosecond's thousandth on, so that a
            // window it is already in, too short for the rest of the frame, is passed).
            start = self.opening_after(c, start + Rat { num: 1, den: 1_000 })?;
            if start > last {
                return None;
            }
        }
        None
    }

    /// Where the posted wire ends, on the EPHC as it is now (rounded up to whole ns): a frame due before this is
    /// `late`.
    pub fn posted_until(&self) -> Tai {
        Tai(i64::try_from(self.time_at(self.next_pos()).ceil()).unwrap_or(i64::MAX))
    }

    /// The byte position descriptor `k` starts at (posted ones as posted; later ones: where the next starts).
    pub fn wire_position(&self, k: u64) -> u64 {
        self.track.start(k).unwrap_or(self.next_pos())
    }
}
