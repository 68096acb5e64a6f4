//! # keepon-ptp
//!
//! PTP synchronisation of keepon's EPHC, sans-IO like `keepon-core`: no sockets, no threads, no clock reads.
//!
//! Read in this order: [`clock`] (the EPHC as the clock a servo steers — adjustments never change the slot
//! count; [`clock::StationClock`] steers a station through `Station::adjust_clock`, which moves the schedule's
//! grid with it; the bridge to statime's `Clock`), [`servo`] (one trait, explicit states, three servos:
//! statime's Kalman filter, a PI servo, the paper's moving-average frequency filter), [`engine`] (statime's
//! port and BMCA behind our own sans-IO interface: messages, exact TX times and timers in, messages and timers
//! out; E2E or P2P delay), [`port`] (the engine on a station: PTP frames through the insertion path with exact TX
//! times, one-step Sync where the slot time is the TX time, adjustments through `StationFace::adjust_clock`, on either timing),
//! [`sim`] (a seeded slave ↔ ideal master simulation in simulated time), [`a9`] (the paper's A.9
//! granularity/jitter study), [`dual`] (the dual clock's steering: RX
//! slot count, merge rule, PTP on the RX clock, a local loop on the EPHC), [`dualrx`] (the dual clock on a real
//! receiver: acquire, track, fall back), [`node`] (one PTP node on a station: port, dual clock and the
//! judgement "synchronised", used by the daemon and the two-station harness), [`dualsim`] (two stations back to back,
//! single vs dual clock), [`wire`] (PTP over
//! L2 and UDPv4: checked parse, emit), [`igmp`] (membership of PTP's IPv4 group, for switches that snoop IGMP), [`gptp`] (the
//! IEEE 802.1AS profiles around statime: majorSdoId, the Follow_Up information TLV, asCapable).
//!
//! statime (pinned `=0.4.0`, upstream on hold) appears only behind our own types: [`clock::ServoClock`],
//! [`servo::Servo`] and [`engine::PtpEngine`].
//!
//! ## Timescale
//! The EPHC runs on TAI. Our engine, as master, announces the PTP timescale without a valid UTC offset (it does
//! not know one); other statime masters announce 0, ptp4l in software mode 37 s. keepon never applies the
//! announced offset to the EPHC: [`engine::PtpEngine::utc_offset`] and
//! [`clock::StatimeClock::utc_offset`] report it so the driver can check it against the host's TAI offset.
#![deny(missing_docs)]

pub mod a9;
pub mod clock;
pub mod dual;
pub mod dualrx;
pub mod dualsim;
pub mod engine;
pub mod fig12;
pub mod gptp;
pub mod igmp;
pub mod node;
pub mod port;
pub mod servo;
pub mod sim;
pub mod wire;
