//! Helpers for tests that run `keepon` processes in network namespaces they make themselves: a
//! talker ─veth─ bridge ─veth─ listener topology deleted by a guard, and child processes that are bounded
//! in time and killed (by their own pid) when the test ends, also when it fails.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `ip netns exec NS [chrt -f 50] keepon …`: the `keepon` binary of this build in namespace `ns`, under
/// `SCHED_FIFO` 50 with `realtime`.
pub fn in_netns(ns: &str, realtime: bool) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    if realtime {
        c.args(["chrt", "-f", "50"]);
    }
    c.arg(env!("CARGO_BIN_EXE_keepon"));
    c
}

/// True if the test runs as root (network namespaces need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Run `ip ARGS`, failing the test with its error output if it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("iproute2 `ip` must be installed");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Network namespaces deleted when the guard goes out of scope (also on panic).
pub struct Namespaces(Vec<String>);

impl Namespaces {
    /// A guard for these namespace names (each deleted on drop, whether or not it was created yet).
    pub fn new(names: Vec<String>) -> Namespaces {
        Namespaces(names)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// One namespace named `PREFIX-PID` with its loopback up, deleted when the guard goes out of scope.
pub fn lone_namespace(prefix: &str) -> (String, Namespaces) {
    let ns = format!("{prefix}-{}", std::process::id());
    ip(&["netns", "add", &ns]);
    let guard = Namespaces(vec![ns.clone()]);
    ip(&["-n", &ns, "link", "set", "dev", "lo", "up"]);
    (ns, guard)
}

/// `talker` (interface `kp0`) ─veth─ `bridge` (`br0`, STP off) ─veth─ `listener` (interface `kp1`).
pub struct Bridged {
    /// Talker namespace.
    pub talker: String,
    /// Listener namespace.
    pub listener: String,
    /// The bridge's namespace.
    pub bridge: String,
    /// Namespaces, deleted on drop.
    _guard: Namespaces,
}

/// `keepon` backend arguments for the bridged topology's talker end: AF_PACKET on `kp0`, host-paced (veth has no
/// wire clock), fillers to a reserved group address that the bridge does not forward.
pub const KP0_HOST_PACED: [&str; 8] =
    ["--backend", "afpacket", "--iface", "kp0", "--pacing", "host", "--filler", "reserved-address"];

/// Build the topology with namespace names unique to this process; every link up, no IPv6 autoconfiguration.
pub fn bridged(prefix: &str) -> Bridged {
    let id = std::process::id();
    let (t, b, l) = (format!("{prefix}t-{id}"), format!("{prefix}b-{id}"), format!("{prefix}l-{id}"));
    let mut guard = Namespaces(Vec::new());
    for n in [&t, &b, &l] {
        ip(&["netns", "add", n]);
        guard.0.push(n.clone());
    }
    // IGMP snooping on, the Linux default (and a managed switch's): over UDPv4 keepon joins PTP's group itself.
    ip(&["-n", &b, "link", "add", "name", "br0", "type", "bridge", "stp_state", "0"]);
    ip(&["-n", &b, "link", "add", "name", "bt", "type", "veth", "peer", "name", "kp0", "netns", &t]);
    ip(&["-n", &b, "link", "add", "name", "bl", "type", "veth", "peer", "name", "kp1", "netns", &l]);
    let devs = [(&b, "br0"), (&b, "bt"), (&b, "bl"), (&t, "kp0"), (&l, "kp1")];
    for (ns, dev) in devs {
        ip(&["-n", ns, "link", "set", "dev", dev, "addrgenmode", "none"]);
    }
    ip(&["-n", &b, "link", "set", "dev", "bt", "master", "br0"]);
    ip(&["-n", &b, "link", "set", "dev", "bl", "master", "br0"]);
    for (ns, dev) in devs {
        ip(&["-n", ns, "link", "set", "dev", dev, "up"]);
    }
    // Carrier comes up asynchronously (the kernel's link watch may hold it back up to a second), and until then
    // the bridge drops what its ports receive: wait until every end is up and both ports forward.
    let shows = |cmd: &str, args: &[&str], want: &str| {
        Command::new(cmd).args(args).output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(want))
    };
    let ready = wait_until(Duration::from_secs(10), || {
        devs.iter().all(|(ns, dev)| shows("ip", &["-n", ns, "link", "show", "dev", dev], "state UP"))
            && ["bt", "bl"].iter().all(|p| shows("bridge", &["-n", &b, "link", "show", "dev", p], "state forwarding"))
    });
    assert!(ready, "the bridged topology {prefix} did not come up within 10 s");
    Bridged { talker: t, listener: l, bridge: b, _guard: guard }
}

/// Two namespaces joined by one veth pair: `a` (interface `kp0`) ─veth─ `b` (interface `kp1`), a direct link with
/// no bridge between (what a P2P profile expects of a link).
pub struct Direct {
    /// The namespace of `kp0`.
    pub a: String,
    /// The namespace of `kp1`.
    pub b: String,
    /// Namespaces, deleted on drop.
    _guard: Namespaces,
}

/// Build a [`Direct`] link with namespace names unique to this process; both ends up, no IPv6 autoconfiguration.
pub fn direct(prefix: &str) -> Direct {
    let id = std::process::id();
    let (a, b) = (format!("{prefix}a-{id}"), format!("{prefix}b-{id}"));
    let mut guard = Namespaces(Vec::new());
    for n in [&a, &b] {
        ip(&["netns", "add", n]);
        guard.0.push(n.clone());
    }
    ip(&["-n", &a, "link", "add", "name", "kp0", "type", "veth", "peer", "name", "kp1", "netns", &b]);
    for (ns, dev) in [(&a, "kp0"), (&b, "kp1")] {
        ip(&["-n", ns, "link", "set", "dev", dev, "addrgenmode", "none"]);
        ip(&["-n", ns, "link", "set", "dev", dev, "up"]);
    }
    let up = wait_until(Duration::from_secs(10), || {
        [(&a, "kp0"), (&b, "kp1")].iter().all(|(ns, dev)| {
            Command::new("ip")
                .args(["-n", ns, "link", "show", "dev", dev])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("state UP"))
        })
    });
    assert!(up, "the direct link {prefix} did not come up within 10 s");
    Direct { a, b, _guard: guard }
}

/// A child process the test started. Its output goes to files; dropping it kills it by its pid (SIGKILL)
/// and reaps it, unless it has already exited.
pub struct Proc {
    /// Name for messages.
    pub name: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    /// When it was started.
    pub started: Instant,
}

impl Proc {
    /// Start `cmd` with its output in `dir/NAME.out` and `dir/NAME.err`.
    pub fn spawn(name: &str, dir: &Path, cmd: &mut Command) -> Proc {
        let stdout = dir.join(format!("{name}.out"));
        let stderr = dir.join(format!("{name}.err"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).unwrap())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc { name: name.into(), child, stdout, stderr, started: Instant::now() }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while it runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Wait at most `limit` for it to exit; on timeout kill it and say so.
    pub fn wait(&mut self, limit: Duration) -> Result<ExitStatus, String> {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(s);
            }
            if Instant::now() >= end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!("{} did not exit within {limit:?}: killed\n{}", self.name, self.output()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait at most `limit` and require a successful exit; returns its standard output.
    pub fn success(&mut self, limit: Duration) -> String {
        match self.wait(limit) {
            Ok(s) if s.success() => self.stdout(),
            Ok(s) => panic!("{} failed ({s})\n{}", self.name, self.output()),
            Err(e) => panic!("{e}"),
        }
    }

    /// Its standard output so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Standard output and error, for failure messages.
    pub fn output(&self) -> String {
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        format!("--- {} stdout ---\n{}--- {} stderr ---\n{err}", self.name, self.stdout(), self.name)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Poll `cond` every 10 ms until it holds (true) or `limit` passes (false).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (at most 5 s) until `keepon listen` says its socket receives: a talker started after that is heard from
/// its first frame. (Its socket existing is not enough: frames sent while it is still being set up can be dropped
/// by the kernel on the way.)
pub fn listening(listener: &Proc) -> bool {
    wait_until(Duration::from_secs(5), || listener.stdout().contains("listen: receiving on"))
}

/// A counter of `dev` in namespace `ns`, from `/sys/class/net/DEV/statistics/STAT` (`rx_dropped`, …).
pub fn link_stat(ns: &str, dev: &str, stat: &str) -> u64 {
    let path = format!("/sys/class/net/{dev}/statistics/{stat}");
    let out = Command::new("ip").args(["netns", "exec", ns, "cat", &path]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse().unwrap_or_else(|_| panic!("{ns}/{dev} {stat}: {text}{}", String::from_utf8_lossy(&out.stderr)))
}

/// `chmod MODE path`.
pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// True if this host lets us run a process under `SCHED_FIFO` (`chrt` from util-linux).
pub fn can_chrt() -> bool {
    Command::new("chrt").args(["-f", "50", "true"]).output().is_ok_and(|o| o.status.success())
}

/// The daemon configuration the daemon tests share: 100 Mb/s, 1230 B slots (δ = 100 µs), ring 32 (a 3.2 ms cycle),
/// batch 8, classes tc-0 (ring slot 0), tc-1 (slots 1 and 17) and best-effort tc-2; `run` and `daemon` are extra
/// lines of those sections (rules, limits).
pub fn daemon_config(sock: &Path, poll_period: &str, run: &str, daemon: &str) -> String {
    format!(
        r#"
[link]
rate = "100Mbps"
[ring]
slot_bytes = 1230      # δ = 100 µs
slots = 32             # cycle 3.2 ms
batch = 8
slot_masks = "0x01,0x20002,0"
[run]
poll_period = "{poll_period}"
{run}
[daemon]
socket = "{}"
{daemon}
"#,
        sock.display()
    )
}

/// The writer (submits taken) and reader (outcomes by tag) threads of one client of a stopping daemon.
pub type ClientThreads =
    (std::thread::JoinHandle<u64>, std::thread::JoinHandle<Result<Vec<(u64, keepon::api::Delivery)>, String>>);

/// Join clients that submitted tags `0..sent` to a daemon that was stopped under them: every submit the socket
/// took has exactly one outcome, and each client submitted more than 100. Returns how many outcomes were
/// `shutdown`.
pub fn every_submit_answered_once(clients: Vec<ClientThreads>) -> u32 {
    let mut shutdown = 0;
    for (i, (writer, reader)) in clients.into_iter().enumerate() {
        let sent = writer.join().unwrap();
        let got = reader.join().unwrap().unwrap_or_else(|e| panic!("client {i}: {e}"));
        let mut seen = vec![0u32; sent as usize];
        for (tag, dl) in &got {
            assert!(*tag < sent, "client {i}: outcome for tag {tag} never submitted");
            seen[*tag as usize] += 1;
            let stopped = keepon::api::Delivery::Rejected(keepon_core::outcome::Reason::Shutdown);
            shutdown += u32::from(*dl == stopped);
        }
        let missing = seen.iter().filter(|&&n| n == 0).count();
        let doubled = seen.iter().filter(|&&n| n > 1).count();
        println!("client {i}: {sent} submitted, {} outcomes", got.len());
        assert_eq!((missing, doubled), (0, 0), "client {i}: {sent} submitted, {} outcomes", got.len());
        assert!(sent > 100, "client {i} submitted only {sent}");
    }
    shutdown
}

fn clock_ns(c: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec; CLOCK_TAI and CLOCK_REALTIME exist on Linux ≥ 3.10.
    unsafe { libc::clock_gettime(c, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// This host's CLOCK_TAI, ns.
pub fn tai_now_ns() -> i64 {
    clock_ns(libc::CLOCK_TAI)
}

/// The kernel's TAI offset, CLOCK_TAI − CLOCK_REALTIME, in ns rounded to whole seconds (0 when never set).
pub fn tai_offset_ns() -> i64 {
    let d = clock_ns(libc::CLOCK_TAI) - clock_ns(libc::CLOCK_REALTIME);
    (d + 500_000_000).div_euclid(1_000_000_000) * 1_000_000_000
}

/// Run `f` on a new thread whose credentials are `uid` (and gid `uid`): the raw `setresuid` system call changes only
/// the calling thread's, so a daemon in this process (or another) sees that thread's connections as that user's
/// through `SO_PEERCRED`. Needs root.
pub fn as_uid<T: Send + 'static>(uid: u32, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        // SAFETY: raw system calls with integer arguments; they change only this thread's credentials.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_setresgid, uid, uid, uid), 0);
            assert_eq!(libc::syscall(libc::SYS_setresuid, uid, uid, uid), 0);
        }
        f()
    })
}
