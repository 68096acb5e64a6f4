//! `keepon status`, `keepon schedule apply` and `keepon talk` against fake daemons that a hostile or broken
//! server could be (point 8 of issue 29): one that never accepts and whose listen backlog is full, one that drips
//! its replies a byte a second, one that streams `Outcome` messages and never answers, and one whose metrics lack
//! the labels `keepon status` expects. Each command ends within a few seconds of its 5 s timeout with an error
//! that says what happened, in bounded memory, and never panics (no root needed).

#[allow(dead_code)] // shared with the namespace tests; this test uses `Proc` and the daemon configuration
mod support;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keepon::api::{
    frame_message, split_messages, Delivery, Info, PortRole, Request, Response, Scheduled, ServoCode, SyncState,
    TimeInfo,
};
use support::{daemon_config, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");

/// How long a command may take against a hostile daemon: its 5 s timeout, and slack for a loaded host.
const LIMIT: Duration = Duration::from_secs(12);

#[derive(Clone, Copy)]
enum Fake {
    /// Listens, never accepts; the test fills its backlog.
    NeverAccepts,
    /// Answers every request, a byte a second.
    Drips,
    /// Streams outcomes as fast as the client reads, answers nothing.
    StreamsOutcomes,
    /// Answers properly, but its metrics have samples without the labels `keepon status` looks for.
    OddMetrics,
}

fn info() -> Info {
    Info {
        rate_bps: 100_000_000,
        slot_bytes: 1230,
        ring: 32,
        batch: 8,
        now: 1_000_000_000,
        cycle_start: 1_000_000_000,
        base_time: 0,
        cycle: (3_200_000, 1),
        classes: vec!["tc-0".into(), "tc-1".into(), "tc-2".into()],
        windows: vec![vec![(0, 100_000)], vec![(100_000, 100_000), (1_700_000, 100_000)], vec![]],
        host: 0,
    }
}

fn answer(req: &Request, fake: Fake) -> Response {
    match req {
        Request::Info => Response::Info(info()),
        Request::Time => Response::Time(TimeInfo {
            sync: SyncState::FreeRunning,
            port: PortRole::None,
            servo: ServoCode::Unlocked,
            ephc_now: 1_000_000_000,
            host_now: 1_000_000_000,
            offset: None,
            freq_ppt: 0,
            path_delay: None,
            alignment: None,
        }),
        Request::Stats if matches!(fake, Fake::OddMetrics) => Response::Stats(
            "keepon_uptime_seconds 3\n\
             keepon_frames_rejected_total 5\n\
             keepon_frames_rejected_total{class=\"tc-0\"} 3\n\
             keepon_frames_rejected_total{reason=\"late\"} 2\n\
             keepon_frames_sent_total 7\n\
             keepon_class_queued{queue=\"x\"} 1\n\
             keepon_info 1\n\
             keepon_schedule_pending_window_ns{class=\"tc-0\"} 5\n\
             keepon_underruns_total NaN\n\
             keepon_connections -4\n"
                .into(),
        ),
        Request::Stats => Response::Stats("keepon_uptime_seconds 3\n".into()),
        Request::Subscribe { .. } => Response::Subscribed { release_times: false },
        Request::Schedule { .. } => Response::Scheduled(Ok(Scheduled { time: 0, rejected: 0 })),
        _ => Response::Error("not here".into()),
    }
}

/// One connection of a fake daemon.
fn serve(mut c: UnixStream, fake: Fake) {
    if let Fake::StreamsOutcomes = fake {
        let mut burst = Vec::new();
        for tag in 0..1000 {
            let o = Response::Outcome {
                tag,
                delivery: Delivery::Sent { slot: tag, time: 0, ring_slot: 0, off_schedule: false },
            };
            frame_message(&o.emit(), &mut burst);
        }
        while c.write_all(&burst).is_ok() {}
        return;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = c.read(&mut chunk) {
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Ok(msgs) = split_messages(&mut buf) else { return };
        for m in msgs {
            let Ok(req) = Request::parse(&m) else { return };
            let mut out = Vec::new();
            frame_message(&answer(&req, fake).emit(), &mut out);
            if let Fake::Drips = fake {
                for b in out {
                    if c.write_all(&[b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            } else if c.write_all(&out).is_err() {
                return;
            }
        }
    }
}

/// Start a fake daemon at `dir/fake.sock`. It lives until the test process ends.
fn start(dir: &Path, fake: Fake) -> PathBuf {
    let sock = dir.join("fake.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    if let Fake::NeverAccepts = fake {
        // Fill the backlog: connections the listener never takes, kept open, until a connect blocks (on its
        // own thread, for ever): then the count stops growing.
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (n, path) = (count.clone(), sock.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Ok(s) = UnixStream::connect(&path) {
                held.push(s);
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let mut last = usize::MAX;
        while count.load(std::sync::atomic::Ordering::Relaxed) != last {
            last = count.load(std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(last > 0, "no connection was queued");
        std::mem::forget(listener);
        return sock;
    }
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            std::thread::spawn(move || serve(c, fake));
        }
    });
    sock
}

/// Peak resident memory of a running process, KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// What a command did against a fake daemon: exit code, output, time taken, peak memory seen.
struct Ran {
    code: Option<i32>,
    out: String,
    took: Duration,
    peak_kib: u64,
}

fn run(dir: &Path, name: &str, args: &[&str], sock: &Path) -> Ran {
    let mut cmd = Command::new(BIN);
    cmd.args(args).arg("--socket").arg(sock);
    let mut p = Proc::spawn(name, dir, &mut cmd);
    let t = Instant::now();
    let mut peak_kib = 0;
    while p.running() && t.elapsed() < LIMIT {
        peak_kib = peak_kib.max(peak_rss_kib(p.pid()).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = p.wait(Duration::ZERO).unwrap_or_else(|e| panic!("{name}: {e}"));
    Ran { code: status.code(), out: p.output(), took: t.elapsed(), peak_kib }
}

/// The three commands, each against its own fake daemon of kind `fake`.
fn each_command(fake: Fake, what: &str) -> Vec<(&'static str, Ran)> {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = d.join("plan.toml");
    std::fs::write(&plan, daemon_config(&d.join("unused.sock"), "50us", "", "")).unwrap();
    let talk_cfg = d.join("talk.toml");
    let flow = "[[flow]]\nname = \"be\"\nclass = \"tc-2\"\nperiod = \"1ms\"\nframe_bytes = 100\ncount = 10\n";
    std::fs::write(&talk_cfg, daemon_config(&d.join("unused.sock"), "50us", "", "") + flow).unwrap();
    let (plan, talk_cfg) = (plan.display().to_string(), talk_cfg.display().to_string());
    let commands: [(&str, Vec<&str>); 3] = [
        ("status", vec!["status"]),
        ("apply", vec!["schedule", "apply", &plan]),
        ("talk", vec!["talk", "--config", &talk_cfg, "--grace", "1s"]),
    ];
    commands
        .into_iter()
        .map(|(name, args)| {
            let sub = d.join(name);
            std::fs::create_dir(&sub).unwrap();
            let sock = start(&sub, fake);
            let r = run(&sub, name, &args, &sock);
            println!("{what}: {name} exited {:?} after {:?}, peak RSS {} KiB\n{}", r.code, r.took, r.peak_kib, r.out);
            (name, r)
        })
        .collect()
}

/// Each command failed (exit 1, not a panic's 101, not killed) within the limit, saying `says`.
fn failed_saying(ran: &[(&str, Ran)], says: &[&str]) {
    for (name, r) in ran {
        assert!(r.took < LIMIT, "{name} still ran after {LIMIT:?}\n{}", r.out);
        assert_eq!(r.code, Some(1), "{name} should fail with a message\n{}", r.out);
        assert!(says.iter().any(|s| r.out.contains(s)), "{name} should say one of {says:?}\n{}", r.out);
        assert!(!r.out.contains("panicked"), "{name}\n{}", r.out);
    }
}

#[test]
fn commands_give_up_on_a_daemon_that_never_accepts() {
    let ran = each_command(Fake::NeverAccepts, "backlog full");
    failed_saying(&ran, &["cannot connect"]);
    failed_saying(&ran, &["not accepted within 5 s: the listener's backlog stayed full"]);
}

/// The timeout is one deadline per request and its whole reply: a byte a second does not keep it alive.
#[test]
fn commands_give_up_on_a_daemon_that_drips_its_replies() {
    let ran = each_command(Fake::Drips, "drip");
    failed_saying(&ran, &["no answer within 5 s"]);
    for (name, r) in &ran {
        assert!(r.took >= Duration::from_secs(4), "{name} gave up before its timeout: {:?}", r.took);
    }
}

/// Outcomes that answer nothing are held only up to a bound, and the deadline still holds.
#[test]
fn commands_give_up_on_a_daemon_that_streams_outcomes() {
    let ran = each_command(Fake::StreamsOutcomes, "outcome stream");
    failed_saying(&ran, &["other responses came before the reply", "no answer within 5 s"]);
    for (name, r) in &ran {
        assert!(r.peak_kib < 64 * 1024, "{name} grew to {} KiB", r.peak_kib);
    }
}

/// Samples without the labels `keepon status` reads are left out; everything else shows.
#[test]
fn status_shows_metrics_without_the_labels_it_expects() {
    let dir = tempfile::tempdir().unwrap();
    let sock = start(dir.path(), Fake::OddMetrics);
    for json in [false, true] {
        let args: &[&str] = if json { &["status", "--json"] } else { &["status"] };
        let r = run(dir.path(), if json { "status-json" } else { "status" }, args, &sock);
        println!("{}", r.out);
        assert_eq!(r.code, Some(0), "{}", r.out);
        assert!(!r.out.contains("panicked"), "{}", r.out);
        if json {
            assert!(r.out.contains("\"name\":\"tc-0\""), "{}", r.out);
        } else {
            assert!(r.out.contains("tc-0") && r.out.contains("up 3 s"), "{}", r.out);
        }
    }
}
