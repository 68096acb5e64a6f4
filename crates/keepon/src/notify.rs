//! systemd's readiness protocol (`sd_notify(3)`), for `Type=notify` units: the daemon tells the service manager
//! `READY=1` once its socket listens on the opened link, and `STOPPING=1` when it shuts down.
//!
//! The protocol is one datagram per message, `KEY=VALUE` lines, to the `AF_UNIX` datagram socket named by
//! `$NOTIFY_SOCKET` — a path, or an abstract name written with a leading `@`. That is all of it std's
//! `UnixDatagram` needs, so keepon takes no dependency (neither libsystemd nor a crate) for a dozen lines.
//! Without `$NOTIFY_SOCKET` (not started by systemd as `Type=notify`) every call here does nothing.
//!
//! **When it is ready.** The daemon's socket is bound inside the serving loop's setup, after the link is open
//! (`std`'s bind also listens, then the daemon sets the socket's mode). [`Readiness::watch`] runs beside it and
//! says `READY=1` once the kernel lists the socket at that path as listening (`/proc/self/net/unix`, flag
//! `__SO_ACCEPTCON`) and its mode is the configured one: from then on a client's `connect` is accepted. It does not
//! connect to find out, so the daemon's connection counters see nothing.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the watcher looks for the listening socket.
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// `__SO_ACCEPTCON`: the flag `/proc/net/unix` shows for a listening socket.
const SO_ACCEPTCON: u32 = 1 << 16;

/// The service manager's notification socket.
pub struct Notifier {
    sock: UnixDatagram,
    addr: SocketAddr,
    shown: String,
}

impl Notifier {
    /// The socket `$NOTIFY_SOCKET` names; `Ok(None)` when it is unset or empty.
    pub fn from_env() -> Result<Option<Notifier>, String> {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(name) if !name.is_empty() => Notifier::to(name.as_bytes()).map(Some),
            _ => Ok(None),
        }
    }

    /// The socket `name` names: a path, or an abstract name written `@name`.
    pub fn to(name: &[u8]) -> Result<Notifier, String> {
        let shown = String::from_utf8_lossy(name).into_owned();
        let addr = match name.strip_prefix(b"@") {
            Some(abstract_name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(abstract_name)
            }
            None => SocketAddr::from_pathname(Path::new(std::ffi::OsStr::from_bytes(name))),
        }
        .map_err(|e| format!("NOTIFY_SOCKET {shown:?}: {e}"))?;
        let sock = UnixDatagram::unbound().map_err(|e| format!("NOTIFY_SOCKET: socket: {e}"))?;
        Ok(Notifier { sock, addr, shown })
    }

    /// Send one notification (`READY=1`, `STOPPING=1`, `STATUS=…`).
    pub fn send(&self, state: &str) -> io::Result<()> {
        self.sock.send_to_addr(state.as_bytes(), &self.addr).map(|_| ())
    }

    fn say(&self, state: &str) {
        if let Err(e) = self.send(state) {
            eprintln!("keepon daemon: cannot tell the service manager {state} (NOTIFY_SOCKET {}): {e}", self.shown);
        }
    }
}

/// Whether a stream socket is listening at `path`, from `/proc/self/net/unix` (`None` if that cannot be read).
pub fn listening(path: &Path) -> Option<bool> {
    let table = std::fs::read(Path::new("/proc/self/net/unix")).ok()?;
    Some(listening_in(&table, path.as_os_str().as_bytes()))
}

/// `/proc/net/unix`: `Num RefCount Protocol Flags Type St Inode Path`, hexadecimal but for the inode; the path
/// is the rest of the line (it may hold spaces).
fn listening_in(table: &[u8], path: &[u8]) -> bool {
    table.split(|b| *b == b'\n').skip(1).any(|line| {
        let mut rest = line;
        let mut fields = [&b""[..]; 7];
        for f in &mut fields {
            rest = rest.trim_ascii_start();
            let end = rest.iter().position(u8::is_ascii_whitespace).unwrap_or(rest.len());
            (*f, rest) = rest.split_at(end);
        }
        let hex = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|s| u32::from_str_radix(s, 16).ok());
        let stream = hex(fields[4]) == Some(libc::SOCK_STREAM as u32);
        let accepts = hex(fields[3]).is_some_and(|f| f & SO_ACCEPTCON != 0);
        stream && accepts && rest.strip_prefix(b" ") == Some(path)
    })
}

/// The daemon's side of the protocol: a watcher that says `READY=1` once the socket listens, and `STOPPING=1`.
pub struct Readiness {
    notifier: Option<Arc<Notifier>>,
    done: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
}

impl Readiness {
    /// Start watching for the daemon's socket at `socket` to listen with `mode`; a no-op without
    /// `$NOTIFY_SOCKET`. Call it before the poll loop asks for `SCHED_FIFO`: the watcher thread stays an ordinary
    /// one.
    pub fn watch(socket: &Path, mode: u32) -> Readiness {
        let notifier = match Notifier::from_env() {
            Ok(n) => n.map(Arc::new),
            Err(e) => {
                eprintln!("keepon daemon: {e}: the service manager will not hear that the daemon is ready");
                None
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let watcher = notifier.clone().map(|n| {
            let (done, socket): (_, PathBuf) = (done.clone(), socket.into());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let moded =
                        std::fs::metadata(&socket).is_ok_and(|m| m.permissions().mode() & 0o7777 == mode & 0o7777);
                    if moded && listening(&socket) == Some(true) {
                        n.say("READY=1");
                        return;
                    }
                    std::thread::sleep(WATCH_EVERY);
                }
            })
        });
        Readiness { notifier, done, watcher }
    }

    /// The daemon is shutting down (its loop returned): stop watching, and say `STOPPING=1`.
    pub fn stopping(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        if let Some(n) = &self.notifier {
            n.say("STOPPING=1");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    const TABLE: &[u8] = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
        0000000000000000: 00000002 00000000 00010000 0001 01 20001 /run/keepon/eth1.sock\n\
        0000000000000000: 00000002 00000000 00000000 0002 01 20002 /run/systemd/notify\n\
        0000000000000000: 00000003 00000000 00000000 0001 03 20003 /run/keepon/eth2.sock\n\
        0000000000000000: 00000002 00000000 00010000 0001 01 20004 /tmp/with space.sock\n\
        0000000000000000: 00000002 00000000 00010000 0001 01 20005 @abstract\n";

    #[test]
    fn a_listening_stream_socket_is_found_by_its_path() {
        assert!(listening_in(TABLE, b"/run/keepon/eth1.sock"));
        assert!(listening_in(TABLE, b"/tmp/with space.sock"));
        // A connected stream socket at that path (no __SO_ACCEPTCON), a datagram socket, a prefix: no.
        assert!(!listening_in(TABLE, b"/run/keepon/eth2.sock"));
        assert!(!listening_in(TABLE, b"/run/systemd/notify"));
        assert!(!listening_in(TABLE, b"/run/keepon/eth1"));
        assert!(!listening_in(b"", b"/run/keepon/eth1.sock"));
        assert!(!listening_in(b"garbage\nmore garbage here\n\xff\xfe", b"here"));
    }

    #[test]
    fn the_kernel_lists_a_bound_listener() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.sock");
        assert_eq!(listening(&p), Some(false));
        let _l = UnixListener::bind(&p).unwrap();
        assert_eq!(listening(&p), Some(true));
    }

    #[test]
    fn notifications_reach_a_path_and_an_abstract_socket() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notify");
        let systemd = UnixDatagram::bind(&p).unwrap();
        systemd.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Notifier::to(p.as_os_str().as_bytes()).unwrap().send("READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = systemd.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("keepon-notify-test-{}", std::process::id());
        let systemd = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        systemd.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Notifier::to(format!("@{name}").as_bytes()).unwrap().send("STOPPING=1").unwrap();
        let n = systemd.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");

        // A name too long for sockaddr_un is an error, not a panic.
        let e = Notifier::to(&[b'x'; 200]).err().unwrap();
        assert!(e.contains("NOTIFY_SOCKET"), "{e}");
    }
}
