//! End-to-end tests of the `keepon` command on the simulated NIC.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use keepon::record::{self, Record};
use keepon_core::time::Nanos;

fn keepon() -> Command {
    Command::new(env!("CARGO_BIN_EXE_keepon"))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

fn by_flow(recs: &[Record]) -> BTreeMap<String, Vec<&Record>> {
    let mut m: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in recs {
        m.entry(r.flow.clone()).or_default().push(r);
    }
    m
}

/// The prototype's Example 2: tc-0 frames arrive exactly 320 µs apart and tc-1 exactly 160 µs apart, read
/// from the per-frame records the CLI writes.
#[test]
fn example2_arrives_exactly_on_the_slot_grid() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e2.csv");
    let pcap = dir.path().join("e2.pcap");
    let out = keepon()
        .args(["run", "--config"])
        .arg(example("example2.toml"))
        .arg("--records")
        .arg(&csv)
        .arg("--pcap")
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = record::read(&csv).unwrap();
    let flows = by_flow(&recs);
    for (flow, gap) in [("tc0-cyclic", 320_000), ("tc1-cyclic", 160_000)] {
        let rs = &flows[flow];
        assert!(rs.len() > 1000);
        assert!(rs.iter().all(|r| r.sent()), "{flow}: every frame sent");
        let rx: Vec<i64> = rs.iter().map(|r| r.rx_ns.unwrap()).collect();
        assert!(rx.windows(2).all(|w| w[1] - w[0] == gap), "{flow}: not exactly {gap} ns apart");
        // Each frame left exactly at its scheduled time, in a slot its class owns.
        assert!(rs.iter().all(|r| r.tx_ns == r.txtime_ns && r.tx_ns == r.ephc_ns));
    }
    assert!(flows["tc0-cyclic"].iter().all(|r| r.ring_slot == Some(0)));
    assert!(flows["tc1-cyclic"].iter().all(|r| matches!(r.ring_slot, Some(1) | Some(17))));
    // Best effort never takes an owned slot.
    assert!(flows["best-effort"].iter().all(|r| !matches!(r.ring_slot, Some(0) | Some(1) | Some(17))));

    // The pcap holds every sent frame at its wire time, nanosecond resolution.
    let mut reader = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    assert_eq!(reader.header().ts_resolution, pcap_file::TsResolution::NanoSecond);
    let mut times = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.data.len(), 1226, "padded to the slot (1230 B minus FCS)");
        times.push(p.timestamp.as_nanos() as i64);
    }
    let mut tx: Vec<i64> = recs.iter().filter_map(|r| r.tx_ns).collect();
    tx.sort_unstable();
    times.sort_unstable();
    assert_eq!(times, tx);

    // `keepon report` reads the records unchanged.
    let rep = keepon().arg("report").arg(&csv).output().unwrap();
    assert!(rep.status.success());
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(text.contains("flow tc0-cyclic (class tc-0)"), "{text}");
    assert!(text.contains("min=320000 max=320000"), "{text}");
}

#[test]
fn pcap_with_fillers_is_back_to_back() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        r#"
        [link]
        rate = "10Gbps"
        [ring]
        slot_bytes = 64
        slots = 16
        batch = 4
        slot_masks = "0x0001"
        [[flow]]
        name = "f"
        class = "tc-0"
        period = "1075200ns"
        frame_bytes = 64
        count = 20
        lead = "500ns"
        [run]
        start = "10us"
        [schedule]
        base_time = 1700000000000000000  # the simulated link comes up on the schedule: no acquisition trims
        [sim]
        poll_period = "0"
        poll_overhead = "50ns"
        poll_per_slot = "1ns"
        post_latency = "100ns"
        "#,
    )
    .unwrap();
    let pcap = dir.path().join("w.pcap");
    let out = keepon().args(["run", "--pcap-fillers", "--config"]).arg(&cfg).arg("--pcap").arg(&pcap).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut reader = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    let mut times = Vec::new();
    let (mut fillers, mut real) = (0, 0);
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        if p.data[..6] == [0x01, 0x80, 0xC2, 0x00, 0x00, 0x04] {
            fillers += 1;
        } else {
            real += 1;
        }
        times.push(p.timestamp.as_nanos() as i64);
    }
    assert_eq!(real, 20);
    assert!(fillers > 1000);
    // 64 B at 10 Gb/s: δ = 67.2 ns exactly; slot k starts at t0 + ⌊k·67.2⌋ — to the nanosecond the EPHC and the
    // schedule round to (a byte is 0.8 ns: the discipline may start a slot on the byte after, ≤ 1 ns later).
    let t0 = times[0];
    for (k, t) in times.iter().enumerate() {
        let d = *t - t0 - (k as i64 * 336) / 5;
        assert!((0..=1).contains(&d), "slot {k}: {d} ns off the 67.2 ns grid");
    }
}

#[test]
fn bad_config_names_the_key_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(example("example2.toml")).unwrap().replace("batch = 8", "batch = 99");
    std::fs::write(&cfg, text).unwrap();
    let out = keepon().args(["run", "--config"]).arg(&cfg).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ring.batch = 99"), "{err}");
}

#[test]
fn late_oversize_and_unowned_frames_are_rejected_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    // lead 50 µs < batch·δ = 80 µs: every frame of `late` misses its slot; `unowned` asks for slot 5 of a
    // class that owns slot 0; `big` does not fit in a slot... (frame_bytes is checked by config, so the
    // oversize case is covered by the core tests).
    std::fs::write(
        &cfg,
        r#"
        [link]
        rate = "1Gbps"
        [ring]
        slot_bytes = 1230
        slots = 32
        batch = 8
        slot_masks = "0x01,0x20002"
        [[flow]]
        name = "late"
        class = "tc-0"
        period = "320us"
        frame_bytes = 100
        count = 10
        lead = "50us"
        [[flow]]
        name = "unowned"
        class = "tc-0"
        period = "320us"
        offset = "50us"
        frame_bytes = 100
        count = 10
        [[flow]]
        name = "ok"
        class = "tc-1"
        period = "160us"
        offset = "10us"
        frame_bytes = 100
        count = 10
        "#,
    )
    .unwrap();
    let csv = dir.path().join("r.csv");
    let out = keepon().args(["run", "--config"]).arg(&cfg).arg("--records").arg(&csv).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = record::read(&csv).unwrap();
    let flows = by_flow(&recs);
    assert!(flows["late"].iter().all(|r| r.reason == "late" && r.tx_ns.is_none()));
    assert!(flows["unowned"].iter().all(|r| r.reason == "not-owned" && r.tx_ns.is_none()));
    assert!(flows["ok"].iter().all(|r| r.sent()));
    assert_eq!(recs.len(), 30, "every frame has exactly one record");
}

#[test]
fn table3_shape_matches_the_paper() {
    let m = keepon::table3::default_model();
    let span = Nanos::from_ms(10);
    let pct = |b, p| keepon::table3::cell(m, b, Nanos::from_us(p), span, 1).unwrap().0 as f64 / 1e4;
    // Saturated where the poll cycle is below batch·δ, collapsing where it is not.
    assert!(pct(1, 0) > 99.9);
    assert!(pct(8, 10) > 99.9);
    assert!(pct(64, 100) > 99.9);
    assert!(pct(512, 1000) > 99.9);
    let b1_10 = pct(1, 10);
    assert!((12.0..22.0).contains(&b1_10), "{b1_10}");
    let b8_100 = pct(8, 100);
    assert!((14.0..23.0).contains(&b8_100), "{b8_100}");
    assert!(pct(1, 1000) < 1.0);
}

/// Run `keepon ARGS`, returning (success, stdout + stderr).
fn keepon_out(args: &[&str]) -> (bool, String) {
    let out = keepon().args(args).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Inputs that used to wrap, hang or lose a run now fail fast with a message naming what is wrong.
#[test]
fn hostile_inputs_fail_fast_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(example("example2.toml")).unwrap();
    let cfg = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().to_string()
    };
    // A flow offset near i64::MAX: refused, naming the key (it used to wrap txtimes negative and exit 0).
    let p = cfg("offset.toml", base.replace("offset = \"0us\"", &format!("offset = {}", i64::MAX - 5)));
    let (ok, text) = keepon_out(&["run", "--config", &p]);
    assert!(!ok && text.contains("tc0-cyclic`).offset"), "{text}");
    // A poll period of 2^63−1 ns: refused (it used to hang).
    let p = cfg("poll.toml", base.replace("poll_period = \"20us\"", &format!("poll_period = {}", i64::MAX)));
    let (ok, text) = keepon_out(&["run", "--config", &p]);
    assert!(!ok && text.contains("sim.poll_period"), "{text}");
    // A pcap that cannot hold the run's times is refused before the run, not after it.
    let p = cfg("late.toml", base.replace("seed = 1", &format!("seed = 1\nt0 = {}", 1i64 << 62)));
    let csv = dir.path().join("late.csv");
    let pcap = dir.path().join("late.pcap");
    let (ok, text) =
        keepon_out(&["run", "--config", &p, "--records", csv.to_str().unwrap(), "--pcap", pcap.to_str().unwrap()]);
    assert!(!ok && text.contains("pcap") && !text.contains("frames:"), "{text}");
    // Without the pcap the same run works.
    let (ok, text) = keepon_out(&["run", "--config", &p, "--records", csv.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert_eq!(record::read(&csv).unwrap().len(), 12_000);
    // A configuration asking for network time is never run on the free-running clock: a slave that hears no
    // master is not synchronised within the wait, and the run fails without sending a frame.
    let p = cfg("ptp.toml", format!("{base}\n[ptp]\nclass = \"tc-0\"\nrole = \"slave\"\n"));
    let (ok, text) = keepon_out(&["run", "--config", &p, "--sync-wait", "1s"]);
    assert!(!ok && text.contains("not synchronised after 1 s") && !text.contains("frames,"), "{text}");
    // `report` on an endless file and `table3` with an absurd span.
    let (ok, text) = keepon_out(&["report", "/dev/zero"]);
    assert!(!ok && text.contains("not a keepon records file"), "{text}");
    let (ok, text) = keepon_out(&["table3", "--span-ms", &i64::MAX.to_string()]);
    assert!(!ok && text.contains("--span-ms"), "{text}");
}

/// The summary says what a schedule's user needs (points 2 and 3 of issue 12): frames in the slot that holds their
/// txtime, the deviation distribution, and the frames beyond the tolerance — the same count the records flag and
/// `keepon report` shows.
#[test]
fn summary_and_report_show_the_deviation_from_the_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e2.csv");
    let (ok, text) = keepon_out(&[
        "run",
        "--config",
        example("example2.toml").to_str().unwrap(),
        "--records",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("6000/6000 real-time frames at the start of the slot that holds their txtime"), "{text}");
    assert!(text.contains("ns); 0 beyond the tolerance"), "{text}");

    // The underrun example moves some frames off their schedule slot: counted, flagged and reported alike.
    let csv = dir.path().join("u.csv");
    let (ok, text) = keepon_out(&[
        "run",
        "--config",
        example("underrun.toml").to_str().unwrap(),
        "--records",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    let recs = record::read(&csv).unwrap();
    let flagged = recs.iter().filter(|r| r.off_schedule == Some(true)).count();
    let line = text.lines().find(|l| l.starts_with("schedule:")).expect("schedule line");
    assert!(line.contains(&format!("; {flagged} beyond the tolerance")), "{line} vs {flagged} flagged records");
    // Every sent real-time record carries its schedule slot, and the flag is exactly |deviation| > δ/2 (1280 ns).
    for r in recs.iter().filter(|r| r.sent() && r.txtime_ns.is_some()) {
        let d = r.deviation().expect("sched_ns and tx_ns");
        assert_eq!(r.off_schedule, Some(d.abs() > 1280), "{r:?}");
        assert!(r.sched_ns.unwrap() <= r.txtime_ns.unwrap() && r.txtime_ns.unwrap() - r.sched_ns.unwrap() < 2560);
    }
    let (ok, report) = keepon_out(&["report", csv.to_str().unwrap()]);
    assert!(ok, "{report}");
    if flagged > 0 {
        assert!(report.contains(&format!("off schedule   {flagged} sent frames")), "{report}");
    }
}

/// `keepon run` with `[ptp]` runs the flows on network time: alone on its link, the station becomes master (the
/// BMCA), is synchronised by definition, and every scheduled frame of the flows gets its outcome, recorded.
#[test]
fn run_with_ptp_replays_the_flows_on_network_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("net.toml");
    std::fs::write(
        &p,
        r#"
[link]
rate = "100Mbps"
[ring]
slot_bytes = 1230      # δ = 100 µs
slots = 32
batch = 8
[[class]]
name = "ptp"
slots = [0, 8, 16, 24]
[[class]]
name = "tc"
slots = [4]
[[class]]
name = "be"
[[flow]]
name = "tc-cyclic"
class = "tc"
period = "3200us"
offset = "400us"
frame_bytes = 128
count = 200
lead = "2ms"
[run]
poll_period = "20us"
[ptp]
class = "ptp"
log_sync_interval = -3
"#,
    )
    .unwrap();
    let csv = dir.path().join("net.csv");
    let pcap = dir.path().join("net.pcap");
    let (ok, text) = keepon_out(&[
        "run",
        "--config",
        p.to_str().unwrap(),
        "--records",
        csv.to_str().unwrap(),
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("network time") && text.contains("run: 200 frames"), "{text}");
    let rows = record::read(&csv).unwrap();
    assert_eq!(rows.len(), 200);
    // The wire on network time: every frame sent is in the pcap at its slot's time, the one its outcome gave (the
    // EPHC: network time, as the station is grandmaster), its txtime to the byte (400 µs is a schedule slot start:
    // the wire slot starts on the first byte at or after it, 80 ns at 100 Mb/s); the PTP messages are there too,
    // padded to the slot as every frame.
    let mut reader = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    let mut frames = std::collections::HashMap::new();
    let mut ptp = 0;
    while let Some(pkt) = reader.next_packet() {
        let pkt = pkt.unwrap();
        assert_eq!(pkt.data.len(), 1226, "padded to the slot (1230 B minus FCS)");
        match keepon_core::testframe::TestHeader::parse(&pkt.data) {
            Ok(h) => assert!(frames.insert(h.seq, (pkt.timestamp.as_nanos() as i64, h.txtime)).is_none()),
            Err(_) => ptp += usize::from(pkt.data[12..14] == [0x88, 0xf7]),
        }
    }
    let sent: Vec<_> = rows.iter().filter(|r| r.sent()).collect();
    assert_eq!(frames.len(), sent.len(), "every frame sent, and only those, on the wire");
    // (After an underrun — a host stall: the simulated link follows the wall clock — frames posted while the wire
    // re-acquires the schedule may leave up to half a slot late, and their outcomes say so.)
    let stalled = text.lines().any(|l| l.ends_with(" underruns") && !l.ends_with(" 0 underruns"));
    for r in sent {
        let (at, txtime) = frames[&r.seq];
        assert_eq!((Some(at), Some(txtime)), (r.ephc_ns, r.txtime_ns), "frame {}", r.seq);
        let late = if stalled { 50_000 } else { 80 };
        assert!((0..late).contains(&(at - txtime)), "frame {} on the wire at {at}, txtime {txtime}\n{text}", r.seq);
    }
    assert!(ptp > 0, "no PTP message in the pcap");
    // Sent, or (a wall-clock-paced link on a loaded host) refused with a reason: never without an outcome.
    // A host stall shows as underruns (the simulated link follows the wall clock) or as frames the replay handed in
    // behind schedule; a frame may be late or underrun only then, and a run without either sends every frame.
    let count = |suffix: &str| -> usize {
        let head = text.split(suffix).next().filter(|h| h.len() < text.len());
        head.and_then(|h| h.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `{suffix}`: {text}"))
    };
    let (underruns, behind) = (count(" underruns\n"), count(" submitted behind schedule"));
    let mut late = 0;
    for r in rows.iter().filter(|r| !r.sent()) {
        assert!(
            matches!(r.reason.as_str(), "late" | "underrun"),
            "{} #{} rejected {:?}\n{text}",
            r.flow,
            r.seq,
            r.reason
        );
        late += 1;
    }
    assert!(underruns > 0 || late <= behind, "{late} frames late or underrun, {behind} behind schedule\n{text}");
    assert!(underruns + behind > 0 || late == 0, "{text}");
    assert!(rows.iter().filter(|r| r.sent()).count() >= 100, "{text}");
    // A measurement log that cannot be written is refused up front, naming the key and the file.
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("measurement_log = \"/nonexistent-keepon-dir/m.csv\"\n");
    std::fs::write(&p, text).unwrap();
    let (ok, text) = keepon_out(&["run", "--config", p.to_str().unwrap()]);
    assert!(!ok && text.contains("ptp.measurement_log: cannot write /nonexistent-keepon-dir/m.csv"), "{text}");
}
