//! The byte clock through the CLI, as a user turns it on: every shipped example with `link.timing = "bytes"`,
//! on the simulated NIC. Every real-time frame must leave within half a byte of its txtime, inside its class's
//! windows (the example's slot masks, as time); best effort outside every window; and the wire must take fewer
//! descriptors than slot mode for the same frames.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keepon::api::{Client, Delivery, PortRole, Request, Response, SyncState};
use keepon::backend::{self, BackendOptions};
use keepon::config::Config;
use keepon::daemon::{serve, DaemonConfig};
use keepon::record::{self, Record};
use keepon::run::byte_config;
use keepon_core::bytes::windows::Rat;
use keepon_core::isolation::ClassId;
use keepon_core::outcome::Reason;
use keepon_core::testframe::TestHeader;

fn keepon_bin() -> &'static str {
    env!("CARGO_BIN_EXE_keepon")
}

/// The shipped examples, each with `timing = "bytes"` added to its `[link]` (and its slot-mode original).
fn examples_in_bytes(dir: &Path) -> Vec<(String, Option<PathBuf>, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        if p.extension().is_none_or(|x| x != "toml") || !text.contains("[ring]") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        // An example already on the byte clock (with time windows) has no slot-mode twin.
        if text.contains("timing = \"bytes\"") {
            v.push((name, None, p));
            continue;
        }
        let bytes = dir.join(&name);
        std::fs::write(&bytes, text.replacen("[link]\n", "[link]\ntiming = \"bytes\"\n", 1)).unwrap();
        v.push((name, Some(p), bytes));
    }
    v.sort();
    assert!(v.len() >= 3);
    v
}

/// Run `config` on the simulator; its stdout and records (and the wire as a pcap next to the records).
fn run(config: &Path, csv: &Path) -> (String, Vec<Record>) {
    let out = Command::new(keepon_bin())
        .args(["run", "--backend", "sim", "--config"])
        .arg(config)
        .arg("--records")
        .arg(csv)
        .arg("--pcap")
        .arg(csv.with_extension("pcap"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}: {stdout}{}", config.display(), String::from_utf8_lossy(&out.stderr));
    (stdout, record::read(csv).unwrap())
}

/// The number after `label` in `text`.
fn count_after(text: &str, label: &str) -> u64 {
    let at = text.find(label).unwrap_or_else(|| panic!("no `{label}` in {text}")) + label.len();
    text[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
}

#[test]
fn every_example_on_the_byte_clock_puts_frames_on_their_txtime_inside_their_windows() {
    let dir = tempfile::tempdir().unwrap();
    for (name, slots_cfg, bytes_cfg) in examples_in_bytes(dir.path()) {
        let cfg = Config::load(&bytes_cfg).unwrap();
        let windows = byte_config(&cfg).windows;
        let byte = cfg.geometry.rate().byte_time();
        let half = byte.ceil_mul(1).div_ceil(2) as i64;
        let (stdout, recs) = run(&bytes_cfg, &dir.path().join(format!("{name}.bytes.csv")));
        let underruns = count_after(&stdout, "underruns ");
        let span = |flow: &str| {
            let f = cfg.flows.iter().find(|f| f.name == flow).unwrap();
            let wire = u64::from(f.spec.frame_bytes.max(64)) + 20;
            Rat { num: i128::from(byte.num()) * i128::from(wire), den: i128::from(byte.den()) }
        };
        let (mut rt, mut rt_sent, mut be_sent) = (0, 0, 0);
        for r in &recs {
            let class = ClassId(cfg.ownership.class_named(&r.class).unwrap().0);
            match (r.sent(), r.txtime_ns, r.tx_ns) {
                (true, Some(t), Some(tx)) => {
                    rt += 1;
                    rt_sent += 1;
                    // Never before its txtime by more than half a byte; late only when the link underran (the
                    // frames posted before a gap leave after it, their records say by how much) or the relaxed
                    // policy moved it past a frame that held its time.
                    let relaxed = cfg.policy == keepon_core::insert::Policy::Relaxed;
                    let late_ok = if underruns > 0 || relaxed { i64::MAX } else { half };
                    let dev = tx - t;
                    assert!(
                        -half <= dev && dev <= late_ok,
                        "{name}: {} #{} left {dev} ns off its txtime",
                        r.flow,
                        r.seq
                    );
                    // Wire times are floored to ns: the frame starts within 1 ns after `tx`.
                    let (at, one) = (Rat::ns(i128::from(tx)), Rat::ns(1));
                    assert!(
                        underruns > 0 || windows.admitting(class, at + one, at + span(&r.flow)).is_some(),
                        "{name}: {} #{} outside its window",
                        r.flow,
                        r.seq
                    );
                }
                (true, None, Some(tx)) => {
                    be_sent += 1;
                    // Wire times are floored to ns: 1 ns of slack either side.
                    let (at, one) = (Rat::ns(i128::from(tx)), Rat::ns(1));
                    let inside = windows.first_reserved(at + one, at + span(&r.flow) - one);
                    // After an underrun the frames the NIC held leave as late as the link stood idle.
                    let ok = inside.is_none() || underruns > 0;
                    assert!(ok, "{name}: best effort #{} at {tx} in a window ({inside:?})", r.seq);
                }
                (false, Some(_), _) => {
                    rt += 1;
                    // Two flows of a relaxed example aim at the same time: the byte clock refuses the second
                    // (it has no relaxed policy); otherwise only an underrun may cost a frame.
                    let ok = matches!(r.reason.as_str(), "late" | "underrun" | "slot-taken");
                    assert!(ok, "{name}: {} #{} rejected {}", r.flow, r.seq, r.reason);
                }
                (sent, _, _) => assert!(!sent || r.tx_ns.is_some(), "{name}: #{} sent without a wire time", r.seq),
            }
        }
        assert!(rt_sent > 0 && rt_sent * 2 >= rt, "{name}: {rt_sent}/{rt} real-time frames sent");
        // The pcap holds every sent frame at its wire time, as long as it is (frame_bytes less the FCS): unpadded.
        let pcap = dir.path().join(format!("{name}.bytes.pcap"));
        let mut reader = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
        let mut on_wire = Vec::new();
        while let Some(p) = reader.next_packet() {
            let p = p.unwrap();
            on_wire.push((p.timestamp.as_nanos() as i64, p.data.len()));
        }
        on_wire.sort_unstable();
        let mut sent: Vec<(i64, usize)> = recs
            .iter()
            .filter(|r| r.sent())
            .map(|r| {
                let f = cfg.flows.iter().find(|f| f.name == r.flow).unwrap();
                (r.tx_ns.unwrap(), f.spec.frame_bytes as usize - 4)
            })
            .collect();
        sent.sort_unstable();
        // (A real-time frame may carry padding that closed a gap too short for a filler: at most 83 bytes.)
        assert_eq!(on_wire.len(), sent.len(), "{name}: the pcap holds every sent frame");
        for (w, s) in on_wire.iter().zip(&sent) {
            assert_eq!(w.0, s.0, "{name}: pcap time");
            assert!(w.1 >= s.1 && w.1 < s.1 + 84, "{name}: a {} B frame as {} B on the wire", s.1, w.1);
        }
        let _ = be_sent;
        // The same frames in slot mode take more descriptors.
        let Some(slots_cfg) = slots_cfg else { continue };
        let (slots_out, _) = run(&slots_cfg, &dir.path().join(format!("{name}.slots.csv")));
        let (d_bytes, d_slots) = (count_after(&stdout, "wire: "), count_after(&slots_out, "wire: "));
        assert!(d_bytes < d_slots, "{name}: {d_bytes} descriptors on the byte clock, {d_slots} in slots");
        eprintln!("{name}: {d_slots} descriptors in slots, {d_bytes} on the byte clock");
    }
}

/// The daemon tests here run one at a time: each daemon polls its simulated link under `SCHED_FIFO` where the
/// host allows it, and two such loops on a 2-core host starve the test's own client threads.
static ONE_DAEMON: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_daemon() -> std::sync::MutexGuard<'static, ()> {
    ONE_DAEMON.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `examples/windows.toml` as a daemon configuration on `sock`, with `extra` appended.
fn daemon_config(sock: &Path, extra: &str) -> String {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/windows.toml");
    std::fs::read_to_string(example).unwrap()
        + &format!("\n[run]\npoll_period = \"20us\"\n[daemon]\nsocket = \"{}\"\n{extra}", sock.display())
}

/// A daemon of [`daemon_config`] serving on a thread, and a client it answers (20 s timeouts).
#[allow(clippy::type_complexity)]
fn start(
    sock: &Path,
    extra: &str,
) -> (Client, Arc<AtomicBool>, std::thread::JoinHandle<Result<keepon::daemon::DaemonStats, String>>) {
    let cfg = Config::parse(&daemon_config(sock, extra)).unwrap();
    let dcfg = DaemonConfig::from_config(&cfg).unwrap();
    let (nic, _) = backend::open(&cfg, &BackendOptions::default(), true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || serve(&cfg, &dcfg, nic, &stop2, None));
    for _ in 0..500 {
        if let Ok(mut k) = Client::connect(sock) {
            if k.info().is_ok() {
                k.set_timeout(Some(Duration::from_secs(20))).unwrap();
                return (k, stop, server);
            }
        }
        assert!(!server.is_finished(), "daemon ended: {:?}", server.join());
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the daemon does not answer");
}

fn test_frame(len: usize, seq: u64, txtime: i64) -> Vec<u8> {
    let mut b = vec![0u8; len];
    TestHeader { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], flow: 0, seq, txtime }.emit(&mut b[..38]);
    b
}

/// The daemon on the byte clock (the simulated NIC held to the wall clock), as a client sees it: `Info` gives
/// the class windows in ns and the cycle; real-time frames at any offset inside their window leave within half a
/// byte of their txtime, unpadded; frames outside their windows, running past one, longer than any, or best
/// effort with a txtime, are refused with the reason; a live schedule change is refused with why; the daemon
/// stops with every frame answered.
#[test]
fn the_daemon_serves_the_byte_clock() {
    let _one = one_daemon();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("k.sock");
    let (mut c, stop, server) = start(&sock, "");
    let info = c.info().unwrap();
    assert_eq!(info.classes, ["ctrl", "video", "be"]);
    assert_eq!(info.windows, [vec![(0, 5_000), (125_000, 5_000)], vec![(40_000, 60_000)], vec![]]);
    assert_eq!((info.cycle, info.base_time), ((250_000, 1), 0));
    assert_eq!(info.cycle_start % 250_000, 0, "a cycle start: {}", info.cycle_start);
    assert!(info.cycle_start > info.now, "{info:?}");

    // Cycles far enough ahead that a loaded host still hands them in before the wire is posted.
    let cycle = 250_000i64;
    let base = info.cycle_start + 400 * cycle;
    // (class, txtime, length): on time anywhere inside a window, at any ns.
    let mut good = Vec::new();
    for i in 0..20i64 {
        let at = base + i * cycle;
        good.push(("ctrl", at + 1_237 + 3 * i, 200usize));
        good.push(("ctrl", at + 125_000 + 3_000, 100));
        good.push(("video", at + 40_100 + 7_777 * (i % 7), 1514));
    }
    let bad = [
        ("ctrl", base + 10_000, 200, Reason::NotOwned), // outside every ctrl window
        ("ctrl", base + 4_000, 200, Reason::NotOwned),  // runs past the window's end
        ("ctrl", base + 1_237, 200, Reason::SlotTaken), // the time a frame already holds
        ("ctrl", base + cycle, 1_000, Reason::Oversize), // longer than any ctrl window (8 µs > 5 µs)
    ];
    let mut tag = 0u64;
    let mut want = std::collections::HashMap::new();
    for &(class, t, len) in &good {
        c.send(&Request::Submit { tag, class: class.into(), txtime: Some(t), frame: test_frame(len, tag, t) }).unwrap();
        want.insert(tag, Ok(t));
        tag += 1;
    }
    for &(class, t, len, why) in &bad {
        c.send(&Request::Submit { tag, class: class.into(), txtime: Some(t), frame: test_frame(len, tag, t) }).unwrap();
        want.insert(tag, Err(why));
        tag += 1;
    }
    c.send(&Request::Submit { tag, class: "be".into(), txtime: Some(base), frame: test_frame(300, tag, 0) }).unwrap();
    want.insert(tag, Err(Reason::UnexpectedTxtime));
    tag += 1;
    for _ in 0..10 {
        c.send(&Request::Submit { tag, class: "be".into(), txtime: None, frame: test_frame(1500, tag, 0) }).unwrap();
        want.insert(tag, Ok(i64::MIN)); // best effort: sent, outside every window (below)
        tag += 1;
    }
    let be_from = tag - 10;
    // A live schedule change: refused, saying why.
    let change = c.change_schedule(base, vec![("ctrl".into(), vec![0])]).unwrap();
    assert!(change.as_ref().is_err_and(|e| e.contains("byte clock")), "{change:?}");

    let mut got = std::collections::HashMap::new();
    while got.len() < want.len() {
        let Some(Response::Outcome { tag, delivery }) = c.recv().unwrap() else { panic!("the daemon closed") };
        assert!(got.insert(tag, delivery).is_none(), "two outcomes for #{tag}");
    }
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap().unwrap();
    assert_eq!(stats.frames, want.len() as u64);
    // The simulated link follows the wall clock: a stalled host underruns it, and the daemon says so. Then a
    // frame due in the time the wire lost is `underrun`, and one posted before the gap leaves after it.
    let stalled = stats.underruns > 0;
    let half = 4; // half a byte at 1 Gb/s
    for (&tag, &delivery) in &got {
        match (want[&tag], delivery) {
            (_, Delivery::Sent { time, .. }) if tag >= be_from => {
                // Best effort: in no window (unless an underrun moved the frames the NIC held).
                let off = (time - info.base_time).rem_euclid(cycle);
                let end = off + (1500 + 20) * 8;
                for w in info.windows.iter().flatten() {
                    let (o, e) = (w.0 as i64, (w.0 + w.1) as i64);
                    assert!(stalled || end <= o || off >= e, "best effort #{tag} at {off} in window {w:?}");
                }
            }
            (Ok(t), Delivery::Sent { time, off_schedule, .. }) => {
                assert!(stalled || ((time - t).abs() <= half && !off_schedule), "#{tag}: sent at {time}, txtime {t}");
                assert!(time - t >= -half, "#{tag}: sent at {time}, before its txtime {t}");
            }
            // (Which of the two a frame gets depends on where the stall fell: it is tested exactly in the core.)
            (Ok(_), Delivery::Rejected(Reason::Underrun | Reason::Late)) if stalled => {}
            // (Time is checked first: a stall long enough to pass a bad frame's time makes it late.)
            (Err(w), Delivery::Rejected(r)) => {
                assert!(
                    r == w || stalled && matches!(r, Reason::Late | Reason::Underrun),
                    "#{tag}: {r:?}, wanted {w:?}"
                )
            }
            (w, d) => panic!("#{tag}: wanted {w:?}, got {d:?} ({} underruns)", stats.underruns),
        }
    }
}

/// `[ptp]` on the byte clock: the daemon (alone on its link: the BMCA makes it master) becomes synchronised and
/// says so in `Time`; its PTP messages go in the `ctrl` class's windows; scheduled frames then leave within half
/// a byte of their txtime.
#[test]
fn a_byte_clock_daemon_runs_ptp_as_master() {
    let _one = one_daemon();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("k.sock");
    let ptp = "[ptp]\nclass = \"ctrl\"\nrole = \"master\"\nlog_announce_interval = -3\nlog_sync_interval = -3\n";
    let cfg = Config::parse(&daemon_config(&sock, ptp)).unwrap();
    let dcfg = DaemonConfig::from_config(&cfg).unwrap();
    let (nic, _) = backend::open(&cfg, &BackendOptions::default(), true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || serve(&cfg, &dcfg, nic, &stop2, None));
    let up = std::time::Instant::now();
    let mut c = loop {
        if let Ok(c) = Client::connect(&sock) {
            break c;
        }
        assert!(!server.is_finished(), "daemon ended: {:?}", server.join());
        assert!(up.elapsed() < Duration::from_secs(5), "daemon not up");
        std::thread::sleep(Duration::from_millis(10));
    };
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = loop {
        let t = c.time().unwrap();
        if t.sync == SyncState::Synchronised {
            break t;
        }
        assert!(up.elapsed() < Duration::from_secs(10), "never became master: {t:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(t.port, PortRole::Master);
    // Scheduled frames: on the byte nearest their txtime; after an underrun (a stalled host: the simulated link
    // follows the wall clock) a frame posted before the gap leaves after it, never before its txtime.
    let mut devs = Vec::new();
    for tag in 0..60u64 {
        if devs.len() == 10 {
            break;
        }
        let info = c.info().unwrap();
        let txtime = info.cycle_start + 40 * 250_000 + 40_100 + 333 * tag as i64;
        c.send(&Request::Submit { tag, class: "video".into(), txtime: Some(txtime), frame: test_frame(500, tag, 0) })
            .unwrap();
        let Some(Response::Outcome { delivery, .. }) = c.recv().unwrap() else { panic!("no outcome") };
        match delivery {
            Delivery::Sent { time, .. } => devs.push(time - txtime),
            Delivery::Rejected(r @ (Reason::Underrun | Reason::Late)) => println!("try {tag}: {r:?} (a host stall)"),
            other => panic!("#{tag}: {other:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap().unwrap();
    println!("deviations (ns): {devs:?}; {} underruns", stats.underruns);
    assert!(devs.len() >= 10, "{} frames sent in 60 tries", devs.len());
    assert!(devs.iter().all(|&d| d >= -4), "a frame left before its txtime: {devs:?}");
    assert!(stats.underruns > 0 || devs.iter().all(|&d| d <= 4), "{devs:?}");
}

/// `keepon talk` through `keepon daemon` on the byte clock, both from the CLI with `examples/windows.toml`: every
/// real-time frame leaves within half a byte of its txtime (or, on a stalled host, says why not); best effort is
/// sent; the records hold every frame.
#[test]
fn talk_through_a_byte_clock_daemon() {
    let _one = one_daemon();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("k.sock");
    let cfg = dir.path().join("windows.toml");
    // 1 ms of wire posted ahead and frames handed in 10 ms ahead: room for a loaded host (the example's 200 µs
    // and 300 µs are for a quiet one).
    // (`run.start`: the flows begin 20 ms after talk starts, so that the first is handed in on time too.)
    let text = daemon_config(&sock, "")
        .replace("slots = 32", "slots = 128")
        .replace("batch = 20 ", "batch = 100 ")
        .replace("lead = \"300us\"", "lead = \"10ms\"")
        .replace("[run]\n", "[run]\nstart = \"20ms\"\n")
        // A tenth of the example's frame rate (2 200 frames/s): the debug build of `keepon talk` keeps up.
        .replace("period = \"125us\"", "period = \"1250us\"")
        .replace("period = \"250us\"", "period = \"2500us\"")
        .replace("period = \"100us\"", "period = \"1ms\"")
        .replace("count = 4000", "count = 1000")
        .replace("count = 5000", "count = 1000")
        .replace("count = 2000", "count = 500");
    std::fs::write(&cfg, text).unwrap();
    let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
    let mut daemon = Command::new(keepon_bin())
        .args(["daemon", "--backend", "sim", "--duration", "60s", "--config"])
        .arg(&cfg)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let up = (0..1000).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        Client::connect(&sock).and_then(|mut c| c.info()).is_ok()
    });
    let records = dir.path().join("talk.csv");
    let talk = up.then(|| {
        Command::new(keepon_bin())
            .args(["talk", "--socket"])
            .arg(&sock)
            .arg("--config")
            .arg(&cfg)
            .arg("--records")
            .arg(&records)
            .output()
            .unwrap()
    });
    // SAFETY: kill(2) on the daemon this test started.
    unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    daemon.wait().unwrap();
    let daemon_out = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap();
    let talk = talk.unwrap_or_else(|| panic!("the daemon did not come up: {daemon_out}"));
    let text = String::from_utf8_lossy(&talk.stdout);
    assert!(talk.status.success(), "{text}{}\n{daemon_out}", String::from_utf8_lossy(&talk.stderr));
    // "…, N underruns, …" in the daemon's summary.
    let underruns: u64 = daemon_out
        .rsplit_once(" underruns")
        .and_then(|(head, _)| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no underrun count in the daemon's summary: {daemon_out}"));
    let recs = record::read(&records).unwrap();
    assert_eq!(recs.len(), 1000 + 500 + 1000, "a record for every frame");
    // Frames talk itself handed in more than half their lead late (a starved talk on a loaded host).
    let behind = text
        .split(" submitted behind schedule")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no behind-schedule count in talk's summary: {text}"));
    let (mut rt, mut be, mut late) = (0, 0, 0);
    for r in &recs {
        match (r.sent(), r.txtime_ns, r.tx_ns) {
            (true, Some(t), Some(tx)) => {
                rt += 1;
                assert!(underruns > 0 || (tx - t).abs() <= 4, "{} #{}: {} ns off its txtime", r.flow, r.seq, tx - t);
            }
            (true, None, Some(_)) => be += 1,
            (false, _, _) => {
                assert!(
                    matches!(r.reason.as_str(), "late" | "underrun"),
                    "{} #{} rejected {}",
                    r.flow,
                    r.seq,
                    r.reason
                );
                late += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    // Late only where the link underran or talk was behind (then no more than it says).
    assert!(underruns > 0 || late <= behind, "{late} frames late, {behind} handed in behind schedule\n{text}");
    assert!(rt > 0 && be > 0, "{rt} real-time and {be} best-effort frames sent\n{text}");
    eprintln!("{rt} real-time and {be} best-effort frames sent, {underruns} underruns\n{text}");
}

/// A live change of the byte clock's windows through the daemon, from a byte-clock configuration with
/// `keepon schedule apply` (IEEE 802.1Qbv admin → oper at the first cycle start at or after its base time):
/// frames before the switch keep the old windows, after it the new ones; `keepon status` shows it pending; a
/// best-effort flood beside it stays out of every window of either side; `Info` reports the new windows once in
/// force; nothing is lost.
#[test]
fn a_byte_clock_daemon_changes_its_windows_live() {
    let _one = one_daemon();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("k.sock");
    let (mut c, stop, server) = start(&sock, "max_in_flight = 1024");
    let info = c.info().unwrap();
    let cycle = 250_000i64;
    // Cycles n0 … n0 + 59, the switch at n0 + 30: well ahead, so that a loaded host hands everything in in time.
    let n0 = (info.now + 200_000_000 - info.base_time).div_euclid(cycle) + 1;
    let at = |n: i64| info.base_time + n * cycle;
    let switch = at(n0 + 30);
    let mut want = std::collections::HashMap::new();
    // ctrl at 1.237 µs into each cycle (its old first window), handed in before the change is known.
    for i in 0..60i64 {
        let t = at(n0 + i) + 1_237;
        let tag = i as u64;
        c.send(&Request::Submit { tag, class: "ctrl".into(), txtime: Some(t), frame: test_frame(200, tag, t) })
            .unwrap();
        want.insert(tag, if i < 30 { Ok(t) } else { Err(Reason::ScheduleChange) });
    }
    // The change: ctrl's windows move to 20 µs and 145 µs, in a byte-clock configuration with its base time.
    let plan = dir.path().join("new.toml");
    let text = daemon_config(&dir.path().join("unused.sock"), "")
        .replace(r#"windows = [["0us", "5us"], ["125us", "5us"]]"#, r#"windows = [["20us", "5us"], ["145us", "5us"]]"#)
        .replace("base_time = 0\n", &format!("base_time = {}\n", switch - 3_000));
    assert!(text.contains("20us"), "examples/windows.toml changed");
    std::fs::write(&plan, text).unwrap();
    let out =
        Command::new(keepon_bin()).args(["schedule", "apply", "--socket"]).arg(&sock).arg(&plan).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "keepon schedule apply: {said}");
    assert!(said.contains(&format!("takes effect at {switch} ns")), "{said}");
    let status = Command::new(keepon_bin()).args(["status", "--json", "--socket"]).arg(&sock).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["schedule"]["pending_ns"].as_i64(), Some(switch), "{status}");
    assert_eq!(status["schedule"]["admin_windows"]["ctrl"], serde_json::json!([[20_000, 5_000], [145_000, 5_000]]));
    // A slot list is not what the byte clock takes: refused, saying what it does take.
    let slots = c.change_schedule(switch, vec![("ctrl".into(), vec![0])]).unwrap();
    assert!(slots.as_ref().is_err_and(|e| e.contains("windows")), "{slots:?}");
    // ctrl at 21 µs (its new first window), handed in after the change is known; best effort beside it all.
    for i in 0..60i64 {
        let t = at(n0 + i) + 21_000;
        let tag = 100 + i as u64;
        c.send(&Request::Submit { tag, class: "ctrl".into(), txtime: Some(t), frame: test_frame(200, tag, t) })
            .unwrap();
        want.insert(tag, if i < 30 { Err(Reason::NotOwned) } else { Ok(t) });
    }
    for i in 0..200u64 {
        let tag = 1000 + i;
        c.send(&Request::Submit { tag, class: "be".into(), txtime: None, frame: test_frame(1500, tag, 0) }).unwrap();
        want.insert(tag, Ok(i64::MIN));
    }
    let mut got = std::collections::HashMap::new();
    while got.len() < want.len() {
        let Some(Response::Outcome { tag, delivery }) = c.recv().unwrap() else { panic!("the daemon closed") };
        assert!(got.insert(tag, delivery).is_none(), "two outcomes for #{tag}");
    }
    let after = c.info().unwrap();
    assert_eq!(after.windows[0], vec![(20_000, 5_000), (145_000, 5_000)], "ctrl's windows once in force");
    // `Time`'s alignment on the byte clock: the sent real-time frames' |wire start − txtime|.
    let align = c.time().unwrap().alignment;
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap().unwrap();
    let stalled = stats.underruns > 0;
    let (mut on_time, mut be_sent, mut shifted) = (0, 0, 0);
    for (&tag, &delivery) in &got {
        match (want[&tag], delivery) {
            (_, Delivery::Sent { time, .. }) if tag >= 1000 => {
                // Best effort: in no ctrl or video window of the side of the switch it is on. After an underrun
                // the frames the NIC already held leave as late as the link stood idle (no descriptor can be
                // taken back), and say so in their time: those may reach into a window.
                let off = (time - info.base_time).rem_euclid(cycle);
                let end = off + (1500 + 20) * 8;
                let windows = if time < switch { &info.windows } else { &after.windows };
                for w in windows.iter().flatten() {
                    let (o, e) = (w.0 as i64, (w.0 + w.1) as i64);
                    if end > o && off < e {
                        assert!(stalled, "best effort #{tag} at {off} in window {w:?} (no underrun)");
                        shifted += 1;
                    }
                }
                be_sent += 1;
            }
            (Ok(t), Delivery::Sent { time, .. }) => {
                assert!(stalled || (time - t).abs() <= 4, "#{tag}: sent at {time}, txtime {t}");
                on_time += 1;
            }
            (Ok(_), Delivery::Rejected(Reason::Underrun | Reason::Late)) if stalled => {}
            (Err(w), Delivery::Rejected(r)) => assert_eq!(r, w, "#{tag}"),
            (w, d) => panic!("#{tag}: wanted {w:?}, got {d:?} ({} underruns)", stats.underruns),
        }
    }
    assert!(on_time >= 45, "{on_time} of 60 real-time frames sent on their byte ({} underruns)", stats.underruns);
    let (p50, p99, max) = align.expect("alignment of the frames sent");
    assert!(p50 <= p99 && p99 <= max && (stalled || max <= 4), "alignment {align:?} ({} underruns)", stats.underruns);
    assert!(be_sent > 0, "no best effort sent");
    eprintln!("{on_time} real-time frames on their byte, {be_sent} best effort sent ({shifted} moved into a window by {} underruns)", stats.underruns);
}
