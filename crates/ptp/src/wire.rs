//! PTP messages on the wire: the two transports keepon offers, as checked views and emitters.
//!
//! - **L2** (IEEE 1588 Annex F): Ethernet, ethertype `0x88F7`, to `01:1B:19:00:00:00` (E2E and general
//!   messages) or the link-local `01:80:C2:00:00:0E` (peer-delay messages).
//! - **UDPv4** (Annex C): IPv4 to `224.0.1.129` (or `224.0.0.107` for peer delay), UDP port 319 for event
//!   messages and 320 for general ones, TTL 1; the UDP checksum may be 0 over IPv4.
//!
//! [`Transport::emit`] wraps a PTP message (as the engine produced it) in a frame; [`Transport::parse`] takes a
//! received frame apart, checking every length and header field it relies on, and says whether the message
//! is an event (timestamped) or a general message. Frames shorter than the minimum are padded by the station
//! (every keepon frame fills its slot), so trailing bytes after the PTP message are ignored.
//!
//! [`make_one_step`] turns a two-step Sync into a one-step one (its TX time written into it, twoStepFlag
//! cleared); its length stays 44, the bare Sync a receiver such as ptp4l requires.

use core::fmt;

use keepon_core::time::Tai;

/// The PTP ethertype.
pub const ETHERTYPE_PTP: u16 = 0x88F7;
/// The IPv4 ethertype.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// Multicast MAC of PTP over L2 (all but peer delay).
pub const MAC_PTP: [u8; 6] = [0x01, 0x1B, 0x19, 0x00, 0x00, 0x00];
/// Link-local multicast MAC of PTP peer-delay messages.
pub const MAC_PTP_PDELAY: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x0E];
/// IPv4 multicast group of PTP (all but peer delay).
pub const IP_PTP: [u8; 4] = [224, 0, 1, 129];
/// IPv4 multicast group of PTP peer-delay messages.
pub const IP_PTP_PDELAY: [u8; 4] = [224, 0, 0, 107];
/// UDP port of event messages.
pub const PORT_EVENT: u16 = 319;
/// UDP port of general messages.
pub const PORT_GENERAL: u16 = 320;

const ETH: usize = 14;
const IP: usize = 20;
const UDP: usize = 8;
/// The PAD TLV's type (IEEE 1588-2019).
pub const PAD_TLV: u16 = 0x8008;
/// The PTP common header's length.
pub const PTP_HEADER: usize = 34;

/// How PTP messages travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Ethernet, ethertype 0x88F7.
    L2,
    /// UDP over IPv4, from this source address.
    UdpV4 {
        /// The station's IPv4 address.
        src: [u8; 4],
    },
}

/// A PTP message's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Sync, Delay_Req, Pdelay_Req, Pdelay_Resp: timestamped on TX and RX.
    Event,
    /// Everything else.
    General,
}

/// Why a frame is not a PTP message for us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its headers say.
    Truncated,
    /// Not PTP (another ethertype, protocol or port).
    NotPtp,
    /// An IPv4 header we do not take (options, fragments, a bad header checksum).
    BadIpv4,
    /// A PTP version other than 2.
    BadVersion(u8),
    /// The message is longer than a frame may be.
    TooLong(usize),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "frame shorter than its headers"),
            WireError::NotPtp => write!(f, "not a PTP frame"),
            WireError::BadIpv4 => write!(f, "IPv4 header with options, fragmentation or a bad checksum"),
            WireError::BadVersion(v) => write!(f, "PTP version {v}, expected 2"),
            WireError::TooLong(n) => write!(f, "PTP message of {n} bytes does not fit a frame"),
        }
    }
}

/// Class of a PTP message from its header's messageType.
pub fn class_of(msg: &[u8]) -> Result<Class, WireError> {
    if msg.len() < PTP_HEADER {
        return Err(WireError::Truncated);
    }
    let version = msg[1] & 0x0F;
    if version != 2 {
        return Err(WireError::BadVersion(version));
    }
    Ok(if msg[0] & 0x0F < 0x8 { Class::Event } else { Class::General })
}

/// True for peer-delay messages (messageType 2, 3, 0xA), which go to the link-local addresses.
fn is_pdelay(msg: &[u8]) -> bool {
    matches!(msg[0] & 0x0F, 0x2 | 0x3 | 0xA)
}

/// False for Sync, Pdelay_Req and Pdelay_Resp: receivers (ptp4l among them) take them at their bare length
/// and read no TLVs, so they carry none.
fn admits_tlv(msg: &[u8]) -> bool {
    !matches!(msg[0] & 0x0F, 0x0 | 0x2 | 0x3)
}

/// The messageType of a Sync.
const SYNC: u8 = 0x0;
/// The twoStepFlag: bit 1 of the first flagField octet (header byte 6).
const TWO_STEP: u8 = 0x02;

/// The header's sequenceId.
pub fn sequence_id(msg: &[u8]) -> Option<u16> {
    msg.get(30..32).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Why a Sync cannot be made one-step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OneStepError {
    /// Not a bare PTPv2 Sync (messageType 0, 44 bytes).
    NotSync,
    /// A time before the PTP epoch, which a timestamp cannot carry.
    BeforeEpoch(Tai),
}

impl fmt::Display for OneStepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OneStepError::NotSync => write!(f, "not a PTPv2 Sync of 44 bytes"),
            OneStepError::BeforeEpoch(t) => write!(f, "TX time {} ns is before the PTP epoch", t.0),
        }
    }
}

/// Make `msg`, a two-step Sync, one-step: its originTimestamp becomes `origin` (the time it leaves, on the
/// PTP timescale: 48-bit seconds and 32-bit nanoseconds), its twoStepFlag is cleared, its correctionField
/// (sub-nanoseconds; `origin` is whole nanoseconds) is left as it is. The message keeps its length.
pub fn make_one_step(msg: &mut [u8], origin: Tai) -> Result<(), OneStepError> {
    if msg.len() != 44 || msg[0] & 0x0F != SYNC || msg[1] & 0x0F != 2 || u16::from_be_bytes([msg[2], msg[3]]) != 44 {
        return Err(OneStepError::NotSync);
    }
    if origin.0 < 0 {
        return Err(OneStepError::BeforeEpoch(origin));
    }
    let (secs, ns) = (origin.0 / 1_000_000_000, origin.0 % 1_000_000_000);
    msg[6] &= !TWO_STEP;
    msg[34..40].copy_from_slice(&secs.to_be_bytes()[2..]);
    msg[40..44].copy_from_slice(&(ns as u32).to_be_bytes());
    Ok(())
}

pub(crate) fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

impl Transport {
    /// Bytes of headers before the PTP message.
    pub fn overhead(self) -> usize {
        match self {
            Transport::L2 => ETH,
            Transport::UdpV4 { .. } => ETH + IP + UDP,
        }
    }

    /// [`Transport::emit`] for a keepon slot of `slot_data` bytes (every frame on a keepon link fills its
    /// slot). Over UDPv4 the IP and UDP lengths delimit the message and the rest is Ethernet padding. Over L2
    /// nothing delimits it. For messages that may carry TLVs a receiver reads trailing zeros as TLVs (ptp4l
    /// rejects such a message as bad), so the rest of the slot becomes one PAD TLV (type 0x8008, IEEE
    /// 1588-2019 §14.4), counted in the header's messageLength. Sync, Pdelay_Req and Pdelay_Resp keep their
    /// exact length and plain trailing padding: ptp4l parses no TLVs on them and rejects any messageLength
    /// other than the bare message's.
    pub fn emit_for_slot(self, src: [u8; 6], msg: &[u8], slot_data: usize) -> Result<Vec<u8>, WireError> {
        let mut f = self.emit(src, msg)?;
        if self == Transport::L2 && admits_tlv(msg) && slot_data >= f.len() + 4 {
            let pad = (slot_data - f.len()).min(usize::from(u16::MAX));
            let len = u16::try_from(msg.len() + pad).map_err(|_| WireError::TooLong(msg.len() + pad))?;
            f.extend_from_slice(&PAD_TLV.to_be_bytes());
            f.extend_from_slice(&((pad - 4) as u16).to_be_bytes());
            f.resize(f.len() + pad - 4, 0);
            f[ETH + 2..ETH + 4].copy_from_slice(&len.to_be_bytes());
        }
        Ok(f)
    }

    /// The frame (without FCS) carrying `msg` from MAC `src`.
    pub fn emit(self, src: [u8; 6], msg: &[u8]) -> Result<Vec<u8>, WireError> {
        let class = class_of(msg)?;
        let pdelay = is_pdelay(msg);
        if msg.len() > 1500 - IP - UDP {
            return Err(WireError::TooLong(msg.len()));
        }
        let mut f = Vec::with_capacity(self.overhead() + msg.len());
        match self {
            Transport::L2 => {
                f.extend_from_slice(if pdelay { &MAC_PTP_PDELAY } else { &MAC_PTP });
                f.extend_from_slice(&src);
                f.extend_from_slice(&ETHERTYPE_PTP.to_be_bytes());
            }
            Transport::UdpV4 { src: ip } => {
                let group = if pdelay { IP_PTP_PDELAY } else { IP_PTP };
                // IPv4 multicast MAC: 01:00:5E + the low 23 bits of the group.
                f.extend_from_slice(&[0x01, 0x00, 0x5E, group[1] & 0x7F, group[2], group[3]]);
                f.extend_from_slice(&src);
                f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                let total = (IP + UDP + msg.len()) as u16;
                let mut h = [0u8; IP];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&total.to_be_bytes());
                h[6] = 0x40; // don't fragment
                h[8] = 1; // TTL 1: PTP stays on the link
                h[9] = 17; // UDP
                h[12..16].copy_from_slice(&ip);
                h[16..20].copy_from_slice(&group);
                let c = ipv4_checksum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&h);
                let port = if class == Class::Event { PORT_EVENT } else { PORT_GENERAL };
                f.extend_from_slice(&port.to_be_bytes());
                f.extend_from_slice(&port.to_be_bytes());
                f.extend_from_slice(&((UDP + msg.len()) as u16).to_be_bytes());
                f.extend_from_slice(&[0, 0]); // checksum not used (allowed over IPv4)
            }
        }
        f.extend_from_slice(msg);
        Ok(f)
    }

    /// Take a received frame apart: the PTP message (exactly its header's messageLength) and its class. Frames
    /// of the other transport are [`WireError::NotPtp`].
    pub fn parse(self, frame: &[u8]) -> Result<(&[u8], Class), WireError> {
        if frame.len() < ETH {
            return Err(WireError::Truncated);
        }
        let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
        let msg = match self {
            Transport::L2 => {
                if ethertype != ETHERTYPE_PTP {
                    return Err(WireError::NotPtp);
                }
                &frame[ETH..]
            }
            Transport::UdpV4 { .. } => {
                if ethertype != ETHERTYPE_IPV4 {
                    return Err(WireError::NotPtp);
                }
                let ip = frame.get(ETH..ETH + IP).ok_or(WireError::Truncated)?;
                if ip[9] != 17 {
                    return Err(WireError::NotPtp); // not UDP (IGMP, for one, which carries an option)
                }
                if ip[0] != 0x45 || ip[6] & 0x3F != 0 || ip[7] != 0 || ipv4_checksum(ip) != 0 {
                    return Err(WireError::BadIpv4);
                }
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                let udp = frame.get(ETH + IP..ETH + IP + UDP).ok_or(WireError::Truncated)?;
                let port = u16::from_be_bytes([udp[2], udp[3]]);
                if port != PORT_EVENT && port != PORT_GENERAL {
                    return Err(WireError::NotPtp);
                }
                let end = ETH + total;
                frame.get(ETH + IP + UDP..end).ok_or(WireError::Truncated)?
            }
        };
        let class = class_of(msg)?;
        let len = usize::from(u16::from_be_bytes([msg[2], msg[3]]));
        if len < PTP_HEADER {
            return Err(WireError::Truncated);
        }
        let msg = msg.get(..len).ok_or(WireError::Truncated)?;
        Ok((msg, class))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Sync (messageType 0, version 2, length 44) and a Follow_Up (type 8).
    fn msg(kind: u8, len: u16) -> Vec<u8> {
        let mut m = vec![0u8; usize::from(len)];
        m[0] = kind;
        m[1] = 0x12; // minor version 1, version 2
        m[2..4].copy_from_slice(&len.to_be_bytes());
        m
    }

    #[test]
    fn l2_round_trip_and_bytes() {
        let src = [2, 0, 0, 0, 0, 1];
        let sync = msg(0x0, 44);
        let f = Transport::L2.emit(src, &sync).unwrap();
        assert_eq!(&f[..14], &[0x01, 0x1B, 0x19, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x88, 0xF7]);
        // Padded to a slot by the station: trailing zeros are ignored.
        let mut padded = f.clone();
        padded.resize(300, 0);
        assert_eq!(Transport::L2.parse(&padded), Ok((&sync[..], Class::Event)));
        let pdelay = msg(0x2, 54);
        assert_eq!(&Transport::L2.emit(src, &pdelay).unwrap()[..6], &MAC_PTP_PDELAY);
        assert_eq!(Transport::L2.parse(&Transport::L2.emit(src, &msg(0x8, 44)).unwrap()).unwrap().1, Class::General);
    }

    /// A slot-filling L2 frame ends in one PAD TLV counted in messageLength, except Sync and the peer-delay
    /// event messages (bare length, plain padding); over UDPv4 the slot's rest is plain padding outside the IP
    /// datagram.
    #[test]
    fn slot_filling_frames_delimit_the_message() {
        let src = [2, 0, 0, 0, 0, 1];
        let fup = msg(0x8, 44);
        let f = Transport::L2.emit_for_slot(src, &fup, 1226).unwrap();
        assert_eq!(f.len(), 1226);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 1226 - 14, "messageLength covers the TLV");
        assert_eq!(&f[14 + 44..14 + 48], &[0x80, 0x08, 0x04, 0x8C], "PAD TLV, length 1226 − 14 − 44 − 4");
        let (m, class) = Transport::L2.parse(&f).unwrap();
        assert_eq!((m.len(), class), (1226 - 14, Class::General));
        assert_eq!(&m[4..44], &fup[4..44]);
        for kind in [0x0, 0x2, 0x3] {
            let bare = msg(kind, if kind == 0 { 44 } else { 54 });
            let f = Transport::L2.emit_for_slot(src, &bare, 1226).unwrap();
            assert_eq!(f, Transport::L2.emit(src, &bare).unwrap(), "type {kind:#x} carries no TLV");
        }
        // No room for a TLV: left as it is.
        assert_eq!(Transport::L2.emit_for_slot(src, &fup, 60).unwrap(), Transport::L2.emit(src, &fup).unwrap());
        let t = Transport::UdpV4 { src: [10, 0, 0, 1] };
        assert_eq!(t.emit_for_slot(src, &fup, 1226).unwrap(), t.emit(src, &fup).unwrap());
    }

    /// A two-step Sync as statime makes it (twoStepFlag set, originTimestamp zero) becomes one-step: flag
    /// cleared, the time in the origin timestamp, nothing else changed.
    #[test]
    fn a_sync_becomes_one_step() {
        let mut sync = msg(0x0, 44);
        sync[6] = 0x02 | 0x04; // twoStep and unicast
        sync[8..16].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0x12, 0x34]); // correctionField
        sync[30..32].copy_from_slice(&[0xBE, 0xEF]);
        let before = sync.clone();
        // 1 700 000 000.123456789 s = 0x6553_F100 s.
        make_one_step(&mut sync, Tai(1_700_000_000_123_456_789)).unwrap();
        assert_eq!(sync[6], 0x04, "twoStepFlag cleared, the other flags kept");
        assert_eq!(&sync[34..44], &[0, 0, 0x65, 0x53, 0xF1, 0x00, 0x07, 0x5B, 0xCD, 0x15]);
        assert_eq!((&sync[..6], &sync[7..34]), (&before[..6], &before[7..34]), "the rest of the header is kept");
        assert_eq!(sequence_id(&sync), Some(0xBEEF));
        // Seconds beyond 32 bits land in the top 16 of the 48.
        make_one_step(&mut sync, Tai((1i64 << 32) * 1_000_000_000 + 5)).unwrap();
        assert_eq!(&sync[34..44], &[0, 1, 0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(make_one_step(&mut sync, Tai(-1)), Err(OneStepError::BeforeEpoch(Tai(-1))));
        for mut other in [msg(0x8, 44), msg(0x1, 44), msg(0x0, 54), msg(0x0, 34)] {
            let was = other.clone();
            assert_eq!(make_one_step(&mut other, Tai(1)), Err(OneStepError::NotSync));
            assert_eq!(other, was, "left untouched");
        }
        assert_eq!(sequence_id(&[0; 31]), None);
    }

    #[test]
    fn udp_round_trip_ports_and_checksum() {
        let t = Transport::UdpV4 { src: [10, 0, 0, 1] };
        let src = [2, 0, 0, 0, 0, 1];
        let sync = msg(0x0, 44);
        let f = t.emit(src, &sync).unwrap();
        assert_eq!(&f[..6], &[0x01, 0x00, 0x5E, 0x00, 0x01, 0x81]);
        assert_eq!(ipv4_checksum(&f[14..34]), 0, "the header checksum verifies");
        assert_eq!(&f[30..34], &IP_PTP);
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), PORT_EVENT);
        assert_eq!(t.parse(&f), Ok((&sync[..], Class::Event)));
        let ann = msg(0xB, 64);
        let f = t.emit(src, &ann).unwrap();
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), PORT_GENERAL);
        assert_eq!(t.parse(&f), Ok((&ann[..], Class::General)));
        // The other transport's frames are not ours.
        assert_eq!(Transport::L2.parse(&f), Err(WireError::NotPtp));
    }

    #[test]
    fn bad_input_is_a_precise_error() {
        let t = Transport::UdpV4 { src: [10, 0, 0, 1] };
        let src = [0; 6];
        let f = t.emit(src, &msg(0x1, 44)).unwrap();
        for cut in 0..f.len() {
            assert!(t.parse(&f[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = f.clone();
        bad[24] ^= 1; // header checksum
        assert_eq!(t.parse(&bad), Err(WireError::BadIpv4));
        let mut v1 = msg(0x0, 44);
        v1[1] = 0x01;
        assert_eq!(Transport::L2.emit(src, &v1), Err(WireError::BadVersion(1)));
        let mut short = msg(0x0, 44);
        short[2..4].copy_from_slice(&20u16.to_be_bytes());
        assert_eq!(Transport::L2.parse(&Transport::L2.emit(src, &short).unwrap()), Err(WireError::Truncated));
        assert_eq!(Transport::L2.emit(src, &msg(0x0, 1600)), Err(WireError::TooLong(1600)));
    }

    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Every message keepon sends (the event and general types, any length a header may give up to what
            /// a UDPv4 frame holds, any header bytes), over either transport and in a keepon slot of any size:
            /// parse(emit(m)) = m, with its class.
            #[test]
            fn parse_of_emit_is_the_message(
                kind in prop::sample::select(vec![0x0u8, 0x1, 0x2, 0x3, 0x8, 0x9, 0xA, 0xB, 0xC, 0xD]),
                len in 34usize..=300,
                body in prop::collection::vec(any::<u8>(), 300),
                udp in any::<bool>(),
                slot in 0usize..1600,
            ) {
                let mut m = body[..len].to_vec();
                m[0] = (m[0] & 0xF0) | kind;
                m[1] = (m[1] & 0xF0) | 2;
                m[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                let t = if udp { Transport::UdpV4 { src: [10, 0, 0, 1] } } else { Transport::L2 };
                let f = t.emit_for_slot([2, 0, 0, 0, 0, 1], &m, slot).unwrap();
                let (back, class) = t.parse(&f).unwrap();
                // A PAD TLV may follow (L2, messages that admit TLVs): the message is its first `len` bytes, the
                // header's length counting the TLV.
                prop_assert_eq!(&back[4..len], &m[4..len]);
                prop_assert_eq!(&back[..2], &m[..2]);
                prop_assert_eq!(class, class_of(&m).unwrap());
                let plain = t.emit([2, 0, 0, 0, 0, 1], &m).unwrap();
                prop_assert_eq!(t.parse(&plain).unwrap().0, &m[..]);
            }
        }
    }
}
