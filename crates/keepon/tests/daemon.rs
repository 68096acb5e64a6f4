//! The daemon API on the simulated NIC held to the wall clock (no root needed): per-frame outcomes with
//! the right reasons, credential-based class access, and clients that misbehave or vanish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keepon::api::{frame_message, Client, Delivery, Request, Response};
use keepon::backend::{self, BackendOptions};
use keepon::clock::host_tai;
use keepon::config::Config;
use keepon::daemon::{serve, DaemonConfig};
use keepon_core::outcome::Reason;
use keepon_core::testframe::TestHeader;

fn frame(len: usize, seq: u64, txtime: i64) -> Vec<u8> {
    let mut b = vec![0u8; len];
    TestHeader { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], flow: 0, seq, txtime }.emit(&mut b[..38]);
    b
}

fn recv_outcome(c: &mut Client) -> (u64, Delivery) {
    match c.recv().unwrap() {
        Some(Response::Outcome { tag, delivery }) => (tag, delivery),
        Some(other) => panic!("unexpected {other:?}"),
        None => panic!("daemon closed the connection"),
    }
}

#[test]
fn daemon_reports_every_outcome_and_survives_bad_clients() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keepon.sock");
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let text = format!(
        r#"
        [link]
        rate = "100Mbps"
        [ring]
        slot_bytes = 1230      # δ = 100 µs
        slots = 32             # cycle 3.2 ms
        batch = 8
        slot_masks = "0x01,0x20002,0"
        [run]
        poll_period = "20us"
        [daemon]
        socket = "{}"
        max_in_flight = 64
        [[daemon.allow]]
        uid = {uid}
        classes = ["tc-0", "tc-2"]
        "#,
        sock.display()
    );
    let cfg = Config::parse(&text).unwrap();
    let dcfg = DaemonConfig::from_config(&cfg).unwrap();
    let (nic, _) = backend::open(&cfg, &BackendOptions::default(), true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || serve(&cfg, &dcfg, nic, &stop2, None));
    for _ in 0..200 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut a = Client::connect(&sock).unwrap();
    a.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let info = a.info().unwrap();
    assert_eq!((info.slot_bytes, info.ring, info.batch), (1230, 32, 8));
    assert_eq!(info.classes, vec!["tc-0", "tc-1", "tc-2"]);

    // A client that sends garbage with valid framing gets an error and stays connected; one that breaks the
    // framing is disconnected; one that vanishes mid-stream leaves its frames to be sent.
    let mut g = Client::connect(&sock).unwrap();
    g.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut junk = Vec::new();
    frame_message(&[7, 7, 7], &mut junk);
    g.send_raw(&junk).unwrap();
    assert!(matches!(g.recv().unwrap(), Some(Response::Error(e)) if e.contains("version")));
    assert_eq!(g.info().unwrap().ring, 32, "still usable after garbage");
    let mut broken = Client::connect(&sock).unwrap();
    broken.set_timeout(Some(Duration::from_secs(10))).unwrap();
    broken.send_raw(&[0xff, 0xff, 0xff, 0x7f, 1, 2, 3]).unwrap();
    assert!(matches!(broken.recv().unwrap(), Some(Response::Error(_))));
    assert_eq!(broken.recv().unwrap(), None, "broken framing closes the connection");
    {
        let mut v = Client::connect(&sock).unwrap();
        let t = info.cycle_start + 40 * 3_200_000;
        for i in 0..10u64 {
            let req = Request::Submit {
                tag: i,
                class: "tc-0".into(),
                txtime: Some(t + i as i64 * 3_200_000),
                frame: frame(100, i, 0),
            };
            v.send(&req).unwrap();
        }
    } // dropped without reading

    // Client A: frames on ring slot 0 of upcoming cycles, plus one of every kind of bad frame.
    let cycle = 3_200_000i64;
    let first = info.cycle_start + 10 * cycle;
    let good: Vec<i64> = (0..20).map(|i| first + i * cycle).collect();
    for (i, &t) in good.iter().enumerate() {
        a.send(&Request::Submit {
            tag: i as u64,
            class: "tc-0".into(),
            txtime: Some(t),
            frame: frame(100, i as u64, t),
        })
        .unwrap();
    }
    let bad = [
        (100, "tc-0", Some(host_tai().0 - 1_000_000), 1000, Reason::Late),
        (101, "tc-0", Some(first + 5 * 100_000), 100, Reason::NotOwned),
        (102, "tc-1", Some(first + 100_000), 100, Reason::Forbidden),
        (103, "tc-9", Some(first), 100, Reason::UnknownClass),
        (104, "tc-0", Some(first + 40 * cycle), 2000, Reason::Oversize),
        (105, "tc-0", None, 100, Reason::MissingTxtime),
        (106, "tc-2", Some(first), 100, Reason::UnexpectedTxtime),
        (107, "tc-0", Some(host_tai().0 + 5_000_000_000), 100, Reason::TooFarAhead),
    ];
    for (tag, class, txtime, len, _) in bad {
        a.send(&Request::Submit { tag, class: class.into(), txtime, frame: frame(len, tag, 0) }).unwrap();
    }
    let mut outcomes = std::collections::HashMap::new();
    while outcomes.len() < good.len() + bad.len() {
        let (tag, d) = recv_outcome(&mut a);
        assert!(outcomes.insert(tag, d).is_none(), "two outcomes for tag {tag}");
    }
    for (tag, _, _, _, why) in bad {
        assert_eq!(outcomes[&tag], Delivery::Rejected(why), "tag {tag}");
    }
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap().unwrap();
    // The simulated slot grid follows the wall clock; a host stalled for longer than batch·δ (a loaded CI
    // machine) underruns it, which the daemon must report. Without underruns, timing is exact.
    for (i, &t) in good.iter().enumerate() {
        match outcomes[&(i as u64)] {
            Delivery::Sent { time, ring_slot, .. } if stats.underruns == 0 => {
                assert_eq!(time, t, "frame {i} left exactly at its txtime");
                assert_eq!(ring_slot, 0);
            }
            Delivery::Sent { time, ring_slot, .. } => {
                assert!((time - t).abs() < 100_000, "frame {i}: {time} vs {t} after {} underruns", stats.underruns);
                assert_eq!(ring_slot, 0);
            }
            Delivery::Rejected(Reason::Underrun | Reason::Late) if stats.underruns > 0 => {}
            other => panic!(
                "frame {i}: {other:?} ({} underruns) all: {:?}",
                stats.underruns,
                (0..20u64).map(|j| outcomes[&j]).collect::<Vec<_>>()
            ),
        }
    }
    assert!(stats.malformed >= 2, "{stats:?}");
    assert!(stats.dropped >= 1, "{stats:?}");
    assert!(!sock.exists(), "socket removed on exit");
}
