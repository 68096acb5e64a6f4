//! Client connections: accepting them within the per-uid and total budgets, reading with backpressure,
//! writing without waiting, and closing them once nothing is owed.

use std::collections::{BTreeMap, HashMap};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};

use crate::api::{frame_message, Response};

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
}

impl Conn {
    /// Queue a reply.
    pub fn respond(&mut self, r: &Response) {
        frame_message(&r.emit(), &mut self.wbuf);
    }

    /// True while the connection may parse requests: it reads and its unsent replies are below the limit.
    pub fn takes_requests(&self, limits: &Limits) -> bool {
        !self.broken && self.wbuf.len() < limits.reply_backlog
    }

    /// Nothing is owed either way: the connection can be closed.
    fn done(&self) -> bool {
        self.broken || (!self.reading && self.in_flight == 0 && self.wbuf.is_empty())
    }

    /// Read what has arrived, up to the read buffer's limit, without waiting. End of stream or an error
    /// ends reading (not the connection: outcomes may still be owed).
    pub fn read_some(&mut self, limits: &Limits) {
        let mut chunk = [0u8; 16 * 1024];
        while self.reading && !self.broken && self.rbuf.len() < limits.read_buffer {
            let room = (limits.read_buffer - self.rbuf.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..room]) {
                Ok(0) => self.reading = false,
                Ok(n) => self.rbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.reading = false,
            }
        }
    }

    /// Write buffered replies without waiting.
    fn write_some(&mut self) {
        while !self.wbuf.is_empty() && !self.broken {
            match self.stream.write(&self.wbuf) {
                Ok(0) => self.broken = true,
                Ok(n) => {
                    self.wbuf.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
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
#[derive(Default)]
pub struct Conns {
    pub map: BTreeMap<u64, Conn>,
    pub usage: HashMap<u32, Usage>,
    next: u64,
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

/// What accepting did.
#[derive(Default)]
pub struct Accepted {
    /// Connections taken.
    pub taken: u64,
    /// Connections refused over a connection limit (told why, then closed).
    pub refused: u64,
}

impl Conns {
    /// Accept every pending connection within the limits; `allowed` gives a peer's classes from its
    /// credentials, and whether one of them is a real-time class. A connection over a limit gets an error
    /// reply naming the limit and is closed.
    pub fn accept_all(
        &mut self,
        listener: &UnixListener,
        limits: &Limits,
        allowed: impl Fn(u32, u32) -> (Vec<bool>, bool),
    ) -> Accepted {
        let mut a = Accepted::default();
        loop {
            let s = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return a, // WouldBlock: nothing more pending
            };
            let Ok((uid, gid)) = peer_credentials(&s) else { continue };
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            let used = self.usage.get(&uid).map_or(0, |u| u.connections);
            let over = if self.map.len() >= limits.max_connections {
                Some(format!("the daemon has {} connections (daemon.max_connections)", self.map.len()))
            } else if used >= limits.max_connections_per_uid {
                Some(format!("uid {uid} has {used} connections (daemon.max_connections_per_uid)"))
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
            self.usage.entry(uid).or_default().connections += 1;
            let (allowed, real_time) = allowed(uid, gid);
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
            };
            self.map.insert(self.next, conn);
            self.next += 1;
            a.taken += 1;
        }
    }

    /// Write what can be written; close connections that broke or owe nothing more. Returns how many broke.
    pub fn flush(&mut self) -> u64 {
        let mut broke = 0;
        let usage = &mut self.usage;
        self.map.retain(|_, c| {
            c.write_some();
            broke += u64::from(c.broken);
            if c.done() {
                if let Some(u) = usage.get_mut(&c.uid) {
                    u.connections = u.connections.saturating_sub(1);
                }
                return false;
            }
            true
        });
        self.usage.retain(|_, u| u.connections > 0 || u.in_flight > 0);
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
    }
}
