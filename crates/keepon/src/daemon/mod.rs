//! `keepon daemon`: one station on one link, serving applications over a local UNIX socket.
//!
//! The poll loop owns everything and never blocks: it accepts connections, reads whatever requests have
//! arrived, queues frames per class, hands the station what each class's share allows, runs one station
//! poll, writes outcomes back, and sleeps until the next poll. A client that sends garbage gets an error
//! message (its connection stays usable unless the length framing itself is broken); a client that stops
//! reading only stalls itself; a client that disconnects leaves its frames to leave in their slots. None of
//! this can disturb the slot grid: the station only ever sees well-formed frames, and socket I/O never waits.
//!
//! Which classes a client may use is decided by its **peer credentials** (`SO_PEERCRED`: uid, gid), matched
//! against `[[daemon.allow]]` rules; a frame of a class the client may not use is rejected `forbidden` and
//! never reaches the station.
//!
//! ```toml
//! [daemon]
//! socket = "/run/keepon.sock"
//! mode = "0666"                 # socket permissions; access to classes is decided by the rules below
//! [[daemon.allow]]
//! uid = 1000                    # and/or gid = …; a rule with neither matches everyone
//! classes = ["ctrl", "be"]
//! ```
//! Without rules, root and the daemon's own user may use every class, nobody else any.
//!
//! # Limits
//!
//! Every resource a client can make the daemon hold is bounded (all keys in `[daemon]`, each a whole
//! number ≥ 1; 0 or nonsense is a configuration error naming the key):
//!
//! | key | default | bounds |
//! |---|---|---|
//! | `max_in_flight` | 4096 | frames without an outcome (subscribed to release times: or their `Released`) per connection (more: `queue-full`) |
//! | `max_in_flight_per_uid` | 16384 | frames without an outcome per uid, all its connections together (more: `queue-full`) |
//! | `max_connections` | 256 | open connections in all (more: an error reply, then closed) |
//! | `max_connections_per_uid` | 32 | open connections per uid (more: an error reply, then closed) |
//! | `reserved_connections` | 32 | of `max_connections`, kept for peers that may use a real-time class (0 for none; less than `max_connections`); users other than root and the daemon's own hold at most half of it, each at most a quarter |
//! | `max_connections_unlisted` | 8 | open connections in all of peers no allow rule gives a class (they can only ask `Info`/`Time`; 0 refuses them) |
//! | `read_buffer` | 65536 | bytes of unparsed requests held per connection (≥ 16388, one largest message) |
//! | `reply_backlog` | 65536 | bytes of unsent replies per connection beyond which its requests are not read |
//! | `max_queued` | 4096 | frames per class waiting in the daemon for room in the station (more: `queue-full`) |
//!
//! A class may have at most `run.max_pending` frames in the station (pre-buffered, queued or posted: the
//! station's budget per class); its further frames wait in the daemon's own queue of that class. Best
//! effort, however many clients flood it, thus never takes a real-time class's admission capacity, in the
//! station or in the daemon. Each poll serves the connections whose peer may use a real-time class first
//! and in full; the connections limited to best effort share `requests_per_poll` requests, round robin, so
//! a flood of them costs each poll a bounded amount of work. Requests other than frames from users other than
//! root and the daemon's own are held to a rate per user by not reading their connections ([`guard`]). (The
//! flooding processes still compete for the host's CPUs: run the daemon under `SCHED_FIFO` to keep its polls on
//! time.)
//!
//! **Memory.** A connection holds at most `read_buffer + reply_backlog` bytes plus one reply, plus the
//! outcomes of its frames in flight (36 B each, at most `max_in_flight`): with the defaults at most
//! 256 × (64 + 64 + 144) KiB ≈ 68 MiB of connection buffers in all, and per uid at most 32 connections. A
//! connection whose replies pile up (its client does not read) is no longer read: its requests wait in the
//! kernel's socket buffer and its client's writes block; it costs nobody else anything. (These are the bytes
//! in use; a buffer's allocation may be up to twice that.) Frames held are at most `max_queued +
//! max_pending` per class plus one ring.
//!
//! **Half-close.** A client that shuts its writing side (`Client::close_write`) still gets every outcome of
//! the frames it submitted (and, subscribed to release times, every `Released`); the daemon closes the
//! connection once they are delivered.
//!
//! **Shutdown** (SIGINT/SIGTERM, or `--duration` over): the daemon stops accepting connections and removes
//! its socket file, shuts the reading side of every connection (a client's further writes fail with
//! `EPIPE`, or raise `SIGPIPE` where it is not ignored; what it wrote before is still read), answers every submit read from then on `shutdown`, lets the
//! frames already accepted leave in their slots (those whose slot is more than `run.max_advance` plus one
//! ring away are rejected `shutdown`), waits for the NIC to complete what is posted (at most one ring plus
//! 1 s; frames still posted then get `link-fault`), and writes every outcome to its client for at most 1 s
//! more before it exits. So every submit the socket took gets exactly one outcome, unless its client stops
//! reading.
//!
//! **Network time.** With a `[ptp]` section the daemon runs PTP on its link ([`Sync`]): the station's EPHC
//! follows the network's master (or is the master). A submit that asks for network time — a real-time class
//! with a txtime — is refused `not-synchronised` while the station is not synchronised (never sent on a
//! free-running clock); best effort is unaffected. The `Time` request reports EPHC and host time at one instant
//! with the synchronisation state, the servo's offset, frequency and path delay.
//!
//! **Socket path.** The daemon refuses to start when a daemon answers on `daemon.socket` or the path exists
//! and is not a socket; it removes only a stale socket (connect refused), and on exit only the socket file it
//! bound itself.

mod config;
mod conn;

mod feed;
mod guard;
pub mod looptime;
pub mod metrics;
mod metricsfile;
mod pause;
mod requests;
pub(crate) mod schedule;
mod serve;
mod served;
mod socket;
mod sync;
pub use sync::MEASUREMENT_LOG_HEADER;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use keepon_core::isolation::ClassId;
use keepon_core::outcome::{FrameId, Outcome, Reason};
use keepon_core::time::{Nanos, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::Nic;

use crate::api::{Delivery, Response};
use crate::config::Config;
use crate::ptpconf::PtpConfig;
use crate::run::{byte_config, station_config};

use crate::pcap::WireTap;
use served::Served;

pub use config::{AllowRule, DaemonConfig, Limits};
use conn::Conns;
use feed::Feed;
pub use sync::{NoRx, RxSource, Sync};

/// The link as PTP sees it: the station's MAC (source of PTP frames, clock identity) and where received
/// frames come from.
pub struct PtpLink {
    /// The station's MAC address.
    pub mac: [u8; 6],
    /// Received frames with host timestamps.
    pub rx: Box<dyn RxSource>,
}

/// The MAC used for PTP when the caller gives no link (the simulated NIC): locally administered.
pub const DEFAULT_PTP_MAC: [u8; 6] = [0x02, 0x6b, 0x65, 0x65, 0x70, 0x01];

/// Underruns are logged at most this often.
const UNDERRUN_LOG_EVERY: Nanos = Nanos::from_ms(10_000);

/// How often the metrics file is rewritten.
const METRICS_EVERY: Nanos = Nanos::from_ms(1_000);

/// How long a stopping daemon keeps writing outcomes to clients after the link has drained.
pub const FLUSH_GRACE: Nanos = Nanos::from_ms(1_000);

/// What the daemon did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DaemonStats {
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused over `max_connections` or `max_connections_per_uid`.
    pub refused: u64,
    /// Malformed requests answered with an error.
    pub malformed: u64,
    /// Connections closed for broken framing or a failed write.
    pub dropped: u64,
    /// Frames submitted by clients.
    pub frames: u64,
    /// Outcomes whose client had gone.
    pub orphaned: u64,
    /// Underruns.
    pub underruns: u64,
    /// Most bytes held in connection buffers (unparsed requests and unsent replies) at any poll.
    pub peak_buffered: usize,
    /// Outcomes by class (index), for the metrics.
    pub classes: Vec<metrics::ClassCounters>,
    /// Rejections of frames naming no class of the configuration.
    pub unknown_class: metrics::ClassCounters,
}

impl DaemonStats {
    /// Count one frame's outcome (`class` `None`: it named no class).
    fn count(&mut self, class: Option<ClassId>, result: Result<(), Reason>) {
        let c = match class.and_then(|c| self.classes.get_mut(usize::from(c.0))) {
            Some(c) => c,
            None => &mut self.unknown_class,
        };
        match result {
            Ok(()) => c.sent += 1,
            Err(why) => c.rejected[why.index()] += 1,
        }
    }
}

/// Who submitted a frame: connection, the client's tag, uid.
type Owners = HashMap<FrameId, (u64, u64, u32)>;

/// Sent frames of connections that subscribed to release times, waiting for their release report: connection,
/// tag, uid, and when the daemon stops waiting ([`RELEASE_WAIT`] after the outcome). Until answered, such a frame
/// still counts in its connection's and its uid's frames in flight (so the wait is bounded by `max_in_flight`).
#[derive(Default)]
struct Releases {
    waiting: HashMap<FrameId, (u64, u64, u32)>,
    /// Deadlines in the order they were set (non-decreasing); entries already answered are dropped from the front.
    deadlines: std::collections::VecDeque<(Tai, FrameId)>,
}

impl Releases {
    /// Wait for the release of `id` until `deadline`.
    fn wait(&mut self, id: FrameId, owner: (u64, u64, u32), deadline: Tai) {
        self.waiting.insert(id, owner);
        self.deadlines.push_back((deadline, id));
        // Answered entries behind an unanswered one stay until it expires; past a few times the waiting ones,
        // drop them all at once (amortised: the deque stays within a bound of the waiting set).
        if self.deadlines.len() > 4 * self.waiting.len() + 1024 {
            let waiting = &self.waiting;
            self.deadlines.retain(|(_, id)| waiting.contains_key(id));
        }
    }

    /// Answer the release of `id` (if a client waits for it) with `released` (EPHC; `None`: no report).
    fn answer(&mut self, id: FrameId, released: Option<Tai>, stamped: bool, conns: &mut Conns) {
        let Some((cid, tag, uid)) = self.waiting.remove(&id) else { return };
        if let Some(u) = conns.usage.get_mut(&uid) {
            u.in_flight = u.in_flight.saturating_sub(1);
        }
        if let Some(c) = conns.get_mut(cid) {
            c.in_flight = c.in_flight.saturating_sub(1);
            c.respond(&Response::Released { tag, released: released.map(|t| t.0), stamped });
        }
    }

    /// Answer `None` for every frame whose wait ended by `now` (all of them with `now` = `None`: the link is
    /// done, no report can come any more). Reports come about in the order of the deadlines, so the front is
    /// mostly answered already and this costs little per poll.
    fn expire(&mut self, now: Option<Tai>, conns: &mut Conns) {
        while let Some(&(deadline, id)) = self.deadlines.front() {
            if self.waiting.contains_key(&id) {
                if now.is_some_and(|now| deadline >= now) {
                    break;
                }
                self.answer(id, None, false, conns);
            }
            self.deadlines.pop_front();
        }
    }
}

/// [`crate::api::RELEASE_WAIT`] as a duration on the backend's clock.
const RELEASE_WAIT: Nanos = Nanos(crate::api::RELEASE_WAIT.as_nanos() as i64);

/// Hand a frame's result to its client and release its budgets; a sent frame of a client that subscribed to
/// release times waits in `releases` (from `now`) and keeps its budgets until then.
fn deliver(
    id: FrameId,
    result: Result<Delivery, Reason>,
    now: Tai,
    owner: &mut Owners,
    conns: &mut Conns,
    releases: &mut Releases,
    stats: &mut DaemonStats,
) {
    let Some((cid, tag, uid)) = owner.remove(&id) else { return };
    let Some(c) = conns.get_mut(cid) else {
        stats.orphaned += 1;
        if let Some(u) = conns.usage.get_mut(&uid) {
            u.in_flight = u.in_flight.saturating_sub(1);
        }
        return;
    };
    let waits = result.is_ok() && c.release_times;
    let delivery = result.unwrap_or_else(Delivery::Rejected);
    c.respond(&Response::Outcome { tag, delivery });
    if waits {
        // Still in flight until its `Released` is written.
        releases.wait(id, (cid, tag, uid), now + RELEASE_WAIT);
        return;
    }
    c.in_flight = c.in_flight.saturating_sub(1);
    if let Some(u) = conns.usage.get_mut(&uid) {
        u.in_flight = u.in_flight.saturating_sub(1);
    }
}

/// Where the station's events go: the daemon's state they touch.
struct Routes<'a> {
    tolerance: Nanos,
    now: Tai,
    feed: &'a mut Feed,
    owner: &'a mut Owners,
    conns: &'a mut Conns,
    releases: &'a mut Releases,
    stats: &'a mut DaemonStats,
    ptp: &'a mut Option<(Sync, Tai)>,
    tap: &'a mut Option<WireTap>,
}

/// Route the station's events: outcomes to their clients (and out of their class's share), release reports to
/// the clients that wait for them and to PTP.
fn route<S: Served>(events: &mut Vec<Event>, r: Routes, station: &mut S) {
    let Routes { tolerance, now, feed, owner, conns, releases, stats, ptp, tap } = r;
    for e in events.drain(..) {
        match e {
            Event::Outcome(o) if ptp.as_mut().is_some_and(|(s, now)| s.on_outcome(&o, station, *now)) => {}
            Event::Outcome(Outcome { id, class, result }) => {
                feed.settled(class);
                stats.count(Some(class), result.as_ref().map(|_| ()).map_err(|why| *why));
                let result = result.map(|s| Delivery::Sent {
                    slot: s.slot,
                    time: s.time.0,
                    ring_slot: s.ring_slot,
                    off_schedule: s.deviation().is_some_and(|d| d.0.unsigned_abs() > tolerance.0.unsigned_abs()),
                });
                deliver(id, result, now, owner, conns, releases, stats);
            }
            Event::Underrun(_) => stats.underruns += 1,
            Event::Wire(w) => {
                if let (Some(t), Some(at)) = (tap.as_mut(), w.ephc) {
                    t.wire(&w, at);
                }
                let Some(id) = w.frame else { continue };
                if let Some((s, now)) = ptp.as_mut() {
                    if s.on_released(id, w.released, w.stamped, station, *now) {
                        continue;
                    }
                }
                releases.answer(id, w.released_ephc, w.stamped, conns);
            }
        }
    }
}

/// Where a stopping daemon is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Serving.
    No,
    /// Frames accepted before the stop may still leave; the station shuts down when they have, or at the
    /// given time.
    Draining(Tai),
    /// The station is shut down; the NIC completes what is posted until the given time.
    LinkDrain(Tai),
    /// The link is done; outcomes are written until the given time.
    Flushing(Tai),
}

/// Serve until `stop` is set (or `duration` of host time has passed), then stop as the module docs say:
/// every submit the socket took gets exactly one outcome, and the socket file is removed.
pub fn serve<N: Nic>(
    cfg: &Config,
    dcfg: &DaemonConfig,
    nic: N,
    stop: &AtomicBool,
    duration: Option<Nanos>,
) -> Result<DaemonStats, String> {
    serve_with(cfg, dcfg, nic, None, stop, duration)
}

/// [`serve`], with the link's MAC and RX source for PTP (used when the configuration has a `[ptp]` section;
/// without a link, PTP runs with [`DEFAULT_PTP_MAC`] and receives nothing, so it can only become master).
pub fn serve_with<N: Nic>(
    cfg: &Config,
    dcfg: &DaemonConfig,
    nic: N,
    link: Option<PtpLink>,
    stop: &AtomicBool,
    duration: Option<Nanos>,
) -> Result<DaemonStats, String> {
    let limits = &dcfg.limits;
    let bytes = cfg.timing == crate::config::WireTiming::Bytes;
    let ptp = PtpConfig::from_config(cfg).map_err(|e| e.to_string())?;
    if let Some(p) = &ptp {
        p.check_link(nic.timing()).map_err(|e| e.to_string())?;
    }
    let mut bound = Some(socket::claim(&dcfg.socket, dcfg.mode)?);
    if let Some(b) = &dcfg.banner {
        println!("{b}");
    }
    if ptp.as_ref().is_some_and(|p| p.dual_clock.is_some()) && link.is_none() {
        return Err("ptp.dual_clock = true needs a real link on which the master streams (it counts the master's \
                    frames): the simulated NIC has no peer"
            .into());
    }
    let setup = ptp.map(|p| (p, link.unwrap_or(PtpLink { mac: DEFAULT_PTP_MAC, rx: Box::new(NoRx) })));
    let loop_cfg = LoopConfig { poll_period: cfg.poll_period, max_duration: Nanos(i64::MAX) };
    let result = if bytes {
        Driver::bytes(nic, byte_config(cfg), loop_cfg)
            .map_err(|e| e.to_string())
            .and_then(|d| serve::Daemon::start(cfg, dcfg, d, setup, stop, duration, &mut bound, limits)?.run())
    } else {
        Driver::new(nic, station_config(cfg), loop_cfg)
            .map_err(|e| e.to_string())
            .and_then(|d| serve::Daemon::start(cfg, dcfg, d, setup, stop, duration, &mut bound, limits)?.run())
    };
    if let Some(b) = bound.take() {
        b.close();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::conn::{Conn, Usage};
    use super::*;

    /// One subscribed connection (id 0, uid 7) with `n` frames in flight.
    fn one_conn(n: usize) -> (Conns, std::os::unix::net::UnixStream) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut conns = Conns::new(None).unwrap();
        conns.map.insert(
            0,
            Conn {
                stream: ours,
                uid: 7,
                allowed: vec![true],
                real_time: true,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                in_flight: n,
                release_times: true,
                reading: true,
                broken: false,
                readable: true,
                writable: true,
                change_waiting: false,
                stats_waiting: false,
                in_reserve: false,
                throttled: false,
            },
        );
        conns.usage.insert(7, Usage { connections: 1, in_flight: n });
        (conns, theirs)
    }

    fn released(conns: &Conns) -> Vec<Response> {
        let mut buf = conns.map[&0].wbuf.clone();
        crate::api::split_messages(&mut buf).unwrap().iter().map(|m| Response::parse(m).unwrap()).collect()
    }

    /// A release report answers its frame at once; a frame without one is answered without a time when its wait
    /// ends, or when the link is done; each answer gives its frame's budgets back, once.
    #[test]
    fn every_waiting_frame_is_answered_once() {
        let (mut conns, _peer) = one_conn(3);
        let mut r = Releases::default();
        let t = Tai(1_000_000_000);
        for k in 0..3 {
            r.wait(FrameId(k), (0, 10 + k, 7), t + RELEASE_WAIT + Nanos(k as i64));
        }
        r.answer(FrameId(1), Some(Tai(5)), true, &mut conns);
        r.answer(FrameId(1), Some(Tai(6)), true, &mut conns); // a second report: nothing
        r.expire(Some(t + RELEASE_WAIT), &mut conns); // no deadline has passed yet
        assert_eq!(released(&conns), vec![Response::Released { tag: 11, released: Some(5), stamped: true }]);
        r.expire(Some(t + RELEASE_WAIT + Nanos(1)), &mut conns); // frame 0's has
        r.expire(None, &mut conns); // the link is done: frame 2
        assert_eq!(
            released(&conns)[1..],
            [
                Response::Released { tag: 10, released: None, stamped: false },
                Response::Released { tag: 12, released: None, stamped: false }
            ]
        );
        assert_eq!((conns.map[&0].in_flight, conns.usage[&7].in_flight), (0, 0));
        assert!(r.waiting.is_empty() && r.deadlines.is_empty());
    }

    /// Frames answered behind one that waits do not pile up: the deadline queue stays within a bound of the
    /// waiting set.
    #[test]
    fn answered_frames_behind_a_waiting_one_do_not_accumulate() {
        let (mut conns, _peer) = one_conn(100_001);
        let mut r = Releases::default();
        let t = Tai(0);
        r.wait(FrameId(0), (0, 0, 7), t + RELEASE_WAIT);
        for k in 1..=100_000 {
            r.wait(FrameId(k), (0, k, 7), t + RELEASE_WAIT);
            r.answer(FrameId(k), None, false, &mut conns);
            r.expire(Some(t), &mut conns);
        }
        assert_eq!(r.waiting.len(), 1);
        assert!(r.deadlines.len() <= 4 + 1024 + 1, "{} deadlines kept", r.deadlines.len());
    }
}
