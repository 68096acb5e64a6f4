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

use core::fmt;

/// EtherType of keepon test frames (and of reserved-address fillers): IEEE local experimental 1.
pub const ETHERTYPE_LOCAL_EXPERIMENTAL: u16 = 0x88B5;
/// Magic at the start of the payload.
pub const MAGIC: [u8; 4] = *b"KPON";
/// Header version.
pub const VERSION: u8 = 1;
/// Bytes from the start of the frame to the end of the test header.
pub const HEADER_LEN: usize = 38;

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

    proptest! {
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
