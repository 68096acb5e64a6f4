//! The station loop: one thread, one NIC queue, one station.
//!
//! ```text
//!   loop {
//!       obs  = nic.observe()                    consumed count, host time, gap
//!       for frame due by obs.now: station.submit(frame, its submit time)
//!       poll = station.poll(obs)                observe → reclaim → place → post
//!       nic.post(poll.post)                     the lazy doorbell
//!       hand outcomes, wire events, underruns to the sink
//!       nic.wait(poll_period)
//!   }
//! ```
//!
//! When the source is exhausted and every frame has an outcome, the station shuts down, the NIC drains its
//! posted slots, and the loop ends.

use std::fmt;

use keepon_core::outcome::{Frame, Outcome};
use keepon_core::ring::RingError;
use keepon_core::station::{Observation, Station, StationConfig, StationError, Underrun};
use keepon_core::time::{Nanos, Tai};

use crate::{Nic, NicError, WireEvent};

/// Frames an application hands to the station over time.
pub trait Source {
    /// The next frame's submission time, or `None` when there are no more.
    fn next_due(&self) -> Option<Tai>;
    /// Take the next frame (whose submission time is [`Source::next_due`]).
    fn take(&mut self) -> Option<Frame<Vec<u8>>>;
}

/// What the loop reports as it runs.
#[derive(Debug)]
pub enum Event {
    /// A frame's single outcome.
    Outcome(Outcome),
    /// A slot that left the wire (real frames; fillers if the backend keeps them).
    Wire(WireEvent),
    /// An underrun the station detected.
    Underrun(Underrun),
}

/// Why the loop stopped early.
#[derive(Debug)]
pub enum DriverError {
    /// The station configuration is invalid.
    Station(StationError),
    /// The backend broke the ring protocol.
    Ring(RingError),
    /// The backend failed.
    Nic(NicError),
    /// The run exceeded its time bound.
    Timeout(Nanos),
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Station(e) => write!(f, "station: {e}"),
            DriverError::Ring(e) => write!(f, "ring: {e}"),
            DriverError::Nic(e) => write!(f, "{e}"),
            DriverError::Timeout(d) => write!(f, "run did not finish within {} ms", d.0 / 1_000_000),
        }
    }
}

impl std::error::Error for DriverError {}

impl From<RingError> for DriverError {
    fn from(e: RingError) -> Self {
        DriverError::Ring(e)
    }
}
impl From<NicError> for DriverError {
    fn from(e: NicError) -> Self {
        DriverError::Nic(e)
    }
}

/// Loop settings.
#[derive(Clone, Copy, Debug)]
pub struct LoopConfig {
    /// Requested time between polls.
    pub poll_period: Nanos,
    /// Longest run allowed (host time), after which the loop stops with [`DriverError::Timeout`].
    pub max_duration: Nanos,
}

/// A station bound to a NIC.
pub struct Driver<N: Nic> {
    /// The backend.
    pub nic: N,
    /// The driver model.
    pub station: Station<Vec<u8>>,
    cfg: LoopConfig,
    wire: Vec<WireEvent>,
}

impl<N: Nic> Driver<N> {
    /// Bind a station to a NIC; the station's slot 0 is expected when the first post lands.
    pub fn new(nic: N, station: StationConfig, cfg: LoopConfig) -> Result<Self, DriverError> {
        let mut station = station;
        station.post_latency = nic.post_latency();
        let t0 = nic.now() + nic.post_latency();
        let station = Station::new(station, t0).map_err(DriverError::Station)?;
        Ok(Driver { nic, station, cfg, wire: Vec::new() })
    }

    /// One poll-loop iteration, submitting what is due first.
    pub fn step(&mut self, source: &mut dyn Source, sink: &mut dyn FnMut(Event)) -> Result<(), DriverError> {
        let obs = self.nic.observe()?;
        while let Some(due) = source.next_due() {
            if due > obs.now {
                break;
            }
            if let Some(frame) = source.take() {
                let _ = self.station.submit(frame, due);
            }
        }
        let poll = self.station.poll(Observation { consumed: obs.consumed, now: obs.now, gaps: &obs.gaps })?;
        let station = &self.station;
        self.nic.post(&mut poll.post.clone().map(|k| station.view(k)))?;
        for u in poll.underruns {
            sink(Event::Underrun(u));
        }
        for o in self.station.drain_outcomes() {
            sink(Event::Outcome(o));
        }
        self.nic.drain_wire(&mut self.wire);
        for w in self.wire.drain(..) {
            sink(Event::Wire(w));
        }
        Ok(())
    }

    /// Run until the source is exhausted and every frame has left or been rejected. A run that exceeds
    /// `max_duration` stops taking frames, shuts the station down, drains it (so every frame handed in still
    /// gets its outcome) and returns [`DriverError::Timeout`].
    pub fn run(&mut self, source: &mut dyn Source, sink: &mut dyn FnMut(Event)) -> Result<(), DriverError> {
        let start = self.nic.now();
        let mut exhausted = Exhausted;
        let mut timed_out = false;
        loop {
            let src: &mut dyn Source = if timed_out { &mut exhausted } else { source };
            self.step(src, sink)?;
            if self.station.drained() && self.nic.unfinished() == 0 {
                break;
            }
            if !timed_out && source.next_due().is_none() && self.station.in_flight() == 0 {
                self.station.shutdown();
            }
            if !timed_out && self.nic.now() - start > self.cfg.max_duration {
                timed_out = true;
                self.station.shutdown();
            }
            self.nic.wait(self.cfg.poll_period);
        }
        if timed_out {
            return Err(DriverError::Timeout(self.cfg.max_duration));
        }
        Ok(())
    }
}

/// A source with nothing in it.
struct Exhausted;

impl Source for Exhausted {
    fn next_due(&self) -> Option<Tai> {
        None
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        None
    }
}
