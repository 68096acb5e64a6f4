//! The checks behind the fuzz targets in `fuzz/` (`cargo fuzz run NAME`), one per untrusted input: the daemon
//! protocol, the configuration, received frames, and a station driven by arbitrary submits and polls. They live
//! here, in the library, so that `cargo test` replays every saved corpus input through the very same code
//! (`tests/fuzz_corpus.rs`) on the stable toolchain — with overflow checks on, as in every debug build.
//!
//! Each check panics only if an invariant is broken: a parser must not panic on any input and must round-trip
//! what it accepts; the station must give every frame exactly one outcome.

use keepon_core::bytes::windows::Windows;
use keepon_core::bytes::{ByteConfig, ByteStation};
use keepon_core::ephc::ClockAdjust;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId};
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::testframe::TestHeader;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};

use keepon_core::face::StationFace;

use crate::api::{split_messages, Request, Response};
use crate::config::Config;
use crate::daemon::DaemonConfig;

/// The daemon's byte protocol: framing, requests and responses.
pub fn protocol(data: &[u8]) {
    let mut buf = data.to_vec();
    let msgs = match split_messages(&mut buf) {
        Ok(m) => m,
        Err(_) => vec![data.to_vec()],
    };
    for m in msgs {
        if let Ok(req) = Request::parse(&m) {
            assert_eq!(Request::parse(&req.emit()).as_ref(), Ok(&req), "request round trip");
        }
        if let Ok(resp) = Response::parse(&m) {
            assert_eq!(Response::parse(&resp.emit()).as_ref(), Ok(&resp), "response round trip");
        }
    }
}

/// The runtime configuration: any text parses to a configuration or an error; an accepted one yields a station
/// and flow times without overflow.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(cfg) = Config::parse(text) else { return };
    let _ = DaemonConfig::from_config(&cfg);
    let st = crate::run::station_config(&cfg);
    let t0 = cfg.sim.t0;
    if let Ok(s) = Station::<Vec<u8>>::new(st, t0) {
        let start = s.cycle_start_at_or_after(t0 + cfg.start).expect("a configured start is representable");
        for f in &cfg.flows {
            let _ = f.spec.time_of(start, f.spec.count.saturating_sub(1));
        }
    }
}

/// A received frame: the test-frame header (round trip), the R-TAG (round trip) and the filler check.
pub fn frame(data: &[u8]) {
    if let Ok(h) = TestHeader::parse(data) {
        let mut out = vec![0u8; TestHeader::buffer_len()];
        h.emit(&mut out);
        assert_eq!(TestHeader::parse(&out), Ok(h), "test header round trip");
    }
    if let Ok((tag, inner)) = keepon_core::frer::rtag::strip(data) {
        // Tagging what was stripped and stripping again gives the same (the reserved bits are not kept, and an
        // R-TAG that encapsulated a VLAN tag goes behind it).
        if let Ok(again) = keepon_core::frer::rtag::insert(&inner, tag) {
            assert_eq!(keepon_core::frer::rtag::strip(&again), Ok((tag, inner)), "R-TAG round trip");
        }
    }
    let _ = crate::listen::is_filler(data);
}

/// A received frame as PTP reads it: both transports' parsers and the IGMP query parser never panic; a PTP
/// message either transport accepts re-emits to a frame that parses to the same message and class; a query that
/// an IGMPv2 frame can carry re-emits to the same query; a Follow_Up information TLV (IEEE 802.1AS) found re-emits
/// to the same TLV, and every profile's policy takes any message.
pub fn ptp(data: &[u8]) {
    use keepon_ptp::gptp::policy::ProfilePolicy;
    use keepon_ptp::gptp::{tlv, Profile};
    use keepon_ptp::igmp;
    use keepon_ptp::wire::{class_of, make_one_step, sequence_id, Transport};
    for t in [Transport::L2, Transport::UdpV4 { src: [10, 0, 0, 1] }] {
        let Ok((msg, class)) = t.parse(data) else { continue };
        assert_eq!(class_of(msg), Ok(class), "the class of what parse accepted");
        assert!(sequence_id(msg).is_some(), "an accepted message has a header");
        if let Ok(frame) = t.emit([2, 0, 0, 0, 0, 1], msg) {
            let back = t.parse(&frame).map(|(m, c)| (m.to_vec(), c));
            assert_eq!(back, Ok((msg.to_vec(), class)), "PTP round trip over {t:?}");
        }
        let mut m = msg.to_vec();
        let _ = make_one_step(&mut m, Tai(1_700_000_000_000_000_000));
        assert_eq!(m.len(), msg.len(), "one-step keeps the length");
        // The 802.1AS Follow_Up information TLV: what is found is emitted back to the same bytes' values.
        if let Ok(info) = tlv::find(msg) {
            let mut again = msg[..tlv::FOLLOW_UP_BODY].to_vec();
            tlv::append(&mut again, &info).unwrap_or_else(|e| panic!("a parsed TLV emits: {e}"));
            assert_eq!(tlv::find(&again), Ok(info), "Follow_Up information TLV round trip");
        }
        // The profiles' policy takes any message without panicking, and what it appends it finds again.
        for profile in [Profile::Default, Profile::Gptp, Profile::Automotive] {
            let mut p = ProfilePolicy::new(profile, [2, 0, 0, 0xFF, 0xFE, 0, 0, 1], Nanos(800));
            let _ = p.inbound(msg, Tai(1_700_000_000_000_000_000));
            let mut out = msg.to_vec();
            // (statime's Follow_Ups are bare, 44 bytes: those leave with the TLV.)
            if p.outbound(&mut out) && profile.is_802_1as() && msg[0] & 0x0F == 0x8 && msg.len() == 44 {
                assert_eq!(
                    tlv::find(&out),
                    Ok(tlv::FollowUpInfo::GRANDMASTER),
                    "an 802.1AS Follow_Up leaves with the TLV"
                );
            }
        }
    }
    if let Some(q) = igmp::query(data) {
        // IGMPv2 carries a Max Response Code below 128 tenths of a second.
        if q.max_response <= Nanos::from_ms(12_700) {
            let frame = igmp::query_frame([2, 0, 0, 0, 0, 1], [10, 0, 0, 1], q.group, q.max_response);
            assert_eq!(igmp::query(&frame), Some(q), "IGMP query round trip");
        }
    }
}

/// A station (ring 16, batch 4, two real-time classes and best effort, relaxed or strict by the first byte's bit
/// 0; slots, or the byte clock with the same slots as time windows, by its bit 1) driven by arbitrary operations,
/// 11 bytes each: submit (class, txtime relative to now as any i64, length), poll (consume up to 4 descriptors,
/// advance time by any amount), or adjust the clock (a rate of any ppt, or a step of any ns; refused ones
/// refused). Every submitted frame must get exactly one outcome.
pub fn station(data: &[u8]) {
    let Some((&mode, ops)) = data.split_first() else { return };
    let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap_or_else(|_| unreachable!()), 125)
        .unwrap_or_else(|_| unreachable!()); // δ = 1.16 µs
    let classes = [
        ClassSpec { name: "a".into(), slots: vec![0, 8] },
        ClassSpec { name: "b".into(), slots: vec![3] },
        ClassSpec { name: "be".into(), slots: vec![] },
    ];
    let Ok(ownership) = Ownership::new(16, &classes) else { return };
    let policy = if mode & 1 == 0 { Policy::Strict } else { Policy::Relaxed };
    let (now, base) = (Tai(1_000_000_000), Tai(1_000_000_000));
    if mode & 2 == 0 {
        let cfg = StationConfig {
            geometry,
            ownership,
            batch: 4,
            policy,
            max_pending: 8,
            max_advance: Nanos::from_ms(1),
            post_latency: Nanos(500),
            base_time: base,
            max_filler: keepon_core::time::MAX_SLOT_BYTES,
        };
        if let Ok(s) = Station::<Vec<u8>>::new(cfg, now) {
            drive(s, ops, now);
        }
    } else {
        let cfg = ByteConfig {
            rate: geometry.rate(),
            windows: Windows::from_slots(base, geometry, &ownership),
            ring: 16,
            max_frame: 1518,
            lead: Nanos(4 * 1_160),
            max_pending: 8,
            max_advance: Nanos::from_ms(1),
            post_latency: Nanos(500),
            policy,
        };
        if let Ok(s) = ByteStation::<Vec<u8>>::new(cfg, now) {
            drive(s, ops, now);
        }
    }
}

/// The operations of [`station`] on either timing.
fn drive<S: StationFace>(mut s: S, ops: &[u8], mut now: Tai) {
    let (mut consumed, mut submitted, mut outcomes) = (0u64, 0u64, 0u64);
    for op in ops.chunks_exact(11) {
        let v = i64::from_le_bytes([op[1], op[2], op[3], op[4], op[5], op[6], op[7], op[8]]);
        match op[0] % 4 {
            0 | 1 => {
                let class = ClassId(op[9] % 4);
                let txtime = (class.0 < 2 || op[0] == 1).then(|| Tai(now.0.saturating_add(v)));
                let len = usize::from(op[10]) * 2;
                let f = Frame { id: FrameId(submitted), class, txtime, data: vec![0u8; len] };
                submitted += 1;
                let _ = s.submit(f, now);
            }
            2 => {
                let posted = s.ring().posted();
                consumed = (consumed + u64::from(op[9] % 5)).min(posted);
                now = Tai(now.0.saturating_add(v.rem_euclid(200_000)));
                let _ = s.poll(Observation { consumed, now, gaps: &[] });
            }
            _ => {
                let adj = if op[9] & 1 == 0 { ClockAdjust::Rate(v) } else { ClockAdjust::Step(Nanos(v)) };
                let _ = s.adjust_clock(adj);
            }
        }
        outcomes += s.drain_outcomes().count() as u64;
    }
    s.shutdown();
    outcomes += s.drain_outcomes().count() as u64;
    assert_eq!(outcomes + s.ring().real_frames() as u64, submitted, "every frame has one outcome or is still posted");
}
