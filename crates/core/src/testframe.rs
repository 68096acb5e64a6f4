//! The keepon test frame: an Ethernet frame whose payload starts with a small header that lets a listener
//! recognise it and match it to its schedule.
//!
//! ```text
//!  0      6      12    14      18   19   20     22          30           38
//!  | dst  | src  | type | magic | ver| rsv| flow |    seq    |  txtime ns |  zero padding …
//!                0x88B5  "KPON"   1    0   u16 BE  u64 BE      i64 BE (TAI)
//! ```
//!
//! EtherType 0x88B5 is IEEE 802 "local experimental". [`TestFrame`] is a checked view over untrusted bytes;
//! [`TestHeader`] is the parsed representation with `parse`/`emit`.
//!
//! The same 24 bytes from the magic on may also be the payload of a UDP datagram over IPv4 (an `SO_TXTIME` program
//! sending UDP, as the preload library's test program does): [`TestHeader::parse_any`] reads both.

use core::fmt;

/// EtherType of keepon test frames (and of reserved-address fillers): IEEE local experimental 1.
pub const ETHERTYPE_LOCAL_EXPERIMENTAL: u16 = 0x88B5;
/// Magic at the start of the payload.
pub const MAGIC: [u8; 4] = *b"KPON";
/// Header version.
pub const VERSION: u8 = 1;
/// Bytes from the start of the frame to the end of the test header.
pub const HEADER_LEN: usize = 38;
/// Bytes of the header from the magic on: what a UDP datagram carries.
pub const PAYLOAD_LEN: usize = HEADER_LEN - 14;
/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// IPv4 protocol number of UDP.
const IPPROTO_UDP: u8 = 17;

/// Why bytes are not a keepon test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the header.
    Truncated(usize),
    /// Another EtherType.
    NotKeepon(u16),
    /// EtherType right, magic wrong.
    BadMagic,
    /// Unknown header version.
    BadVersion(u8),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Truncated(n) => write!(f, "{n} bytes is shorter than a keepon test header ({HEADER_LEN})"),
            ParseError::NotKeepon(t) => {
                write!(f, "EtherType {t:#06x} is not keepon's {ETHERTYPE_LOCAL_EXPERIMENTAL:#06x}")
            }
            ParseError::BadMagic => write!(f, "payload does not start with the keepon magic"),
            ParseError::BadVersion(v) => write!(f, "keepon test header version {v} is not {VERSION}"),
        }
    }
}

/// A checked view of a test frame.
#[derive(Clone, Copy, Debug)]
pub struct TestFrame<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> TestFrame<T> {
    /// Check length, EtherType, magic and version.
    pub fn new_checked(buf: T) -> Result<Self, ParseError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::Truncated(b.len()));
        }
        let et = u16::from_be_bytes([b[12], b[13]]);
        if et != ETHERTYPE_LOCAL_EXPERIMENTAL {
            return Err(ParseError::NotKeepon(et));
        }
        if b[14..18] != MAGIC {
            return Err(ParseError::BadMagic);
        }
        if b[18] != VERSION {
            return Err(ParseError::BadVersion(b[18]));
        }
        Ok(TestFrame { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Destination MAC.
    pub fn dst(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.b()[0..6]);
        m
    }
    /// Source MAC.
    pub fn src(&self) -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&self.b()[6..12]);
        m
    }
    /// Flow number.
    pub fn flow(&self) -> u16 {
        u16::from_be_bytes([self.b()[20], self.b()[21]])
    }
    /// Sequence number within the flow.
    pub fn seq(&self) -> u64 {
        let mut a = [0; 8];
        a.copy_from_slice(&self.b()[22..30]);
        u64::from_be_bytes(a)
    }
    /// Scheduled txtime (TAI ns).
    pub fn txtime(&self) -> i64 {
        let mut a = [0; 8];
        a.copy_from_slice(&self.b()[30..38]);
        i64::from_be_bytes(a)
    }
}

/// Parsed test header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestHeader {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// Flow number.
    pub flow: u16,
    /// Sequence number.
    pub seq: u64,
    /// Scheduled txtime (TAI ns).
    pub txtime: i64,
}

impl TestHeader {
    /// Parse from untrusted bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let f = TestFrame::new_checked(bytes)?;
        Ok(TestHeader { dst: f.dst(), src: f.src(), flow: f.flow(), seq: f.seq(), txtime: f.txtime() })
    }

    /// Parse a test frame, or an IPv4 frame (no VLAN tag) whose UDP payload starts with the test header's bytes
    /// from the magic on (its `dst`/`src` are the frame's MAC addresses). Checksums are not checked: this is for
    /// recognising frames, not for validating them.
    pub fn parse_any(bytes: &[u8]) -> Result<Self, ParseError> {
        if bytes.len() < 14 || u16::from_be_bytes([bytes[12], bytes[13]]) != ETHERTYPE_IPV4 {
            return Self::parse(bytes);
        }
        let ip = &bytes[14..];
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != IPPROTO_UDP {
            return Err(ParseError::NotKeepon(ETHERTYPE_IPV4));
        }
        let ihl = usize::from(ip[0] & 0x0F) * 4;
        // A later fragment carries no UDP header.
        let fragment_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1FFF;
        if ihl < 20 || fragment_offset != 0 {
            return Err(ParseError::NotKeepon(ETHERTYPE_IPV4));
        }
        let payload = ip.get(ihl + 8..).ok_or(ParseError::Truncated(bytes.len()))?;
        let mut frame = [0u8; HEADER_LEN];
        let n = payload.len().min(PAYLOAD_LEN);
        frame[..12].copy_from_slice(&bytes[..12]);
        frame[12..14].copy_from_slice(&ETHERTYPE_LOCAL_EXPERIMENTAL.to_be_bytes());
        frame[14..14 + n].copy_from_slice(&payload[..n]);
        if n < PAYLOAD_LEN {
            return Err(ParseError::Truncated(14 + ihl + 8 + n));
        }
        Self::parse(&frame)
    }

    /// Bytes [`TestHeader::emit`] writes.
    pub const fn buffer_len() -> usize {
        HEADER_LEN
    }

    /// Write the header into the first [`HEADER_LEN`] bytes of `out` (which must be that long).
    pub fn emit(&self, out: &mut [u8]) {
        out[0..6].copy_from_slice(&self.dst);
        out[6..12].copy_from_slice(&self.src);
        out[12..14].copy_from_slice(&ETHERTYPE_LOCAL_EXPERIMENTAL.to_be_bytes());
        out[14..18].copy_from_slice(&MAGIC);
        out[18] = VERSION;
        out[19] = 0;
        out[20..22].copy_from_slice(&self.flow.to_be_bytes());
        out[22..30].copy_from_slice(&self.seq.to_be_bytes());
        out[30..38].copy_from_slice(&self.txtime.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BYTES: [u8; 38] = [
        0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xB5, b'K', b'P', b'O', b'N', 1, 0, 0, 7, 0, 0, 0, 0, 0, 0, 1,
        0, 0, 0, 0, 0, 0, 0, 0x27, 0x10,
    ];

    #[test]
    fn parses_and_emits_byte_literal() {
        let h = TestHeader::parse(&BYTES).unwrap();
        assert_eq!(h.flow, 7);
        assert_eq!(h.seq, 256);
        assert_eq!(h.txtime, 10_000);
        assert_eq!(h.src, [2, 0, 0, 0, 0, 1]);
        let mut out = [0u8; 38];
        h.emit(&mut out);
        assert_eq!(out, BYTES);
    }

    #[test]
    fn rejects_what_is_not_ours() {
        assert_eq!(TestHeader::parse(&BYTES[..20]), Err(ParseError::Truncated(20)));
        let mut b = BYTES;
        b[12] = 0x08;
        b[13] = 0x00;
        assert_eq!(TestHeader::parse(&b), Err(ParseError::NotKeepon(0x0800)));
        let mut b = BYTES;
        b[15] = b'X';
        assert_eq!(TestHeader::parse(&b), Err(ParseError::BadMagic));
        let mut b = BYTES;
        b[18] = 9;
        assert_eq!(TestHeader::parse(&b), Err(ParseError::BadVersion(9)));
    }

    /// `BYTES`' header as the payload of a UDP datagram over IPv4 (IHL `ihl` words).
    fn udp_frame(ihl: u8) -> Vec<u8> {
        let mut f = BYTES[..12].to_vec();
        f.extend_from_slice(&[0x08, 0x00, 0x40 | ihl, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 239, 1, 2, 3]);
        f.resize(14 + usize::from(ihl) * 4, 0);
        f.extend_from_slice(&[0x13, 0x88, 0x13, 0x88, 0, 32, 0, 0]);
        f.extend_from_slice(&BYTES[14..]);
        f.resize(f.len() + 10, 0);
        f
    }

    #[test]
    fn reads_the_header_from_a_udp_datagram() {
        let want = TestHeader::parse(&BYTES).unwrap();
        assert_eq!(TestHeader::parse_any(&BYTES).unwrap(), want);
        assert_eq!(TestHeader::parse_any(&udp_frame(5)).unwrap(), want);
        assert_eq!(TestHeader::parse_any(&udp_frame(6)).unwrap(), want, "with IP options");
        let f = udp_frame(5);
        assert!(matches!(TestHeader::parse_any(&f[..14 + 20 + 8 + 10]), Err(ParseError::Truncated(_))));
        let mut tcp = f.clone();
        tcp[14 + 9] = 6;
        assert_eq!(TestHeader::parse_any(&tcp), Err(ParseError::NotKeepon(0x0800)));
        let mut fragment = f.clone();
        fragment[14 + 7] = 1;
        assert_eq!(TestHeader::parse_any(&fragment), Err(ParseError::NotKeepon(0x0800)));
        let mut other = f;
        other[14 + 28] = b'X';
        assert_eq!(TestHeader::parse_any(&other), Err(ParseError::BadMagic));
    }

    proptest! {
        #[test]
        fn parse_any_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..90), ipv4: bool) {
            let mut bytes = bytes;
            if ipv4 && bytes.len() >= 15 {
                bytes[12] = 0x08;
                bytes[13] = 0;
                bytes[14] = 0x45;
            }
            let _ = TestHeader::parse_any(&bytes);
        }

        #[test]
        fn emit_parse_round_trip(dst: [u8; 6], src: [u8; 6], flow: u16, seq: u64, txtime: i64) {
            let h = TestHeader { dst, src, flow, seq, txtime };
            let mut out = [0u8; 64];
            h.emit(&mut out);
            prop_assert_eq!(TestHeader::parse(&out).unwrap(), h);
        }

        #[test]
        fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
            let _ = TestHeader::parse(&bytes);
        }
    }
}
