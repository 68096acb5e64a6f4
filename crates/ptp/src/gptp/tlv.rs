//! The IEEE 802.1AS Follow_Up information TLV, as a view-free representation: [`FollowUpInfo::parse`] takes the
//! TLV's bytes (type, length and value) apart, checking every field it relies on; [`FollowUpInfo::emit`] writes
//! them back; [`find`] looks for it among a Follow_Up's TLVs; [`append`] adds it to a Follow_Up (messageLength
//! follows).
//!
//! ```text
//!  0      2      4         7         10                          14        16                            28     32
//!  | type | len  | orgId   | subtype | cumulativeScaledRateOffset | gmTBI   | lastGmPhaseChange (ScaledNs) | sLGFC |
//!  0x0003   28    00-80-C2  00-00-01   Int32 (rate ratio − 1)·2^41  UInt16    96-bit signed, ns·2^16         Int32
//! ```

use core::fmt;

/// The ORGANIZATION_EXTENSION TLV type.
pub const ORGANIZATION_EXTENSION: u16 = 0x0003;
/// IEEE 802.1's organizationId.
pub const IEEE_802_1: [u8; 3] = [0x00, 0x80, 0xC2];
/// The Follow_Up information TLV's organizationSubType.
pub const SUBTYPE_FOLLOW_UP_INFO: [u8; 3] = [0x00, 0x00, 0x01];
/// The TLV's lengthField (the value's bytes).
pub const VALUE_LEN: u16 = 28;
/// The whole TLV's bytes.
pub const LEN: usize = 4 + VALUE_LEN as usize;
/// A Follow_Up's length without TLVs (header and preciseOriginTimestamp).
pub const FOLLOW_UP_BODY: usize = 44;
/// 2^41: the scale of cumulativeScaledRateOffset and scaledLastGmFreqChange.
const RATE_SCALE: f64 = 2_199_023_255_552.0;

/// What the Follow_Up information TLV carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowUpInfo {
    /// (rateRatio − 1)·2^41: the grandmaster's frequency over the sender's.
    pub cumulative_scaled_rate_offset: i32,
    /// Which time base the grandmaster's time belongs to (changes when its phase or frequency jumps).
    pub gm_time_base_indicator: u16,
    /// The grandmaster's last phase change, ns·2^16 (a 96-bit signed value on the wire).
    pub last_gm_phase_change: i128,
    /// The grandmaster's last frequency change, scaled by 2^41.
    pub scaled_last_gm_freq_change: i32,
}

/// Why bytes are not a Follow_Up information TLV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlvError {
    /// Fewer bytes than the TLV (or the Follow_Up) needs.
    Truncated,
    /// Another TLV type, organization or subtype.
    NotFollowUpInfo,
    /// The right type and organization with a lengthField other than 28.
    BadLength(u16),
    /// A lastGmPhaseChange outside what 96 bits hold.
    PhaseOutOfRange,
    /// Not a Follow_Up (messageType 8).
    NotFollowUp,
}

impl fmt::Display for TlvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlvError::Truncated => write!(f, "shorter than a Follow_Up information TLV"),
            TlvError::NotFollowUpInfo => write!(f, "not an IEEE 802.1 Follow_Up information TLV"),
            TlvError::BadLength(n) => write!(f, "Follow_Up information TLV of length {n}, expected {VALUE_LEN}"),
            TlvError::PhaseOutOfRange => write!(f, "lastGmPhaseChange beyond 96 bits"),
            TlvError::NotFollowUp => write!(f, "not a Follow_Up"),
        }
    }
}

/// The largest magnitude a 96-bit signed ScaledNs holds.
const SCALED_NS_MAX: i128 = (1i128 << 95) - 1;
const SCALED_NS_MIN: i128 = -(1i128 << 95);

impl FollowUpInfo {
    /// A grandmaster's own TLV: its rate ratio is 1, no phase or frequency change, time base 0.
    pub const GRANDMASTER: FollowUpInfo = FollowUpInfo {
        cumulative_scaled_rate_offset: 0,
        gm_time_base_indicator: 0,
        last_gm_phase_change: 0,
        scaled_last_gm_freq_change: 0,
    };

    /// The rate ratio it carries (grandmaster frequency over the sender's).
    pub fn rate_ratio(&self) -> f64 {
        1.0 + f64::from(self.cumulative_scaled_rate_offset) / RATE_SCALE
    }

    /// Take the TLV at the start of `b` apart (trailing bytes are ignored).
    pub fn parse(b: &[u8]) -> Result<FollowUpInfo, TlvError> {
        // Type and length first: another TLV may be shorter than an organization extension's header.
        let tl = b.get(..4).ok_or(TlvError::Truncated)?;
        if u16::from_be_bytes([tl[0], tl[1]]) != ORGANIZATION_EXTENSION {
            return Err(TlvError::NotFollowUpInfo);
        }
        let head = b.get(..10).ok_or(TlvError::Truncated)?;
        if head[4..7] != IEEE_802_1 || head[7..10] != SUBTYPE_FOLLOW_UP_INFO {
            return Err(TlvError::NotFollowUpInfo);
        }
        let len = u16::from_be_bytes([head[2], head[3]]);
        if len != VALUE_LEN {
            return Err(TlvError::BadLength(len));
        }
        let v = b.get(10..LEN).ok_or(TlvError::Truncated)?;
        let mut phase = [0u8; 16];
        // Sign-extend the 96-bit value into 128 bits.
        phase[..4].fill(if v[6] & 0x80 != 0 { 0xFF } else { 0 });
        phase[4..].copy_from_slice(&v[6..18]);
        Ok(FollowUpInfo {
            cumulative_scaled_rate_offset: i32::from_be_bytes([v[0], v[1], v[2], v[3]]),
            gm_time_base_indicator: u16::from_be_bytes([v[4], v[5]]),
            last_gm_phase_change: i128::from_be_bytes(phase),
            scaled_last_gm_freq_change: i32::from_be_bytes([v[18], v[19], v[20], v[21]]),
        })
    }

    /// Write the TLV into the first [`LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), TlvError> {
        if !(SCALED_NS_MIN..=SCALED_NS_MAX).contains(&self.last_gm_phase_change) {
            return Err(TlvError::PhaseOutOfRange);
        }
        let b = b.get_mut(..LEN).ok_or(TlvError::Truncated)?;
        b[0..2].copy_from_slice(&ORGANIZATION_EXTENSION.to_be_bytes());
        b[2..4].copy_from_slice(&VALUE_LEN.to_be_bytes());
        b[4..7].copy_from_slice(&IEEE_802_1);
        b[7..10].copy_from_slice(&SUBTYPE_FOLLOW_UP_INFO);
        b[10..14].copy_from_slice(&self.cumulative_scaled_rate_offset.to_be_bytes());
        b[14..16].copy_from_slice(&self.gm_time_base_indicator.to_be_bytes());
        b[16..28].copy_from_slice(&self.last_gm_phase_change.to_be_bytes()[4..]);
        b[28..32].copy_from_slice(&self.scaled_last_gm_freq_change.to_be_bytes());
        Ok(())
    }
}

fn is_follow_up(msg: &[u8]) -> bool {
    msg.first().is_some_and(|b| b & 0x0F == 0x8)
}

/// The Follow_Up information TLV among the TLVs of Follow_Up `msg` (exactly its messageLength, as
/// [`crate::wire::Transport::parse`] gives it). Other TLVs (a PAD TLV, for one) are skipped.
pub fn find(msg: &[u8]) -> Result<FollowUpInfo, TlvError> {
    if !is_follow_up(msg) {
        return Err(TlvError::NotFollowUp);
    }
    let mut at = FOLLOW_UP_BODY;
    if msg.len() < at {
        return Err(TlvError::Truncated);
    }
    while let Some(h) = msg.get(at..at + 4) {
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let tlv = msg.get(at..at + 4 + len).ok_or(TlvError::Truncated)?;
        match FollowUpInfo::parse(tlv) {
            // (A TLV whose own length ends before an organization header is complete is not it either.)
            Err(TlvError::NotFollowUpInfo | TlvError::Truncated) if tlv.len() < 10 => at += 4 + len,
            Err(TlvError::NotFollowUpInfo) => at += 4 + len,
            r => return r,
        }
    }
    Err(TlvError::NotFollowUpInfo)
}

/// Append the TLV to Follow_Up `msg` (a bare Follow_Up, or one with TLVs already), counting it in messageLength.
pub fn append(msg: &mut Vec<u8>, info: &FollowUpInfo) -> Result<(), TlvError> {
    if !is_follow_up(msg) {
        return Err(TlvError::NotFollowUp);
    }
    if msg.len() < FOLLOW_UP_BODY {
        return Err(TlvError::Truncated);
    }
    let len = u16::try_from(msg.len() + LEN).map_err(|_| TlvError::Truncated)?;
    let at = msg.len();
    msg.resize(at + LEN, 0);
    if let Err(e) = info.emit(&mut msg[at..]) {
        msg.truncate(at);
        return Err(e);
    }
    msg[2..4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare Follow_Up (type 8 with transportSpecific 1, version 2, length 44).
    fn follow_up() -> Vec<u8> {
        let mut m = vec![0u8; 44];
        m[0] = 0x18;
        m[1] = 0x02;
        m[2..4].copy_from_slice(&44u16.to_be_bytes());
        m
    }

    /// Byte-exact, written by hand from IEEE 802.1AS-2020 §11.4.4.3: type 3, length 28, 00-80-C2, subtype 1, then
    /// the four fields big-endian; the 96-bit lastGmPhaseChange sign-extends on the way back.
    #[test]
    fn encoding_is_byte_exact_and_parses_back() {
        let info = FollowUpInfo {
            cumulative_scaled_rate_offset: -0x0102_0304,
            gm_time_base_indicator: 0xBEEF,
            last_gm_phase_change: -2,
            scaled_last_gm_freq_change: 0x1122_3344,
        };
        let mut b = [0u8; LEN];
        info.emit(&mut b).unwrap();
        #[rustfmt::skip]
        let want: [u8; LEN] = [
            0x00, 0x03, 0x00, 0x1C,
            0x00, 0x80, 0xC2, 0x00, 0x00, 0x01,
            0xFE, 0xFD, 0xFC, 0xFC,                         // −0x01020304
            0xBE, 0xEF,
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, // −2 in 96 bits
            0x11, 0x22, 0x33, 0x44,
        ];
        assert_eq!(b, want);
        assert_eq!(FollowUpInfo::parse(&b), Ok(info));
        // The largest and smallest 96-bit values survive; one beyond is refused, not wrapped.
        for phase in [SCALED_NS_MAX, SCALED_NS_MIN, 1 << 64] {
            let i = FollowUpInfo { last_gm_phase_change: phase, ..info };
            i.emit(&mut b).unwrap();
            assert_eq!(FollowUpInfo::parse(&b).unwrap().last_gm_phase_change, phase);
        }
        let over = FollowUpInfo { last_gm_phase_change: SCALED_NS_MAX + 1, ..info };
        assert_eq!(over.emit(&mut b), Err(TlvError::PhaseOutOfRange));
        assert_eq!(info.emit(&mut b[..LEN - 1]), Err(TlvError::Truncated));
    }

    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any field values a TLV can carry, appended to a Follow_Up with any TLVs before it: found again as they
            /// were, and the Follow_Up's messageLength counts it.
            #[test]
            fn find_of_append_is_the_info(
                csro in any::<i32>(),
                tbi in any::<u16>(),
                phase in SCALED_NS_MIN..=SCALED_NS_MAX,
                freq in any::<i32>(),
                pads in prop::collection::vec(0u16..40, 0..3),
            ) {
                let info = FollowUpInfo {
                    cumulative_scaled_rate_offset: csro,
                    gm_time_base_indicator: tbi,
                    last_gm_phase_change: phase,
                    scaled_last_gm_freq_change: freq,
                };
                let mut m = follow_up();
                for n in pads {
                    m.extend_from_slice(&[0x80, 0x08]);
                    m.extend_from_slice(&n.to_be_bytes());
                    m.resize(m.len() + usize::from(n), 0);
                }
                append(&mut m, &info).unwrap();
                prop_assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
                prop_assert_eq!(find(&m), Ok(info));
            }
        }
    }

    #[test]
    fn rate_ratio_is_scaled_by_2_pow_41() {
        let i = FollowUpInfo { cumulative_scaled_rate_offset: 2_199_023, ..FollowUpInfo::GRANDMASTER };
        // 2 199 023 / 2^41 ≈ 1.0e-6: 1 ppm.
        assert!((i.rate_ratio() - 1.000_001).abs() < 1e-12, "{}", i.rate_ratio());
        assert_eq!(FollowUpInfo::GRANDMASTER.rate_ratio(), 1.0);
    }

    #[test]
    fn appended_to_a_follow_up_found_behind_other_tlvs() {
        let info = FollowUpInfo { cumulative_scaled_rate_offset: 7, ..FollowUpInfo::GRANDMASTER };
        let mut m = follow_up();
        assert_eq!(find(&m), Err(TlvError::NotFollowUpInfo), "a bare Follow_Up has none");
        append(&mut m, &info).unwrap();
        assert_eq!(m.len(), 76);
        assert_eq!(u16::from_be_bytes([m[2], m[3]]), 76, "messageLength counts the TLV");
        assert_eq!(m[0], 0x18, "the header is kept");
        assert_eq!(find(&m), Ok(info));
        // Behind a PAD TLV of 6 bytes.
        let mut padded = follow_up();
        padded.extend_from_slice(&[0x80, 0x08, 0x00, 0x06, 0, 0, 0, 0, 0, 0]);
        append(&mut padded, &info).unwrap();
        assert_eq!(find(&padded), Ok(info));
        // Another organization's subtype 1 is not it.
        let mut other = m.clone();
        other[44 + 6] = 0x81;
        assert_eq!(find(&other), Err(TlvError::NotFollowUpInfo));
        let mut bad_len = m.clone();
        bad_len[44 + 3] = 27;
        assert_eq!(find(&bad_len), Err(TlvError::BadLength(27)));
        for cut in 45..m.len() {
            assert!(find(&m[..cut]).is_err(), "cut at {cut}");
        }
        let mut sync = follow_up();
        sync[0] = 0x10;
        assert_eq!(append(&mut sync, &info), Err(TlvError::NotFollowUp));
        assert_eq!(sync.len(), 44);
        assert_eq!(find(&sync), Err(TlvError::NotFollowUp));
    }
}
