//! IEEE 802.1CB frame replication and elimination for reliability (FRER), sans-IO.
//!
//! A talker sends every frame of a stream as several copies over disjoint paths, each copy carrying the same
//! sequence number in a redundancy tag; the listener passes the first copy of each sequence number and discards
//! the others, so a stream survives the loss of any one path without a retransmission or a gap. Mainline Linux
//! has none of this; keepon does it in software:
//!
//! - [`rtag`] — the R-TAG (EtherType 0xF1C1, 16 reserved bits, 16-bit sequence number) as a checked view and a
//!   representation, and where it goes in a frame (after the MAC addresses, after a VLAN tag if there is one);
//! - [`generation`] — the sequence generation function: one counter per stream, wrapping at 2¹⁶;
//! - [`recovery`] — the sequence recovery function: the standard's vector recovery algorithm (a history window
//!   of sequence numbers seen) and match recovery (only the last one), each with a reset timeout after which it
//!   takes any sequence number, and the standard's counters per stream.
//!
//! Time is passed in ([`crate::time::Tai`]); nothing here reads a clock or touches a socket. Not implemented:
//! stream identification functions other than what the caller does (keepon's listener keys streams by the test
//! frame's flow number), individual recovery, latent error detection, and the redundancy tags other than the
//! R-TAG (HSR, PRP).

pub mod generation;
pub mod recovery;
pub mod rtag;

use core::fmt;

pub use generation::SequenceGenerator;
pub use recovery::{Algorithm, Counters, Recovery, RecoveryConfig, Verdict};
pub use rtag::{Rtag, RtagFrame, ETHERTYPE_RTAG, RTAG_LEN};

/// What goes wrong with FRER frames and settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrerError {
    /// The frame (or output buffer) has this many bytes, too few for the tag or the headers before it.
    Truncated(usize),
    /// No R-TAG where one belongs: this EtherType is there instead.
    NotTagged(u16),
    /// The frame already has an R-TAG.
    AlreadyTagged,
    /// A history length outside `MIN_HISTORY..=MAX_HISTORY` of [`recovery`].
    History(u32),
    /// A reset timeout that is not positive (ns).
    ResetTimeout(i64),
}

impl fmt::Display for FrerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrerError::Truncated(n) => write!(f, "{n} bytes is too short for an R-TAG where it belongs"),
            FrerError::NotTagged(t) => write!(f, "EtherType {t:#06x} where an R-TAG ({ETHERTYPE_RTAG:#06x}) belongs"),
            FrerError::AlreadyTagged => write!(f, "the frame already has an R-TAG"),
            FrerError::History(n) => {
                write!(f, "history length {n} must be within {}..={}", recovery::MIN_HISTORY, recovery::MAX_HISTORY)
            }
            FrerError::ResetTimeout(ns) => write!(f, "reset timeout {ns} ns must be positive"),
        }
    }
}
