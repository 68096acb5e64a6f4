//! IEEE 802.1CB R-TAGs from `keepon run` on the simulated NIC: a flow with `rtag = true` carries an R-TAG whose
//! sequence number is the instance's number on network time (`txtime / period mod 2¹⁶` for a flow at offset 0),
//! two stations started at different times number the same instance alike, and Wireshark's dissector
//! (`tshark`, filter `ieee8021cb`) reads the tags keepon writes. The tshark part skips (saying so) where tshark is
//! not installed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use keepon_core::frer::rtag::{self, Rtag};
use keepon_core::testframe::TestHeader;

const PERIOD: i64 = 320_000;

/// Example 2 of the prototype with its tc-0 flow R-TAGged; `start` is the flow epoch's delay.
fn config(start: &str) -> String {
    format!(
        r#"
[link]
rate = "1Gbps"
[ring]
slot_bytes = 1230
slots = 32
batch = 8
slot_masks = "0x01,0x20002,0"
[schedule]
base_time = 0
[[flow]]
name = "tc0-cyclic"
class = "tc-0"
period = "320us"
frame_bytes = 128
count = 400
lead = "150us"
rtag = true
[[flow]]
name = "tc1-cyclic"
class = "tc-1"
period = "160us"
offset = "10us"
frame_bytes = 128
count = 200
lead = "150us"
[run]
start = "{start}"
[sim]
seed = 1
poll_period = "20us"
"#
    )
}

/// Run the configuration on the simulated NIC with a pcap; the pcap's frames.
fn run(dir: &Path, name: &str, text: &str) -> (std::path::PathBuf, Vec<Vec<u8>>) {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, text).unwrap();
    let pcap = dir.join(format!("{name}.pcap"));
    let out = Command::new(env!("CARGO_BIN_EXE_keepon"))
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--pcap")
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut reader = pcap_file::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    let mut frames = Vec::new();
    while let Some(p) = reader.next_packet() {
        frames.push(p.unwrap().data.to_vec());
    }
    (pcap, frames)
}

/// Per R-TAGged frame: (txtime, R-TAG sequence number); and the untagged frames' count.
fn tags(frames: &[Vec<u8>]) -> (Vec<(i64, u16)>, usize) {
    let mut tagged = Vec::new();
    let mut untagged = 0;
    for f in frames {
        match rtag::strip(f) {
            Ok((Rtag { seq }, inner)) => {
                let h = TestHeader::parse(&inner).expect("an R-TAGged keepon test frame");
                assert_eq!(h.flow, 0, "only the tc-0 flow is tagged");
                assert_eq!(f.len(), 1226, "padded to the slot (1230 B less the FCS), the tag inside");
                tagged.push((h.txtime, seq));
            }
            Err(_) => {
                assert_eq!(TestHeader::parse(f).unwrap().flow, 1);
                untagged += 1;
            }
        }
    }
    (tagged, untagged)
}

#[test]
fn run_numbers_r_tags_on_network_time_and_wireshark_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, frames) = run(dir.path(), "a", &config("1ms"));
    let (tagged, untagged) = tags(&frames);
    assert_eq!((tagged.len(), untagged), (400, 200));
    for (txtime, seq) in &tagged {
        assert_eq!(i64::from(*seq), txtime / PERIOD % 65_536, "the instance's number on network time, mod 2¹⁶");
    }
    assert!(tagged.windows(2).all(|w| w[1].1 == w[0].1.wrapping_add(1)), "consecutive sequence numbers");

    // A second station started 50 ms later puts the same number on every instance both send.
    let (_, later) = run(dir.path(), "b", &config("50ms"));
    let first: BTreeMap<i64, u16> = tagged.iter().copied().collect();
    let (second, _) = tags(&later);
    let common: Vec<_> = second.iter().filter(|(t, _)| first.contains_key(t)).collect();
    assert!(common.len() > 200, "the two runs overlap on network time ({} instances)", common.len());
    assert!(common.iter().all(|(t, s)| first[t] == *s));

    // Wireshark's 802.1CB dissector reads the same sequence numbers.
    let out = match Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args(["-Y", "ieee8021cb", "-T", "fields", "-e", "ieee8021cb.seq", "-e", "ieee8021cb.etype"])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            println!("SKIP the tshark check: tshark cannot be run ({e}); install it (Debian: tshark)");
            return;
        }
    };
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let read: Vec<(u16, u16)> = text
        .lines()
        .map(|l| {
            let mut f = l.split('\t');
            let num = |s: Option<&str>| {
                let s = s.unwrap_or_default().trim();
                s.strip_prefix("0x").map_or_else(|| s.parse(), |h| u16::from_str_radix(h, 16)).unwrap()
            };
            (num(f.next()), num(f.next()))
        })
        .collect();
    assert_eq!(read.len(), 400, "tshark dissects every R-TAG:\n{text}");
    assert!(read.iter().all(|(_, etype)| *etype == 0x88B5), "the encapsulated EtherType is keepon's");
    let want: Vec<u16> = tagged.iter().map(|(_, s)| *s).collect();
    assert_eq!(read.iter().map(|(s, _)| *s).collect::<Vec<_>>(), want);
}

/// The listener's FRER options are checked before it opens a socket, the error naming the option.
#[test]
fn listen_refuses_bad_recovery_settings() {
    let listen = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_keepon"))
            .args(["listen", "--iface", "lo", "--records", "/nonexistent/L.csv", "--duration", "0s"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = listen(&["--frer-history", "1"]);
    assert!(e.contains("--frer-history 1") && e.contains("2..=32768"), "{e}");
    let e = listen(&["--frer-reset-ms", "0"]);
    assert!(e.contains("--frer-reset-ms 0"), "{e}");
    let e = listen(&["--frer-match", "--frer-history", "8"]);
    assert!(e.contains("--frer-history") && e.contains("--frer-match"), "{e}");
}
