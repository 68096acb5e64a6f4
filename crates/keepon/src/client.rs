//! The blocking client of `keepon daemon` ([`crate::api`]'s protocol): what `keepon status`, `keepon schedule
//! apply` and `keepon talk` use, and applications in Rust. Every wait is bounded ([`crate::deadline`]): connecting,
//! each exchange by one deadline, the responses held while a request waits, and a stop flag for signals.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::api::{frame_message, split_messages, Info, Request, Response, Scheduled, TimeInfo};
use crate::deadline::{self, Bound};

/// How long a [`Client`] waits by default: for `connect`, and for each exchange (a request and its whole reply,
/// or one whole message in [`Client::recv`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Responses [`Client::recv`] holds, at most, that arrived while a request waited for its reply (outcomes of
/// earlier submits): beyond this the reply is given up for (a peer that streams responses would otherwise fill
/// memory).
pub const MAX_HELD: usize = 65_536;

/// [`Client`]'s stored timeout for none.
const NO_TIMEOUT: u64 = u64::MAX;

fn nanos(t: Option<Duration>) -> u64 {
    t.map_or(NO_TIMEOUT, |t| u64::try_from(t.as_nanos()).unwrap_or(NO_TIMEOUT - 1))
}

/// A blocking client of `keepon daemon`. Every call is bounded: `connect` and each exchange by the timeout
/// ([`DEFAULT_TIMEOUT`], [`Client::set_timeout`]) — one deadline for a request and its whole reply, not per
/// read —, and by a stop flag ([`Client::set_stop`]) that a signal handler sets. After a request timed out or was
/// stopped its reply may still come, so replies no longer pair with requests: later requests fail, the client
/// should be dropped.
pub struct Client {
    stream: UnixStream,
    rbuf: Vec<u8>,
    pending: std::collections::VecDeque<Response>,
    /// The timeout in ns, [`NO_TIMEOUT`] for none (atomic: `set_timeout` takes `&self`, and a client stays `Sync`).
    timeout: AtomicU64,
    stop: Option<&'static AtomicBool>,
    /// A request was abandoned (timed out, stopped, half written).
    out_of_step: bool,
}

impl Client {
    /// Connect to the daemon's socket within [`DEFAULT_TIMEOUT`] (a daemon whose listen backlog is full does
    /// not accept).
    pub fn connect(path: &Path) -> io::Result<Client> {
        Client::connect_within(path, Some(DEFAULT_TIMEOUT), None)
    }

    /// Connect within `timeout` (`None`: no limit), giving up when `stop` is set; `timeout` then bounds each
    /// exchange and `stop` every wait.
    pub fn connect_within(
        path: &Path,
        timeout: Option<Duration>,
        stop: Option<&'static AtomicBool>,
    ) -> io::Result<Client> {
        let stream = deadline::connect(path, Bound::within(timeout, stop))?;
        let timeout = AtomicU64::new(nanos(timeout));
        Ok(Client { stream, rbuf: Vec::new(), pending: Default::default(), timeout, stop, out_of_step: false })
    }

    /// How long each exchange may take.
    pub fn timeout(&self) -> Option<Duration> {
        match self.timeout.load(Ordering::Relaxed) {
            NO_TIMEOUT => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    fn bound(&self) -> deadline::Bound {
        Bound::within(self.timeout(), self.stop)
    }

    /// Send one request (within the timeout).
    pub fn send(&mut self, req: &Request) -> io::Result<()> {
        let mut b = Vec::new();
        frame_message(&req.emit(), &mut b);
        self.send_raw(&b)
    }

    /// Send raw bytes (for testing a daemon's robustness).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        let r = deadline::write_all(&self.stream, bytes, self.bound());
        self.out_of_step |= r.is_err();
        r
    }

    /// Wait for the next response (`None` when the daemon closed the connection), a whole message within the
    /// timeout.
    pub fn recv(&mut self) -> io::Result<Option<Response>> {
        self.recv_by(self.bound())
    }

    fn recv_by(&mut self, bound: deadline::Bound) -> io::Result<Option<Response>> {
        loop {
            if let Some(r) = self.pending.pop_front() {
                return Ok(Some(r));
            }
            let mut chunk = [0u8; 8192];
            let n = deadline::read(&self.stream, &mut chunk, bound)?;
            if n == 0 {
                return Ok(None);
            }
            self.rbuf.extend_from_slice(&chunk[..n]);
            let msgs = split_messages(&mut self.rbuf).map_err(io::Error::other)?;
            for m in msgs {
                self.pending.push_back(Response::parse(&m).map_err(io::Error::other)?);
            }
        }
    }

    /// Ask for the link's description. Outcomes that arrive first are kept for [`Client::recv`].
    pub fn info(&mut self) -> io::Result<Info> {
        self.ask(&Request::Info, |r| match r {
            Response::Info(i) => Ok(i),
            other => Err(other),
        })
    }

    /// Read the station's network time and synchronisation state. Outcomes that arrive first are kept for
    /// [`Client::recv`].
    pub fn time(&mut self) -> io::Result<TimeInfo> {
        self.ask(&Request::Time, |r| match r {
            Response::Time(t) => Ok(t),
            other => Err(other),
        })
    }

    /// Change the schedule from `base_time` on ([`Request::Schedule`]): `Ok(Err(why))` when the daemon refuses.
    /// Outcomes that arrive first are kept for [`Client::recv`].
    pub fn change_schedule(
        &mut self,
        base_time: i64,
        classes: Vec<(String, Vec<u32>)>,
    ) -> io::Result<Result<Scheduled, String>> {
        self.ask(&Request::Schedule { base_time, classes }, |r| match r {
            Response::Scheduled(r) => Ok(r),
            other => Err(other),
        })
    }

    /// Change the schedule from the first cycle start at or after `base_time` on, given as each class's windows
    /// in the cycle, (offset, length) ns ([`Request::ScheduleWindows`]): `Ok(Err(why))` when the daemon refuses.
    pub fn change_windows(
        &mut self,
        base_time: i64,
        classes: Vec<(String, Vec<(u64, u64)>)>,
    ) -> io::Result<Result<Scheduled, String>> {
        self.ask(&Request::ScheduleWindows { base_time, classes }, |r| match r {
            Response::Scheduled(r) => Ok(r),
            other => Err(other),
        })
    }

    /// The daemon's metrics (Prometheus text format). Outcomes that arrive first are kept for [`Client::recv`].
    pub fn stats(&mut self) -> io::Result<String> {
        self.ask(&Request::Stats, |r| match r {
            Response::Stats(t) => Ok(t),
            other => Err(other),
        })
    }

    /// Ask for a `Released` message after the outcome of every sent frame (see the module docs); the daemon's
    /// reply says whether it does. Outcomes that arrive first are kept for [`Client::recv`].
    pub fn subscribe_release_times(&mut self) -> io::Result<bool> {
        self.ask(&Request::Subscribe { release_times: true }, |r| match r {
            Response::Subscribed { release_times } => Ok(release_times),
            other => Err(other),
        })
    }

    /// Send `req` and wait for the reply `pick` accepts, all within one deadline; an `Error` reply is the error,
    /// and every other response (outcomes of earlier submits) is kept, in order, for [`Client::recv`] — at most
    /// [`MAX_HELD`] of them.
    fn ask<T>(&mut self, req: &Request, pick: impl Fn(Response) -> Result<T, Response>) -> io::Result<T> {
        if self.out_of_step {
            return Err(io::Error::other("an earlier request on this connection was abandoned: reconnect"));
        }
        let bound = self.bound();
        let mut b = Vec::new();
        frame_message(&req.emit(), &mut b);
        self.out_of_step = true;
        deadline::write_all(&self.stream, &b, bound)?;
        // What was already held stays first; what arrives now is held behind it.
        let mut held = std::mem::take(&mut self.pending);
        let result = loop {
            if held.len() >= MAX_HELD {
                break Err(io::Error::other(format!("more than {MAX_HELD} other responses came before the reply")));
            }
            match self.recv_by(bound) {
                Ok(Some(Response::Error(e))) => break Ok(Err(io::Error::other(e))),
                Ok(Some(r)) => match pick(r) {
                    Ok(v) => break Ok(Ok(v)),
                    Err(other) => held.push_back(other),
                },
                Ok(None) => break Err(io::Error::new(io::ErrorKind::UnexpectedEof, "daemon closed the connection")),
                Err(e) => break Err(e),
            }
        };
        held.append(&mut self.pending);
        self.pending = held;
        match result {
            Ok(answer) => {
                self.out_of_step = false;
                answer
            }
            Err(e) => Err(e),
        }
    }

    /// A second handle on the same connection (e.g. to read outcomes on another thread), with the same timeout
    /// and stop flag. Responses already buffered stay with this handle.
    pub fn try_clone(&self) -> io::Result<Client> {
        Ok(Client {
            stream: self.stream.try_clone()?,
            rbuf: Vec::new(),
            pending: Default::default(),
            timeout: AtomicU64::new(self.timeout.load(Ordering::Relaxed)),
            stop: self.stop,
            out_of_step: false,
        })
    }

    /// Shut the connection down for writing: the daemon sees end of stream, still sends the outcome of
    /// every frame submitted before, then closes the connection ([`Client::recv`] returns `None`).
    pub fn close_write(&self) -> io::Result<()> {
        self.stream.shutdown(std::net::Shutdown::Write)
    }

    /// How long each exchange may take (`None`: no limit): a request and its whole reply, one whole message in
    /// [`Client::recv`], one request in [`Client::send`].
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.timeout.store(nanos(t), Ordering::Relaxed);
        Ok(())
    }

    /// Give up any wait, with [`io::ErrorKind::Interrupted`], once `stop` is set (by a signal handler: within
    /// [`deadline::SLICE`]).
    pub fn set_stop(&mut self, stop: Option<&'static AtomicBool>) {
        self.stop = stop;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;

    fn info() -> Info {
        Info {
            rate_bps: 1,
            slot_bytes: 64,
            ring: 2,
            batch: 1,
            now: 0,
            cycle_start: 0,
            base_time: 0,
            cycle: (1344, 1),
            classes: vec![],
            windows: vec![],
            host: 0,
        }
    }

    /// A peer that reads one request, then writes `replies` (none: it stays silent).
    fn peer(dir: &Path, replies: Vec<Response>) -> std::path::PathBuf {
        let p = dir.join("peer.sock");
        let l = UnixListener::bind(&p).unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let _ = c.read(&mut [0u8; 64]);
            let mut out = Vec::new();
            for r in replies {
                frame_message(&r.emit(), &mut out);
            }
            c.write_all(&out).unwrap();
            std::thread::sleep(Duration::from_secs(5));
        });
        p
    }

    fn outcome(tag: u64) -> Response {
        use crate::api::Delivery;
        Response::Outcome { tag, delivery: Delivery::Sent { slot: tag, time: 0, ring_slot: 0, off_schedule: false } }
    }

    #[test]
    fn a_client_can_be_shared_and_sent() {
        fn shared<T: Send + Sync>() {}
        shared::<Client>();
    }

    #[test]
    fn outcomes_before_the_reply_are_kept_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = peer(dir.path(), vec![outcome(1), outcome(2), Response::Info(info())]);
        let mut c = Client::connect(&p).unwrap();
        assert_eq!(c.info().unwrap(), info());
        assert_eq!(c.recv().unwrap(), Some(outcome(1)));
        assert_eq!(c.recv().unwrap(), Some(outcome(2)));
    }

    /// After a request timed out its reply may still come: the next request is refused, not paired with it.
    #[test]
    fn a_request_that_timed_out_puts_the_connection_out_of_step() {
        let dir = tempfile::tempdir().unwrap();
        let p = peer(dir.path(), vec![]);
        let mut c = Client::connect(&p).unwrap();
        c.set_timeout(Some(Duration::from_millis(200))).unwrap();
        let e = c.info().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("no answer within 200 ms"), "{e}");
        let e = c.time().unwrap_err();
        assert!(e.to_string().contains("reconnect"), "{e}");
    }
}
