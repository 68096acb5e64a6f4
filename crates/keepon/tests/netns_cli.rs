//! keepon end to end through real kernel components, driven through the `keepon` binary:
//!
//! ```text
//!   kct-PID (talker)                kcb-PID (bridge, STP off)              kcl-PID (listener)
//!   keepon daemon ── kp0 ── veth ── bt ─┤ br0 ├─ bl ── veth ── kp1 ── keepon listen
//!        ▲ UNIX socket (shared filesystem)
//!        ├── keepon talk (root: real-time classes + best effort)
//!        ├── keepon talk as uid 65534 (best effort only: its real-time frames are `forbidden`)
//!        └── keepon::api::Client from this test: bad requests, a client that vanishes, a final check
//! ```
//!
//! The daemon runs AF_PACKET `sendmmsg`, host-paced at 100 Mb/s with 1230 B slots (δ = 100 µs, a 32-slot
//! ring = a 3.2 ms cycle), reserved-address fillers that the bridge must never forward. Checked: every frame
//! `talk` reports sent arrives at the listener, in slot order, none missing per flow; no filler crosses the
//! bridge; every sent frame's ring slot is its class's (best effort: unowned) and a real-time frame's slot
//! time is within half a slot of its txtime; rejections carry the right reason and never reach the wire; the daemon keeps serving after bad clients and exits cleanly at its
//! duration; `keepon report` reads the listener's records.
//!
//! Needs root (skips otherwise). Everything is bounded in time (about 10 s); the namespaces are deleted and
//! the processes killed by guards even when an assertion fails. veth has no line clock, so timing here is
//! host-paced (µs): this proves function, not timing.
#![cfg(target_os = "linux")]

#[allow(dead_code)] // shared by the namespace and daemon tests; this one uses part of it
mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keepon::api::{frame_message, Client, Delivery, Request, Response};
use keepon::record::{self, Record};
use keepon_core::outcome::Reason;
use keepon_core::testframe::TestHeader;

use support::{bridged, can_chrt, chmod, in_netns, is_root, listening, wait_until, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");
/// Slot period (100 Mb/s, 1230 B slots) and ring cycle (32 slots), ns.
const SLOT: i64 = 100_000;
const CYCLE: i64 = 32 * SLOT;
const DAEMON_DURATION: Duration = Duration::from_secs(6);
const LISTEN_DURATION: Duration = Duration::from_secs(9);
const DST: [u8; 6] = [0x02, 0x6b, 0x70, 0x00, 0x00, 0x02];
const SRC: [u8; 6] = [0x02, 0x6b, 0x70, 0x00, 0x00, 0x01];

/// A flow of the shared flow list; its index is its position (the flow number in each test frame).
struct FlowDef {
    name: &'static str,
    class: &'static str,
    offset_us: u32,
    period_us: u32,
    frame_bytes: u32,
    lead_us: u32,
    /// Instances `keepon talk` sends as root, and as nobody.
    root: u64,
    nobody: u64,
}

/// tc-0 owns ring slots 0 and 16, tc-1 owns 1 and 17, tc-2 is best effort (the other 28).
const MASKS: &str = "0x10001,0x20002,0";
const OWNED: [&[u32]; 2] = [&[0, 16], &[1, 17]];

#[rustfmt::skip]
const FLOWS: [FlowDef; 9] = [
    // Ring slot 0 of every cycle.
    FlowDef { name: "ctrl", class: "tc-0", offset_us: 0, period_us: 3_200, frame_bytes: 100, lead_us: 2_000, root: 200, nobody: 0 },
    // Ring slots 1 and 17.
    FlowDef { name: "fast", class: "tc-1", offset_us: 100, period_us: 1_600, frame_bytes: 300, lead_us: 2_000, root: 400, nobody: 0 },
    // Lead 300 µs < batch·δ = 800 µs: its slot is already posted when the frame arrives → late.
    FlowDef { name: "late", class: "tc-0", offset_us: 1_600, period_us: 3_200, frame_bytes: 100, lead_us: 300, root: 50, nobody: 0 },
    // Ring slot 5 is nobody's (best effort) → not-owned for tc-0. Submitted 50 ms ahead: only a host stall that
    // long could make the daemon see one after its slot was posted (then it is `late`, as ETF checks time first).
    FlowDef { name: "stray", class: "tc-0", offset_us: 500, period_us: 3_200, frame_bytes: 100, lead_us: 50_000, root: 20, nobody: 0 },
    FlowDef { name: "bulk", class: "tc-2", offset_us: 0, period_us: 400, frame_bytes: 1_000, lead_us: 0, root: 1_500, nobody: 0 },
    // uid 65534 may use only best effort.
    FlowDef { name: "nobody-rt", class: "tc-0", offset_us: 1_600, period_us: 3_200, frame_bytes: 100, lead_us: 2_000, root: 0, nobody: 100 },
    FlowDef { name: "nobody-be", class: "tc-2", offset_us: 0, period_us: 1_000, frame_bytes: 200, lead_us: 0, root: 0, nobody: 300 },
    // Frames this test submits itself with keepon::api::Client.
    FlowDef { name: "client", class: "tc-0", offset_us: 0, period_us: 3_200, frame_bytes: 100, lead_us: 2_000, root: 0, nobody: 0 },
    FlowDef { name: "vanish", class: "tc-0", offset_us: 0, period_us: 3_200, frame_bytes: 100, lead_us: 2_000, root: 0, nobody: 0 },
];
const CLIENT: u16 = 7;
const VANISH: u16 = 8;

/// A runtime configuration with the shared flow list, `count` instances of each.
fn config(socket: &Path, count: impl Fn(&FlowDef) -> u64) -> String {
    let mut t = format!(
        r#"# keepon netns_cli test
[link]
rate = "100Mbps"
[ring]
slot_bytes = 1230      # δ = 100 µs
slots = 32             # cycle 3.2 ms
batch = 8              # guard 800 µs
slot_masks = "{MASKS}"
[run]
start = "150ms"
poll_period = "100us"
[daemon]
socket = "{}"
[[daemon.allow]]
uid = 0
classes = ["tc-0", "tc-1", "tc-2"]
[[daemon.allow]]
uid = 65534
classes = ["tc-2"]
"#,
        socket.display()
    );
    for f in &FLOWS {
        t += &format!(
            "[[flow]]\nname = \"{}\"\nclass = \"{}\"\noffset = \"{}us\"\nperiod = \"{}us\"\nframe_bytes = {}\n\
             count = {}\nlead = \"{}us\"\n",
            f.name,
            f.class,
            f.offset_us,
            f.period_us,
            f.frame_bytes,
            count(f),
            f.lead_us
        );
    }
    t
}

fn test_frame(flow: u16, seq: u64, txtime: i64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    TestHeader { dst: DST, src: SRC, flow, seq, txtime }.emit(&mut b[..TestHeader::buffer_len()]);
    b
}

fn outcome(c: &mut Client, what: &str) -> (u64, Delivery) {
    match c.recv() {
        Ok(Some(Response::Outcome { tag, delivery })) => (tag, delivery),
        other => panic!("{what}: expected an outcome, got {other:?}"),
    }
}

/// `key` from a line like "… 12 malformed requests, …": the number just before it.
fn number_before(text: &str, key: &str) -> Option<u64> {
    let at = text.find(key)?;
    text[..at].split_whitespace().last()?.parse().ok()
}

#[test]
fn daemon_talk_listen_through_a_bridge() {
    if !is_root() {
        println!("skipping: needs root (network namespaces)");
        return;
    }
    let t_start = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    // KEEPON_TEST_KEEP=1 keeps the configs, records and process output for a look afterwards.
    let _dir = if std::env::var_os("KEEPON_TEST_KEEP").is_some() {
        println!("keeping {}", d.display());
        drop(dir.into_path());
        None
    } else {
        Some(dir)
    };
    // uid 65534 must reach the configs and the socket, and write its records.
    chmod(&d, 0o755);
    let nobody_dir = d.join("nobody");
    std::fs::create_dir(&nobody_dir).unwrap();
    chmod(&nobody_dir, 0o777);
    let sock = d.join("keepon.sock");
    let (dcfg, tcfg, ncfg) = (d.join("D.toml"), d.join("T.toml"), d.join("N.toml"));
    std::fs::write(&dcfg, config(&sock, |_| 0)).unwrap();
    std::fs::write(&tcfg, config(&sock, |f| f.root)).unwrap();
    std::fs::write(&ncfg, config(&sock, |f| f.nobody)).unwrap();
    let (lcsv, tcsv, ncsv) = (d.join("L.csv"), d.join("T.csv"), nobody_dir.join("N.csv"));

    let topo = bridged("kc");
    // The daemon is started plainly, as root: it asks for SCHED_FIFO and locked memory itself ([realtime]
    // defaults) and says what it got.
    let realtime = can_chrt();
    println!("namespaces {} / {}; the host grants SCHED_FIFO: {realtime}", topo.talker, topo.listener);

    // Listener first; it is ready once it says it receives.
    let mut listener = Proc::spawn(
        "listen",
        &d,
        in_netns(&topo.listener, false)
            .args(["listen", "--iface", "kp1", "--records"])
            .arg(&lcsv)
            .arg("--config")
            .arg(&dcfg)
            .args(["--duration", &format!("{}ms", LISTEN_DURATION.as_millis())]),
    );
    assert!(listening(&listener), "listener did not open its socket: {}", listener.output());

    let mut daemon = Proc::spawn(
        "daemon",
        &d,
        in_netns(&topo.talker, false)
            .args(["daemon", "--config"])
            .arg(&dcfg)
            .args(["--backend", "afpacket", "--iface", "kp0", "--pacing", "host", "--filler", "reserved-address"])
            .args(["--duration", &format!("{}ms", DAEMON_DURATION.as_millis())]),
    );
    assert!(
        wait_until(Duration::from_secs(5), || sock.exists()),
        "daemon did not create its socket\n{}",
        daemon.output()
    );
    chmod(&sock, 0o666);

    // --- Bad and vanishing clients, before the talkers. ---
    let mut a = Client::connect(&sock).unwrap();
    a.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let info = a.info().unwrap();
    assert_eq!((info.rate_bps, info.slot_bytes, info.ring, info.batch), (100_000_000, 1230, 32, 8));
    assert_eq!(info.classes, vec!["tc-0", "tc-1", "tc-2"]);
    // Garbage with valid framing: an error reply, and the connection stays usable.
    let mut junk = Vec::new();
    frame_message(&[7, 7, 7], &mut junk);
    a.send_raw(&junk).unwrap();
    match a.recv().unwrap() {
        Some(Response::Error(e)) => assert!(e.contains("version"), "{e}"),
        other => panic!("garbage: expected an error reply, got {other:?}"),
    }
    let info = a.info().expect("the connection is still usable after garbage");
    let slot16 = |cycles: i64| info.cycle_start + cycles * CYCLE + 16 * SLOT;
    a.send(&Request::Submit { tag: 1, class: "tc-0".into(), txtime: Some(slot16(20)), frame: vec![0; 2000] }).unwrap();
    a.send(&Request::Submit {
        tag: 2,
        class: "tc-9".into(),
        txtime: Some(slot16(20)),
        frame: test_frame(CLIENT, 999, 0, 96),
    })
    .unwrap();
    let mut got: HashMap<u64, Delivery> = HashMap::new();
    for _ in 0..2 {
        let (tag, dl) = outcome(&mut a, "oversize / unknown class");
        got.insert(tag, dl);
    }
    assert_eq!(got[&1], Delivery::Rejected(Reason::Oversize));
    assert_eq!(got[&2], Delivery::Rejected(Reason::UnknownClass));
    // A broken length prefix: an error reply, then the daemon closes the connection.
    let mut b = Client::connect(&sock).unwrap();
    b.set_timeout(Some(Duration::from_secs(10))).unwrap();
    b.send_raw(&[0xff, 0xff, 0xff, 0x7f, 1, 2, 3]).unwrap();
    assert!(matches!(b.recv().unwrap(), Some(Response::Error(_))), "broken framing: error reply first");
    assert_eq!(b.recv().unwrap(), None, "broken framing closes the connection");
    // A client that submits frames, stops in the middle of a message and disconnects without reading.
    const VANISHED: u64 = 10;
    {
        let mut v = Client::connect(&sock).unwrap();
        for i in 0..VANISHED {
            let t = slot16(10 + i as i64);
            let frame = test_frame(VANISH, i, t, 96);
            v.send(&Request::Submit { tag: i, class: "tc-0".into(), txtime: Some(t), frame }).unwrap();
        }
        let mut half = Vec::new();
        frame_message(&Request::Info.emit(), &mut half);
        v.send_raw(&half[..3]).unwrap();
    }

    // --- The talkers: root with every class, nobody with best effort only, at the same time. ---
    let mut talk = Proc::spawn(
        "talk",
        &d,
        Command::new(BIN)
            .args(["talk", "--socket"])
            .arg(&sock)
            .arg("--config")
            .arg(&tcfg)
            .arg("--records")
            .arg(&tcsv)
            .args(["--grace", "3s"]),
    );
    let mut as_nobody = Command::new("setpriv");
    as_nobody
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN, "talk", "--socket"])
        .arg(&sock)
        .arg("--config")
        .arg(&ncfg)
        .arg("--records")
        .arg(&ncsv)
        .args(["--grace", "3s"]);
    let mut nobody = Proc::spawn("talk-nobody", &d, &mut as_nobody);
    let talk_out = talk.success(Duration::from_secs(15));
    let nobody_out = nobody.success(Duration::from_secs(15));
    println!("{talk_out}{nobody_out}");

    // --- The daemon still serves: Info and frames from the first client. ---
    assert!(daemon.running(), "the daemon stopped before the final check\n{}", daemon.output());
    let info = a.info().expect("Info after the bad clients and the talkers");
    let slot16 = |cycles: i64| info.cycle_start + cycles * CYCLE + 16 * SLOT;
    let mut client_tags: HashMap<u64, (u64, Option<i64>)> = HashMap::new();
    for i in 0..5u64 {
        let t = slot16(2 + i as i64);
        let frame = test_frame(CLIENT, i, t, 96);
        a.send(&Request::Submit { tag: 100 + i, class: "tc-0".into(), txtime: Some(t), frame }).unwrap();
        client_tags.insert(100 + i, (i, Some(t)));
    }
    for i in 5..7u64 {
        let frame = test_frame(CLIENT, i, 0, 400);
        a.send(&Request::Submit { tag: 100 + i, class: "tc-2".into(), txtime: None, frame }).unwrap();
        client_tags.insert(100 + i, (i, None));
    }
    let mut client_sent = Vec::new();
    let mut client_rejected = BTreeMap::new();
    for _ in 0..client_tags.len() {
        let (tag, dl) = outcome(&mut a, "final client frames");
        let (seq, txtime) = client_tags[&tag];
        match dl {
            Delivery::Sent { slot, time, ring_slot, .. } => {
                let class = if txtime.is_some() { "tc-0" } else { "tc-2" };
                let mut r = Record::new(seq, "client", class, txtime);
                r.sent_at(slot, ring_slot, time);
                client_sent.push(r);
            }
            Delivery::Rejected(r) => {
                client_rejected.insert(seq, r.as_str());
            }
        }
    }
    drop(a);
    assert!(listener.running(), "the listener stopped before the last frames left\n{}", listener.output());

    // --- The daemon exits cleanly at its duration; then the listener. ---
    let daemon_out = daemon.success(DAEMON_DURATION + Duration::from_secs(10));
    let ran = daemon.started.elapsed();
    println!("{daemon_out}");
    assert!(ran >= DAEMON_DURATION, "the daemon stopped after {ran:?}, before its duration");
    assert!(ran < DAEMON_DURATION + Duration::from_secs(3), "the daemon took {ran:?} to stop");
    assert!(!sock.exists(), "the daemon removed its socket");
    let fifo = daemon_out.contains("poll loop SCHED_FIFO 50, memory locked");
    assert_eq!(fifo, realtime, "the daemon's own real-time request, where the host grants it\n{daemon_out}");
    let underruns = number_before(&daemon_out, "underruns").expect("daemon summary");
    let malformed = number_before(&daemon_out, "malformed").expect("daemon summary");
    let dropped = number_before(&daemon_out, "connections dropped").expect("daemon summary");
    assert!(malformed >= 2 && dropped >= 1, "daemon counted {malformed} malformed, {dropped} dropped");
    let listen_out = listener.success(LISTEN_DURATION + Duration::from_secs(10));
    println!("{listen_out}");
    let fillers = number_before(&listen_out, "fillers").expect("listener summary");
    assert_eq!(fillers, 0, "reserved-address fillers crossed the bridge");

    // --- What the talkers were told. ---
    let talked = record::read(&tcsv).unwrap();
    let nobody_talked = record::read(&ncsv).unwrap();
    let per_flow = |recs: &[Record]| {
        let mut m: BTreeMap<String, Vec<Record>> = BTreeMap::new();
        for r in recs {
            m.entry(r.flow.clone()).or_default().push(r.clone());
        }
        m
    };
    let (t_flows, n_flows) = (per_flow(&talked), per_flow(&nobody_talked));
    for f in FLOWS.iter().filter(|f| f.root > 0) {
        assert_eq!(t_flows.get(f.name).map_or(0, Vec::len) as u64, f.root, "talk: one record per {} frame", f.name);
    }
    for f in FLOWS.iter().filter(|f| f.nobody > 0) {
        assert_eq!(n_flows.get(f.name).map_or(0, Vec::len) as u64, f.nobody, "nobody: one record per {} frame", f.name);
    }
    let reasons = |recs: &[Record]| -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for r in recs {
            *m.entry(if r.sent() { "sent".to_string() } else { r.reason.clone() }).or_default() += 1;
        }
        m
    };
    // All frames of these flows are rejected for their reason. Only when the link underran (the daemon stalled
    // past batch·δ) may some end otherwise: a stray frame handled after its slot was posted is `late` first, a
    // frame due while the link was idle is `underrun` (the station names the stall itself: CI once saw 45
    // underruns in this run, 7 of the late flow's 50 frames `underrun`), and a late frame that arrives while the
    // ring ran dry can still find its slot — at most one in ten.
    let only = |recs: &[Record], want: &str, otherwise: &[&str]| {
        let got = reasons(recs);
        let n = |k: &str| got.get(k).copied().unwrap_or(0);
        let ok = got.len() == 1 && got.contains_key(want)
            || underruns > 0
                && n(want) > 0
                && (n(want) + n("underrun")) * 10 >= recs.len() * 9
                && got.keys().all(|k| k == want || otherwise.contains(&k.as_str()));
        assert!(ok, "{}: expected all {want}, got {got:?} ({underruns} underruns)", recs[0].flow);
    };
    only(&t_flows["late"], "late", &["sent", "underrun"]);
    only(&t_flows["stray"], "not-owned", &["late"]);
    only(&n_flows["nobody-rt"], "forbidden", &[]);
    // Everything else is sent. A host that stalls for longer than batch·δ underruns the link (the daemon
    // reports it); the frames that costs are rejected `underrun` or, after a long stall, `late`: tolerated
    // only then, and printed. A talker the host stalled for more than half its lead submits frames that may
    // rightly be `late` without any underrun: tolerated for as many frames as the talkers report submitting
    // behind schedule.
    let behind = number_before(&talk_out, "submitted behind schedule").expect("talk summary")
        + number_before(&nobody_out, "submitted behind schedule").expect("talk summary");
    let tolerated: &[&str] = if underruns > 0 { &["sent", "underrun", "late"] } else { &["sent"] };
    let late_total = [&t_flows["ctrl"], &t_flows["fast"], &t_flows["bulk"], &n_flows["nobody-be"]]
        .iter()
        .map(|recs| reasons(recs).get("late").copied().unwrap_or(0))
        .sum::<usize>();
    assert!(
        underruns > 0 || late_total as u64 <= behind,
        "{late_total} frames late with no underrun and only {behind} submitted behind schedule"
    );
    let client_reasons: BTreeMap<String, usize> = client_rejected.values().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.to_string()).or_default() += 1;
        m
    });
    println!("  client     {} sent, rejected {client_reasons:?}", client_sent.len());
    assert!(client_reasons.keys().all(|k| tolerated.contains(&k.as_str())), "client: {client_reasons:?}");
    for recs in [&t_flows["ctrl"], &t_flows["fast"], &t_flows["bulk"], &n_flows["nobody-be"]] {
        let got = reasons(recs);
        let sent = got.get("sent").copied().unwrap_or(0);
        println!("  {:<10} {got:?}", recs[0].flow);
        assert!(got.keys().all(|k| tolerated.contains(&k.as_str()) || k == "late"), "{}: {got:?}", recs[0].flow);
        // `late` is the talker's own doing when the host stalls it (submitted behind schedule, or an underrun:
        // checked above), and `underrun` the daemon's host stalling past its lead (it reported them): both count
        // with the sent ones here — how many a loaded host costs is not this test's to bound (a CI run beside a
        // build lost 41 of 200 to 32 ms stalls). Every other loss is bounded at 10 %.
        let late = got.get("late").copied().unwrap_or(0);
        let stalled = if underruns > 0 { got.get("underrun").copied().unwrap_or(0) } else { 0 };
        assert!(
            (sent + late + stalled) * 10 >= recs.len() * 9,
            "{}: only {sent} of {} sent ({late} late, {stalled} lost to underruns)",
            recs[0].flow,
            recs.len()
        );
    }
    // Every sent frame is in a slot its class owns (best effort: no class owns it), and a real-time frame in
    // the wire slot whose start is nearest its txtime: the station reads txtimes against the schedule's grid
    // (anchored at the link's real start), and the wire grid sits within half a slot of it (also after any
    // underrun, for frames placed after it).
    let mut deviation = Vec::new();
    for r in talked.iter().chain(&nobody_talked).chain(&client_sent).filter(|r| r.sent()) {
        let ring_slot = r.ring_slot.expect("sent frames have a ring slot");
        match r.class.as_str() {
            "tc-0" => assert!(OWNED[0].contains(&ring_slot), "{} {}: ring slot {ring_slot}", r.flow, r.seq),
            "tc-1" => assert!(OWNED[1].contains(&ring_slot), "{} {}: ring slot {ring_slot}", r.flow, r.seq),
            _ => assert!(
                !OWNED.iter().any(|o| o.contains(&ring_slot)),
                "{} {}: best effort in {ring_slot}",
                r.flow,
                r.seq
            ),
        }
        if let (Some(t), Some(e)) = (r.txtime_ns, r.ephc_ns) {
            // A frame already posted when the host stalls leaves late by the stall (an underrun the daemon
            // reports); none ever leaves more than half a slot early.
            let late_ok = if underruns > 0 { i64::MAX } else { SLOT / 2 };
            assert!(
                e - t >= -SLOT / 2 && e - t <= late_ok,
                "{} {}: slot time {e} vs txtime {t} ({underruns} underruns)",
                r.flow,
                r.seq
            );
            deviation.push(e - t);
        }
    }
    // The talkers subscribe to release times: every frame they were told was sent has the time the host
    // released it (host-paced link), never before its slot (up to 1 µs of conversion, as in examples.rs).
    for r in talked.iter().chain(&nobody_talked).filter(|r| r.sent()) {
        let (Some(rel), Some(slot)) = (r.released_ns, r.ephc_ns) else {
            panic!("{} {}: sent without a release time", r.flow, r.seq)
        };
        assert!(rel >= slot - 1_000, "{} {}: released {} ns before its slot", r.flow, r.seq, slot - rel);
    }
    assert!(talk_out.contains("release:"), "talk prints its release line\n{talk_out}");
    deviation.sort_unstable();
    println!(
        "  real-time frames: EPHC slot time − txtime from {} to {} ns over {} frames",
        deviation.first().unwrap_or(&0),
        deviation.last().unwrap_or(&0),
        deviation.len()
    );

    // --- What crossed the bridge. ---
    let heard = record::read(&lcsv).unwrap();
    let sent: Vec<&Record> = talked.iter().chain(&nobody_talked).chain(&client_sent).filter(|r| r.sent()).collect();
    let rejected: BTreeSet<(String, u64)> = talked
        .iter()
        .chain(&nobody_talked)
        .filter(|r| !r.sent())
        .map(|r| (r.flow.clone(), r.seq))
        .chain(client_rejected.keys().map(|s| ("client".to_string(), *s)))
        .collect();
    let known: HashMap<(String, u64), &Record> = sent.iter().map(|s| ((s.flow.clone(), s.seq), *s)).collect();
    let mut seen = BTreeSet::new();
    let mut lag = Vec::new();
    let mut vanished = Vec::new();
    for h in &heard {
        let key = (h.flow.clone(), h.seq);
        assert!(seen.insert(key.clone()), "{key:?} arrived twice");
        assert!(!rejected.contains(&key), "rejected frame {key:?} reached the listener");
        if h.flow == "vanish" {
            assert!(h.seq < VANISHED, "vanish {} was never submitted", h.seq);
            vanished.push(h.seq);
            continue;
        }
        let s = known.get(&key).unwrap_or_else(|| panic!("{key:?} arrived but no talker reports it sent"));
        if let (Some(rx), Some(e)) = (h.rx_ns, s.ephc_ns) {
            lag.push(rx - e);
        }
    }
    // Every frame reported sent arrived, and per flow the received sequence is the sent one.
    let mut by_slot = sent.clone();
    by_slot.sort_by_key(|s| s.slot);
    let mut want_by_flow: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for s in &by_slot {
        want_by_flow.entry(&s.flow).or_default().push(s.seq);
    }
    for (flow, want) in &want_by_flow {
        let got: Vec<u64> = heard.iter().filter(|h| h.flow == *flow).map(|h| h.seq).collect();
        assert_eq!(
            &got, want,
            "flow {flow}: received (in arrival order) differs from the frames reported sent (in slot order)"
        );
    }
    // Arrival order is slot order, across flows.
    let want: Vec<(String, u64)> = by_slot.iter().map(|s| (s.flow.clone(), s.seq)).collect();
    let got: Vec<(String, u64)> =
        heard.iter().filter(|h| h.flow != "vanish").map(|h| (h.flow.clone(), h.seq)).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "frames arrived out of slot order");
    // The vanished client's frames still left in their slots, in order.
    assert!(vanished.windows(2).all(|w| w[0] < w[1]), "vanish frames out of order: {vanished:?}");
    if underruns == 0 {
        assert_eq!(vanished.len() as u64, VANISHED, "a client that disconnects still has its frames sent");
    }
    // Host pacing never releases a slot before its EPHC time.
    lag.sort_unstable();
    println!(
        "received {} frames ({} from the vanished client); rx − EPHC slot time: min {} µs, median {} µs, max {} µs; \
         daemon underruns {underruns}",
        heard.len(),
        vanished.len(),
        lag.first().unwrap_or(&0) / 1_000,
        lag.get(lag.len() / 2).unwrap_or(&0) / 1_000,
        lag.last().unwrap_or(&0) / 1_000
    );
    assert!(lag.iter().all(|l| *l >= 0), "a frame arrived before its slot time");

    // --- keepon report reads the listener's records. ---
    let report = Command::new(BIN).arg("report").arg(&lcsv).output().unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let report = String::from_utf8_lossy(&report.stdout);
    for f in ["ctrl", "fast", "bulk", "nobody-be", "client"] {
        assert!(report.contains(f), "report lacks flow {f}:\n{report}");
    }
    println!("{report}");
    drop(topo);
    let took = t_start.elapsed();
    println!("whole test: {took:?}");
    assert!(took < Duration::from_secs(45), "the test took {took:?}");
}
