//! The serving daemon as one value: everything the poll loop holds between iterations, and each phase of an
//! iteration a method (the module docs of [`super`] say what the daemon promises).
//!
//! ```text
//!   wake ─ accept ─ ptp ─ requests (read, answer) ─ schedule change ─ metrics ─ station (poll, route) ─ underruns
//!   ─ write ─ sleep
//! ```
//!
//! Each phase's time is accounted ([`super::looptime`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use keepon_core::isolation::ClassId;
use keepon_core::outcome::Reason;
use keepon_core::time::{Nanos, Tai};
use keepon_nic::driver::{Driver, Event};
use keepon_nic::Nic;

use crate::api::{Info, PortRole, Response, ServoCode, SyncState, TimeInfo};
use crate::config::Config;
use crate::pcap::WireTap;
use crate::ptpconf::PtpConfig;

use super::conn::Conns;
use super::feed::Feed;
use super::looptime::{LoopClock, LoopTime, Phase};
use super::requests::{serve_requests, Ctx, Later};
use super::served::{self, Served};
use super::{
    deliver, metrics, metricsfile, pause, route, schedule, socket, sync, DaemonConfig, DaemonStats, Limits, Owners,
    PtpLink, Releases, Routes, Stop, Sync, FLUSH_GRACE, METRICS_EVERY, UNDERRUN_LOG_EVERY,
};
use keepon_nic::driver::DRAIN_GRACE;

/// The metrics file and what was last said about it.
struct MetricsOut {
    file: Option<metricsfile::MetricsFile>,
    /// When it is next due.
    next: Tai,
    /// The last failure said (each said once, and its end said too).
    said: Option<String>,
}

impl MetricsOut {
    /// The metrics file `daemon.metrics_file` names, if any (its directory checked as [`metricsfile`] says).
    fn open(dcfg: &DaemonConfig) -> Result<MetricsOut, String> {
        let file = match &dcfg.metrics_file {
            Some(p) => {
                let f = metricsfile::MetricsFile::open(p)?;
                if let Some(w) = f.shared_directory_warning() {
                    eprintln!("keepon daemon: warning: {w}");
                }
                Some(f)
            }
            None => None,
        };
        Ok(MetricsOut { file, next: Tai(i64::MIN), said: None })
    }
}

/// PTP on the link that is up, and when it was last polled.
fn start_ptp<N: Nic, S: Served>(driver: &mut Driver<N, S>, p: PtpConfig, link: PtpLink) -> Result<(Sync, Tai), String> {
    let now = driver.nic.now();
    let mut sync = Sync::new(p, link.mac, &mut driver.station, now, link.rx)?;
    sync.open_measurement_log()?;
    if driver.nic.timing() == keepon_nic::Timing::HostPaced {
        sync.on_host_paced_link()?;
    }
    Ok((sync, now))
}

/// A schedule change accepted and not yet in force, and how many were accepted.
#[derive(Default)]
struct Changes {
    pending: bool,
    accepted: u64,
}

/// The daemon between iterations (see the module doc).
pub(super) struct Daemon<'a, N: Nic, S: Served> {
    cfg: &'a Config,
    dcfg: &'a DaemonConfig,
    limits: &'a Limits,
    stop: &'a AtomicBool,
    duration: Option<Nanos>,
    bound: &'a mut Option<socket::BoundSocket>,
    driver: Driver<N, S>,
    /// When serving began (backend time).
    start: Tai,
    tap: Option<WireTap>,
    stats: DaemonStats,
    backend: String,
    later: Later,
    metrics: MetricsOut,
    conns: Conns,
    owner: Owners,
    releases: Releases,
    next_frame: u64,
    feed: Feed,
    events: Vec<Event>,
    phase: Stop,
    keep_ptp: Option<crate::ptproom::Keep>,
    ptp: Option<(Sync, Tai)>,
    names: Vec<String>,
    windows: metrics::Windows,
    changes: Changes,
    /// Where the next poll starts serving best-effort-only connections (round robin under the budget).
    cursor: u64,
    /// Whether the loop may sleep beyond its period (see [`pause`]).
    paced_by_nic: bool,
    wakeups: pause::Wakeups,
    /// Underruns are said at most once per [`UNDERRUN_LOG_EVERY`]: (count said, when next).
    underruns_said: (u64, Tai),
    clock: LoopClock,
    busy: LoopTime,
}

impl<'a, N: Nic, S: Served> Daemon<'a, N, S> {
    /// Bring the link up (the first polls anchor the clock and the schedule's grid, which `Info` reports) and
    /// start PTP: the daemon, ready to answer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        cfg: &'a Config,
        dcfg: &'a DaemonConfig,
        mut driver: Driver<N, S>,
        setup: Option<(PtpConfig, PtpLink)>,
        stop: &'a AtomicBool,
        duration: Option<Nanos>,
        bound: &'a mut Option<socket::BoundSocket>,
        limits: &'a Limits,
    ) -> Result<Self, String> {
        let start = driver.nic.now();
        let tap = dcfg.pcap.as_deref().map(|p| WireTap::create(p, cfg)).transpose()?;
        let classes = cfg.ownership.classes();
        let stats = DaemonStats { classes: vec![metrics::ClassCounters::default(); classes], ..Default::default() };
        let backend = crate::backend::describe_for(cfg, driver.nic.describe());
        let metrics = MetricsOut::open(dcfg)?;
        let conns = Conns::new(bound.as_ref().map(|b| &b.listener)).map_err(|e| format!("epoll: {e}"))?;
        let mut feed = Feed::new(classes, cfg.max_pending, limits.max_queued);
        for _ in 0..100_000 {
            driver.step(&mut feed, &mut |_| {}).map_err(|e| e.to_string())?;
            if driver.station.schedule_settled() {
                break;
            }
            driver.nic.wait(cfg.poll_period);
        }
        let keep_ptp = setup.as_ref().map(|(p, _)| crate::ptproom::Keep::new(cfg, p));
        let ptp = setup.map(|(p, link)| start_ptp(&mut driver, p, link)).transpose()?;
        let names = (0..classes).map(|i| cfg.ownership.name(ClassId(i as u8)).into()).collect();
        let windows = served::class_windows(&driver.station.schedule_windows());
        // The loop sleeps beyond its period only where the NIC paces the wire (not on host-paced links, where the
        // loop releases each frame itself, nor under the dual clock, which counts arriving frames as they come).
        let dual = ptp.as_ref().is_some_and(|(s, _)| s.dual_clock());
        let paced_by_nic = dcfg.idle_pause
            && matches!(driver.nic.timing(), keepon_nic::Timing::Simulated | keepon_nic::Timing::LineRate)
            && !dual;
        Ok(Daemon {
            cfg,
            dcfg,
            limits,
            stop,
            duration,
            bound,
            driver,
            start,
            tap,
            stats,
            backend,
            later: Later::default(),
            metrics,
            conns,
            owner: HashMap::new(),
            releases: Releases::default(),
            next_frame: 0,
            feed,
            events: Vec::new(),
            phase: Stop::No,
            keep_ptp,
            ptp,
            names,
            windows,
            changes: Changes::default(),
            cursor: 0,
            paced_by_nic,
            wakeups: pause::Wakeups::default(),
            underruns_said: (0, Tai(i64::MIN)),
            clock: LoopClock::start(),
            busy: LoopTime::new(Nanos(i64::try_from(cfg.lead()).unwrap_or(i64::MAX))),
        })
    }

    /// Serve until stopped and drained (the module docs of [`super`]).
    pub(super) fn run(mut self) -> Result<DaemonStats, String> {
        while !self.iteration()? {}
        self.later.guard.flush(self.driver.nic.now());
        if let Some(t) = self.tap.take() {
            t.finish()?;
        }
        Ok(self.stats)
    }

    /// One iteration of the poll loop; true when the daemon is done.
    fn iteration(&mut self) -> Result<bool, String> {
        self.busy.begin(self.clock.now());
        let now = self.driver.nic.now();
        let stopping = self.stop.load(Ordering::Relaxed) || self.duration.is_some_and(|d| now - self.start > d);
        self.accept(now, stopping);
        self.busy.mark(Phase::Clients, self.clock.now());
        if let (Some((s, at)), Stop::No | Stop::Draining(_)) = (self.ptp.as_mut(), self.phase) {
            *at = now;
            s.poll(&self.driver.nic, &mut self.driver.station, now);
        }
        self.busy.mark(Phase::Ptp, self.clock.now());
        self.change_in_effect();
        let order = self.read_requests(now, stopping);
        self.schedule_change(now);
        self.later.guard.tick(now);
        self.metrics(now);
        // Buffers change only on active connections: with none, the sum is what it was.
        if !order.is_empty() {
            self.stats.peak_buffered = self.stats.peak_buffered.max(self.conns.buffered());
        }
        self.busy.mark(Phase::Requests, self.clock.now());
        if let Stop::No | Stop::Draining(_) | Stop::LinkDrain(_) = self.phase {
            self.station(now)?;
        }
        self.releases.expire(Some(now), &mut self.conns);
        self.busy.mark(Phase::Station, self.clock.now());
        self.report_underruns(now);
        self.stats.dropped += self.conns.flush(self.limits);
        self.busy.mark(Phase::Clients, self.clock.now());
        if let Stop::Flushing(until) = self.phase {
            if self.conns.map.is_empty() || self.driver.nic.now() > until {
                return Ok(true);
            }
        }
        self.sleep(now);
        Ok(false)
    }

    /// Accept new connections; once stopping, nobody new (every peer's further writes fail, what they wrote is
    /// still read and answered).
    fn accept(&mut self, now: Tai, stopping: bool) {
        // One epoll_wait: which connections (and whether the listener) have something to read.
        self.conns.ready();
        if let Some(b) = self.bound.as_ref() {
            let (dcfg, cfg) = (self.dcfg, self.cfg);
            let allowed = |uid, gid| {
                let a = dcfg.allowed(cfg, uid, gid);
                let rt = a.iter().enumerate().any(|(i, &ok)| ok && !cfg.is_best_effort(ClassId(i as u8)));
                (a, rt)
            };
            let a = self.conns.accept_all(&b.listener, self.limits, allowed);
            self.stats.connections += a.taken;
            self.stats.refused += a.refused;
        }
        if stopping && self.phase == Stop::No {
            if let Some(b) = self.bound.take() {
                b.close();
            }
            self.conns.shut_reading();
            self.phase = Stop::Draining(now + self.cfg.max_advance + self.driver.ring_span());
        }
    }

    /// The `Time` reply's content now.
    fn time_info(&self, now: Tai) -> TimeInfo {
        let st = &self.driver.station;
        match &self.ptp {
            Some((s, _)) => s.time(st, now, self.driver.nic.host_time(now)),
            None => TimeInfo {
                sync: SyncState::FreeRunning,
                port: PortRole::None,
                servo: ServoCode::Unlocked,
                ephc_now: st.ephc_at(now).0,
                host_now: self.driver.nic.host_time(now).0,
                offset: None,
                freq_ppt: st.ephc().rate_ppt(),
                path_delay: None,
                alignment: sync::quantiles(st.alignment()),
            },
        }
    }

    /// A pending schedule change that took effect: `Info` reports the new windows from now on.
    fn change_in_effect(&mut self) {
        if self.changes.pending && self.driver.station.pending_change_time().is_none() {
            self.changes.pending = false;
            self.windows = served::class_windows(&self.driver.station.schedule_windows());
            eprintln!("keepon daemon: schedule change in effect (Info reports the new windows)");
        }
    }

    /// Read and answer requests: connections that may use a real-time class first, in full; then the
    /// best-effort-only ones, round robin, within the per-poll budget. Returns the connections looked at (none:
    /// the clock readings requests are answered from are not even taken).
    fn read_requests(&mut self, now: Tai, stopping: bool) -> Vec<u64> {
        let order = self.conns.active_from(self.cursor);
        if order.is_empty() {
            return order;
        }
        let time = self.time_info(now);
        let info = {
            // A cycle start at least a ring of slots ahead of the NIC.
            let (st, cfg) = (&self.driver.station, self.cfg);
            let ahead = st.ephc_at(now) + st.ring_span();
            Info {
                rate_bps: cfg.geometry.rate().bps(),
                slot_bytes: cfg.geometry.slot_bytes(),
                ring: cfg.ownership.ring(),
                batch: cfg.batch,
                now: st.ephc_at(now).0,
                cycle_start: st.cycle_start_at_or_after(ahead).map_or(0, |t| t.0),
                base_time: st.base_time().0,
                cycle: served::cycle_of(st.cycle()),
                host: self.dcfg.host,
                classes: Vec::new(),
                windows: Vec::new(),
            }
        };
        let (cfg, limits) = (self.cfg, self.limits);
        let ctx = Ctx { cfg, limits, names: &self.names, windows: &self.windows, info, time, now, stopping };
        let mut budget = limits.requests_per_poll;
        for real_time in [true, false] {
            for &cid in &order {
                let Some(c) = self.conns.map.get_mut(&cid).filter(|c| c.real_time == real_time) else { continue };
                if !real_time && budget == 0 {
                    self.cursor = cid;
                    break;
                }
                if c.takes_requests(limits) {
                    c.read_some(limits);
                }
                let mut unlimited = usize::MAX;
                let b = if real_time { &mut unlimited } else { &mut budget };
                serve_requests(
                    cid,
                    c,
                    &mut self.conns.usage,
                    &ctx,
                    b,
                    &mut self.feed,
                    &mut self.owner,
                    &mut self.next_frame,
                    &mut self.stats,
                    &mut self.later,
                );
            }
        }
        order
    }

    /// Schedule changes, in the order asked, one per poll (each may move every frame waiting in the station):
    /// each answered with when it takes effect, or why not.
    fn schedule_change(&mut self, now: Tai) {
        let Some(schedule::Request { cid, uid, base_time, change }) = self.later.changes.pop_front() else { return };
        let st = &mut self.driver.station;
        let horizon = st.ephc_at(now) + schedule::MAX_AHEAD;
        let r = if base_time > horizon.0 {
            Err(format!(
                "base time {base_time} ns is more than {} s ahead of the station's clock ({} ns): a change is held at \
                 most that long (one pending change at a time)",
                schedule::MAX_AHEAD.0 / 1_000_000_000,
                st.ephc_at(now).0
            ))
        } else if let Some(Err(why)) = self.keep_ptp.as_ref().map(|k| k.check(self.cfg, &change)) {
            Err(why)
        } else {
            st.change_schedule(uid, base_time, &change)
        };
        match &r {
            Ok(s) => {
                self.changes.pending = true;
                self.changes.accepted += 1;
                let says = || {
                    format!(
                        "takes effect at {} ns; {} frames already submitted lost their slot (schedule-change)",
                        s.time, s.rejected
                    )
                };
                self.later.guard.note(uid, "schedule changes accepted", says, now);
            }
            Err(why) => self.later.guard.note(uid, "schedule changes refused", || why.clone(), now),
        }
        if let Some(c) = self.conns.get_mut(cid) {
            c.change_waiting = false;
            c.respond(&Response::Scheduled(r));
        }
    }

    /// The metrics: to those who asked this poll, and to the metrics file when it is due.
    fn metrics(&mut self, now: Tai) {
        let file_due = self.metrics.file.is_some() && now >= self.metrics.next;
        if self.later.stats.is_empty() && !file_due {
            return;
        }
        let time = &self.time_info(now);
        let cfg = self.cfg;
        let view = metrics::View {
            backend: &self.backend,
            timing: match cfg.timing {
                crate::config::WireTiming::Slots => "slots",
                crate::config::WireTiming::Bytes => "bytes",
            },
            rate_bps: cfg.geometry.rate().bps(),
            slot_bytes: cfg.geometry.slot_bytes(),
            ring: cfg.ownership.ring(),
            uptime_s: (now - self.start).0 as f64 / 1e9,
            time,
            host: self.dcfg.host,
            names: &self.names,
            stats: &self.stats,
            queued: self.feed.per_class(),
            open_connections: self.conns.map.len(),
            schedule_pending: self.driver.station.pending_windows().map(|(t, w)| (t.0, served::class_windows(&w))),
            schedule_changes: self.changes.accepted,
            wakeups_per_s: self.wakeups.per_s,
            loop_time: &self.busy,
            ptp_profile: self.ptp.as_ref().map(|(p, _)| p.profile_view()),
        };
        let text = metrics::render(&view);
        let reply = (!self.later.stats.is_empty()).then(|| Response::Stats(metrics::fit(&text)).emit());
        for cid in self.later.stats.drain(..) {
            if let Some(c) = self.conns.get_mut(cid) {
                c.stats_waiting = false;
                crate::api::frame_message(reply.as_deref().unwrap_or_default(), &mut c.wbuf);
            }
        }
        let out = &mut self.metrics;
        if let (true, Some(f)) = (file_due, out.file.as_mut()) {
            out.next = now + METRICS_EVERY;
            match f.write(&text) {
                Err(e) if out.said.as_ref() != Some(&e) => {
                    eprintln!("keepon daemon: daemon.metrics_file not written: {e}");
                    out.said = Some(e);
                }
                Ok(()) if out.said.take().is_some() => {
                    eprintln!("keepon daemon: daemon.metrics_file {} written again", f.path().display());
                }
                _ => {}
            }
        }
    }

    /// The station: one poll while the link runs; outcomes go back to their clients. A stopping daemon shuts
    /// the station down once what it accepted has left (or its time is up), then lets the link drain.
    fn station(&mut self, now: Tai) -> Result<(), String> {
        if let Stop::Draining(until) = self.phase {
            if (self.driver.station.in_flight() == 0 && self.feed.queued() == 0) || now > until {
                for (id, class) in self.feed.take_all() {
                    self.stats.count(Some(class), Err(Reason::Shutdown));
                    let (owner, conns, releases) = (&mut self.owner, &mut self.conns, &mut self.releases);
                    deliver(id, Err(Reason::Shutdown), now, owner, conns, releases, &mut self.stats);
                }
                self.driver.station.shutdown();
                self.phase = Stop::LinkDrain(now + DRAIN_GRACE + self.driver.ring_span());
            }
        }
        let events = &mut self.events;
        self.driver.step(&mut self.feed, &mut |e| events.push(e)).map_err(|e| e.to_string())?;
        let mut link_done = false;
        if let Stop::LinkDrain(give_up) = self.phase {
            // A link that stops completing must not hold the daemon: after the grace period, the frames still
            // posted get `link-fault`.
            let done = self.driver.station.drained() && self.driver.nic.unfinished() == 0;
            if !done && self.driver.nic.now() > give_up {
                self.driver.abandon_posted(&mut |e| events.push(e));
            }
            link_done = done || self.driver.nic.now() > give_up;
        }
        let routes = Routes {
            tolerance: self.cfg.tolerance,
            now,
            feed: &mut self.feed,
            owner: &mut self.owner,
            conns: &mut self.conns,
            releases: &mut self.releases,
            stats: &mut self.stats,
            ptp: &mut self.ptp,
            tap: &mut self.tap,
        };
        route(&mut self.events, routes, &mut self.driver.station);
        if link_done {
            self.phase = Stop::Flushing(self.driver.nic.now() + FLUSH_GRACE);
            // No release report can come any more.
            self.releases.expire(None, &mut self.conns);
        }
        Ok(())
    }

    /// Underruns, said at most once per [`UNDERRUN_LOG_EVERY`], with the longest iteration since the last report.
    fn report_underruns(&mut self, now: Tai) {
        let (said, next) = self.underruns_said;
        if self.stats.underruns <= said || now < next {
            return;
        }
        eprintln!(
            "keepon daemon: {} underruns so far, {} new: the link went idle (the host did not post slots in time); \
             frames held then report `underrun`, later ones follow the re-anchored grid; the longest poll-loop \
             iteration since the last report: {} (lead {})",
            self.stats.underruns,
            self.stats.underruns - said,
            self.busy.take_report().describe(),
            super::looptime::span(self.busy.lead())
        );
        self.underruns_said = (self.stats.underruns, now + UNDERRUN_LOG_EVERY);
    }

    /// Sleep as long as the posted lead allows ([`pause`]), woken by a client's request.
    fn sleep(&mut self, now: Tai) {
        self.wakeups.tick(now);
        self.busy.end(self.clock.now());
        self.driver.nic.wait(self.cfg.poll_period);
        if self.paced_by_nic && self.phase == Stop::No {
            // The lead: what is posted beyond what the NIC has fetched (at this poll's observation).
            let (st, ring) = (&self.driver.station, self.driver.station.ring());
            let lead = st.slot_time(ring.posted()) - st.slot_time(ring.consumed());
            if let Some(extra) = pause::extra(lead, self.cfg.poll_period) {
                self.conns.wait_ready(std::time::Duration::from_nanos(extra.0 as u64));
                self.driver.nic.wait(Nanos(0));
            }
        }
    }
}
