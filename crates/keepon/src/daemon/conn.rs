//! Client connections: accepting them within the per-uid and total budgets, reading with backpressure,
//! writing without waiting, and closing them once nothing is owed.
//!
//! Readiness comes from epoll (`mio`, edge-triggered): a connection is read only after the kernel said it has
//! data (written only after it said there is room), and stays marked so until a read (write) finds none. A poll
//! visits only the *active* connections — those with data to read, a whole request to parse, replies to write
//! or nothing more owed — so an idle connection costs nothing per poll: one `epoll_wait` covers them all.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::api::{frame_message, message_len, Response};

use super::config::Limits;

/// One client connection.
pub struct Conn {
    pub stream: UnixStream,
    /// Peer uid (budgets are kept per uid).
    pub uid: u32,
    /// Classes the peer may use, by class index.
    pub allowed: Vec<bool>,
    /// The peer may use a real-time class: its requests are served first each poll.
    pub real_time: bool,
    /// Bytes read and not yet parsed (at most `read_buffer`).
    pub rbuf: Vec<u8>,
    /// Replies not yet written.
    pub wbuf: Vec<u8>,
    /// Frames of this connection without an outcome (subscribed to release times: or without their `Released`).
    pub in_flight: usize,
    /// The client subscribed to release times (`Released` after every sent frame's outcome).
    pub release_times: bool,
    /// False after end of stream (or broken framing): nothing more is read, but outcomes are still owed.
    pub reading: bool,
    /// The connection failed (write error): it is closed at once; its outcomes are orphaned.
    pub broken: bool,
    /// The kernel reported data (or end of stream) that no read has yet found exhausted.
    pub readable: bool,
    /// The kernel reported room to write that no write has yet found exhausted.
    pub writable: bool,
    /// A `Schedule` request of this connection waits for the poll loop: no further request is parsed until it
    /// is answered (one queued per connection, so the queue is bounded by the connections).
    pub change_waiting: bool,
    /// A `Stats` request of this connection waits for this poll's metrics: no further request is parsed this
    /// poll (one `Stats` per connection per poll).
    pub stats_waiting: bool,
    /// The connection holds one of the connections reserved for users of real-time classes.
    pub in_reserve: bool,
    /// Its user's request rate was used up with a request still buffered ([`super::guard`]): looked at again
    /// each poll until the rate allows it.
    pub throttled: bool,
}

impl Conn {
    /// Queue a reply.
    pub fn respond(&mut self, r: &Response) {
        frame_message(&r.emit(), &mut self.wbuf);
    }

    /// True while the connection may parse requests: it reads and its unsent replies are below the limit.
    pub fn takes_requests(&self, limits: &Limits) -> bool {
        !self.broken && !self.change_waiting && !self.stats_waiting && self.wbuf.len() < limits.reply_backlog
    }

    /// Nothing is owed either way: the connection can be closed.
    fn done(&self) -> bool {
        self.broken || (!self.reading && self.in_flight == 0 && self.wbuf.is_empty())
    }

    /// Read what has arrived, up to the read buffer's limit, without waiting; nothing (no system call) unless
    /// the kernel reported data since the last read that found none. End of stream or an error ends reading
    /// (not the connection: outcomes may still be owed).
    pub fn read_some(&mut self, limits: &Limits) {
        let mut chunk = [0u8; 16 * 1024];
        while self.readable && self.reading && !self.broken && self.rbuf.len() < limits.read_buffer {
            let room = (limits.read_buffer - self.rbuf.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..room]) {
                Ok(0) => self.reading = false,
                Ok(n) => self.rbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.reading = false,
            }
        }
    }

    /// A whole request (or broken framing) waits in the read buffer.
    fn has_request(&self) -> bool {
        !matches!(message_len(&self.rbuf), Ok(None))
    }

    /// Something to do at the next poll (else the connection waits for a readiness event).
    fn busy(&self, limits: &Limits) -> bool {
        self.done()
            || (self.readable && self.reading && self.rbuf.len() < limits.read_buffer)
            || (self.writable && !self.wbuf.is_empty())
            || (self.takes_requests(limits) && self.has_request())
            || self.throttled
    }

    /// Write buffered replies without waiting.
    fn write_some(&mut self) {
        while self.writable && !self.wbuf.is_empty() && !self.broken {
            match self.stream.write(&self.wbuf) {
                Ok(0) => self.broken = true,
                Ok(n) => {
                    self.wbuf.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.writable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.broken = true,
            }
        }
    }
}

/// What one uid holds.
#[derive(Default, Debug, Clone, Copy)]
pub struct Usage {
    /// Open connections.
    pub connections: usize,
    /// Frames without an outcome.
    pub in_flight: usize,
}

/// Every open connection and what each uid holds.
pub struct Conns {
    pub map: BTreeMap<u64, Conn>,
    pub usage: HashMap<u32, Usage>,
    next: u64,
    /// Readiness of the connections (token = connection id) and of the listener ([`LISTENER`]).
    poll: Poll,
    events: Events,
    /// The listener had connections pending that no accept has yet found exhausted.
    pending: bool,
    /// The connections a poll visits (see the module docs); the others wait for a readiness event.
    active: BTreeSet<u64>,
    /// Open connections of peers that may use no real-time class (they share what the reserve leaves).
    shared: usize,
    /// Of these, peers that may use no class at all.
    unlisted: usize,
    /// Connections in the reserve held by users other than root and the daemon's own, by uid (see
    /// [`Conns::accept_all`]).
    reserve_by_uid: HashMap<u32, usize>,
}

/// The listener's token (connection ids count up from 0 and never reach it).
const LISTENER: Token = Token(usize::MAX);

/// Readiness events taken per poll (more wait for the next `epoll_wait`, which reports them again only if new
/// data arrives; their connections' flags stay set meanwhile, so none is lost: see [`Conns::ready`]).
const EVENTS_PER_POLL: usize = 1024;

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

/// What accepting did.
#[derive(Default)]
pub struct Accepted {
    /// Connections taken.
    pub taken: u64,
    /// Connections refused over a connection limit (told why, then closed).
    pub refused: u64,
}

impl Conns {
    /// No connections yet; `listener` (if any) is watched for new ones.
    pub fn new(listener: Option<&UnixListener>) -> std::io::Result<Conns> {
        let poll = Poll::new()?;
        if let Some(l) = listener {
            poll.registry().register(&mut SourceFd(&l.as_raw_fd()), LISTENER, Interest::READABLE)?;
        }
        Ok(Conns {
            map: BTreeMap::new(),
            usage: HashMap::new(),
            next: 0,
            poll,
            events: Events::with_capacity(EVENTS_PER_POLL),
            pending: true,
            active: BTreeSet::new(),
            shared: 0,
            unlisted: 0,
            reserve_by_uid: HashMap::new(),
        })
    }

    /// A connection, marked active (whatever is done with it, e.g. a reply queued, is seen to this poll).
    pub fn get_mut(&mut self, cid: u64) -> Option<&mut Conn> {
        let c = self.map.get_mut(&cid)?;
        self.active.insert(cid);
        Some(c)
    }

    /// The active connections, from `cursor` on and then round to it.
    pub fn active_from(&self, cursor: u64) -> Vec<u64> {
        self.active.range(cursor..).chain(self.active.range(..cursor)).copied().collect()
    }

    /// Mark every connection active (a shutdown or an epoll failure: each is looked at once more).
    fn all_active(&mut self) {
        self.active.extend(self.map.keys().copied());
    }

    /// Take the readiness the kernel reports now (without waiting) into the connections' flags.
    pub fn ready(&mut self) {
        self.ready_within(std::time::Duration::ZERO);
    }

    /// Wait at most `timeout` for a connection (or the listener) to become ready, and take what the kernel
    /// reports into the flags. Returns at once while a connection still has work from the last poll.
    pub fn wait_ready(&mut self, timeout: std::time::Duration) {
        if !self.active.is_empty() {
            return;
        }
        // epoll_wait counts whole milliseconds; ppoll on the epoll descriptor waits to the nanosecond (it is
        // readable when an event is ready).
        let mut fd = libc::pollfd { fd: self.poll.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
        // SAFETY: one valid pollfd and a valid timespec, both live across the call; no signal mask is changed.
        let n = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
        if n > 0 {
            self.ready_within(std::time::Duration::ZERO);
        }
    }

    fn ready_within(&mut self, timeout: std::time::Duration) {
        loop {
            if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                // epoll_wait on our own epoll fd cannot fail otherwise; were it to, read everyone (correct, as
                // before readiness existed, only costlier).
                self.pending = true;
                self.map.values_mut().for_each(|c| (c.readable, c.writable) = (true, true));
                self.all_active();
            }
            break;
        }
        for e in self.events.iter() {
            match e.token() {
                LISTENER => self.pending = true,
                Token(id) => {
                    let id = id as u64;
                    if let Some(c) = self.map.get_mut(&id) {
                        c.readable |= e.is_readable() || e.is_read_closed() || e.is_error();
                        c.writable |= e.is_writable() || e.is_write_closed() || e.is_error();
                        self.active.insert(id);
                    }
                }
            }
        }
    }

    /// Accept every pending connection within the limits; `allowed` gives a peer's classes from its
    /// credentials, and whether one of them is a real-time class. A connection over a limit gets an error
    /// reply naming the limit and is closed.
    ///
    /// The reserve (`reserved_connections`, what is left once `max_connections − reserved_connections` are
    /// open) serves users of real-time classes, and is kept per user: users other than root and the daemon's
    /// own together hold at most half of it, each at most a quarter (at least one when the half allows), so
    /// no single user — nor a few — can take root's connections.
    pub fn accept_all(
        &mut self,
        listener: &UnixListener,
        limits: &Limits,
        allowed: impl Fn(u32, u32) -> (Vec<bool>, bool),
    ) -> Accepted {
        let mut a = Accepted::default();
        while self.pending {
            let s = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.pending = false;
                    break;
                }
                // Out of descriptors or memory: the rest stay pending, tried again next poll.
                Err(_) => break,
            };
            let Ok((uid, gid)) = peer_credentials(&s) else { continue };
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            let used = self.usage.get(&uid).map_or(0, |u| u.connections);
            let (allowed, real_time) = allowed(uid, gid);
            let unlisted = !allowed.iter().any(|&a| a);
            let shared = limits.max_connections - limits.reserved_connections;
            let over = if self.map.len() >= limits.max_connections {
                Some(format!("the daemon has {} connections (daemon.max_connections)", self.map.len()))
            } else if used >= limits.max_connections_per_uid {
                Some(format!("uid {uid} has {used} connections (daemon.max_connections_per_uid)"))
            } else if !real_time && self.shared >= shared {
                Some(format!(
                    "the {} connections open to best-effort and unlisted users are all taken; the other {} are kept \
                     for users of real-time classes (daemon.reserved_connections)",
                    self.shared, limits.reserved_connections
                ))
            } else if let Some(why) = self.reserve_refusal(uid, real_time, limits) {
                Some(why)
            } else if unlisted && self.unlisted >= limits.max_connections_unlisted {
                Some(format!(
                    "uid {uid} may use no class, and users without an allow rule have {} connections \
                     (daemon.max_connections_unlisted)",
                    self.unlisted
                ))
            } else {
                None
            };
            if let Some(why) = over {
                let mut b = Vec::new();
                frame_message(&Response::Error(format!("connection refused: {why}")).emit(), &mut b);
                let _ = (&s).write(&b); // best effort: the socket is new, its buffer empty
                a.refused += 1;
                continue;
            }
            let id = self.next;
            let registered = self.poll.registry().register(
                &mut SourceFd(&s.as_raw_fd()),
                Token(id as usize),
                Interest::READABLE | Interest::WRITABLE,
            );
            if registered.is_err() {
                continue; // (out of memory for epoll: the peer sees its connection closed)
            }
            self.usage.entry(uid).or_default().connections += 1;
            let in_reserve = real_time && self.map.len() >= shared && !super::guard::privileged(uid);
            if in_reserve {
                *self.reserve_by_uid.entry(uid).or_default() += 1;
            }
            self.shared += usize::from(!real_time);
            self.unlisted += usize::from(unlisted);
            let conn = Conn {
                stream: s,
                uid,
                allowed,
                real_time,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                in_flight: 0,
                release_times: false,
                reading: true,
                broken: false,
                // A new connection may hold data already (written before the accept), and has room.
                readable: true,
                writable: true,
                change_waiting: false,
                stats_waiting: false,
                in_reserve,
                throttled: false,
            };
            self.map.insert(id, conn);
            self.active.insert(id);
            self.next += 1;
            a.taken += 1;
        }
        a
    }

    /// Why a connection of `uid` may not take one of the reserved connections, if it would need one.
    fn reserve_refusal(&self, uid: u32, real_time: bool, limits: &Limits) -> Option<String> {
        let shared = limits.max_connections - limits.reserved_connections;
        if !real_time || self.map.len() < shared || super::guard::privileged(uid) {
            return None;
        }
        let all: usize = self.reserve_by_uid.values().sum();
        let mine = self.reserve_by_uid.get(&uid).copied().unwrap_or(0);
        let (half, quarter) = (limits.reserved_connections / 2, (limits.reserved_connections / 4).max(1));
        if all >= half {
            Some(format!(
                "the {} unreserved connections are all open and users other than root hold {all} of the {} \
                 reserved ones, half of them (daemon.reserved_connections; the rest stay for root)",
                shared, limits.reserved_connections
            ))
        } else if mine >= quarter {
            Some(format!(
                "the {} unreserved connections are all open and uid {uid} holds {mine} of the {} reserved ones, a \
                 quarter of them (daemon.reserved_connections)",
                shared, limits.reserved_connections
            ))
        } else {
            None
        }
    }

    /// Write what can be written; close connections that broke or owe nothing more; keep active only those with
    /// something left to do. Returns how many broke.
    pub fn flush(&mut self, limits: &Limits) -> u64 {
        let mut broke = 0;
        let active = std::mem::take(&mut self.active);
        for cid in active {
            let Some(c) = self.map.get_mut(&cid) else { continue };
            c.write_some();
            broke += u64::from(c.broken);
            if c.done() {
                let c = self.map.remove(&cid).expect("present");
                self.shared = self.shared.saturating_sub(usize::from(!c.real_time));
                self.unlisted = self.unlisted.saturating_sub(usize::from(!c.allowed.iter().any(|&a| a)));
                if c.in_reserve {
                    if let Some(n) = self.reserve_by_uid.get_mut(&c.uid) {
                        *n -= 1;
                        if *n == 0 {
                            self.reserve_by_uid.remove(&c.uid);
                        }
                    }
                }
                let _ = self.poll.registry().deregister(&mut SourceFd(&c.stream.as_raw_fd()));
                if let Some(u) = self.usage.get_mut(&c.uid) {
                    u.connections = u.connections.saturating_sub(1);
                    if u.connections == 0 && u.in_flight == 0 {
                        self.usage.remove(&c.uid);
                    }
                }
            } else if c.busy(limits) {
                self.active.insert(cid);
            }
        }
        broke
    }

    /// Bytes held in connection buffers.
    pub fn buffered(&self) -> usize {
        self.map.values().map(|c| c.rbuf.len() + c.wbuf.len()).sum()
    }

    /// Stop every peer from sending more (their writes fail from now on); what they already sent is still
    /// read.
    pub fn shut_reading(&mut self) {
        for c in self.map.values() {
            let _ = c.stream.shutdown(std::net::Shutdown::Read);
        }
        self.all_active();
    }
}
