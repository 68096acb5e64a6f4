//! The redundancy tag (R-TAG) of IEEE 802.1CB: a sequence number carried in the frame so that a receiver can
//! tell the copies of one frame apart from the next frame.
//!
//! ```text
//!  untagged   | dst 6 | src 6 |                                  | type 2 | payload …
//!  R-TAGged   | dst 6 | src 6 | 0xF1C1 | reserved 2 | seq 2 (BE) | type 2 | payload …
//!  with VLAN  | dst 6 | src 6 | 0x8100 | TCI 2 | 0xF1C1 | reserved 2 | seq 2 | type 2 | payload …
//! ```
//!
//! **Placement.** The tag goes after the MAC addresses, and after one VLAN tag (C-TAG 0x8100 or S-TAG 0x88A8) if
//! the frame has one: a bridge classifies and forwards a frame by its VLAN tag, so the tag stays outermost and the
//! R-TAG travels inside it, as the standard places it (and as Wireshark dissects it: the R-TAG is an EtherType
//! like any other, so a dissector reaches it after the VLAN tag). Only one VLAN tag is looked through; an R-TAG
//! behind two stacked tags is not found (keepon never sends one).
//!
//! **Reserved bits** are written as zero and ignored on receipt.
//!
//! [`RtagFrame`] is a checked view over untrusted bytes (a whole Ethernet frame); [`Rtag`] is the parsed
//! representation with `parse`/`emit`; [`insert`] and [`strip`] add and remove the tag of a whole frame.

use alloc::vec::Vec;

use super::FrerError;

/// EtherType of the R-TAG (IEEE 802.1CB).
pub const ETHERTYPE_RTAG: u16 = 0xF1C1;
/// EtherType of a customer VLAN tag (IEEE 802.1Q C-TAG).
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of a service VLAN tag (IEEE 802.1ad S-TAG).
pub const ETHERTYPE_QINQ: u16 = 0x88A8;
/// Bytes the R-TAG adds to a frame: its EtherType, 16 reserved bits and the 16-bit sequence number.
pub const RTAG_LEN: usize = 6;
/// Bytes of the MAC addresses.
const MACS: usize = 12;
/// Bytes of a VLAN tag (EtherType and TCI).
const VLAN_LEN: usize = 4;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Where a frame's R-TAG is, or goes: after the MAC addresses, and after one VLAN tag if the frame has one.
/// `Err` if the frame is too short to say.
pub fn tag_offset(frame: &[u8]) -> Result<usize, FrerError> {
    if frame.len() < MACS + 2 {
        return Err(FrerError::Truncated(frame.len()));
    }
    match be16(frame, MACS) {
        ETHERTYPE_VLAN | ETHERTYPE_QINQ if frame.len() < MACS + VLAN_LEN + 2 => Err(FrerError::Truncated(frame.len())),
        ETHERTYPE_VLAN | ETHERTYPE_QINQ => Ok(MACS + VLAN_LEN),
        _ => Ok(MACS),
    }
}

/// A checked view of an R-TAGged Ethernet frame: the tag and the EtherType after it are inside the buffer.
#[derive(Clone, Copy, Debug)]
pub struct RtagFrame<T: AsRef<[u8]>> {
    buf: T,
    /// Offset of the R-TAG's EtherType.
    at: usize,
}

impl<T: AsRef<[u8]>> RtagFrame<T> {
    /// Check that `buf` is a frame with an R-TAG where one belongs ([`tag_offset`]) and that the encapsulated
    /// EtherType follows it.
    pub fn new_checked(buf: T) -> Result<Self, FrerError> {
        let b = buf.as_ref();
        let at = tag_offset(b)?;
        let et = be16(b, at);
        if et != ETHERTYPE_RTAG {
            return Err(FrerError::NotTagged(et));
        }
        if b.len() < at + RTAG_LEN + 2 {
            return Err(FrerError::Truncated(b.len()));
        }
        Ok(RtagFrame { buf, at })
    }

    /// Offset of the R-TAG in the frame (12, or 16 behind a VLAN tag).
    pub fn offset(&self) -> usize {
        self.at
    }
    /// The reserved field (zero when sent; ignored).
    pub fn reserved(&self) -> u16 {
        be16(self.buf.as_ref(), self.at + 2)
    }
    /// The sequence number.
    pub fn seq(&self) -> u16 {
        be16(self.buf.as_ref(), self.at + 4)
    }
    /// The EtherType of what the tag encapsulates.
    pub fn inner_ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), self.at + RTAG_LEN)
    }
}

/// A parsed R-TAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rtag {
    /// The sequence number (802.1CB `sequence_number`, 16 bits).
    pub seq: u16,
}

impl Rtag {
    /// The R-TAG of a whole frame, and its offset.
    pub fn parse(frame: &[u8]) -> Result<(Rtag, usize), FrerError> {
        let f = RtagFrame::new_checked(frame)?;
        Ok((Rtag { seq: f.seq() }, f.offset()))
    }

    /// Bytes [`Rtag::emit`] writes.
    pub const fn buffer_len() -> usize {
        RTAG_LEN
    }

    /// Write the tag (EtherType, zero reserved bits, sequence number) into the first [`RTAG_LEN`] bytes of
    /// `out`; `Err` if `out` is shorter.
    pub fn emit(&self, out: &mut [u8]) -> Result<(), FrerError> {
        let n = out.len();
        let out = out.get_mut(..RTAG_LEN).ok_or(FrerError::Truncated(n))?;
        out[0..2].copy_from_slice(&ETHERTYPE_RTAG.to_be_bytes());
        out[2..4].copy_from_slice(&[0, 0]);
        out[4..6].copy_from_slice(&self.seq.to_be_bytes());
        Ok(())
    }
}

/// `frame` with `tag` inserted where it belongs ([`tag_offset`]): [`RTAG_LEN`] bytes longer. A frame that already
/// has an R-TAG is refused ([`FrerError::AlreadyTagged`]): a stream is tagged once.
pub fn insert(frame: &[u8], tag: Rtag) -> Result<Vec<u8>, FrerError> {
    let at = tag_offset(frame)?;
    if be16(frame, at) == ETHERTYPE_RTAG {
        return Err(FrerError::AlreadyTagged);
    }
    let mut out = Vec::with_capacity(frame.len() + RTAG_LEN);
    out.extend_from_slice(&frame[..at]);
    out.extend_from_slice(&[0; RTAG_LEN]);
    tag.emit(&mut out[at..])?;
    out.extend_from_slice(&frame[at..]);
    Ok(out)
}

/// The tag of an R-TAGged frame and the frame without it (what the talker tagged); `Err` if it has none.
pub fn strip(frame: &[u8]) -> Result<(Rtag, Vec<u8>), FrerError> {
    let (tag, at) = Rtag::parse(frame)?;
    let mut out = Vec::with_capacity(frame.len() - RTAG_LEN);
    out.extend_from_slice(&frame[..at]);
    out.extend_from_slice(&frame[at + RTAG_LEN..]);
    Ok((tag, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A keepon test frame's first bytes, untagged and tagged with sequence number 0x1234.
    const PLAIN: [u8; 18] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xB5, b'K', b'P', b'O', b'N'];
    const TAGGED: [u8; 24] =
        [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0xF1, 0xC1, 0, 0, 0x12, 0x34, 0x88, 0xB5, b'K', b'P', b'O', b'N'];

    #[test]
    fn parses_and_emits_byte_literals() {
        let f = RtagFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!((f.offset(), f.seq(), f.reserved(), f.inner_ethertype()), (12, 0x1234, 0, 0x88B5));
        assert_eq!(insert(&PLAIN, Rtag { seq: 0x1234 }).unwrap(), TAGGED);
        assert_eq!(strip(&TAGGED).unwrap(), (Rtag { seq: 0x1234 }, PLAIN.to_vec()));
        let mut out = [0xFF; 6];
        Rtag { seq: 0xBEEF }.emit(&mut out).unwrap();
        assert_eq!(out, [0xF1, 0xC1, 0, 0, 0xBE, 0xEF]);
        assert_eq!(Rtag { seq: 1 }.emit(&mut [0; 5]), Err(FrerError::Truncated(5)));
    }

    /// Behind a VLAN tag (C-TAG or S-TAG) the R-TAG comes after it; reserved bits are ignored on receipt.
    #[test]
    fn goes_behind_a_vlan_tag() {
        for tpid in [[0x81, 0x00], [0x88, 0xA8]] {
            let mut plain = PLAIN[..12].to_vec();
            plain.extend_from_slice(&[tpid[0], tpid[1], 0x20, 0x05, 0x88, 0xB5, b'K']);
            let tagged = insert(&plain, Rtag { seq: 7 }).unwrap();
            assert_eq!(&tagged[12..24], &[tpid[0], tpid[1], 0x20, 0x05, 0xF1, 0xC1, 0, 0, 0, 7, 0x88, 0xB5]);
            let mut odd = tagged.clone();
            odd[18] = 0xAB;
            let f = RtagFrame::new_checked(&odd).unwrap();
            assert_eq!((f.offset(), f.seq(), f.reserved(), f.inner_ethertype()), (16, 7, 0xAB00, 0x88B5));
            assert_eq!(strip(&tagged).unwrap().1, plain);
        }
    }

    #[test]
    fn refuses_what_is_not_tagged_or_is_cut() {
        assert_eq!(Rtag::parse(&PLAIN), Err(FrerError::NotTagged(0x88B5)));
        assert_eq!(Rtag::parse(&TAGGED[..19]), Err(FrerError::Truncated(19)));
        assert_eq!(Rtag::parse(&TAGGED[..13]), Err(FrerError::Truncated(13)));
        assert_eq!(insert(&TAGGED, Rtag { seq: 1 }), Err(FrerError::AlreadyTagged));
        assert_eq!(insert(&PLAIN[..13], Rtag { seq: 1 }), Err(FrerError::Truncated(13)));
        let vlan_cut = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0x20];
        assert_eq!(tag_offset(&vlan_cut), Err(FrerError::Truncated(15)));
    }

    proptest! {
        #[test]
        fn insert_strip_round_trip(frame in prop::collection::vec(any::<u8>(), 14..80), seq: u16) {
            match insert(&frame, Rtag { seq }) {
                Ok(tagged) => {
                    prop_assert_eq!(tagged.len(), frame.len() + RTAG_LEN);
                    prop_assert_eq!(strip(&tagged).unwrap(), (Rtag { seq }, frame));
                }
                Err(e) => prop_assert!(matches!(e, FrerError::AlreadyTagged | FrerError::Truncated(_))),
            }
        }

        #[test]
        fn parse_never_panics(frame in prop::collection::vec(any::<u8>(), 0..40)) {
            let _ = Rtag::parse(&frame);
            let _ = strip(&frame);
        }
    }
}
