//! A root daemon against a hostile local user (issue 29): floods of `Schedule` (both forms), `Stats` and `Info`
//! requests from uid 65534 while root sends real-time frames 50 ms ahead, and one non-root user of a real-time class trying to
//! take the whole connection reserve. Needs root (the hostile clients are threads that drop to another uid with
//! the raw `setresuid` system call, which changes only the calling thread's credentials, so the daemon sees them
//! through `SO_PEERCRED`); skips otherwise. The daemon is the `keepon` binary on the simulated NIC, its stderr in a
//! file the test reads.

#[allow(dead_code)] // shared with the namespace tests; this test uses the daemon configuration and `Proc`
mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keepon::api::{frame_message, split_messages, Client, Delivery, Request, Response};
use keepon_core::testframe::TestHeader;
use support::{as_uid, daemon_config, is_root, tai_now_ns, wait_until, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");
const CYCLE: i64 = 3_200_000;
const NOBODY: u32 = 65534;
/// A non-root user that an allow rule gives a real-time class.
const OPERATOR: u32 = 65533;

struct Daemon {
    dir: tempfile::TempDir,
    sock: PathBuf,
    proc: Proc,
    /// One daemon at a time: two daemons' `SCHED_FIFO` poll loops on this 2-core machine would starve root's
    /// real-time writer (`SCHED_FIFO` below them), which measures the test's scheduling, not the daemon (CI once
    /// saw root's frames handed over 50 ms late that way).
    _one: std::sync::MutexGuard<'static, ()>,
}

/// Held by each test's daemon ([`Daemon`]).
static ONE_DAEMON: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A `keepon daemon` on the simulated NIC: root may use every class, the operator tc-1, nobody best effort.
fn start(daemon_extra: &str) -> Daemon {
    let one = ONE_DAEMON.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    support::chmod(dir.path(), 0o755);
    let sock = dir.path().join("keepon.sock");
    let rules = format!(
        r#"mode = "0666"
{daemon_extra}
[[daemon.allow]]
uid = 0
classes = ["tc-0", "tc-1", "tc-2"]
[[daemon.allow]]
uid = {OPERATOR}
classes = ["tc-1", "tc-2"]
[[daemon.allow]]
uid = {NOBODY}
classes = ["tc-2"]"#
    );
    let cfg = dir.path().join("d.toml");
    std::fs::write(&cfg, daemon_config(&sock, "20us", "", &rules)).unwrap();
    let proc = Proc::spawn(
        "daemon",
        dir.path(),
        Command::new(BIN).args(["daemon", "--backend", "sim", "--duration", "120s", "--config"]).arg(&cfg),
    );
    let up = wait_until(Duration::from_secs(10), || Client::connect(&sock).and_then(|mut c| c.info()).is_ok());
    assert!(up, "daemon did not come up\n{}", proc.output());
    Daemon { dir, sock, proc, _one: one }
}

impl Daemon {
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.err")).unwrap_or_default()
    }
}

fn frame(seq: u64, txtime: i64) -> Vec<u8> {
    let mut b = vec![0u8; 100];
    TestHeader { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], flow: 0, seq, txtime }.emit(&mut b[..38]);
    b
}

/// Root sends `n` tc-0 frames (ring slot 0, one per cycle), each submitted about 50 ms before its txtime;
/// returns how many were sent.
fn root_round(sock: &Path, n: u64) -> (u64, Vec<String>) {
    let mut c = Client::connect(sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(20))).unwrap();
    let info = c.info().unwrap();
    let time = c.time().unwrap();
    // EPHC now ≈ ephc_now + (host TAI now − host_now): the simulated NIC runs on the host's clock.
    let ephc = move |host: i64| time.ephc_now + (host - time.host_now);
    let first = info.cycle_start + (100_000_000 / CYCLE + 1) * CYCLE;
    let mut sender = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        // A real-time application: SCHED_FIFO below the daemon's poll loop (the floods are the test's own
        // threads on the same two cores; this measures the daemon, not the test's scheduling).
        let p = libc::sched_param { sched_priority: 10 };
        // SAFETY: valid sched_param for the calling thread (pid 0).
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
        for i in 0..n {
            let t = first + i as i64 * CYCLE;
            while ephc(tai_now_ns()) < t - 50_000_000 {
                std::thread::sleep(Duration::from_micros(200));
            }
            sender
                .send(&Request::Submit { tag: i, class: "tc-0".into(), txtime: Some(t), frame: frame(i, t) })
                .unwrap();
        }
    });
    let (mut sent, mut other) = (0, Vec::new());
    for _ in 0..n {
        match c.recv().unwrap() {
            Some(Response::Outcome { delivery: Delivery::Sent { ring_slot: 0, .. }, .. }) => sent += 1,
            Some(r) => other.push(format!("{r:?}")),
            None => panic!("the daemon closed the connection"),
        }
    }
    writer.join().unwrap();
    (sent, other)
}

/// Replies by kind that a flooding client read.
#[derive(Default, Debug)]
struct Tally {
    bytes: AtomicU64,
    messages: AtomicU64,
    errors: AtomicU64,
}

/// `conns` connections of `uid`, each writing `req` as fast as the daemon reads and reading every reply, until
/// `stop`.
fn flood(
    sock: &Path,
    uid: u32,
    conns: usize,
    req: Request,
    stop: &Arc<AtomicBool>,
) -> (Vec<JoinHandle<()>>, Arc<Tally>) {
    let tally = Arc::new(Tally::default());
    let mut batch = Vec::new();
    for _ in 0..64 {
        frame_message(&req.emit(), &mut batch);
    }
    let threads = (0..conns)
        .map(|_| {
            let (sock, stop, tally, batch) = (sock.to_owned(), stop.clone(), tally.clone(), batch.clone());
            as_uid(uid, move || {
                let mut s = UnixStream::connect(&sock).unwrap();
                s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
                let mut r = s.try_clone().unwrap();
                r.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
                let stop2 = stop.clone();
                let reader = std::thread::spawn(move || {
                    let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 64 << 10]);
                    while !stop2.load(Ordering::Relaxed) {
                        match r.read(&mut chunk) {
                            Ok(0) => break,
                            Ok(n) => {
                                tally.bytes.fetch_add(n as u64, Ordering::Relaxed);
                                buf.extend_from_slice(&chunk[..n]);
                                for m in split_messages(&mut buf).unwrap() {
                                    tally.messages.fetch_add(1, Ordering::Relaxed);
                                    if matches!(Response::parse(&m), Ok(Response::Error(_))) {
                                        tally.errors.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                            Err(_) => {}
                        }
                    }
                });
                while !stop.load(Ordering::Relaxed) {
                    if s.write_all(&batch).is_err() && !stop.load(Ordering::Relaxed) {
                        // A write timeout (the daemon reads no more while replies pile up): try again.
                        continue;
                    }
                }
                reader.join().unwrap();
            })
        })
        .collect();
    (threads, tally)
}

/// Issue 29 point 1 and "what it must show": floods of `Schedule`, `Stats` and `Info` from an unprivileged uid
/// while root sends 300 frames 50 ms ahead: at least 299 of 300 sent in each case, and the daemon's stderr stays
/// a few lines (each kind of refusal said once per user per interval, with counts).
#[test]
fn unprivileged_request_floods_cost_root_nothing() {
    if !is_root() {
        println!("skipping: needs root (threads acting as another uid)");
        return;
    }
    let d = start("");
    let before = d.stderr().lines().count();
    println!("daemon start:\n{}", d.proc.output());
    let schedule = Request::Schedule { base_time: i64::MAX / 2, classes: vec![("tc-0".into(), vec![3])] };
    // The same change given as windows (request kind 7) takes the same path: refused within the user's rate.
    let windows = Request::ScheduleWindows { base_time: i64::MAX / 2, classes: vec![("tc-0".into(), vec![(0, 1000)])] };
    let floods =
        [("Schedule", schedule), ("ScheduleWindows", windows), ("Stats", Request::Stats), ("Info", Request::Info)];
    for (name, req) in floods {
        let stop = Arc::new(AtomicBool::new(false));
        let (threads, tally) = flood(&d.sock, NOBODY, 8, req, &stop);
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        let (sent, other) = root_round(&d.sock, 300);
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        println!(
            "{name} flood: root sent {sent}/300 in {:?}; the flood read {} replies ({} errors, {} MB); others: {:?}",
            started.elapsed(),
            tally.messages.load(Ordering::Relaxed),
            tally.errors.load(Ordering::Relaxed),
            tally.bytes.load(Ordering::Relaxed) >> 20,
            &other[..other.len().min(5)]
        );
        assert!(sent >= 299, "{name} flood: root sent only {sent} of 300: {other:?}\n{}", d.stderr());
        // The user's rate, and no more: the daemon stops reading its connections when it is used up (a burst of
        // one second's worth, then the rate, over the ~1.4 s of the flood).
        let (replies, secs) = (tally.messages.load(Ordering::Relaxed), started.elapsed().as_secs_f64() + 0.3);
        let rate = if name == "Stats" { 20.0 } else { 1000.0 };
        assert!(replies as f64 >= rate, "{name}: the flood did not get going ({replies} replies)");
        assert!(replies as f64 <= rate * (1.0 + secs) * 1.1, "{name}: {replies} replies in {secs:.1} s");
        assert_eq!(tally.errors.load(Ordering::Relaxed), 0, "{name}: throttled by not reading, not by errors");
    }
    let err = d.stderr();
    let lines = err.lines().count() - before;
    println!(
        "daemon stderr during the floods ({lines} lines):\n{}",
        err.lines().skip(before).collect::<Vec<_>>().join("\n")
    );
    assert!(lines <= 12, "stderr grew by {lines} lines:\n{err}");
    assert!(err.contains(&format!("uid {NOBODY}: schedule changes refused")), "{err}");
    drop(d);
}

/// Issue 29 point 7: one non-root user of a real-time class cannot take the whole connection reserve: with the
/// unreserved connections all open, it gets a quarter of the reserve, and root still connects.
#[test]
fn one_operator_cannot_take_roots_reserve() {
    if !is_root() {
        println!("skipping: needs root (threads acting as another uid)");
        return;
    }
    let d = start(
        "max_connections = 12\nreserved_connections = 8\nmax_connections_per_uid = 12\nmax_connections_unlisted = 8",
    );
    let hold = |uid: u32, n: usize| {
        let sock = d.sock.clone();
        as_uid(uid, move || {
            (0..n)
                .filter_map(|_| {
                    let mut c = Client::connect(&sock).ok()?;
                    c.set_timeout(Some(Duration::from_secs(5))).ok()?;
                    c.info().ok().map(|_| c)
                })
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap()
    };
    // Best effort takes the 4 unreserved connections; the operator then tries 12.
    let be = hold(NOBODY, 6);
    assert_eq!(be.len(), 4, "best effort gets the unreserved connections only");
    let op = hold(OPERATOR, 12);
    assert_eq!(op.len(), 2, "the operator gets a quarter of the reserve of 8");
    let mut root: Vec<Client> = Vec::new();
    for _ in 0..6 {
        let mut c = Client::connect(&d.sock).unwrap();
        c.set_timeout(Some(Duration::from_secs(5))).unwrap();
        c.info().expect("root connects while the operator holds what it may");
        root.push(c);
    }
    // All 12 taken now: the next is refused whoever asks.
    let mut c = Client::connect(&d.sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(c.info().is_err());
    drop((be, op, root));
}

/// Issue 29 point 2: a user who can write the metrics directory (0777 here) plants `PATH.tmp` → a victim file
/// while the daemon runs (as root in CI): the victim stays intact, the daemon says what it refused (once), and
/// the metrics come back when the plant is gone. A daemon configured to write its metrics over a device node
/// refuses to start, naming it.
#[test]
fn a_planted_metrics_symlink_never_reaches_its_victim() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    support::chmod(&open, 0o777);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let prom = open.join("keepon.prom");
    let d = start(&format!("metrics_file = \"{}\"", prom.display()));
    assert!(wait_until(Duration::from_secs(5), || prom.exists()), "{}", d.proc.output());
    std::os::unix::fs::symlink(&victim, open.join("keepon.prom.tmp")).unwrap();
    std::fs::remove_file(&prom).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!prom.exists());
    let err = d.stderr();
    assert!(err.contains("its directory is writable by other users"), "{err}");
    let said = err.matches("keepon.prom.tmp exists and is a symbolic link: refusing to write through it").count();
    assert_eq!(said, 1, "said once:\n{err}");
    std::fs::remove_file(open.join("keepon.prom.tmp")).unwrap();
    assert!(wait_until(Duration::from_secs(3), || prom.exists()), "{}", d.stderr());
    assert!(d.stderr().contains("written again"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    drop(d);

    // `metrics_file = "/dev/null"` (a plausible way to "turn it off") must never replace the host's /dev/null.
    let cfg = dir.path().join("null.toml");
    let sock = dir.path().join("null.sock");
    std::fs::write(&cfg, daemon_config(&sock, "20us", "", "metrics_file = \"/dev/null\"")).unwrap();
    let out = Command::new(BIN).args(["daemon", "--backend", "sim", "--duration", "5s", "--config"]).arg(&cfg).output();
    let out = out.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/dev/null: a character device is there: not replacing it"), "{err}");
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(&meta.file_type()));
}

/// Issue 29 point 6: a burst of 1 000 `Schedule` requests from the daemon's own user while 4 000 frames of a class
/// the changes never touch wait in the station. Changes are applied one per poll, so the loop never stalls: every
/// one of the 4 000 frames is sent in its slot, every change answered — with the changes beyond every waiting frame
/// (the station looks at none of them) and in the middle of them (each change re-decides the half due after it).
#[test]
fn a_burst_of_schedule_changes_does_not_stall_the_loop() {
    for cycles in [200, 65] {
        burst_of_schedule_changes(cycles);
    }
}

/// [`a_burst_of_schedule_changes_does_not_stall_the_loop`] with the changes `cycles` after the first frame's.
fn burst_of_schedule_changes(cycles: i64) {
    // One daemon at a time, as in [`start`] (CI once lost 11 frames to an underrun when this daemon's poll loop
    // shared the two cores with the flood test's).
    let _one = ONE_DAEMON.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keepon.sock");
    let cfg = dir.path().join("d.toml");
    // A lookahead of 24 slots (2.4 ms): this 2-core VM now and then loses a vCPU for about a millisecond with no
    // change in flight (one run in six lost frames to an underrun 600 ms after the burst at batch 8), which is the
    // host, not the daemon. A change's cost grows with the frames it looks at: the loop's share of it is what this
    // measures (1000 changes beyond every frame were answered in ~21 ms, in the middle of them in ~100 ms, debug
    // build; before the station looked only at frames due from the change on, ~200 ms and one run in four lost
    // frames at batch 8).
    let text = daemon_config(&sock, "20us", "max_advance = \"2s\"", "max_queued = 8192")
        .replace("slot_masks = \"0x01,0x20002,0\"", "slot_masks = \"0x01,0xfffffffe,0\"")
        .replace("batch = 8", "batch = 24");
    std::fs::write(&cfg, text).unwrap();
    let d = Proc::spawn(
        "daemon",
        dir.path(),
        Command::new(BIN).args(["daemon", "--backend", "sim", "--duration", "60s", "--config"]).arg(&cfg),
    );
    let up = wait_until(Duration::from_secs(10), || Client::connect(&sock).and_then(|mut c| c.info()).is_ok());
    assert!(up, "daemon did not come up\n{}", d.output());
    let mut c = Client::connect(&sock).unwrap();
    c.set_timeout(Some(Duration::from_secs(30))).unwrap();
    let info = c.info().unwrap();
    // tc-1 owns ring slots 1..=31: 4 000 frames over 130 cycles from 300 ms on.
    let first = info.cycle_start + (300_000_000 / CYCLE) * CYCLE;
    let mut tags = 0u64;
    let mut batch = Vec::new();
    for n in 0.. {
        for slot in 1..32 {
            if tags == 4000 {
                break;
            }
            let t = first + n * CYCLE + slot * 100_000;
            let req = Request::Submit { tag: tags, class: "tc-1".into(), txtime: Some(t), frame: frame(tags, t) };
            frame_message(&req.emit(), &mut batch);
            tags += 1;
        }
        if tags == 4000 {
            break;
        }
    }
    c.send_raw(&batch).unwrap();
    // 1 000 changes of tc-0 (its own slot 0 each time: nothing moves but every waiting frame is re-decided).
    let mut changes = Client::connect(&sock).unwrap();
    changes.set_timeout(Some(Duration::from_secs(30))).unwrap();
    let base = first + cycles * CYCLE;
    let mut burst = Vec::new();
    for _ in 0..1000 {
        let req = Request::Schedule { base_time: base, classes: vec![("tc-0".into(), vec![0])] };
        frame_message(&req.emit(), &mut burst);
    }
    let started = Instant::now();
    changes.send_raw(&burst).unwrap();
    let mut answered = 0;
    while answered < 1000 {
        match changes.recv().unwrap() {
            Some(Response::Scheduled(r)) => {
                r.unwrap_or_else(|e| panic!("change {answered} refused: {e}"));
                answered += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    let took = started.elapsed();
    let (mut sent, mut other) = (0, Vec::new());
    for _ in 0..4000 {
        match c.recv().unwrap() {
            Some(Response::Outcome { delivery: Delivery::Sent { .. }, .. }) => sent += 1,
            Some(r) => other.push(format!("{r:?}")),
            None => panic!("closed"),
        }
    }
    println!(
        "changes {cycles} cycles on: 1000 answered in {took:?}; tc-1 sent {sent}/4000; others {:?}",
        &other[..other.len().min(5)]
    );
    assert_eq!(sent, 4000, "{other:?}\n{}", d.output());
}
