//! The wire clock: byte positions on the wire against the EPHC and the schedule.
//!
//! It holds the O(1) step the pacing loop posts slots with ([`step`]), the record of posted slots ([`track`]), the
//! link's lifecycle and the meaning of each reported gap ([`lifecycle`]) and the link-up's snap onto the schedule's
//! byte grid, and the wire by the host clock ([`host`]), for both timings; the rest of the wire clock (the EPHC's
//! pieces and re-anchoring) is still in `station/grid.rs` and `bytes/` (issue 30).

pub(crate) mod host;
pub(crate) mod lifecycle;
pub(crate) mod step;
pub(crate) mod track;

use crate::time::{SlotPeriod, Tai};

/// How many of its latest underruns a station remembers the lost time of (the slot station as schedule slots, the
/// byte clock as EPHC intervals), so that a frame due in one is rejected `underrun`, not `late`. A host stalled on a
/// host-paced link reports several gaps a poll; the frames waiting behind them are judged when the wire reaches them.
pub(crate) const LOST_KEPT: usize = 64;

/// The link comes up at host time `t`: the EPHC is anchored there, moved later by less than a byte time so that its
/// byte boundaries meet the schedule's (`origin + m·byte`). The EPHC of a station without synchronisation is its own
/// clock, anchored to the host's at start; this keeps frames and slots due on the schedule's byte grid exactly on
/// it rather than up to a byte off. Links whose byte time is not whole ns (2.5, 10, 25 Gb/s, …) keep `t`.
/// Both timings snap their link-up (and a backend's later report of it) here.
pub(crate) fn snap_to_bytes(t: Tai, byte: SlotPeriod, origin: Tai) -> Tai {
    if byte.den() != 1 {
        return t;
    }
    let off = (i128::from(origin.0) - i128::from(t.0)).rem_euclid(i128::from(byte.num()));
    Tai(crate::station::sat_i64(i128::from(t.0) + off))
}
