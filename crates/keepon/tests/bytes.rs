//! The byte clock through the CLI, as a user turns it on: every shipped example with `link.timing = "bytes"`,
//! on the simulated NIC. Every real-time frame must leave within half a byte of its txtime, inside its class's
//! windows (the example's slot masks, as time); best effort outside every window; and the wire must take fewer
//! descriptors than slot mode for the same frames.

use std::path::{Path, PathBuf};
use std::process::Command;

use keepon::config::Config;
use keepon::record::{self, Record};
use keepon::run::byte_config;
use keepon_core::bytes::windows::Rat;
use keepon_core::isolation::ClassId;

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
                        windows.admitting(class, at + one, at + span(&r.flow)).is_some(),
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
                    assert!(inside.is_none(), "{name}: best effort #{} at {tx} in a window ({inside:?})", r.seq);
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

/// The daemon does not run the byte clock yet: it refuses such a configuration with a message that says so, and
/// does not quietly serve in slots.
#[test]
fn the_daemon_refuses_the_byte_clock_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/windows.toml");
    let sock = dir.path().join("k.sock");
    let text = std::fs::read_to_string(example).unwrap() + &format!("\n[daemon]\nsocket = \"{}\"\n", sock.display());
    let cfg = dir.path().join("daemon.toml");
    std::fs::write(&cfg, text).unwrap();
    let mut cmd = Command::new(keepon_bin());
    cmd.args(["daemon", "--backend", "sim", "--duration", "5s", "--config"]).arg(&cfg);
    cmd.current_dir(dir.path());
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the daemon served a byte-clock configuration: {err}");
    assert!(err.contains("link.timing = \"bytes\"") && err.contains("not yet in the daemon"), "{err}");
    assert!(!sock.exists(), "no socket was bound");
}
