//! Frames handed to a station and the one outcome each of them ends with.
//!
//! Every frame submitted gets exactly one [`Outcome`]: sent in slot `k` at time `t`, or rejected with a
//! [`Reason`]. The station never drops a frame without one (ARCHITECTURE.md §4.2).

use core::fmt;

use crate::isolation::ClassId;
use crate::time::Tai;

/// Caller-chosen identity of a frame, echoed in its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FrameId(pub u64);

/// A frame handed to the station: L2 bytes without FCS (the NIC or the backend appends it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame<B> {
    /// Identity echoed in the outcome.
    pub id: FrameId,
    /// Traffic class.
    pub class: ClassId,
    /// Scheduled transmission time (TAI) for real-time classes; `None` for best effort.
    pub txtime: Option<Tai>,
    /// L2 header and payload, without FCS; padded with zeros to the slot size on the wire.
    pub data: B,
}

/// Where and when a frame left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Absolute slot number (EPHC count).
    pub slot: u64,
    /// Wire start time of the slot on the EPHC (TAI).
    pub time: Tai,
    /// Ring slot of the ownership map the frame occupied (`slot mod N` until an underrun shifts the grid).
    pub ring_slot: u32,
    /// Real-time frames: the start of the schedule slot that holds the frame's txtime — where the schedule put
    /// it. `time − scheduled` is the frame's deviation from its schedule: 0 on an undisturbed link; up to a few
    /// slots for a frame the relaxed policy moved; the gap's length for a frame that was already posted when the
    /// link went idle (see [`crate::station`], underruns). `None` for best effort.
    pub scheduled: Option<Tai>,
}

impl Sent {
    /// `time − scheduled` (real-time frames).
    pub fn deviation(&self) -> Option<crate::time::Nanos> {
        self.scheduled.map(|s| self.time - s)
    }
}

/// Why a frame was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Its slot was already posted to the NIC (or lies in the past) when the frame arrived.
    Late,
    /// Its txtime is further ahead than the station accepts (`max_advance`).
    TooFarAhead,
    /// Strict policy: its slot already holds another frame. Relaxed: no owned slot free within one ring cycle.
    SlotTaken,
    /// Strict policy: its slot belongs to another class (or to best effort).
    NotOwned,
    /// Longer than a slot.
    Oversize,
    /// Shorter than an Ethernet header.
    Runt,
    /// No such class.
    UnknownClass,
    /// A real-time class frame without a txtime.
    MissingTxtime,
    /// A best-effort class frame with a txtime.
    UnexpectedTxtime,
    /// The pre-buffer is full.
    QueueFull,
    /// The class can never be served: a best-effort class while every slot is owned.
    NoCapacity,
    /// The client is not allowed to use the class.
    Forbidden,
    /// An underrun broke the slot grid and the frame's new slot had already passed or was taken.
    Underrun,
    /// The NIC or kernel refused the frame.
    LinkFault,
    /// The station stopped before the frame's slot came.
    Shutdown,
    /// A clock adjustment (a PTP step or frequency change) moved the frame's slot: it had already passed, was
    /// taken, or was not its class's.
    ClockStep,
    /// Network time was asked for (a scheduled frame on a station configured for PTP) but the station is not
    /// synchronised: its |offset| from the master is not below the sync threshold, or it lost its master.
    NotSynchronised,
    /// A schedule change (a new gate control list taking effect at its base time) left the frame's schedule slot
    /// without its class: the frame was due after the change, in a window the new schedule no longer gives it.
    ScheduleChange,
}

impl Reason {
    /// Number of reasons.
    pub const COUNT: usize = 18;

    /// All reasons, for counters and reports.
    pub const ALL: [Reason; Reason::COUNT] = [
        Reason::Late,
        Reason::TooFarAhead,
        Reason::SlotTaken,
        Reason::NotOwned,
        Reason::Oversize,
        Reason::Runt,
        Reason::UnknownClass,
        Reason::MissingTxtime,
        Reason::UnexpectedTxtime,
        Reason::QueueFull,
        Reason::NoCapacity,
        Reason::Forbidden,
        Reason::Underrun,
        Reason::LinkFault,
        Reason::Shutdown,
        Reason::ClockStep,
        Reason::NotSynchronised,
        Reason::ScheduleChange,
    ];

    /// Stable machine-readable name (used in records).
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Late => "late",
            Reason::TooFarAhead => "too-far-ahead",
            Reason::SlotTaken => "slot-taken",
            Reason::NotOwned => "not-owned",
            Reason::Oversize => "oversize",
            Reason::Runt => "runt",
            Reason::UnknownClass => "unknown-class",
            Reason::MissingTxtime => "missing-txtime",
            Reason::UnexpectedTxtime => "unexpected-txtime",
            Reason::QueueFull => "queue-full",
            Reason::NoCapacity => "no-capacity",
            Reason::Forbidden => "forbidden",
            Reason::Underrun => "underrun",
            Reason::LinkFault => "link-fault",
            Reason::Shutdown => "shutdown",
            Reason::ClockStep => "clock-step",
            Reason::NotSynchronised => "not-synchronised",
            Reason::ScheduleChange => "schedule-change",
        }
    }

    /// Parse the name written by [`Reason::as_str`].
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == s)
    }

    /// Index into [`Reason::ALL`].
    pub fn index(self) -> usize {
        Reason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The single outcome of one frame.
#[must_use = "every frame's outcome must reach its owner"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The frame.
    pub id: FrameId,
    /// Its class.
    pub class: ClassId,
    /// Sent or rejected.
    pub result: Result<Sent, Reason>,
}

/// Counters of a station; fillers are counted apart from real traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames submitted.
    pub submitted: u64,
    /// Real frames that left the NIC.
    pub sent: u64,
    /// Real frames rejected, by [`Reason::index`].
    pub rejected: [u64; Reason::COUNT],
    /// Filler slots the NIC has transmitted.
    pub fillers_sent: u64,
    /// Slots posted to the NIC (real and filler).
    pub slots_posted: u64,
    /// Underruns detected.
    pub underruns: u64,
    /// Whole slots the wire grid is behind the schedule's after underruns (wire slot `k` carries schedule slot
    /// `k + grid_shift_slots`).
    pub grid_shift_slots: i64,
}

impl Counters {
    /// Total rejected.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().sum()
    }
}
