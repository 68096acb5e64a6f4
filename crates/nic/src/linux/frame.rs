//! What goes on the wire for a slot: fillers the first hop drops, and the FCS when software writes it.
//!
//! ```text
//!   reserved-address filler   01-80-C2-00-00-04 | src | 0x88B5 | zeros …            | FCS by the NIC
//!   bad-FCS filler            01-80-C2-00-00-04 | src | 0x88B5 | zeros …            | !CRC-32 (SO_NOFCS)
//!   real frame, bad-FCS mode  frame bytes | zero padding to the slot's length − 4   | CRC-32  (SO_NOFCS)
//!   real frame, otherwise     frame bytes | zero padding to the slot's length − 4   | FCS by the NIC
//! ```
//!
//! Each slot is as long on the wire as the station made it: `slot_bytes` nominally, fillers anywhere from 64
//! bytes to the link's largest frame (the station trims them to keep the wire on its schedule). A bad-FCS
//! filler of any length carries the inverted CRC of its own bytes (precomputed for every length) and the
//! reserved group address: a first hop that forwards before checking the FCS (cut-through) still never
//! forwards it.

use std::fmt;

/// IEEE 802.1Q reserved group address used for fillers by default (never forwarded by 802.1Q bridges).
pub const RESERVED_DST: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x04];
/// IEEE local experimental EtherType.
pub const FILLER_ETHERTYPE: u16 = 0x88B5;

/// How fillers are made so that the first hop discards them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillerMode {
    /// Bad FCS when the backend and driver can send it (AF_PACKET `sendmmsg` + `SO_NOFCS`), else reserved
    /// address.
    Auto,
    /// Fillers with an inverted FCS, real frames with a correct one, all written in software and sent on one
    /// AF_PACKET socket with `SO_NOFCS`. Needs a driver with `IFF_SUPP_NOFCS` and a store-and-forward first hop.
    BadFcs,
    /// Fillers addressed to a reserved group address the first bridge never forwards. Works on every NIC.
    ReservedAddress {
        /// Destination MAC (default `01-80-C2-00-00-04`; fallbacks 05, 06, 09, 0A).
        dst: [u8; 6],
        /// EtherType (default `0x88B5`).
        ethertype: u16,
    },
}

impl FillerMode {
    /// Reserved-address fillers with the defaults.
    pub const fn reserved() -> FillerMode {
        FillerMode::ReservedAddress { dst: RESERVED_DST, ethertype: FILLER_ETHERTYPE }
    }
}

impl fmt::Display for FillerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FillerMode::Auto => f.write_str("auto"),
            FillerMode::BadFcs => f.write_str("bad-fcs"),
            FillerMode::ReservedAddress { dst, ethertype } => {
                write!(f, "reserved-address {} / {ethertype:#06x}", mac_string(dst))
            }
        }
    }
}

/// `aa-bb-cc-dd-ee-ff`.
pub fn mac_string(m: &[u8; 6]) -> String {
    format!("{:02x}-{:02x}-{:02x}-{:02x}-{:02x}-{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// The Ethernet FCS of `data`: CRC-32 (IEEE 802.3), least significant byte first on the wire.
pub fn fcs(data: &[u8]) -> [u8; 4] {
    crc32fast::hash(data).to_le_bytes()
}

/// The bytes of every slot of one link, for a resolved filler mode.
#[derive(Clone, Debug)]
pub struct Framing {
    /// Software writes the FCS (`SO_NOFCS`): real frames get a correct one, fillers an inverted one.
    pub software_fcs: bool,
    /// The longest filler's data (header and zeros, no FCS); shorter fillers are its prefixes.
    data: Vec<u8>,
    /// Software-FCS mode: the inverted CRC of the filler of each data length (index: data bytes).
    bad_fcs: Vec<[u8; 4]>,
    /// The filler of the nominal slot size as handed to the kernel (with its bad FCS in software-FCS mode).
    nominal: Vec<u8>,
    data_len: usize,
}

impl Framing {
    /// Framing for slots of `slot_bytes` and fillers up to `max_frame` bytes (both including FCS). `mode` must be
    /// resolved (not `Auto`).
    pub fn new(mode: FillerMode, src: [u8; 6], slot_bytes: u32, max_frame: u32) -> Framing {
        let data_len = slot_bytes as usize - 4;
        let max_data = max_frame.max(slot_bytes) as usize - 4;
        let (dst, ethertype, software_fcs) = match mode {
            FillerMode::ReservedAddress { dst, ethertype } => (dst, ethertype, false),
            FillerMode::BadFcs | FillerMode::Auto => (RESERVED_DST, FILLER_ETHERTYPE, true),
        };
        let mut data = vec![0u8; max_data];
        data[0..6].copy_from_slice(&dst);
        data[6..12].copy_from_slice(&src);
        data[12..14].copy_from_slice(&ethertype.to_be_bytes());
        let mut bad_fcs = Vec::new();
        if software_fcs {
            // The CRC of every prefix, extended one zero byte at a time.
            let mut h = crc32fast::Hasher::new();
            h.update(&data[..14]);
            bad_fcs = vec![[0; 4]; max_data + 1];
            for (len, fcs) in bad_fcs.iter_mut().enumerate().skip(14) {
                if len > 14 {
                    h.update(&[0]);
                }
                *fcs = (h.clone().finalize() ^ 0xFFFF_FFFF).to_le_bytes();
            }
        }
        let mut nominal = data[..data_len].to_vec();
        if software_fcs {
            nominal.extend_from_slice(&bad_fcs[data_len]);
        }
        Framing { software_fcs, data, bad_fcs, nominal, data_len }
    }

    /// The complete filler of the nominal slot size as handed to the kernel (with its bad FCS in software-FCS
    /// mode).
    pub fn filler(&self) -> &[u8] {
        &self.nominal
    }

    /// A filler of `len` data bytes (its length on the wire minus the FCS): the data, and the bad FCS to append
    /// (empty unless software writes the FCS). `len` is clamped to what the framing holds.
    pub fn filler_of(&self, len: usize) -> (&[u8], &[u8]) {
        let len = len.clamp(14, self.data.len());
        let fcs = if self.software_fcs { &self.bad_fcs[len][..] } else { &[][..] };
        (&self.data[..len], fcs)
    }

    /// Bytes of frame data per nominal slot (slot size minus FCS).
    pub fn data_len(&self) -> usize {
        self.data_len
    }

    /// Most bytes of frame data a slot may have (the longest filler, minus FCS).
    pub fn max_data(&self) -> usize {
        self.data.len()
    }

    /// Most bytes handed to the kernel per slot.
    pub fn wire_len(&self) -> usize {
        self.data.len() + if self.software_fcs { 4 } else { 0 }
    }

    /// True if `frame` (without FCS) is one of this link's fillers.
    pub fn is_filler(&self, frame: &[u8]) -> bool {
        frame.len() >= 14 && frame[..14] == self.data[..14]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcs_matches_a_known_frame() {
        // CRC-32 of "123456789" is 0xCBF43926; on the wire LSB first.
        assert_eq!(fcs(b"123456789"), [0x26, 0x39, 0xF4, 0xCB]);
    }

    #[test]
    fn fillers_have_the_slot_length_and_the_right_fcs() {
        let src = [2, 0, 0, 0, 0, 1];
        let r = Framing::new(FillerMode::reserved(), src, 300, 300);
        assert_eq!(r.filler().len(), 296);
        assert_eq!(&r.filler()[..6], &RESERVED_DST);
        assert_eq!(&r.filler()[12..14], &[0x88, 0xB5]);
        assert!(r.filler()[14..].iter().all(|b| *b == 0));
        let b = Framing::new(FillerMode::BadFcs, src, 300, 1518);
        assert_eq!(b.filler().len(), 300);
        let good = fcs(&b.filler()[..296]);
        let sent = &b.filler()[296..];
        assert!(good.iter().zip(sent).all(|(g, s)| g ^ s == 0xFF), "filler FCS is the inverted CRC");
        assert!(b.is_filler(b.filler()));
        assert_eq!(FillerMode::reserved().to_string(), "reserved-address 01-80-c2-00-00-04 / 0x88b5");
    }

    /// Fillers of every length from the minimum frame to the largest carry zeros after the header and, in
    /// bad-FCS mode, the inverted CRC of exactly their own bytes.
    #[test]
    fn fillers_of_any_length_are_zero_with_their_own_bad_fcs() {
        let src = [2, 0, 0, 0, 0, 1];
        let b = Framing::new(FillerMode::BadFcs, src, 300, 1518);
        let r = Framing::new(FillerMode::reserved(), src, 300, 1518);
        assert_eq!((b.max_data(), b.wire_len(), r.wire_len()), (1514, 1518, 1514));
        for len in 60..=1514 {
            let (d, f) = b.filler_of(len);
            assert_eq!(d.len(), len);
            assert!(d[14..].iter().all(|x| *x == 0));
            let good = fcs(d);
            assert!(good.iter().zip(f).all(|(g, s)| g ^ s == 0xFF), "length {len}");
            let (d, f) = r.filler_of(len);
            assert_eq!((d.len(), f.len()), (len, 0));
            assert!(r.is_filler(d));
        }
    }
}
