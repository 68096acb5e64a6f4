//! `keepon daemon`: one station on one link, serving applications over a local UNIX socket.
//!
//! The poll loop owns everything and never blocks: it accepts connections, reads whatever requests have
//! arrived, submits frames, runs one station poll, writes outcomes back, and sleeps until the next poll. A
//! client that sends garbage gets an error message (its connection stays usable unless the length framing
//! itself is broken); a client that floods is capped at `max_in_flight` frames without an outcome (the rest
//! are rejected `queue-full`); a client that stops reading or disconnects is dropped — its frames already in
//! the station still leave in their slots. None of this can disturb the slot grid: the station only ever
//! sees well-formed frames, and socket I/O never waits.
//!
//! Which classes a client may use is decided by its **peer credentials** (`SO_PEERCRED`: uid, gid), matched
//! against `[[daemon.allow]]` rules; a frame of a class the client may not use is rejected `forbidden` and
//! never reaches the station.
//!
//! ```toml
//! [daemon]
//! socket = "/run/keepon.sock"
//! mode = "0666"                 # socket permissions; access to classes is decided by the rules below
//! max_in_flight = 4096          # per client
//! [[daemon.allow]]
//! uid = 1000                    # and/or gid = …; a rule with neither matches everyone
//! classes = ["ctrl", "be"]
//! ```
//! Without rules, root and the daemon's own user may use every class, nobody else any.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;

use keepon_core::isolation::ClassId;
use keepon_core::outcome::{Frame, FrameId, Reason};
use keepon_core::time::{Nanos, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig, Source, DRAIN_GRACE};
use keepon_nic::Nic;

use crate::api::{frame_message, split_messages, Delivery, Info, Request, Response};
use crate::config::{Config, ConfigError};
use crate::run::station_config;

/// `[daemon]`
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct DaemonSection {
    socket: PathBuf,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    max_in_flight: Option<usize>,
    #[serde(default)]
    allow: Vec<AllowRule>,
}

/// One `[[daemon.allow]]` rule.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AllowRule {
    /// Matching uid (any if absent).
    #[serde(default)]
    pub uid: Option<u32>,
    /// Matching gid (any if absent).
    #[serde(default)]
    pub gid: Option<u32>,
    /// Class names the matching clients may use.
    pub classes: Vec<String>,
}

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Socket path.
    pub socket: PathBuf,
    /// Socket file permissions (default 0o666: anyone may connect; what they may send is decided by the
    /// allow rules on their credentials).
    pub mode: u32,
    /// Frames without an outcome allowed per client.
    pub max_in_flight: usize,
    /// Credential rules.
    pub allow: Vec<AllowRule>,
}

impl DaemonConfig {
    /// Read `[daemon]` from a validated configuration; class names in rules must exist.
    pub fn from_config(cfg: &Config) -> Result<DaemonConfig, ConfigError> {
        let table = cfg.raw.daemon.clone().ok_or_else(|| ConfigError("no [daemon] section (daemon.socket)".into()))?;
        let d: DaemonSection =
            table.try_into().map_err(|e: toml::de::Error| ConfigError(format!("[daemon]: {}", e.message())))?;
        for (i, r) in d.allow.iter().enumerate() {
            for c in &r.classes {
                if cfg.ownership.class_named(c).is_none() {
                    return Err(ConfigError(format!("daemon.allow[{i}].classes: no class named `{c}`")));
                }
            }
        }
        let mode = match &d.mode {
            None => 0o666,
            Some(m) => u32::from_str_radix(m.trim_start_matches("0o"), 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| ConfigError(format!("daemon.mode = \"{m}\" is not an octal mode like \"0660\"")))?,
        };
        Ok(DaemonConfig { socket: d.socket, mode, max_in_flight: d.max_in_flight.unwrap_or(4096), allow: d.allow })
    }

    /// Which classes a peer with these credentials may use.
    pub fn allowed(&self, cfg: &Config, uid: u32, gid: u32) -> Vec<bool> {
        let n = cfg.ownership.classes();
        if self.allow.is_empty() {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            return vec![uid == 0 || uid == me; n];
        }
        let mut ok = vec![false; n];
        for r in &self.allow {
            if r.uid.is_none_or(|u| u == uid) && r.gid.is_none_or(|g| g == gid) {
                for c in &r.classes {
                    if let Some(id) = cfg.ownership.class_named(c) {
                        ok[usize::from(id.0)] = true;
                    }
                }
            }
        }
        ok
    }
}

/// uid and gid of the peer of a connected UNIX socket.
fn peer_credentials(s: &UnixStream) -> std::io::Result<(u32, u32)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a valid socket for the lifetime of `s`; `cred` and `len` are valid for writes of the
    // sizes given.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cred.uid, cred.gid))
}

/// Most bytes of responses buffered for one client before it is dropped as not reading.
const MAX_WRITE_BACKLOG: usize = 4 << 20;

struct Conn {
    stream: UnixStream,
    allowed: Vec<bool>,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    in_flight: usize,
    open: bool,
}

impl Conn {
    fn respond(&mut self, r: &Response) {
        frame_message(&r.emit(), &mut self.wbuf);
    }
}

/// What the daemon did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DaemonStats {
    /// Connections accepted.
    pub connections: u64,
    /// Malformed requests answered with an error.
    pub malformed: u64,
    /// Connections closed for broken framing or not reading.
    pub dropped: u64,
    /// Frames submitted by clients.
    pub frames: u64,
    /// Outcomes whose client had gone.
    pub orphaned: u64,
    /// Underruns.
    pub underruns: u64,
}

/// Accept every pending connection, recording its peer's credentials and allowed classes.
fn accept_all(
    listener: &UnixListener,
    cfg: &Config,
    dcfg: &DaemonConfig,
    conns: &mut HashMap<u64, Conn>,
    next_conn: &mut u64,
    stats: &mut DaemonStats,
) {
    loop {
        let s = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return, // WouldBlock: nothing more pending
        };
        let Ok((uid, gid)) = peer_credentials(&s) else { continue };
        if s.set_nonblocking(true).is_err() {
            continue;
        }
        stats.connections += 1;
        let allowed = dcfg.allowed(cfg, uid, gid);
        conns.insert(
            *next_conn,
            Conn { stream: s, allowed, rbuf: Vec::new(), wbuf: Vec::new(), in_flight: 0, open: true },
        );
        *next_conn += 1;
    }
}

/// Send an event's outcome to the client that submitted the frame.
fn route(e: Event, owner: &mut HashMap<FrameId, (u64, u64)>, conns: &mut HashMap<u64, Conn>, stats: &mut DaemonStats) {
    match e {
        Event::Outcome(o) => match owner.remove(&o.id).and_then(|(cid, tag)| Some((conns.get_mut(&cid)?, tag))) {
            Some((c, tag)) => {
                c.in_flight = c.in_flight.saturating_sub(1);
                let delivery = match o.result {
                    Ok(s) => Delivery::Sent { slot: s.slot, time: s.time.0, ring_slot: s.ring_slot },
                    Err(r) => Delivery::Rejected(r),
                };
                c.respond(&Response::Outcome { tag, delivery });
            }
            None => stats.orphaned += 1,
        },
        Event::Underrun(_) => stats.underruns += 1,
        Event::Wire(_) => {}
    }
}

/// Write buffered responses without waiting; drop clients that stopped reading or went away.
fn flush(conns: &mut HashMap<u64, Conn>, stats: &mut DaemonStats) {
    conns.retain(|_, c| {
        while !c.wbuf.is_empty() && c.open {
            match c.stream.write(&c.wbuf) {
                Ok(0) => c.open = false,
                Ok(n) => {
                    c.wbuf.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => c.open = false,
            }
        }
        if c.wbuf.len() > MAX_WRITE_BACKLOG {
            stats.dropped += 1;
            c.open = false;
        }
        c.open
    });
}

/// Frames ready to be handed to the station at once.
#[derive(Default)]
struct Inbox(VecDeque<(Tai, Frame<Vec<u8>>)>);

impl Source for Inbox {
    fn next_due(&self) -> Option<Tai> {
        self.0.front().map(|(t, _)| *t)
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        self.0.pop_front().map(|(_, f)| f)
    }
}

/// Serve until `stop` is set (or `duration` of host time has passed), then drain the station so every
/// submitted frame gets its outcome, and remove the socket.
pub fn serve<N: Nic>(
    cfg: &Config,
    dcfg: &DaemonConfig,
    nic: N,
    stop: &AtomicBool,
    duration: Option<Nanos>,
) -> Result<DaemonStats, String> {
    let _ = std::fs::remove_file(&dcfg.socket);
    let listener =
        UnixListener::bind(&dcfg.socket).map_err(|e| format!("cannot bind {}: {e}", dcfg.socket.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dcfg.socket, std::fs::Permissions::from_mode(dcfg.mode))
            .map_err(|e| format!("cannot set the mode of {}: {e}", dcfg.socket.display()))?;
    }
    let loop_cfg = LoopConfig { poll_period: cfg.poll_period, max_duration: Nanos(i64::MAX) };
    let mut driver = Driver::new(nic, station_config(cfg), loop_cfg).map_err(|e| e.to_string())?;
    let start = driver.nic.now();
    let mut stats = DaemonStats::default();
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut owner: HashMap<FrameId, (u64, u64)> = HashMap::new();
    let (mut next_conn, mut next_frame) = (0u64, 0u64);
    let mut inbox = Inbox::default();
    let mut stop_at: Option<Tai> = None;
    // Bring the link up before answering anyone: the first polls anchor the clock and the schedule's grid,
    // which `Info` reports.
    for _ in 0..100_000 {
        driver.step(&mut inbox, &mut |_| {}).map_err(|e| e.to_string())?;
        if driver.station.schedule_settled() {
            break;
        }
        driver.nic.wait(cfg.poll_period);
    }
    let names: Vec<String> =
        (0..cfg.ownership.classes()).map(|i| cfg.ownership.name(ClassId(i as u8)).into()).collect();

    loop {
        let stopping = stop.load(Ordering::Relaxed) || duration.is_some_and(|d| driver.nic.now() - start > d);
        // Accept (not while stopping).
        if !stopping {
            accept_all(&listener, cfg, dcfg, &mut conns, &mut next_conn, &mut stats);
        }
        // Read and parse requests.
        let now = driver.nic.now();
        for (&cid, c) in conns.iter_mut() {
            let mut chunk = [0u8; 16 * 1024];
            loop {
                match c.stream.read(&mut chunk) {
                    Ok(0) => {
                        c.open = false;
                        break;
                    }
                    Ok(n) => c.rbuf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.open = false;
                        break;
                    }
                }
                if c.rbuf.len() > 1 << 20 {
                    break; // handle what we have; read more next poll
                }
            }
            let msgs = match split_messages(&mut c.rbuf) {
                Ok(m) => m,
                Err(e) => {
                    stats.malformed += 1;
                    stats.dropped += 1;
                    c.respond(&Response::Error(format!("{e}; closing the connection")));
                    let _ = c.stream.write_all(&c.wbuf);
                    c.open = false;
                    Vec::new()
                }
            };
            for m in msgs {
                match Request::parse(&m) {
                    Err(e) => {
                        stats.malformed += 1;
                        c.respond(&Response::Error(e.0));
                    }
                    Ok(Request::Info) => {
                        // A schedule slot of ring slot 0, at least a ring ahead of the NIC.
                        let n = u64::from(cfg.ownership.ring());
                        let st = &driver.station;
                        let j = st.schedule().slot_of(st.ephc().time_of(st.ring().consumed())).unwrap_or(0);
                        let j = (j + n).div_ceil(n) * n;
                        c.respond(&Response::Info(Info {
                            rate_bps: cfg.geometry.rate().bps(),
                            slot_bytes: cfg.geometry.slot_bytes(),
                            ring: cfg.ownership.ring(),
                            batch: cfg.batch,
                            now: now.0,
                            cycle_start: driver.station.schedule().time_of(j).0,
                            classes: names.clone(),
                        }));
                    }
                    Ok(Request::Submit { tag, class, txtime, frame }) => {
                        stats.frames += 1;
                        let reject = |c: &mut Conn, why: Reason| {
                            c.respond(&Response::Outcome { tag, delivery: Delivery::Rejected(why) })
                        };
                        let Some(id) = cfg.ownership.class_named(&class) else {
                            reject(c, Reason::UnknownClass);
                            continue;
                        };
                        if !c.allowed[usize::from(id.0)] {
                            reject(c, Reason::Forbidden);
                            continue;
                        }
                        if c.in_flight >= dcfg.max_in_flight {
                            reject(c, Reason::QueueFull);
                            continue;
                        }
                        let fid = FrameId(next_frame);
                        next_frame += 1;
                        owner.insert(fid, (cid, tag));
                        c.in_flight += 1;
                        inbox.0.push_back((now, Frame { id: fid, class: id, txtime: txtime.map(Tai), data: frame }));
                    }
                }
            }
        }
        if stopping && driver.station.in_flight() == 0 && inbox.0.is_empty() && !driver.station.drained() {
            driver.station.shutdown();
        }
        // One poll of the station; outcomes go back to their clients.
        driver.step(&mut inbox, &mut |e| route(e, &mut owner, &mut conns, &mut stats)).map_err(|e| e.to_string())?;
        flush(&mut conns, &mut stats);
        if stopping && driver.station.drained() && driver.nic.unfinished() == 0 {
            break;
        }
        if stopping {
            // A link that stops completing must not hold the daemon: after a grace period, the frames still
            // posted get `link-fault`.
            let give_up = *stop_at.get_or_insert(driver.nic.now() + DRAIN_GRACE + driver.ring_span());
            if driver.nic.now() > give_up {
                driver.abandon_posted(&mut |e| route(e, &mut owner, &mut conns, &mut stats));
                flush(&mut conns, &mut stats);
                break;
            }
        }
        driver.nic.wait(cfg.poll_period);
    }
    let _ = std::fs::remove_file(&dcfg.socket);
    Ok(stats)
}
