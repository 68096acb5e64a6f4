//! The daemon's PTP: a [`PtpNode`] on the station (the port, the dual clock and the judgement "is the EPHC
//! network time?" that gates scheduled submits), fed by an RX source on the same link, with its measurement log
//! and status line.
//!
//! - TX: the port schedules event and general messages through the station's insertion path in the `[ptp]`
//!   class; an event message's TX time is its `Sent` time plus `ptp.tx_latency`, exact (on host-paced links:
//!   the time the host released it). With `ptp.one_step` a Sync carries that time itself and has no Follow_Up;
//!   the daemon refuses it on host-paced links before it starts ([`PtpConfig::check_link`]).
//! - Delay: `ptp.delay_mechanism` E2E (a slave's Delay_Req) or P2P (Pdelay_Req from every state, answered in
//!   every state); the status line's path delay is the link delay with P2P, a master's too.
//! - RX: an [`RxSource`] hands in frames with host timestamps (`CLOCK_TAI`; on Linux the kernel's software
//!   stamp from an AF_PACKET socket on the link's interface). Each is converted to the backend's clock
//!   ([`Nic::link_time`], which differs from the host's only under an emulated oscillator error) and then to
//!   EPHC time through the station's host grid ([`Station::clock_at`]: the clock as the servo set it); the port
//!   subtracts `ptp.rx_latency`.
//!   Frames that are not PTP messages of the configured transport are ignored, except IGMP Membership Queries
//!   over UDPv4, which the port answers (`PtpPort::on_igmp`: keepon joins PTP's group itself, since no
//!   kernel IP stack does it for a station that sends past it).
//! - Synchronised ([`PtpNode`]): master (the BMCA made the station the time source), or a slave whose servo's
//!   last four measurements found it locked with |offset| below `ptp.sync_threshold`, the last at most four Sync
//!   intervals old (`2^ptp.log_sync_interval` s). Every change is logged on stderr with the servo's numbers, and so is
//!   the status every 10 s.

use keepon_core::outcome::{FrameId, Outcome};
use keepon_core::station::Station;
use keepon_core::time::{Nanos, Tai};
use keepon_nic::Nic;
use keepon_ptp::engine::{EngineConfig, MeasurementRecord};
use keepon_ptp::node::{NodeConfig, NodeEvent, PtpNode};
use keepon_ptp::port::{PortConfig, TxLag};
use keepon_ptp::servo::ServoState;

use crate::api::{PortRole, ServoCode, SyncState, TimeInfo};
use crate::ptpconf::{PtpConfig, Role};

use super::served::Served;

/// Where received frames come from.
pub trait RxSource {
    /// Frames received since the last call, each with its host receive time (`CLOCK_TAI`). Never blocks.
    fn recv(&mut self, out: &mut Vec<(Vec<u8>, Tai)>) -> Result<(), String>;
    /// Frames the receiver dropped so far, cumulative (a full socket buffer); 0 if it cannot tell.
    fn dropped(&mut self) -> u64 {
        0
    }
}

/// No receiver (a link nobody answers on, e.g. the simulated NIC): the station can only be master.
pub struct NoRx;

impl RxSource for NoRx {
    fn recv(&mut self, _: &mut Vec<(Vec<u8>, Tai)>) -> Result<(), String> {
        Ok(())
    }
}

/// The Linux receiver (software or hardware stamps converted to TAI).
#[cfg(target_os = "linux")]
impl RxSource for keepon_nic::linux::rx::Receiver {
    fn recv(&mut self, out: &mut Vec<(Vec<u8>, Tai)>) -> Result<(), String> {
        for _ in 0..256 {
            match keepon_nic::linux::rx::Receiver::recv(self, std::time::Duration::ZERO) {
                Ok(Some((frame, at, _))) => out.push((frame, at)),
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }
    fn dropped(&mut self) -> u64 {
        self.stats().map_or(0, |s| s.drops)
    }
}

/// How often the status is logged while nothing changes.
const LOG_EVERY: Nanos = Nanos::from_ms(10_000);

/// PTP on the daemon's link: a [`PtpNode`] with its receiver, its log and the status line.
pub struct Sync {
    cfg: PtpConfig,
    node: PtpNode,
    rx: Box<dyn RxSource>,
    frames: Vec<(Vec<u8>, Tai)>,
    logged: (PortRole, ServoState, bool),
    next_log: Tai,
    /// `ptp.measurement_log`, once opened.
    log: Option<std::io::BufWriter<std::fs::File>>,
}

/// The measurement log's header (see [`Sync::open_measurement_log`]).
pub const MEASUREMENT_LOG_HEADER: &str = "ephc_ns,sync_raw_ns,delay_raw_ns,peer_delay_raw_ns,sync_used_ns,\
                                          delay_used_ns,peer_delay_used_ns,dropped,servo,offset_ns,path_delay_ns,freq_ppt";

/// One measurement as a row of the measurement log.
fn measurement_row(m: &MeasurementRecord) -> String {
    let ns = |v: Option<Nanos>| v.map_or(String::new(), |v| v.0.to_string());
    let used = m.used;
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{}",
        m.raw.at.0,
        ns(m.raw.sync_raw),
        ns(m.raw.delay_raw),
        ns(m.raw.peer_delay),
        ns(used.and_then(|u| u.sync_raw)),
        ns(used.and_then(|u| u.delay_raw)),
        ns(used.and_then(|u| u.peer_delay)),
        used.is_none(),
        m.servo.state,
        ns(m.servo.offset),
        ns(m.servo.mean_delay),
        m.freq_ppt
    )
}

/// The clock identity from a MAC (EUI-48 to EUI-64, `ff:fe` in the middle).
fn identity(mac: [u8; 6]) -> [u8; 8] {
    [mac[0], mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]]
}

impl Sync {
    /// Start PTP on `station` (which must be up) at backend time `now`, with frames from `rx`.
    /// With `ptp.dual_clock`, the slot period must be whole ns (the configuration checks it).
    pub fn new<S: Served>(
        cfg: PtpConfig,
        mac: [u8; 6],
        station: &mut S,
        now: Tai,
        rx: Box<dyn RxSource>,
    ) -> Result<Sync, String> {
        let engine = EngineConfig {
            domain: cfg.domain,
            identity: identity(mac),
            priority1: cfg.priority1,
            slave_only: cfg.role == Role::Slave,
            master_only: cfg.role == Role::Master,
            log_sync: cfg.log_sync,
            log_announce: cfg.log_announce,
            delay: cfg.delay,
            servo: cfg.servo,
            floor: cfg.delay_floor,
            profile: cfg.profile,
        };
        // Schedule PTP frames beyond what is posted and one poll.
        let lead = station.ptp_lead();
        let pc = PortConfig {
            engine,
            transport: cfg.transport,
            mac,
            class: cfg.class,
            lead,
            tx_constant: cfg.tx_latency,
            rx_latency: cfg.rx_latency,
            one_step: cfg.one_step,
            neighbor_prop_delay_thresh: cfg.neighbor_prop_delay_thresh,
        };
        let seed = u64::from_le_bytes(identity(mac));
        let node = NodeConfig { port: pc, sync_threshold: cfg.sync_threshold, dual_clock: cfg.dual_clock };
        let node = PtpNode::new(node, station, now, seed)?;
        Ok(Sync {
            cfg,
            node,
            rx,
            frames: Vec::new(),
            logged: (PortRole::None, ServoState::Unlocked, false),
            next_log: now,
            log: None,
        })
    }

    /// The dual clock runs (`ptp.dual_clock`).
    pub fn dual_clock(&self) -> bool {
        self.node.dual().is_some()
    }

    /// Create (or truncate) `ptp.measurement_log`, if configured, and write its header: from now on every
    /// measurement the servo gets is a row — event time (EPHC), the raw `t2 − t1`, `t3 − t4` and peer delay,
    /// what the outlier prefilter and the delay-floor filter handed on (empty: not measured; `dropped`: an
    /// outlier), and the servo's state, offset, path delay and the clock's frequency adjustment after it.
    pub fn open_measurement_log(&mut self) -> Result<(), String> {
        use std::io::Write as _;
        let Some(path) = &self.cfg.measurement_log else { return Ok(()) };
        let fail = |e: std::io::Error| format!("ptp.measurement_log: cannot write {}: {e}", path.display());
        let mut out = std::io::BufWriter::with_capacity(64 << 10, std::fs::File::create(path).map_err(fail)?);
        writeln!(out, "{MEASUREMENT_LOG_HEADER}").and_then(|()| out.flush()).map_err(fail)?;
        self.log = Some(out);
        Ok(())
    }

    /// Write the measurements taken since the last poll to the log (a failing log is reported once and closed:
    /// synchronisation goes on).
    fn write_measurements(&mut self) {
        use std::io::Write as _;
        let Some(out) = &mut self.log else { return };
        let taken = self.node.port().engine().take_measurements();
        // Buffered: written when the buffer fills, with each status line and at the end, not at every poll.
        let written = taken.iter().try_for_each(|m| writeln!(out, "{}", measurement_row(m)));
        if let Err(e) = written {
            let path = self.cfg.measurement_log.as_ref().map_or(String::new(), |p| p.display().to_string());
            eprintln!("keepon daemon: ptp: measurement log {path}: {e}; closed");
            self.log = None;
        }
    }

    /// The PTP configuration.
    pub fn config(&self) -> &PtpConfig {
        &self.cfg
    }

    /// One poll: receive, fire timers, re-judge synchronisation, log changes. `now` is the backend's clock.
    pub fn poll<N: Nic, S: Served>(&mut self, nic: &N, station: &mut S, now: Tai) {
        if let Err(e) = self.rx.recv(&mut self.frames) {
            self.node.problem(format!("receive failed: {e}"));
            eprintln!("keepon daemon: ptp: receive failed: {e}");
        }
        for (frame, host) in std::mem::take(&mut self.frames) {
            let stamp = station.clock_at(nic.link_time(host));
            self.node.on_frame(&frame, stamp, station, now);
        }
        if self.node.dual().is_some() {
            // (A system call on Linux: only where the count needs it.)
            self.node.on_receiver_drops(self.rx.dropped());
        }
        self.node.poll(station, now, nic.unfinished());
        self.write_measurements();
        for e in self.node.take_events() {
            match e {
                NodeEvent::Synchronised(true) => eprintln!("keepon daemon: ptp: synchronised"),
                NodeEvent::Synchronised(false) => eprintln!("keepon daemon: ptp: NOT synchronised"),
                NodeEvent::DualTookOver => {
                    eprintln!("keepon daemon: ptp: synchronised on the single clock: the dual clock takes over")
                }
                NodeEvent::DualFellBack(after) => eprintln!(
                    "keepon daemon: ptp: the dual clock lost synchronisation for {} s: back to the single clock \
                     (software receive stamps) until synchronised again",
                    after.0 / 1_000_000_000
                ),
            }
        }
        let key = (self.role(), self.node.servo().state, self.node.synchronised());
        if key != self.logged || now >= self.next_log {
            eprintln!("keepon daemon: ptp: {}", self.describe(station, now));
            if let Some(out) = &mut self.log {
                // With the status line: the log is at most one status interval behind.
                let _ = std::io::Write::flush(out);
            }
            self.logged = key;
            self.next_log = now + LOG_EVERY;
            self.node.clear_problems();
        }
    }

    /// True while the EPHC is network time (see the module docs).
    pub fn synchronised(&self) -> bool {
        self.node.synchronised()
    }

    /// The port's role.
    pub fn role(&self) -> PortRole {
        match self.node.role() {
            keepon_ptp::node::Role::Master => PortRole::Master,
            keepon_ptp::node::Role::Slave => PortRole::Slave,
            keepon_ptp::node::Role::Listening => PortRole::None,
        }
    }

    /// A host-paced link: PTP TX times come from the backend's release times (a slot released late leaves late;
    /// refused with one-step Sync, checked before start by [`PtpConfig::check_link`]), and the dual clock's
    /// frames arrive as they are sent (no wire serialises them).
    pub fn on_host_paced_link(&mut self) -> Result<(), String> {
        self.node.on_host_paced_link().map_err(|e| format!("ptp.one_step = true on this host-paced link: {e}"))
    }

    /// A wire event of frame `id`, released by the backend at `released`: PTP frames' are consumed here (true).
    pub fn on_released<S: Served>(
        &mut self,
        id: FrameId,
        released: Option<Tai>,
        stamped: bool,
        station: &mut S,
        now: Tai,
    ) -> bool {
        self.node.port_mut().on_released(id, released, stamped, station, now)
    }

    /// An outcome from the station: PTP frames' are consumed here (true).
    pub fn on_outcome<S: Served>(&mut self, o: &Outcome, station: &mut S, now: Tai) -> bool {
        self.node.on_outcome(o, station, now)
    }

    /// The `Time` reply at backend time `now`, host time `host`.
    pub fn time<S: Served>(&self, station: &S, now: Tai, host: Tai) -> TimeInfo {
        let st = self.node.servo();
        TimeInfo {
            sync: if self.node.synchronised() { SyncState::Synchronised } else { SyncState::NotSynchronised },
            port: self.role(),
            servo: match st.state {
                ServoState::Unlocked => ServoCode::Unlocked,
                ServoState::Stepping => ServoCode::Stepping,
                ServoState::Locked => ServoCode::Locked,
            },
            ephc_now: station.ephc_at(now).0,
            host_now: host.0,
            offset: st.offset.map(|o| o.0),
            freq_ppt: station.ephc().rate_ppt(),
            path_delay: st.mean_delay.map(|d| d.0),
            alignment: quantiles(station.alignment()),
        }
    }

    fn describe<S: Served>(&self, station: &S, now: Tai) -> String {
        // (The grid's alignment follows the sync error: how far the wire kept to the schedule on the EPHC.)
        let st = self.node.servo();
        let port = self.node.port();
        let role = match self.role() {
            PortRole::Master => "master",
            PortRole::Slave => "slave",
            PortRole::None => "listening",
        };
        let ns = |v: Option<Nanos>| v.map_or("-".to_string(), |v| format!("{} ns", v.0));
        format!(
            "{role}, servo {}{}, offset {}, frequency {:+.3} ppm, path delay {}, EPHC − link clock {} ns, grid {}{}{}{}{}{}{}",
            st.state,
            match self.cfg.delay_floor.window {
                Nanos(0) => String::new(),
                w => format!(" (delay floor over {} s)", w.0 as f64 / 1e9),
            },
            ns(st.offset),
            station.ephc().rate_ppt() as f64 / 1e6,
            ns(st.mean_delay),
            (station.ephc_at(now) - now).0,
            station.grid_line(),
            match port.tx_lag() {
                l @ TxLag { n: 1.., .. } => format!(
                    ", TX times: {} of {} from kernel stamps, behind their slots by {} ns mean, {} ns max, {} ns \
                     min ({} released before their place)",
                    l.stamped,
                    l.n,
                    l.mean().unwrap_or(0),
                    l.max,
                    l.min,
                    l.early
                ),
                _ => String::new(),
            },
            match port.membership_reports() {
                Some(n) => format!(", IGMP reports for 224.0.1.129: {n}"),
                None => String::new(),
            },
            match port.engine().prefilter_stats() {
                p if p.dropped > 0 => format!(", outliers dropped {} of {}", p.dropped, p.dropped + p.passed),
                _ => String::new(),
            },
            match self.node.dual() {
                Some(d) => format!(", {}", d.describe()),
                None => String::new(),
            },
            match self.node.problems() {
                (n @ 1.., Some(e)) => format!(", {n} errors (last: {e})"),
                _ => String::new(),
            },
            self.profile_line(),
        )
    }

    /// The profile's view and the grandmaster, for the metrics.
    pub fn profile_view(&self) -> super::metrics::ProfileView {
        super::metrics::ProfileView {
            status: self.node.port().profile_status(),
            grandmaster: self.node.port().engine().grandmaster(),
        }
    }

    /// The profile's part of the status line: for 802.1AS, asCapable, the neighbour, the grandmaster and what
    /// the profile dropped; for the default profile, only messages of another transportSpecific, if any.
    pub fn profile_line(&self) -> String {
        let p = self.node.port().profile_status();
        let c = p.counts;
        let foreign = if c.foreign_sdo > 0 {
            format!(", {} messages of another transportSpecific dropped", c.foreign_sdo)
        } else {
            String::new()
        };
        if !p.profile.is_802_1as() {
            return foreign;
        }
        let n = p.neighbor;
        let gm = self.node.port().engine().grandmaster();
        format!(
            ", profile {}: asCapable {}, neighbour delay {} (threshold {} ns, {} exchanges), neighbour rate ratio {}, \
             grandmaster {}{}{}",
            p.profile.name(),
            n.as_capable,
            n.delay.map_or("-".into(), |d| format!("{} ns", d.0)),
            n.threshold.0,
            n.exchanges,
            n.rate_ratio.map_or("-".into(), |r| format!("{r:.9}")),
            gm.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(""),
            foreign,
            match (c.no_follow_up_info, c.dropped_not_capable, c.held_not_capable) {
                (0, 0, 0) => String::new(),
                (a, b, h) => format!(
                    ", Follow_Up without the 802.1AS TLV dropped {a}, time messages dropped {b} and held back {h} \
                     while not asCapable"
                ),
            }
        )
    }
}

/// Median, 99th percentile and maximum magnitude of `a`, ns (`None` before anything is recorded): for `Time`, how
/// far the wire kept to the schedule (slots: |slot start − schedule time| of the slots posted while the grid was
/// locked; bytes: |frame start − txtime|).
pub fn quantiles(a: &keepon_core::station::Alignment) -> Option<(i64, i64, i64)> {
    let q = |p| a.quantile_abs(p).map(|v| v as i64);
    Some((q(500)?, q(990)?, a.max_abs() as i64))
}

/// The grid's alignment for the status line.
pub fn grid_line(station: &Station<Vec<u8>>) -> String {
    match quantiles(station.alignment()) {
        Some((p50, p99, max)) => format!(
            "|slot − schedule| p50 {p50} ns, p99 {p99} ns, max {max} ns ({} acquisitions, {} skips, {} spacers)",
            station.alignment().acquisitions,
            station.alignment().skips,
            station.alignment().spacers
        ),
        None => "not locked yet".to_string(),
    }
}
