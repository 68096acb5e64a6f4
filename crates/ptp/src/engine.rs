//! The PTP engine: statime's port and instance (BMCA, the E2E or P2P delay mechanism) behind our own sans-IO
//! interface, with one of our [`Servo`]s as its filter and a shared [`ServoClock`] (the EPHC) as its clock.
//!
//! Inputs: received messages with their RX time ([`PtpEngine::on_event`], [`PtpEngine::on_general`]), the
//! exact TX time of each event message the engine asked to send ([`PtpEngine::on_tx_time`] — on keepon this is
//! the slot's EPHC time, known when the message is placed), and expired timers ([`PtpEngine::on_timer`]).
//! Outputs: [`Output`]s — messages to send, timers to (re)arm. Nothing here reads a clock or touches a socket.
//!
//! **Delay mechanisms.** E2E: a slave sends Delay_Req to the master ([`Timer::DelayRequest`]). P2P: every port,
//! master or slave, measures the delay of its link with Pdelay_Req every `2^log_interval` s (the same timer;
//! statime only arms it on becoming slave, so the engine arms it at start) and answers a peer's Pdelay_Req with
//! Pdelay_Resp and Pdelay_Resp_Follow_Up in every state. Pdelay_Req and Pdelay_Resp are event messages: their TX
//! times come back through [`PtpEngine::on_tx_time`] like Sync's and Delay_Req's (the Follow_Up of a
//! Pdelay_Resp carries its TX time). A servo takes each peer delay as a sample of its own; a Sync's offset is
//! `t2 − t1 −` the link delay. statime asks for no timer beyond E2E's.
//!
//! **One-step Sync.** statime 0.4 sends two-step Sync. A driver that knows a Sync's TX time before it leaves
//! (keepon: the slot's EPHC time) may write it into the Sync ([`crate::wire::make_one_step`]) and hand it back
//! with [`PtpEngine::on_one_step_sent`], which drops the Follow_Up statime makes for it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use keepon_core::time::{Nanos, Tai};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use statime::config::{
    AcceptAnyMaster, ClockIdentity, InstanceConfig, LeapIndicator, PortConfig, PtpMinorVersion, SdoId,
    TimePropertiesDS, TimeSource,
};
use statime::filters::{Filter, FilterEstimate, FilterUpdate};
use statime::port::{InBmca, Measurement, NoForwardedTLVs, Port, PortAction, Running, TimestampContext};
use statime::time::{Duration, Interval};
use statime::PtpInstance;

use crate::clock::{from_statime_duration, ppm_to_ppt, to_statime_time, ClockError, ServoClock};
use crate::gptp::Profile;
use crate::servo::floor::{FloorConfig, FloorFilter, PhaseLog, SLOPE_WINDOWS};
use crate::servo::prefilter::{Prefilter, PrefilterConfig, PrefilterStats};
use crate::servo::{AnyServo, Sample, Servo, ServoKind, ServoState, ServoStatus};

/// Configuration of one PTP port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// PTP domain.
    pub domain: u8,
    /// The clock identity (EUI-64, usually from the interface's MAC).
    pub identity: [u8; 8],
    /// BMCA priority 1 (lower wins; 128 default).
    pub priority1: u8,
    /// Never become master.
    pub slave_only: bool,
    /// Never become slave.
    pub master_only: bool,
    /// log₂ of the Sync interval in seconds.
    pub log_sync: i8,
    /// log₂ of the Announce interval.
    pub log_announce: i8,
    /// How the path delay is measured.
    pub delay: DelayMechanism,
    /// The servo.
    pub servo: ServoKind,
    /// The delay-floor filter in front of the servo.
    pub floor: FloorConfig,
    /// The PTP profile: its sdoId goes into every message statime writes and is required of every message it
    /// takes ([`crate::gptp`]).
    pub profile: Profile,
}

/// How the path delay is measured, with the log₂ of the request interval in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayMechanism {
    /// End to end: a slave's Delay_Req to the master, answered with Delay_Resp.
    E2E {
        /// log₂ of the Delay_Req interval.
        log_interval: i8,
    },
    /// Peer to peer: every port's Pdelay_Req to its link partner, answered with Pdelay_Resp and
    /// Pdelay_Resp_Follow_Up.
    P2P {
        /// log₂ of the Pdelay_Req interval.
        log_interval: i8,
    },
}

/// Timers the engine asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timer {
    /// Send an Announce.
    Announce,
    /// Send a Sync.
    Sync,
    /// Send a Delay_Req (E2E) or a Pdelay_Req (P2P).
    DelayRequest,
    /// No Announce from the master in time.
    AnnounceReceipt,
    /// The servo's update timer.
    FilterUpdate,
    /// Run the BMCA.
    Bmca,
}

/// A TX timestamp the engine is owed: hand it back with the message's exact TX time.
#[derive(Debug)]
#[must_use = "an event message's TX time must be handed back"]
pub struct TxToken(TimestampContext);

/// What the engine asks the driver to do.
#[derive(Debug)]
pub enum Output {
    /// Send an event message (Sync, Delay_Req, Pdelay_Req, Pdelay_Resp) and hand its TX time back with the token.
    SendEvent {
        /// The PTP message.
        data: Vec<u8>,
        /// Return with [`PtpEngine::on_tx_time`].
        token: TxToken,
    },
    /// Send a general message (Announce, Follow_Up, Delay_Resp, Pdelay_Resp_Follow_Up).
    SendGeneral {
        /// The PTP message.
        data: Vec<u8>,
    },
    /// (Re)arm a timer.
    SetTimer {
        /// Which.
        timer: Timer,
        /// After this long.
        after: Nanos,
    },
}

/// statime's clock: a shared [`ServoClock`].
struct SharedClock<C>(Rc<RefCell<C>>);

impl<C: ServoClock> statime::Clock for SharedClock<C> {
    type Error = ClockError;
    fn now(&self) -> statime::time::Time {
        to_statime_time(self.0.borrow().now())
    }
    fn step_clock(&mut self, offset: Duration) -> Result<statime::time::Time, ClockError> {
        Ok(to_statime_time(self.0.borrow_mut().step(from_statime_duration(offset))?))
    }
    fn set_frequency(&mut self, ppm: f64) -> Result<statime::time::Time, ClockError> {
        Ok(to_statime_time(self.0.borrow_mut().set_freq_ppt(ppm_to_ppt(ppm)?)?))
    }
    fn set_properties(&mut self, _: &TimePropertiesDS) -> Result<(), ClockError> {
        Ok(())
    }
}

/// statime's `Clock` seen as our [`ServoClock`] (for the servo inside statime's filter slot). statime's clock
/// has no frequency getter: the last frequency set is tracked here.
struct FromStatime<'a, C: statime::Clock> {
    clock: &'a mut C,
    ppt: &'a mut i64,
    /// Every adjustment, for the delay-floor filter.
    log: &'a mut PhaseLog,
}

impl<C: statime::Clock> ServoClock for FromStatime<'_, C> {
    fn now(&self) -> Tai {
        Tai(i64::try_from(self.clock.now().nanos().to_num::<u128>()).unwrap_or(i64::MAX))
    }
    fn step(&mut self, by: Nanos) -> Result<Tai, ClockError> {
        self.clock.step_clock(Duration::from_nanos(by.0)).map_err(|_| ClockError::StepOutOfRange)?;
        let now = self.now();
        self.log.step(now, by);
        Ok(now)
    }
    fn set_freq_ppt(&mut self, ppt: i64) -> Result<Tai, ClockError> {
        self.clock.set_frequency(ppt as f64 / 1e6).map_err(|_| ClockError::NotFinite)?;
        *self.ppt = ppt;
        let now = self.now();
        self.log.set_freq(now, ppt);
        Ok(now)
    }
    fn freq_ppt(&self) -> i64 {
        *self.ppt
    }
}

/// One measurement as the servo got it: statime's raw differences, what the outlier prefilter and the delay-floor
/// filter handed on, and the servo's state after it (see [`PtpEngine::take_measurements`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasurementRecord {
    /// The raw differences (`t2 − t1`, `t3 − t4`, a peer delay) and their event time.
    pub raw: Sample,
    /// What reached the servo (`None`: dropped as an outlier).
    pub used: Option<Sample>,
    /// The servo after it.
    pub servo: ServoStatus,
    /// The clock's frequency adjustment after it, parts per trillion.
    pub freq_ppt: i64,
}

/// At most this many measurements wait for [`PtpEngine::take_measurements`]; older ones are dropped.
pub const MAX_KEPT_MEASUREMENTS: usize = 1024;

/// Measurements not yet taken, shared between the engine and its filter.
type Measurements = Rc<RefCell<VecDeque<MeasurementRecord>>>;

/// Our servo as statime's filter; its status is published through a shared cell.
struct ServoFilter {
    servo: AnyServo,
    prefilter: Prefilter,
    floor: FloorFilter,
    log: PhaseLog,
    ppt: i64,
    status: Rc<Cell<ServoStatus>>,
    outliers: Rc<Cell<PrefilterStats>>,
    measurements: Measurements,
}

/// Configuration of [`ServoFilter`]: the servo, the sync interval, where to publish its status.
#[derive(Clone)]
struct ServoFilterConfig {
    kind: ServoKind,
    interval: Nanos,
    floor: FloorConfig,
    status: Rc<Cell<ServoStatus>>,
    outliers: Rc<Cell<PrefilterStats>>,
    measurements: Measurements,
}

impl ServoFilter {
    fn update_from(&self, clock_now: Tai) -> FilterUpdate {
        let st = self.servo.status();
        FilterUpdate {
            next_update: self
                .servo
                .update_due()
                .map(|due| core::time::Duration::from_nanos(u64::try_from((due - clock_now).0.max(0)).unwrap_or(0))),
            mean_delay: st.mean_delay.map(|d| Duration::from_nanos(d.0)),
        }
    }
}

impl Filter for ServoFilter {
    type Config = ServoFilterConfig;

    fn new(c: ServoFilterConfig) -> Self {
        ServoFilter {
            servo: AnyServo::new(c.kind, c.interval),
            prefilter: Prefilter::new(PrefilterConfig::default()),
            floor: FloorFilter::new(c.floor),
            log: PhaseLog::new(Nanos(c.floor.window.0.saturating_mul(SLOPE_WINDOWS + 1)), 0),
            ppt: 0,
            status: c.status,
            outliers: c.outliers,
            measurements: c.measurements,
        }
    }

    fn measurement<C: statime::Clock>(&mut self, m: Measurement, clock: &mut C) -> FilterUpdate {
        let s = Sample {
            at: Tai(i64::try_from(m.event_time.nanos().to_num::<u128>()).unwrap_or(i64::MAX)),
            sync_raw: m.raw_sync_offset.map(from_statime_duration),
            delay_raw: m.raw_delay_offset.map(from_statime_duration),
            peer_delay: m.peer_delay.map(from_statime_duration),
        };
        let locked = self.servo.status().state == ServoState::Locked;
        let kept = self.prefilter.filter(s, locked);
        let kept = kept.map(|s| self.floor.filter(s, locked, &self.log));
        self.outliers.set(self.prefilter.stats());
        let mut c = FromStatime { clock, ppt: &mut self.ppt, log: &mut self.log };
        if let Some(s) = kept {
            // A refused adjustment leaves the servo unlocked; it retries with the next measurement.
            let _ = self.servo.sample(s, &mut c);
        }
        let now = c.now();
        self.status.set(self.servo.status());
        let mut m = self.measurements.borrow_mut();
        if m.len() >= MAX_KEPT_MEASUREMENTS {
            m.pop_front();
        }
        m.push_back(MeasurementRecord { raw: s, used: kept, servo: self.servo.status(), freq_ppt: self.ppt });
        drop(m);
        self.update_from(now)
    }

    fn update<C: statime::Clock>(&mut self, clock: &mut C) -> FilterUpdate {
        let mut c = FromStatime { clock, ppt: &mut self.ppt, log: &mut self.log };
        let _ = self.servo.update(&mut c);
        let now = c.now();
        self.status.set(self.servo.status());
        self.update_from(now)
    }

    fn demobilize<C: statime::Clock>(self, _clock: &mut C) {}

    fn current_estimates(&self) -> FilterEstimate {
        let st = self.servo.status();
        FilterEstimate {
            offset_from_master: Duration::from_nanos(st.offset.map_or(0, |o| o.0)),
            mean_delay: Duration::from_nanos(st.mean_delay.map_or(0, |d| d.0)),
        }
    }
}

type Inst = PtpInstance<ServoFilter>;
type RunningPort<C> = Port<'static, Running, AcceptAnyMaster, ChaCha8Rng, SharedClock<C>, ServoFilter>;
type BmcaPort<C> = Port<'static, InBmca, AcceptAnyMaster, ChaCha8Rng, SharedClock<C>, ServoFilter>;

/// One PTP ordinary clock with one port, sans-IO.
pub struct PtpEngine<C: ServoClock + 'static> {
    instance: &'static Inst,
    intervals: Intervals,
    port: Option<RunningPort<C>>,
    status: Rc<Cell<ServoStatus>>,
    outliers: Rc<Cell<PrefilterStats>>,
    measurements: Measurements,
}

fn to_nanos(d: core::time::Duration) -> Nanos {
    Nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The logMessageInterval values this port announces (statime 0.4.0 writes 0 into Sync, Follow_Up, Announce and
/// the peer-delay messages; a receiver such as ptp4l takes its Sync interval from the Sync's field). IEEE
/// 1588-2019 Table 42: the Sync interval in Sync and Follow_Up, the Announce interval in Announce, 0x7F in
/// Pdelay_Req, Pdelay_Resp and Pdelay_Resp_Follow_Up.
#[derive(Clone, Copy, Debug)]
struct Intervals {
    log_sync: i8,
    log_announce: i8,
}

impl Intervals {
    /// Set the logMessageInterval of outgoing Sync, Follow_Up, Announce and peer-delay messages.
    fn stamp(self, out: &mut [Output]) {
        for o in out {
            let data = match o {
                Output::SendEvent { data, .. } | Output::SendGeneral { data } => data,
                Output::SetTimer { .. } => continue,
            };
            if data.len() < 34 {
                continue;
            }
            data[33] = match data[0] & 0x0F {
                0x0 | 0x8 => self.log_sync as u8,
                0xB => self.log_announce as u8,
                0x2 | 0x3 | 0xA => 0x7F,
                _ => continue,
            };
        }
    }
}

fn collect<'a>(actions: impl Iterator<Item = PortAction<'a>>, out: &mut Vec<Output>) {
    for a in actions {
        out.push(match a {
            PortAction::SendEvent { context, data, .. } => {
                Output::SendEvent { data: data.to_vec(), token: TxToken(context) }
            }
            PortAction::SendGeneral { data, .. } => Output::SendGeneral { data: data.to_vec() },
            PortAction::ResetAnnounceTimer { duration } => {
                Output::SetTimer { timer: Timer::Announce, after: to_nanos(duration) }
            }
            PortAction::ResetSyncTimer { duration } => {
                Output::SetTimer { timer: Timer::Sync, after: to_nanos(duration) }
            }
            PortAction::ResetDelayRequestTimer { duration } => {
                Output::SetTimer { timer: Timer::DelayRequest, after: to_nanos(duration) }
            }
            PortAction::ResetAnnounceReceiptTimer { duration } => {
                Output::SetTimer { timer: Timer::AnnounceReceipt, after: to_nanos(duration) }
            }
            PortAction::ResetFilterUpdateTimer { duration } => {
                Output::SetTimer { timer: Timer::FilterUpdate, after: to_nanos(duration) }
            }
            PortAction::ForwardTLV { .. } => continue,
        });
    }
}

impl<C: ServoClock + 'static> PtpEngine<C> {
    /// An engine steering `clock`; returns it with its first outputs (timers). The instance lives for the rest
    /// of the process (statime's ports borrow it; one engine per keepon link).
    pub fn new(cfg: EngineConfig, clock: Rc<RefCell<C>>, seed: u64) -> (PtpEngine<C>, Vec<Output>) {
        let instance_cfg = InstanceConfig {
            clock_identity: ClockIdentity(cfg.identity),
            // A slave-only clock must lose every comparison (IEEE 1588-2019 §9.2.2: its clockClass is 255). statime
            // 0.4 keeps its clockClass at 248 and, when its own dataset compares better than the best master's,
            // stays listening: a slave-only keepon (priority1 128) would never follow a master announcing 248 —
            // gPTP.cfg's ptp4l. Priority1 255 is compared first and makes it lose, as the standard intends.
            priority_1: if cfg.slave_only { 255 } else { cfg.priority1 },
            priority_2: 128,
            domain_number: cfg.domain,
            // (0x100 for 802.1AS: statime then writes majorSdoId 1 into every header.)
            sdo_id: SdoId::try_from(cfg.profile.sdo_id()).unwrap_or_default(),
            slave_only: cfg.slave_only,
            // 802.1AS: Announce carries the path trace TLV.
            path_trace: cfg.profile.is_802_1as(),
        };
        // The EPHC runs on TAI: a PTP timescale; we do not know the UTC offset (see the crate docs).
        let tp =
            TimePropertiesDS::new_ptp_time(None, LeapIndicator::NoLeap, false, false, TimeSource::InternalOscillator);
        let instance: &'static Inst = Box::leak(Box::new(PtpInstance::new(instance_cfg, tp)));
        let delay_mechanism = match cfg.delay {
            DelayMechanism::E2E { log_interval } => {
                statime::config::DelayMechanism::E2E { interval: Interval::from_log_2(log_interval) }
            }
            DelayMechanism::P2P { log_interval } => {
                statime::config::DelayMechanism::P2P { interval: Interval::from_log_2(log_interval) }
            }
        };
        let port_cfg = PortConfig {
            acceptable_master_list: AcceptAnyMaster,
            delay_mechanism,
            announce_interval: Interval::from_log_2(cfg.log_announce),
            announce_receipt_timeout: 3,
            sync_interval: Interval::from_log_2(cfg.log_sync),
            master_only: cfg.master_only,
            delay_asymmetry: Duration::default(),
            minor_ptp_version: PtpMinorVersion::One,
        };
        let status = Rc::new(Cell::new(ServoStatus::INITIAL));
        let interval = to_nanos(Interval::from_log_2(cfg.log_sync).as_core_duration());
        let outliers = Rc::new(Cell::new(PrefilterStats::default()));
        let fcfg = ServoFilterConfig {
            kind: cfg.servo,
            interval,
            floor: cfg.floor,
            status: status.clone(),
            outliers: outliers.clone(),
            measurements: Measurements::default(),
        };
        let measurements = fcfg.measurements.clone();
        let bmca: BmcaPort<C> = instance.add_port(port_cfg, fcfg, SharedClock(clock), ChaCha8Rng::seed_from_u64(seed));
        let (port, actions) = bmca.end_bmca();
        let mut out = Vec::new();
        collect(actions, &mut out);
        out.push(Output::SetTimer { timer: Timer::Bmca, after: to_nanos(instance.bmca_interval()) });
        if matches!(cfg.delay, DelayMechanism::P2P { .. }) {
            // Every P2P port measures its link, whatever its state (statime starts only on becoming slave).
            out.push(Output::SetTimer { timer: Timer::DelayRequest, after: Nanos::ZERO });
        }
        let intervals = Intervals { log_sync: cfg.log_sync, log_announce: cfg.log_announce };
        intervals.stamp(&mut out);
        (PtpEngine { instance, intervals, port: Some(port), status, outliers, measurements }, out)
    }

    fn with_port(&mut self, f: impl FnOnce(&mut RunningPort<C>, &mut Vec<Output>)) -> Vec<Output> {
        let mut out = Vec::new();
        if let Some(p) = self.port.as_mut() {
            f(p, &mut out);
        }
        self.intervals.stamp(&mut out);
        out
    }

    /// An event message (Sync, Delay_Req, Pdelay_Req, Pdelay_Resp) arrived at local time `rx`.
    pub fn on_event(&mut self, data: &[u8], rx: Tai) -> Vec<Output> {
        self.with_port(|p, out| collect(p.handle_event_receive(data, to_statime_time(rx)), out))
    }

    /// A general message arrived.
    pub fn on_general(&mut self, data: &[u8]) -> Vec<Output> {
        self.with_port(|p, out| collect(p.handle_general_receive(data), out))
    }

    /// An event message left at local time `tx` (on keepon: its slot's EPHC time, plus the MAC/PHY constant).
    pub fn on_tx_time(&mut self, token: TxToken, tx: Tai) -> Vec<Output> {
        self.with_port(|p, out| collect(p.handle_send_timestamp(token.0, to_statime_time(tx)), out))
    }

    /// A Sync this engine asked to send left as one-step Sync at local time `tx` (the time written into it, see
    /// [`crate::wire::make_one_step`]; `sequence_id` is the Sync's): the engine takes its TX time, and the
    /// Follow_Up statime makes for it is dropped — a one-step Sync has none.
    pub fn on_one_step_sent(&mut self, token: TxToken, sequence_id: u16, tx: Tai) -> Vec<Output> {
        let mut out = self.on_tx_time(token, tx);
        out.retain(|o| match o {
            Output::SendGeneral { data } => {
                !(data.first().is_some_and(|b| b & 0x0F == 0x8) && crate::wire::sequence_id(data) == Some(sequence_id))
            }
            _ => true,
        });
        out
    }

    /// A timer expired.
    pub fn on_timer(&mut self, t: Timer) -> Vec<Output> {
        if t == Timer::Bmca {
            let mut out = Vec::new();
            if let Some(p) = self.port.take() {
                let mut b = p.start_bmca();
                self.instance.bmca(&mut [&mut b]);
                let (p, actions) = b.end_bmca();
                collect(actions, &mut out);
                self.port = Some(p);
            }
            out.push(Output::SetTimer { timer: Timer::Bmca, after: to_nanos(self.instance.bmca_interval()) });
            self.intervals.stamp(&mut out);
            return out;
        }
        self.with_port(|p, out| {
            let actions = match t {
                Timer::Announce => p.handle_announce_timer(&mut NoForwardedTLVs),
                Timer::Sync => p.handle_sync_timer(),
                Timer::DelayRequest => p.handle_delay_request_timer(),
                Timer::AnnounceReceipt => p.handle_announce_receipt_timer(),
                Timer::FilterUpdate => p.handle_filter_update_timer(),
                Timer::Bmca => return,
            };
            collect(actions, out)
        })
    }

    /// True while the port is master.
    pub fn is_master(&self) -> bool {
        self.port.as_ref().is_some_and(|p| p.is_master())
    }

    /// True while the port is a slave steering the clock.
    pub fn is_steering(&self) -> bool {
        self.port.as_ref().is_some_and(|p| p.is_steering())
    }

    /// The servo's status (state, offset, frequency, path delay).
    pub fn servo_status(&self) -> ServoStatus {
        self.status.get()
    }

    /// The measurements since the last call, oldest first (at most [`MAX_KEPT_MEASUREMENTS`]).
    pub fn take_measurements(&self) -> Vec<MeasurementRecord> {
        self.measurements.borrow_mut().drain(..).collect()
    }

    /// What the outlier prefilter in front of the servo did so far.
    pub fn prefilter_stats(&self) -> PrefilterStats {
        self.outliers.get()
    }

    /// The grandmaster's clock identity as the BMCA last chose it (this clock's own while it is the time source).
    pub fn grandmaster(&self) -> [u8; 8] {
        self.instance.parent_ds().grandmaster_identity.0
    }

    /// The UTC offset the current master announces (seconds), if valid. keepon's EPHC runs on TAI and never
    /// applies it.
    pub fn utc_offset(&self) -> Option<i16> {
        self.instance.time_properties_ds().utc_offset()
    }
}

#[cfg(test)]
mod tests;
