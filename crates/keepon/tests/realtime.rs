//! `[realtime]`: the daemon asks the host for `SCHED_FIFO` and locked memory itself, says on its status line what
//! it got, and tells clients in `Info`; an unprivileged daemon is refused, says so loudly and keeps serving (needs
//! root to start the daemon both ways; skips otherwise).

#[allow(dead_code)] // shared with the namespace tests; this test uses `Proc` and the daemon configuration
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use keepon::api::{Client, HOST_FIFO, HOST_MEMORY_LOCKED, HOST_PINNED, HOST_REFUSED};
use support::{can_chrt, chmod, daemon_config, is_root, wait_until, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");

/// Start `keepon daemon --backend sim` (as `uid` if given, with setpriv), read `Info.host`, stop it; its output
/// (standard output and error).
fn daemon_host(d: &Path, uid: Option<u32>, realtime: &str) -> (u32, String) {
    let sock = d.join("keepon.sock");
    let cfg = d.join("D.toml");
    std::fs::write(&cfg, daemon_config(&sock, "50us", "", "") + realtime).unwrap();
    chmod(&cfg, 0o644);
    let mut cmd = match uid {
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.args([&format!("--reuid={u}"), &format!("--regid={u}"), "--clear-groups", BIN]);
            c
        }
        None => Command::new(BIN),
    };
    cmd.args(["daemon", "--backend", "sim", "--duration", "20s", "--config"]).arg(&cfg);
    let mut p = Proc::spawn("daemon", d, &mut cmd);
    // Not the socket file's appearance: it appears at bind(), a moment before listen() (a connect is refused then).
    let mut info = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            info = Client::connect(&sock).and_then(|mut c| c.info()).ok();
            info.is_some()
        }),
        "the daemon did not come up\n{}",
        p.output()
    );
    let info = info.unwrap();
    // SAFETY: kill(2) on the daemon this test started (setpriv execs into keepon).
    assert_eq!(unsafe { libc::kill(p.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    p.success(Duration::from_secs(10));
    (info.host, p.output())
}

#[test]
fn a_daemon_started_plainly_by_root_runs_real_time() {
    if !is_root() || !can_chrt() {
        println!("skipping: needs root on a host that grants SCHED_FIFO");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (host, out) = daemon_host(dir.path(), None, "");
    println!("{out}");
    assert!(out.contains("poll loop SCHED_FIFO 50, memory locked, not pinned"), "{out}");
    assert_eq!(host, HOST_FIFO | HOST_MEMORY_LOCKED);
    // Asked for a CPU too, and a priority of its own.
    let (host, out) = daemon_host(dir.path(), None, "[realtime]\npriority = 20\ncpu = 0\n");
    assert!(out.contains("poll loop SCHED_FIFO 20, memory locked, pinned to CPU 0"), "{out}");
    assert_eq!(host, HOST_FIFO | HOST_MEMORY_LOCKED | HOST_PINNED);
}

#[test]
fn an_unprivileged_daemon_says_what_the_host_refused_and_serves() {
    if !is_root() {
        println!("skipping: needs root (to start the daemon as uid 65534)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o777);
    let (host, out) = daemon_host(dir.path(), Some(65534), "");
    println!("{out}");
    assert!(out.contains("WARNING: the host refused SCHED_FIFO priority 50"), "{out}");
    assert!(out.contains("poll loop not real-time (SCHED_OTHER)"), "{out}");
    assert_ne!(host & HOST_REFUSED, 0, "Info says the host refused something: {host:#x}");
    assert_eq!(host & HOST_FIFO, 0);
}
