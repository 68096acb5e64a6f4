//! # keepon-nic
//!
//! NIC backends for the keepon station and the loop that drives them.
//!
//! - [`Nic`]: what a backend must do — say how many slots the NIC has consumed (a count), take posted slots in
//!   order, report what left the wire, keep the poll loop's time.
//! - [`sim`]: a NIC and host in virtual time. Slots leave back to back at line rate, exactly; the host's poll
//!   loop has explicit, seeded costs and jitter; a gap on the wire is real and reported. Runs everywhere.
//! - [`rxring`]: the dual clock's RX core on the simulator — a ring a line-rate peer fills, and its poll loop.
//! - [`faults`]: the simulated NIC's own failure modes (stalled DMA fetches, late completions), off by default.
//! - [`driver`]: the station loop — observe, submit due frames, poll the station, post, collect outcomes — the
//!   same for every backend.
//!
//! ## Adding a backend
//! Implement [`Nic`]. `observe` returns the NIC's consumed count (never more than you were given) and your
//! host clock; `post` must hand every slot to the hardware in order or fail (a slot silently lost would
//! desynchronise the count-based clock); `drain_wire` reports consumed slots, with a wire time if the backend
//! knows one. The station, the clock and the records need no change.
#![deny(missing_docs)]

pub mod driver;
pub mod emulation;
pub mod faults;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod rxring;
pub mod sim;
pub mod source;

use std::fmt;

use keepon_core::ring::SlotView;
use keepon_core::station::Gap;
use keepon_core::time::{Nanos, Tai};

/// What the backend saw at one poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicObservation {
    /// Slots the NIC has finished with since it started.
    pub consumed: u64,
    /// Host clock (TAI).
    pub now: Tai,
    /// Gaps the backend saw on the wire since the last observation, in order (if it can see gaps).
    pub gaps: Vec<Gap>,
}

/// How exact a backend's timing is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Simulated: slot times are exact by construction (virtual time).
    Simulated,
    /// A real PHY paces the slots: as exact as the line clock.
    LineRate,
    /// Paced from the host clock (links without a line rate, e.g. veth): microseconds, approximate.
    HostPaced,
    /// The kernel's ETF qdisc (or the NIC's LaunchTime) sends each frame at its txtime: keepon records the
    /// txtime it asked for; the real send time is the kernel's, not measured.
    KernelTxtime,
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Timing::Simulated => "simulated (exact, virtual time)",
            Timing::LineRate => "line rate (as exact as the PHY)",
            Timing::HostPaced => "host-paced (approximate, µs)",
            Timing::KernelTxtime => "kernel ETF, not measured (sent at the txtime keepon asked for)",
        })
    }
}

/// One slot that left the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireEvent {
    /// NIC count of the slot.
    pub nic_slot: u64,
    /// Wire start time: the true one when the backend knows it (the simulator); otherwise the driver fills in
    /// the EPHC slot time.
    pub start: Option<Tai>,
    /// Receiver timestamp, when a receiver saw it (the simulator's receiver does).
    pub rx: Option<Tai>,
    /// Real frame id, or `None` for a filler.
    pub frame: Option<keepon_core::outcome::FrameId>,
    /// Frame bytes without FCS, when kept (real frames; fillers only if asked for).
    pub bytes: Option<Vec<u8>>,
    /// Host-paced backends: when (backend clock, [`Nic::now`]) the frame really left — the kernel's software
    /// TX timestamp where the backend gets one (AF_PACKET `sendmmsg`), otherwise interpolated within the call
    /// that handed it to the kernel; later than its slot's time when the host overslept. `None` where the NIC
    /// paces.
    pub released: Option<Tai>,
    /// `released` is the kernel's TX timestamp (not interpolated).
    pub stamped: bool,
    /// `released` on the EPHC (filled in by the driver): later than the slot's EPHC time by the host's release
    /// lag — microseconds usually, milliseconds after a host stall.
    pub released_ephc: Option<Tai>,
    /// The slot's start on the EPHC, as the station posted it (filled in by the driver while the station still
    /// tracks the slot). On the simulator `start` is the true (network) time and `ephc − start` the EPHC's error.
    pub ephc: Option<Tai>,
    /// The schedule time of the schedule slot the slot carried (filled in by the driver; `None` for a spacer or
    /// a slot the station no longer tracks): `ephc − grid` is how far the wire was off its schedule.
    pub grid: Option<Tai>,
    /// The grid was locked when the slot was posted (not being acquired after link-up, a step or a restart).
    pub locked: bool,
}

/// Backend failures.
#[derive(Debug)]
pub enum NicError {
    /// An OS call failed.
    Io(std::io::Error),
    /// The kernel refused or dropped slots: the count-based clock can no longer be trusted.
    Dropped {
        /// Slots lost.
        slots: u64,
    },
    /// The backend cannot run with this configuration.
    Unsupported(String),
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NicError::Io(e) => write!(f, "NIC I/O error: {e}"),
            NicError::Dropped { slots } => {
                write!(f, "the kernel dropped {slots} posted slots; the slot clock is broken")
            }
            NicError::Unsupported(why) => write!(f, "unsupported: {why}"),
        }
    }
}

impl std::error::Error for NicError {}

impl From<std::io::Error> for NicError {
    fn from(e: std::io::Error) -> Self {
        NicError::Io(e)
    }
}

/// A NIC transmit queue driven in keepon's slot model.
pub trait Nic {
    /// Short description: backend, interface, filler mode, and why.
    fn describe(&self) -> String;
    /// How exact the timing of this backend is.
    fn timing(&self) -> Timing;
    /// Consumed count, host time, and any gap seen.
    fn observe(&mut self) -> Result<NicObservation, NicError>;
    /// Hand these slots (consecutive, in order) to the NIC.
    fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError>;
    /// Move consumed slots' wire events into `out` (fillers only if the backend keeps them).
    fn drain_wire(&mut self, out: &mut Vec<WireEvent>);
    /// Let the poll loop's period pass (virtual time in the simulator, sleeping or spinning on hardware).
    fn wait(&mut self, period: Nanos);
    /// Host time now.
    fn now(&self) -> Tai;
    /// The delay from a post to the slot starting on an idle link, as far as the backend knows it.
    fn post_latency(&self) -> Nanos;
    /// The longest frame (L2 bytes with FCS) the backend can send: fillers are posted with any length from 64
    /// bytes up to this to keep the wire on its schedule (the driver never asks for more than the slot size
    /// below it).
    fn max_frame_bytes(&self) -> u32 {
        keepon_core::time::MAX_STD_FRAME_BYTES
    }
    /// Slots consumed (fetched) but not yet finished on the wire, if the backend knows; the loop waits for
    /// them before it ends so that their wire events are reported.
    fn unfinished(&self) -> u64 {
        0
    }
    /// Real frames among the consumed slots that the kernel refused after they were posted (the ETF backend
    /// learns this from the socket's error queue), each with its reason. The driver turns their outcomes into
    /// these rejections. Must be reported no later than the observation that counts their slots consumed.
    fn drain_refused(&mut self, _out: &mut Vec<(keepon_core::outcome::FrameId, keepon_core::outcome::Reason)>) {}
    /// The backend's clock ([`Nic::now`]) at host time `host` (`CLOCK_TAI`). The identity, unless the backend
    /// emulates an oscillator error for tests (`link.emulated_offset`, `link.emulated_ppm`).
    fn link_time(&self, host: Tai) -> Tai {
        host
    }
    /// The host time (`CLOCK_TAI`) at which the backend's clock reads `link` (the inverse of [`Nic::link_time`]).
    fn host_time(&self, link: Tai) -> Tai {
        link
    }
}

/// A boxed backend is a backend (so `linux::open`'s `Box<dyn Nic + Send>` drives a station like any other).
impl<T: Nic + ?Sized> Nic for Box<T> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn timing(&self) -> Timing {
        (**self).timing()
    }
    fn observe(&mut self) -> Result<NicObservation, NicError> {
        (**self).observe()
    }
    fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError> {
        (**self).post(slots)
    }
    fn drain_wire(&mut self, out: &mut Vec<WireEvent>) {
        (**self).drain_wire(out)
    }
    fn wait(&mut self, period: Nanos) {
        (**self).wait(period)
    }
    fn now(&self) -> Tai {
        (**self).now()
    }
    fn post_latency(&self) -> Nanos {
        (**self).post_latency()
    }
    fn max_frame_bytes(&self) -> u32 {
        (**self).max_frame_bytes()
    }
    fn unfinished(&self) -> u64 {
        (**self).unfinished()
    }
    fn drain_refused(&mut self, out: &mut Vec<(keepon_core::outcome::FrameId, keepon_core::outcome::Reason)>) {
        (**self).drain_refused(out)
    }
    fn link_time(&self, host: Tai) -> Tai {
        (**self).link_time(host)
    }
    fn host_time(&self, link: Tai) -> Tai {
        (**self).host_time(link)
    }
}
