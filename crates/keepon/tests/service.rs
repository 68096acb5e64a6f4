//! `dist/keepon@.service` as written: `systemd-analyze verify` accepts it (where systemd is installed), and its
//! `ExecStart` line, run the way systemd would run it — its `User=` (here nobody, standing for `keepon`), its
//! `AmbientCapabilities=`, its `EnvironmentFile=` expanded, `%i` the instance — serves on a veth in a namespace
//! without root: AF_PACKET on the link, SCHED_FIFO and locked memory granted by the capabilities, a client's frame
//! sent, SIGTERM a clean stop (needs root to set this up; skips otherwise).

#[allow(dead_code)] // shared with the namespace tests
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use keepon::api::{Client, Delivery, Request, Response, HOST_FIFO, HOST_MEMORY_LOCKED, HOST_REFUSED};
use keepon_core::testframe::TestHeader;
use support::{bridged, chmod, daemon_config, is_root, wait_until, Proc, KP0_HOST_PACED};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");
const NOBODY: u32 = 65534;

fn unit() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/keepon@.service");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The value of `key=` in the unit (the last one, as systemd takes it).
fn key(unit: &str, key: &str) -> String {
    unit.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
        .to_string()
}

#[test]
fn systemd_analyze_verify_accepts_the_unit() {
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        println!("skipping: no systemd-analyze on this machine");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The binary where this build put it (verify checks that ExecStart's command exists).
    let text = unit().replace("/usr/local/bin/keepon", BIN);
    let path = dir.path().join("keepon@eth1.service");
    std::fs::write(&path, &text).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.trim().is_empty(), "systemd-analyze verify: {err}");
    // And it does catch a mistake in a unit like this one.
    std::fs::write(&path, text.replace("Restart=on-failure", "Restart=sometimes")).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("sometimes"), "a bad Restart= goes unnoticed");
}

#[test]
fn the_units_exec_start_serves_without_root() {
    if !is_root() {
        println!("skipping: needs root (namespaces, and starting the daemon as another user with capabilities)");
        return;
    }
    let unit = unit();
    let topo = bridged("ksv");
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    // /etc/keepon and /run/keepon, here; the runtime directory belongs to the service's user, as systemd makes it.
    let (etc, run) = (dir.path().join("etc"), dir.path().join("run"));
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    chmod(&etc, 0o755);
    chmod(&run, 0o750);
    // SAFETY: chown(2) on a path this test created.
    let c = std::ffi::CString::new(run.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::chown(c.as_ptr(), NOBODY, NOBODY) }, 0);
    let instance = "kp0";
    let sock = run.join(format!("{instance}.sock"));
    let allow = "mode = \"0660\"\n[[daemon.allow]]\nuid = 0\nclasses = [\"tc-0\", \"tc-1\", \"tc-2\"]\n";
    std::fs::write(etc.join(format!("{instance}.toml")), daemon_config(&sock, "50us", "", allow)).unwrap();
    std::fs::write(etc.join(format!("{instance}.env")), format!("KEEPON_ARGS=\"{}\"\n", KP0_HOST_PACED.join(" ")))
        .unwrap();
    for f in ["toml", "env"] {
        chmod(&etc.join(format!("{instance}.{f}")), 0o644);
    }

    // ExecStart as systemd expands it: %i, the paths, $KEEPON_ARGS from the EnvironmentFile.
    let local = |s: &str| {
        s.replace("%i", instance)
            .replace("/usr/local/bin/keepon", BIN)
            .replace("/etc/keepon", &etc.display().to_string())
            .replace("/run/keepon", &run.display().to_string())
    };
    let env_file = local(&key(&unit, "EnvironmentFile"));
    let env = std::fs::read_to_string(&env_file).unwrap();
    let args = env.trim().strip_prefix("KEEPON_ARGS=").unwrap().trim_matches('"').to_string();
    let exec: Vec<String> =
        local(&key(&unit, "ExecStart")).replace("$KEEPON_ARGS", &args).split_whitespace().map(String::from).collect();
    assert_eq!(exec[0], BIN);
    // User= and AmbientCapabilities= as systemd applies them (setpriv: the same system calls).
    let caps: Vec<String> = key(&unit, "AmbientCapabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let caps = caps.join(",");
    assert_eq!(key(&unit, "User"), "keepon", "the unit's user (nobody stands for it here)");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &topo.talker, "setpriv"])
        .args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}"), "--clear-groups"])
        .args([&format!("--inh-caps={caps}"), &format!("--ambient-caps={caps}")])
        .args(&exec)
        .args(["--duration", "60s"]);
    let mut daemon = Proc::spawn("daemon", dir.path(), &mut cmd);
    assert!(wait_until(Duration::from_secs(10), || sock.exists()), "no socket\n{}", daemon.output());

    // The host granted what [realtime] asks, through the capabilities; a client's frame leaves.
    let mut c = Client::connect(&sock).unwrap_or_else(|e| panic!("connect: {e}\n{}", daemon.output()));
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let info = c.info().unwrap();
    assert_eq!(info.host & (HOST_FIFO | HOST_MEMORY_LOCKED | HOST_REFUSED), HOST_FIFO | HOST_MEMORY_LOCKED);
    let mut sent = false;
    for tag in 0..5u64 {
        let t = c.info().unwrap().cycle_start + 20 * 3_200_000;
        let mut f = vec![0u8; 100];
        TestHeader { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], flow: 0, seq: tag, txtime: t }
            .emit(&mut f[..38]);
        c.send(&Request::Submit { tag, class: "tc-0".into(), txtime: Some(t), frame: f }).unwrap();
        match c.recv().unwrap() {
            Some(Response::Outcome { delivery: Delivery::Sent { .. }, .. }) => {
                sent = true;
                break;
            }
            other => println!("try {tag}: {other:?} (a host stall)"),
        }
    }
    assert!(sent, "no frame sent\n{}", daemon.output());
    drop(c);
    // systemd's stop: SIGTERM, a clean exit within TimeoutStopSec.
    let stop = key(&unit, "TimeoutStopSec").trim_end_matches('s').parse::<u64>().unwrap();
    // SAFETY: kill(2) on the daemon this test started (ip netns exec and setpriv exec into keepon).
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    let out = daemon.success(Duration::from_secs(stop));
    println!("{out}");
    assert!(out.contains("poll loop SCHED_FIFO 50, memory locked"), "{out}");
    assert!(!sock.exists(), "the daemon removed its socket");
}
