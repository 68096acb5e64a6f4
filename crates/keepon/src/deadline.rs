//! Blocking I/O on a UNIX stream socket that gives up at a deadline, or at once when a stop flag (a signal) is
//! set: what keeps [`crate::api::Client`] — and so `keepon status`, `keepon schedule apply` and `keepon talk` —
//! from hanging on a daemon that is stopped, overloaded or hostile.
//!
//! - **connect** is non-blocking and retried: a listener whose backlog is full answers `EAGAIN` until it accepts,
//!   and the deadline bounds the wait (a blocking `connect` would wait for ever).
//! - **read** and **write** block at most [`SLICE`] at a time (the socket's `SO_RCVTIMEO`/`SO_SNDTIMEO`), and
//!   between slices look at the deadline and the stop flag. The deadline is one per exchange, not per call: a
//!   peer that drips a byte every few seconds does not reset it.
//!
//! A signal handler installed with `SA_RESTART` (as `signal(2)` installs it) would restart a blocked `read`;
//! the slices make the stop flag seen within [`SLICE`] whatever the handler's flags.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest single blocking wait: how late a deadline or a stop may be noticed.
pub const SLICE: Duration = Duration::from_millis(50);

/// Pause between connection attempts while the listener's backlog is full.
const CONNECT_RETRY: Duration = Duration::from_millis(10);

/// When a blocking call must give up.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The timeout this deadline came from (for the error message).
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    stop: Option<&'static AtomicBool>,
}

impl Bound {
    /// Give up `timeout` from now (never, with `None`), or when `stop` is set.
    pub fn within(timeout: Option<Duration>, stop: Option<&'static AtomicBool>) -> Bound {
        Bound { timeout, deadline: timeout.map(|t| Instant::now() + t), stop }
    }

    /// `Err` once the deadline has passed (`TimedOut`) or the stop flag is set (`Interrupted`).
    pub fn check(&self) -> io::Result<()> {
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped by a signal"));
        }
        match (self.deadline, self.timeout) {
            (Some(d), Some(t)) if Instant::now() >= d => {
                Err(io::Error::new(io::ErrorKind::TimedOut, format!("no answer within {}", shown(t))))
            }
            _ => Ok(()),
        }
    }
}

fn shown(t: Duration) -> String {
    if t.subsec_millis() == 0 {
        format!("{} s", t.as_secs())
    } else {
        format!("{} ms", t.as_millis())
    }
}

/// Whether a call that returned `e` may simply be tried again (its slice ran out, or a signal interrupted it).
fn again(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// Connect to the listener at `path` within `bound`. The stream returned is blocking, with [`SLICE`] as its
/// read and write timeouts (what [`read`] and [`write_all`] expect).
pub fn connect(path: &Path, bound: Bound) -> io::Result<UnixStream> {
    let stream = loop {
        bound.check().map_err(|e| match (e.kind(), bound.timeout) {
            (io::ErrorKind::TimedOut, Some(t)) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("not accepted within {}: the listener's backlog stayed full", shown(t)),
            ),
            _ => e,
        })?;
        match mio::net::UnixStream::connect(path) {
            Ok(s) => break UnixStream::from(s),
            // EAGAIN: the listener's backlog is full (it is not accepting, or not fast enough).
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(CONNECT_RETRY),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(SLICE))?;
    stream.set_write_timeout(Some(SLICE))?;
    Ok(stream)
}

/// Read what is there (at least one byte; 0 at end of stream) within `bound`.
pub fn read(stream: &UnixStream, buf: &mut [u8], bound: Bound) -> io::Result<usize> {
    loop {
        bound.check()?;
        match (&*stream).read(buf) {
            Err(e) if again(&e) => {}
            r => return r,
        }
    }
}

/// Write all of `buf` within `bound`. On an error part of it may have been written.
pub fn write_all(stream: &UnixStream, buf: &[u8], bound: Bound) -> io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        bound.check()?;
        match (&*stream).write(&buf[at..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the connection accepts no more data")),
            Ok(n) => at += n,
            Err(e) if again(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    static STOP: AtomicBool = AtomicBool::new(false);

    /// A listener that never accepts, its backlog filled: a blocking connect would wait for ever.
    #[test]
    fn connect_gives_up_on_a_full_backlog() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("full.sock");
        let _l = UnixListener::bind(&p).unwrap();
        let mut held = Vec::new();
        let t = Instant::now();
        let e = loop {
            match connect(&p, Bound::within(Some(Duration::from_millis(200)), None)) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 10_000, "the backlog never filled");
        };
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("not accepted within 200 ms"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_read_gives_up_at_its_deadline_or_stop() {
        let (a, _b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(SLICE)).unwrap();
        let t = Instant::now();
        let e = read(&a, &mut [0u8; 8], Bound::within(Some(Duration::from_millis(120)), None)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(120) && t.elapsed() < Duration::from_secs(2));
        STOP.store(true, Ordering::Relaxed);
        let e = read(&a, &mut [0u8; 8], Bound::within(None, Some(&STOP))).unwrap_err();
        STOP.store(false, Ordering::Relaxed);
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
    }

    /// A peer that does not read: the write blocks once the socket's buffer is full, and gives up.
    #[test]
    fn a_write_to_a_peer_that_does_not_read_gives_up() {
        let (a, _b) = UnixStream::pair().unwrap();
        a.set_write_timeout(Some(SLICE)).unwrap();
        let big = vec![0u8; 16 << 20];
        let e = write_all(&a, &big, Bound::within(Some(Duration::from_millis(150)), None)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
