//! `keepon status` (text and `--json`) and the metrics file of a running daemon on the simulated NIC: the counts
//! they show are those of the frames this test submitted (no root needed).

#[allow(dead_code)] // shared with the namespace tests; this test uses `Proc` and the daemon configuration
mod support;

use std::process::Command;
use std::time::Duration;

use keepon::api::{Client, Delivery, Request, Response};
use keepon::daemon::metrics;
use keepon_core::testframe::TestHeader;
use support::{daemon_config, wait_until, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");
const CYCLE: i64 = 3_200_000;

fn frame(seq: u64, txtime: i64) -> Vec<u8> {
    let mut b = vec![0u8; 100];
    TestHeader { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], flow: 0, seq, txtime }.emit(&mut b[..38]);
    b
}

#[test]
fn status_and_metrics_show_what_the_daemon_did() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sock = d.join("keepon.sock");
    let prom = d.join("keepon.prom");
    let cfg = d.join("D.toml");
    let extra = format!("metrics_file = \"{}\"\n", prom.display());
    // No allow rules: this user (and root) may use every class.
    std::fs::write(&cfg, daemon_config(&sock, "50us", "", &extra)).unwrap();
    let mut daemon = Proc::spawn(
        "daemon",
        d,
        Command::new(BIN).args(["daemon", "--backend", "sim", "--duration", "30s", "--config"]).arg(&cfg),
    );
    assert!(wait_until(Duration::from_secs(10), || sock.exists()), "daemon\n{}", daemon.output());

    // 10 frames in tc-0's slot (ring slot 0), 3 in ring slot 5 (nobody's: not-owned), 2 of a class that does not
    // exist (tags 13 and 14).
    let mut c = Client::connect(&sock).unwrap();
    let info = c.info().unwrap();
    let first = info.cycle_start + 20 * CYCLE;
    let mut tag = 0;
    for i in 0..10 {
        let t = first + i * CYCLE;
        c.send(&Request::Submit { tag, class: "tc-0".into(), txtime: Some(t), frame: frame(tag, t) }).unwrap();
        tag += 1;
    }
    for i in 0..3 {
        let t = first + i * CYCLE + 5 * 100_000;
        c.send(&Request::Submit { tag, class: "tc-0".into(), txtime: Some(t), frame: frame(tag, t) }).unwrap();
        tag += 1;
    }
    for _ in 0..2 {
        c.send(&Request::Submit { tag, class: "nope".into(), txtime: Some(first), frame: frame(tag, first) }).unwrap();
        tag += 1;
    }
    // What the client was told, by class and reason (a host stall may cost a tc-0 frame `underrun` or `late`).
    let mut told: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
    for _ in 0..tag {
        match c.recv().unwrap() {
            Some(Response::Outcome { tag, delivery }) => {
                let class = if tag >= 13 { "" } else { "tc-0" };
                let what = match delivery {
                    Delivery::Sent { .. } => "sent",
                    Delivery::Rejected(r) => r.as_str(),
                };
                *told.entry((class, what)).or_default() += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    println!("told: {told:?}");
    assert_eq!(told.get(&("tc-0", "not-owned")), Some(&3));
    assert_eq!(told.get(&("", "unknown-class")), Some(&2));
    let sent = told.get(&("tc-0", "sent")).copied().unwrap_or(0);
    let stalled = 10 - sent;
    assert!(sent >= 8, "{told:?}");
    let tc0_rejected: Vec<String> =
        told.iter().filter(|((c, w), _)| *c == "tc-0" && *w != "sent").map(|((_, w), n)| format!("{w} {n}")).collect();

    // Text.
    let out = Command::new(BIN).args(["status", "--socket"]).arg(&sock).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("sync: free-running"), "{text}");
    let line = format!("tc-0             sent {sent}, queued 0, rejected {}", tc0_rejected.join(", "));
    assert!(text.contains(&line), "`{line}` in\n{text}");
    assert!(text.contains("(no such class)  sent 0, queued 0, rejected unknown-class 2"), "{text}");
    assert!(text.contains("connections 2 open"), "this test's client and the status query: {text}");
    assert!(text.contains("poll loop: ") && text.contains(", longest iteration "), "{text}");

    // JSON.
    let out = Command::new(BIN).args(["status", "--json", "--socket"]).arg(&sock).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status --json is JSON");
    let tc0 = v["classes"].as_array().unwrap().iter().find(|c| c["name"] == "tc-0").unwrap();
    assert_eq!((tc0["sent"].as_u64(), tc0["rejected"]["not-owned"].as_u64()), (Some(sent), Some(3)));
    assert_eq!(v["sync"]["state"], "free-running");
    assert_eq!(v["link"]["slot_bytes"].as_u64(), Some(1230));
    assert!(v["schedule"]["alignment_ns"]["max"].is_i64(), "{v}");
    assert!(stalled == 0 || v["underruns"].as_u64() > Some(0), "frames lost without an underrun: {v}");

    // The metrics file (rewritten every second).
    assert!(
        wait_until(Duration::from_secs(5), || std::fs::read_to_string(&prom)
            .is_ok_and(|t| t.contains(&format!("keepon_frames_sent_total{{class=\"tc-0\"}} {sent}")))),
        "metrics file\n{}",
        std::fs::read_to_string(&prom).unwrap_or_default()
    );
    let samples = metrics::parse(&std::fs::read_to_string(&prom).unwrap()).expect("the metrics file parses");
    let find = |name: &str, labels: &[(&str, &str)]| {
        samples
            .iter()
            .find(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
            .map(|s| s.value)
    };
    assert_eq!(find("keepon_frames_rejected_total", &[("class", "tc-0"), ("reason", "not-owned")]), Some(3.0));
    assert_eq!(find("keepon_frames_rejected_total", &[("class", ""), ("reason", "unknown-class")]), Some(2.0));
    assert!(find("keepon_uptime_seconds", &[]).is_some_and(|u| u > 0.0));
    // The poll loop's longest iteration: measured (not zero), shorter than the daemon has been up, and its phases
    // add up to no more than it.
    let uptime = find("keepon_uptime_seconds", &[]).unwrap();
    let longest = find("keepon_loop_busy_longest_seconds", &[("phase", "all")]).unwrap();
    assert!(longest > 0.0 && longest < uptime, "longest iteration {longest} s, up {uptime} s");
    let phases: f64 = ["clients", "ptp", "requests", "station"]
        .iter()
        .map(|p| find("keepon_loop_busy_longest_seconds", &[("phase", p)]).unwrap())
        .sum();
    assert!(phases > 0.0 && phases <= longest * (1.0 + 1e-9), "phases {phases} s of {longest} s");
    assert!(find("keepon_loop_lead_seconds", &[]).is_some_and(|l| l > 0.0));
    assert!(find("keepon_loop_over_lead_total", &[]).is_some());

    // SAFETY: kill(2) on the daemon this test started.
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    daemon.success(Duration::from_secs(10));
    // No daemon: a clear error naming the socket.
    let out = Command::new(BIN).args(["status", "--socket"]).arg(&sock).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot connect to the daemon at"), "{err}");
}

/// Issue 29 point 4: the largest legal configuration — ring 4 096 with one class in 2 048 windows, 64 classes
/// with 255-byte names that are not ASCII — gives an `Info` every client reads, and `keepon status` shows it
/// (before, the reply was 32 843 bytes and every client failed with "message length … exceeds 16384").
#[test]
fn the_largest_legal_configuration_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sock = d.join("keepon.sock");
    let name = |k: usize| format!("{k:02}{}x", "é".repeat(126));
    let mut classes = format!("[[class]]\nname = \"{}\"\nslots = [{}]\n", name(0), {
        let s: Vec<String> = (0..2048).map(|i| (2 * i).to_string()).collect();
        s.join(", ")
    });
    for k in 1..63 {
        classes += &format!("[[class]]\nname = \"{}\"\nslots = [{}]\n", name(k), 2 * k - 1);
    }
    classes += &format!("[[class]]\nname = \"{}\"\n", name(63));
    let cfg = d.join("big.toml");
    let text = format!(
        "[link]\nrate = \"1Gbps\"\n[ring]\nslot_bytes = 1230\nslots = 4096\nbatch = 16\n[run]\npoll_period = \"50us\"\n\
         [daemon]\nsocket = \"{}\"\n{classes}",
        sock.display()
    );
    std::fs::write(&cfg, text).unwrap();
    let mut daemon = Proc::spawn(
        "daemon",
        d,
        Command::new(BIN).args(["daemon", "--backend", "sim", "--duration", "30s", "--config"]).arg(&cfg),
    );
    assert!(wait_until(Duration::from_secs(10), || sock.exists()), "daemon\n{}", daemon.output());
    let mut c = Client::connect(&sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(5))).unwrap();
    let info = c.info().expect("Info of the largest configuration");
    assert_eq!(info.classes.len(), 64);
    assert_eq!(info.classes[5], name(5));
    assert_eq!(info.windows[0].len(), 2048);
    assert!(c.stats().is_ok());
    for args in [&["status", "--socket"][..], &["status", "--json", "--socket"][..]] {
        let out = Command::new(BIN).args(args).arg(&sock).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&name(62)));
    }
    // SAFETY: kill(2) on the daemon this test started.
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    daemon.success(Duration::from_secs(10));
}
