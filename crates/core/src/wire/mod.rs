//! The wire clock: byte positions on the wire against the EPHC and the schedule.
//!
//! So far it holds the O(1) step the pacing loop posts slots with ([`step`]); the rest of the wire clock (host
//! view, re-anchoring, the link's lifecycle) is still in `station/grid.rs` and `bytes/` (issue 30).

pub(crate) mod step;
pub(crate) mod track;
