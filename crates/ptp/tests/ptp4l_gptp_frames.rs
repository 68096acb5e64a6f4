//! Frames ptp4l (linuxptp 3.1.1, Debian) sent with linuxptp's `configs/gPTP.cfg` on a veth, captured as they
//! arrived (`tests/data/ptp4l-gptp-cfg.pcap`: the grandmaster's Announce, Sync and Follow_Up, the slave's
//! Pdelay_Req and the grandmaster's Pdelay_Resp and Pdelay_Resp_Follow_Up, three of each): they parse, carry
//! transportSpecific 1, go to 01:80:C2:00:00:0E, the Follow_Ups carry the Follow_Up information TLV, and a keepon
//! gPTP slave's engine takes ptp4l as its master from them.

use std::cell::RefCell;
use std::rc::Rc;

use keepon_core::ephc::Ephc;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_ptp::clock::EphcClock;
use keepon_ptp::engine::{DelayMechanism, EngineConfig, PtpEngine, Timer};
use keepon_ptp::gptp::policy::{Inbound, ProfilePolicy};
use keepon_ptp::gptp::tlv::{self, FollowUpInfo};
use keepon_ptp::gptp::{Profile, DEFAULT_THRESHOLD};
use keepon_ptp::servo::floor::FloorConfig;
use keepon_ptp::servo::ServoKind;
use keepon_ptp::wire::{Class, Transport, MAC_PTP_PDELAY};

/// The frames of a classic pcap file (little-endian, as written by the capture).
fn frames(pcap: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(&pcap[..4], &[0xD4, 0xC3, 0xB2, 0xA1], "a little-endian pcap");
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(pcap[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

fn captured() -> Vec<Vec<u8>> {
    frames(include_bytes!("data/ptp4l-gptp-cfg.pcap"))
}

#[test]
fn ptp4l_gptp_frames_parse_with_transport_specific_1_and_the_tlv() {
    let all = captured();
    let mut types = std::collections::BTreeMap::new();
    for f in &all {
        assert_eq!(&f[..6], &MAC_PTP_PDELAY, "every gPTP message goes to the link-local address");
        let (msg, class) = Transport::L2.parse(f).unwrap();
        assert_eq!(msg[0] >> 4, 1, "transportSpecific 1");
        assert!(Profile::Gptp.accepts(msg) && !Profile::Default.accepts(msg));
        assert_eq!(class == Class::Event, matches!(msg[0] & 0x0F, 0x0 | 0x2 | 0x3));
        *types.entry(msg[0] & 0x0F).or_insert(0) += 1;
        if msg[0] & 0x0F == 0x8 {
            // ptp4l's grandmaster: rate ratio 1, no phase or frequency change.
            assert_eq!(tlv::find(msg), Ok(FollowUpInfo::GRANDMASTER));
            // Emitted again by keepon, the same bytes.
            let mut bare = msg[..tlv::FOLLOW_UP_BODY].to_vec();
            bare[2..4].copy_from_slice(&(tlv::FOLLOW_UP_BODY as u16).to_be_bytes());
            tlv::append(&mut bare, &FollowUpInfo::GRANDMASTER).unwrap();
            assert_eq!(bare, msg);
        }
    }
    assert_eq!(types.keys().copied().collect::<Vec<_>>(), vec![0x0, 0x2, 0x3, 0x8, 0xA, 0xB], "{types:?}");
}

/// ptp4l's Announces, through an 802.1AS policy (the automotive one: asCapable forced, the capture has no exchange
/// of ours) into a slave-only engine with the gPTP profile: the BMCA makes it ptp4l's slave, although ptp4l
/// announces priority1 248 (a slave-only clock loses every comparison; see `PtpEngine::new`).
#[test]
fn a_keepon_gptp_slave_engine_takes_ptp4l_as_master() {
    let g = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap();
    let clock = Rc::new(RefCell::new(EphcClock::new(Ephc::new(g.period(), 0, Tai(1_700_000_000_000_000_000)), 0)));
    let cfg = EngineConfig {
        domain: 0,
        identity: [2, 0, 0, 0xFF, 0xFE, 0, 0, 1],
        priority1: 128,
        slave_only: true,
        master_only: false,
        log_sync: -3,
        log_announce: 0,
        delay: DelayMechanism::P2P { log_interval: 0 },
        servo: ServoKind::Kalman,
        floor: FloorConfig::default(),
        profile: Profile::Gptp,
    };
    let (mut engine, _) = PtpEngine::new(cfg, clock, 1);
    let mut policy = ProfilePolicy::new(Profile::Automotive, cfg.identity, DEFAULT_THRESHOLD);
    let mut rx = Tai(1_700_000_000_000_000_000);
    for f in captured() {
        let (msg, class) = Transport::L2.parse(&f).unwrap();
        rx += Nanos::from_ms(100);
        if msg[0] & 0x0F != 0xB {
            continue; // (the automotive policy would make Announces of Syncs: only ptp4l's own here)
        }
        assert_eq!(policy.inbound(msg, rx), Inbound::Take);
        assert_eq!(class, Class::General);
        let _ = engine.on_general(msg);
    }
    let _ = engine.on_timer(Timer::Bmca);
    assert!(engine.is_steering(), "statime did not take ptp4l's gPTP Announce");
    let announce = captured().into_iter().find(|f| f[14] & 0x0F == 0xB).unwrap();
    assert_eq!(engine.grandmaster()[..], announce[14 + 53..14 + 61], "ptp4l's clock is the grandmaster");
}
