//! The daemon on a real AF_PACKET link (needs root; skips otherwise): clients keep submitting while the
//! daemon gets SIGTERM, and every submit the socket took gets exactly one outcome (issue 12, point 8); a client
//! subscribed to release times gets, after every sent frame's outcome, the time the host released it.
//!
//! ```text
//!   kqt-PID: keepon daemon (afpacket, host-paced) ── kp0 ── veth ── bridge ── veth ── kp1 (nobody listens)
//!        ▲ UNIX socket: 4 clients of this test, submitting without pause
//! ```
//! Bounded in time (about 5 s); the namespaces are deleted and the daemon killed by guards on failure.
#![cfg(target_os = "linux")]

#[allow(dead_code)] // shared with netns_cli.rs; this test uses part of it
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use keepon::api::{Client, Delivery, Request, Response};
use keepon_core::outcome::Reason;
use keepon_core::testframe::TestHeader;

use support::{bridged, chmod, is_root, Proc, KP0_HOST_PACED};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");
const CYCLE: i64 = 3_200_000;

fn frame(seq: u64, txtime: i64) -> Vec<u8> {
    let mut b = vec![0u8; 100];
    let h = TestHeader { dst: [2, 0x6b, 0x70, 0, 0, 2], src: [2, 0x6b, 0x70, 0, 0, 1], flow: 0, seq, txtime };
    h.emit(&mut b[..TestHeader::buffer_len()]);
    b
}

/// A daemon (AF_PACKET, host-paced) on `kp0` of a fresh bridged topology named `prefix`, with `limits` in its
/// `[daemon]` section, answering `Info` on its socket: the guards, the socket and the link's description.
struct Daemon {
    dir: tempfile::TempDir,
    _topo: support::Bridged,
    proc: Proc,
    sock: std::path::PathBuf,
    info: keepon::api::Info,
}

fn start_daemon(prefix: &str, limits: &str) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    chmod(d, 0o755);
    let sock = d.join("keepon.sock");
    let cfg = d.join("D.toml");
    std::fs::write(&cfg, support::daemon_config(&sock, "100us", "", limits)).unwrap();
    let topo = bridged(prefix);
    let mut proc = Proc::spawn(
        "daemon",
        d,
        Command::new("ip")
            .args(["netns", "exec", &topo.talker, BIN, "daemon", "--config"])
            .arg(&cfg)
            .args(KP0_HOST_PACED),
    );
    let up = Instant::now();
    let info = loop {
        if let Ok(i) = Client::connect(&sock).and_then(|mut c| c.info()) {
            break i;
        }
        assert!(proc.running() && up.elapsed() < Duration::from_secs(5), "daemon not up\n{}", proc.output());
        std::thread::sleep(Duration::from_millis(10));
    };
    Daemon { dir, _topo: topo, proc, sock, info }
}

#[test]
fn sigterm_while_clients_submit_leaves_no_submit_without_an_outcome() {
    if !is_root() {
        println!("skipping: needs root (network namespaces)");
        return;
    }
    let Daemon { dir: _dir, _topo, proc: mut daemon, sock, info } = start_daemon("kq", "max_in_flight = 256");
    let mut clients = Vec::new();
    for n in 0..4u64 {
        let mut c = Client::connect(&sock).unwrap();
        c.set_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut w = c.try_clone().unwrap();
        let first = info.cycle_start + 60 * CYCLE;
        let writer = std::thread::spawn(move || {
            let mut sent = 0u64;
            loop {
                let req = if sent & 1 == 0 {
                    let t = first + ((sent / 2) % 200) as i64 * CYCLE;
                    Request::Submit { tag: sent, class: "tc-0".into(), txtime: Some(t), frame: frame(sent, t) }
                } else {
                    Request::Submit { tag: sent, class: "tc-2".into(), txtime: None, frame: frame(sent, 0) }
                };
                if w.send(&req).is_err() {
                    return sent;
                }
                sent += 1;
                if sent & 63 == 0 {
                    std::thread::sleep(Duration::from_micros(300 + 100 * n));
                }
            }
        });
        let reader = std::thread::spawn(move || {
            let mut got: Vec<(u64, Delivery)> = Vec::new();
            loop {
                match c.recv() {
                    Ok(Some(Response::Outcome { tag, delivery })) => got.push((tag, delivery)),
                    Ok(Some(other)) => return Err(format!("unexpected {other:?}")),
                    Ok(None) => return Ok(got),
                    Err(e) => return Err(format!("{e} after {} outcomes", got.len())),
                }
            }
        });
        clients.push((writer, reader));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill with a pid this test started (`ip netns exec` execs keepon in the same process).
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    let out = daemon.success(Duration::from_secs(10));
    println!("{out}");
    let shutdown = support::every_submit_answered_once(clients);
    assert!(shutdown > 0, "no submit met the stopping daemon");
    assert!(!sock.exists(), "the daemon removed its socket");
}

/// Release times on a host-paced link: a client subscribes, submits scheduled and best-effort frames and
/// half-closes. Every sent frame's outcome is followed by exactly one `Released` whose time is valid, not before
/// the frame's slot time and within the daemon's wait (`RELEASE_WAIT`), mostly the kernel's TX timestamp; the
/// connection closes after the last one.
#[test]
fn a_subscribed_client_learns_when_each_frame_left_the_host() {
    if !is_root() {
        println!("skipping: needs root (network namespaces)");
        return;
    }
    let Daemon { dir: _dir, _topo, proc: mut daemon, sock, info } = start_daemon("ks", "");
    let mut c = Client::connect(&sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(15))).unwrap();
    assert!(c.subscribe_release_times().unwrap());
    let first = info.cycle_start + 60 * CYCLE;
    for i in 0..40u64 {
        let (class, t) = if i % 4 == 3 { ("tc-2", None) } else { ("tc-0", Some(first + i as i64 * CYCLE)) };
        let f = frame(i, t.unwrap_or(0));
        c.send(&Request::Submit { tag: i, class: class.into(), txtime: t, frame: f }).unwrap();
    }
    c.close_write().unwrap();
    let mut sent = std::collections::HashMap::new();
    let mut lags = Vec::new();
    let (mut stamped, mut missed) = (0, 0);
    while let Some(r) = c.recv().unwrap() {
        match r {
            Response::Outcome { tag, delivery: Delivery::Sent { time, .. } } => {
                assert!(sent.insert(tag, time).is_none(), "{tag}: one outcome");
            }
            // A host stall past the ring's lead (an underrun) on a loaded host: rejected, and no `Released`.
            Response::Outcome { delivery: Delivery::Rejected(Reason::Late | Reason::Underrun), .. } => missed += 1,
            Response::Outcome { tag, delivery } => panic!("{tag}: {delivery:?}"),
            Response::Released { tag, released, stamped: s } => {
                let slot = sent.remove(&tag).unwrap_or_else(|| panic!("{tag}: Released before its outcome, or twice"));
                let at = released.unwrap_or_else(|| panic!("{tag}: no release time on a host-paced link"));
                // Not before its slot (up to 1 µs: the kernel's stamp is converted to EPHC time through the host
                // grid, as in examples.rs), and within the daemon's wait for it (milliseconds after a host stall).
                assert!(
                    at >= slot - 1_000 && at - slot < keepon::api::RELEASE_WAIT.as_nanos() as i64,
                    "{tag}: released {} ns after its slot",
                    at - slot
                );
                lags.push(at - slot);
                stamped += usize::from(s);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(sent.is_empty(), "sent frames without a Released: {sent:?}");
    assert_eq!(lags.len() + missed, 40, "every frame sent (and released) or missed");
    assert!(lags.len() >= 20, "{} of 40 frames sent", lags.len());
    assert!(stamped * 2 > lags.len(), "only {stamped} of {} release times are kernel stamps", lags.len());
    lags.sort_unstable();
    println!(
        "release lag over {} frames: min {} ns, median {} ns, max {} ns; {stamped} kernel TX stamps",
        lags.len(),
        lags[0],
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    // SAFETY: kill with a pid this test started (`ip netns exec` execs keepon in the same process).
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    daemon.success(Duration::from_secs(10));
}
