//! One PTP node on one station, sans-IO: the [`PtpPort`], the optional dual clock ([`DualRx`]) and the judgement
//! "is the EPHC network time?" that gates scheduled frames. The daemon drives it (with a receiver, a log and
//! the status line around it), and so does the two-station harness on the simulated NIC (`tests/link.rs`), on
//! either timing ([`StationFace`]): the judgement and the dual clock measured there are the ones that ship.
//!
//! - **Frames in** ([`PtpNode::on_frame`]) with a receive stamp already on the EPHC's timescale. With the dual
//!   clock every frame is one of the master's slots and is counted first; IGMP Membership Queries are answered;
//!   frames that are not PTP messages of the configured transport are otherwise ignored. While the dual clock
//!   tracks, a PTP message's `t2` is the RX clock's time of its place in the count instead of the stamp.
//! - **Synchronised**: master (the BMCA made the station the time source), or a slave whose servo's last
//!   [`GOOD_MEASUREMENTS`] measurements found it locked with |offset| below the threshold, spanning at least
//!   [`SETTLE`], the last at most four Sync intervals old.
//! - **The dual clock** takes over once synchronised on the single clock and falls back after
//!   [`FALL_BACK`] unsynchronised (see [`crate::dualrx`]).
//!
//! What changed is reported as [`NodeEvent`]s for the caller to log; problems (port errors other than frames
//! that are not PTP, refused clock adjustments) are counted with the last one kept.

use keepon_core::face::StationFace;
use keepon_core::outcome::Outcome;
use keepon_core::time::{Nanos, SlotPeriod, Tai};

use crate::dualrx::{DualRx, FALL_BACK};
use crate::port::{OneStepNeedsSlotTime, PortConfig, PortError, PtpPort};
use crate::servo::{ServoState, ServoStatus};
use crate::wire::WireError;

/// Consecutive measurements within the threshold, locked, before a slave counts as synchronised (one alone
/// may be the filter's reset value right after a step)...
pub const GOOD_MEASUREMENTS: u32 = 4;
/// ...spanning at least this long: right after its first step a servo reports small offsets while it has not
/// yet learned the frequency error, and a 50 ppm error then takes it past the threshold within a second or two.
pub const SETTLE: Nanos = Nanos::from_ms(2_000);

/// A node's configuration.
#[derive(Clone, Copy, Debug)]
pub struct NodeConfig {
    /// The port.
    pub port: PortConfig,
    /// A slave is synchronised only while |offset| stays below this.
    pub sync_threshold: Nanos,
    /// With the dual clock: the master's slot period (whole ns).
    pub dual_clock: Option<SlotPeriod>,
}

/// The node's role as the BMCA decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The station is the time source.
    Master,
    /// The station steers its EPHC to a master.
    Slave,
    /// Neither yet.
    Listening,
}

/// Something the caller may want to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// The judgement changed: synchronised (true) or not.
    Synchronised(bool),
    /// The dual clock took over from the single clock.
    DualTookOver,
    /// The dual clock fell back to the single clock after this long unsynchronised.
    DualFellBack(Nanos),
}

/// The port, the dual clock and the judgement.
pub struct PtpNode {
    port: PtpPort,
    threshold: Nanos,
    last: ServoStatus,
    /// Host time of the last measurement the servo absorbed.
    last_sample: Option<Tai>,
    /// Offsets measured so far (the prefilter's count).
    offsets: u64,
    stale_after: Nanos,
    /// Consecutive measurements that found the servo locked within the threshold.
    good: u32,
    /// When the current run of good measurements began.
    good_since: Option<Tai>,
    synchronised: bool,
    dual: Option<DualRx>,
    /// When the slave was last synchronised (with the dual clock).
    synced_at: Option<Tai>,
    events: Vec<NodeEvent>,
    problems: u64,
    last_problem: Option<String>,
}

impl PtpNode {
    /// Start PTP on `station` (which must be up) at backend time `now`.
    pub fn new<S: StationFace>(cfg: NodeConfig, station: &mut S, now: Tai, seed: u64) -> Result<PtpNode, String> {
        let dual = cfg.dual_clock.map(DualRx::new).transpose()?;
        let log_sync = cfg.port.engine.log_sync;
        let interval = Nanos(if log_sync >= 0 {
            1_000_000_000i64 << log_sync.min(16)
        } else {
            1_000_000_000i64 >> (-i32::from(log_sync)).min(30)
        });
        Ok(PtpNode {
            port: PtpPort::new(cfg.port, station, now, seed),
            threshold: cfg.sync_threshold,
            last: ServoStatus::INITIAL,
            last_sample: None,
            offsets: 0,
            stale_after: Nanos(interval.0.saturating_mul(4)),
            good: 0,
            good_since: None,
            synchronised: false,
            dual,
            synced_at: None,
            events: Vec::new(),
            problems: 0,
            last_problem: None,
        })
    }

    /// A frame received at `stamp` (EPHC time, e.g. a kernel stamp read through the station's host grid).
    pub fn on_frame<S: StationFace>(&mut self, frame: &[u8], stamp: Tai, station: &mut S, now: Tai) {
        let place = self.dual.as_mut().map(DualRx::count_frame);
        if self.port.on_igmp(frame, now) {
            return; // a membership query: answered with a report (over UDPv4)
        }
        if self.port.transport().parse(frame).is_err() {
            return; // not a PTP message of our transport
        }
        let rx = match (&self.dual, place) {
            // (Before the first reading anchors the RX clock, a message has no time: it is not used.) The RX
            // clock's time is no software stamp: the port's receive latency, which it takes off every RX time, is
            // added back so that nothing is taken off it.
            (Some(d), Some(place)) if d.tracking() => match d.t2(place) {
                Some(t) => t + self.port.rx_latency(),
                None => return,
            },
            _ => stamp,
        };
        self.port.on_rx(frame, rx, station, now);
    }

    /// The receiver's cumulative count of frames it dropped (with the dual clock, each was a slot).
    pub fn on_receiver_drops(&mut self, total: u64) {
        if let Some(d) = &mut self.dual {
            d.dropped(total);
        }
    }

    /// One poll at backend time `now`: fire timers, steer the dual clock, re-judge synchronisation. `unfinished`
    /// is what the backend says of the slots it took and has not finished sending (`keepon_nic::Nic::unfinished`:
    /// the dual clock's TX reading is the slot on the wire).
    pub fn poll<S: StationFace>(&mut self, station: &mut S, now: Tai, unfinished: u64) {
        self.port.poll(station, now);
        if let Some(d) = &mut self.dual {
            let mut adjust = d.ptp(self.port.take_adjustments());
            let t_tx = d.tx_reading(station, now, unfinished);
            adjust.extend(d.poll(now, t_tx));
            for a in adjust {
                if let Err(e) = station.adjust_clock(a) {
                    self.problems += 1;
                    self.last_problem = Some(format!("dual clock: {a:?}: {e:?}"));
                }
            }
        }
        for e in self.port.take_errors() {
            if !matches!(e, PortError::Wire(WireError::NotPtp)) {
                self.problems += 1;
                self.last_problem = Some(format!("{e:?}"));
            }
        }
        // A fresh measurement of the offset, or a new servo state: judged (a servo behind the delay-floor filter
        // may well give the same estimate twice, which is no sign of a lost master).
        let st = self.port.servo_status();
        let offsets = self.port.engine().prefilter_stats().offsets;
        if st != self.last || offsets != self.offsets {
            self.last = st;
            self.offsets = offsets;
            self.last_sample = Some(now);
            let within = st.offset.is_some_and(|o| o.0.unsigned_abs() < self.threshold.0.unsigned_abs());
            self.good = if st.state == ServoState::Locked && within { self.good.saturating_add(1) } else { 0 };
            self.good_since = if self.good == 0 { None } else { self.good_since.or(Some(now)) };
        }
        let judged = self.judge(now);
        if judged != self.synchronised {
            self.events.push(NodeEvent::Synchronised(judged));
        }
        self.synchronised = judged;
        self.hand_over(station, now);
    }

    /// With the dual clock: take over once synchronised on the single clock; fall back after [`FALL_BACK`]
    /// unsynchronised while tracking.
    fn hand_over<S: StationFace>(&mut self, station: &S, now: Tai) {
        let Some(d) = &mut self.dual else { return };
        if self.synchronised {
            self.synced_at = Some(now);
        }
        if !d.tracking() && self.synchronised {
            d.take_over(now, station.ephc().rate_ppt());
            self.port.hold_adjustments();
            self.events.push(NodeEvent::DualTookOver);
        } else if d.tracking() && self.synced_at.is_some_and(|t| now - t > FALL_BACK) {
            d.fall_back();
            self.port.release_adjustments();
            self.synced_at = None;
            self.events.push(NodeEvent::DualFellBack(FALL_BACK));
        }
    }

    fn judge(&self, now: Tai) -> bool {
        if self.port.engine().is_master() {
            return true;
        }
        self.port.engine().is_steering()
            && self.good >= GOOD_MEASUREMENTS
            && self.good_since.is_some_and(|t| now - t >= SETTLE)
            && self.last_sample.is_some_and(|t| now - t <= self.stale_after)
    }

    /// True while the EPHC is network time (see the module docs).
    pub fn synchronised(&self) -> bool {
        self.synchronised
    }

    /// The port's role.
    pub fn role(&self) -> Role {
        let e = self.port.engine();
        if e.is_master() {
            Role::Master
        } else if e.is_steering() {
            Role::Slave
        } else {
            Role::Listening
        }
    }

    /// The servo's status as last judged.
    pub fn servo(&self) -> ServoStatus {
        self.last
    }

    /// What changed since the last call.
    pub fn take_events(&mut self) -> Vec<NodeEvent> {
        std::mem::take(&mut self.events)
    }

    /// Problems since the last [`PtpNode::clear_problems`], and the last one.
    pub fn problems(&self) -> (u64, Option<&str>) {
        (self.problems, self.last_problem.as_deref())
    }

    /// Start counting problems afresh (the last one is kept for the next report).
    pub fn clear_problems(&mut self) {
        self.problems = 0;
    }

    /// Count a problem the caller met (e.g. its receiver failing).
    pub fn problem(&mut self, what: String) {
        self.problems += 1;
        self.last_problem = Some(what);
    }

    /// The port.
    pub fn port(&self) -> &PtpPort {
        &self.port
    }

    /// The port, to drive directly (a harness answering an IGMP query it made up, say).
    pub fn port_mut(&mut self) -> &mut PtpPort {
        &mut self.port
    }

    /// The dual clock, if configured.
    pub fn dual(&self) -> Option<&DualRx> {
        self.dual.as_ref()
    }

    /// A host-paced link: PTP TX times come from the backend's release times (refused with one-step Sync), and
    /// the dual clock's frames arrive as they are sent (no wire serialises them).
    pub fn on_host_paced_link(&mut self) -> Result<(), OneStepNeedsSlotTime> {
        if let Some(d) = &mut self.dual {
            d.set_unserialised();
        }
        self.port.tx_on_release()
    }

    /// An outcome from the station: PTP frames' are consumed here (true).
    pub fn on_outcome<S: StationFace>(&mut self, o: &Outcome, station: &mut S, now: Tai) -> bool {
        self.port.on_outcome(o, station, now)
    }
}
