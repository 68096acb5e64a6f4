//! PTP profiles: the IEEE 1588 default profile, and IEEE 802.1AS (gPTP) with its automotive variant — what each
//! asks of the messages a port sends and takes, built around statime 0.4 (which has no 802.1AS profile).
//!
//! | | default | gPTP | automotive |
//! |---|---|---|---|
//! | majorSdoId (transportSpecific) | 0 | 1 | 1 |
//! | delay | E2E or P2P | P2P | P2P |
//! | transport | L2 or UDPv4 | L2, every message to 01:80:C2:00:00:0E | the same |
//! | Sync | one- or two-step | two-step, Follow_Up with the [`tlv::FollowUpInfo`] | the same |
//! | roles | BMCA | BMCA (Announce only while asCapable) | static, no Announce |
//! | asCapable | — | [`neighbor::Neighbor`] | always true |
//! | intervals (log₂ s) | sync 0, announce 1, delay 0 | sync −3, announce 0, pdelay 0 | the same |
//!
//! **Who does what.** statime writes the header's sdoId from its instance configuration and drops received
//! messages of another sdoId silently: the engine gives it `0x100` for gPTP (majorSdoId 1, minorSdoId 0 — what
//! ptp4l's `transportSpecific 1` sends), and the port ([`crate::port`]) checks the majorSdoId of every received
//! message first, so the ones of another profile are *counted* before they are dropped, as ptp4l counts them.
//! statime's Follow_Up carries no TLV and it knows no asCapable: the port appends the Follow_Up information TLV
//! to each Follow_Up it sends, requires and reads it on each it receives, keeps the [`neighbor::Neighbor`] from its
//! own Pdelay exchanges, and (gPTP) holds back Sync, Follow_Up and Announce — both ways — while the port is not
//! asCapable. For the automotive profile, whose master sends no Announce, the port lets statime's BMCA find the
//! static master by handing it an Announce made from each Sync's source ([`announce_for`]); the automotive master
//! sends none.

pub mod neighbor;
pub mod policy;
pub mod tlv;

use keepon_core::time::Nanos;

/// The PTP profile a port runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    /// IEEE 1588-2019's default delay request-response / peer-to-peer profile.
    #[default]
    Default,
    /// IEEE 802.1AS (gPTP).
    Gptp,
    /// IEEE 802.1AS with static roles and no Announce, as linuxptp's `automotive-master.cfg` /
    /// `automotive-slave.cfg`.
    Automotive,
}

/// The 802.1AS default neighbour-delay threshold (`neighborPropDelayThresh`), 800 ns.
pub const DEFAULT_THRESHOLD: Nanos = Nanos(800);

impl Profile {
    /// The name in `[ptp] profile`.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Gptp => "gptp",
            Profile::Automotive => "automotive",
        }
    }

    /// An 802.1AS profile (gPTP or automotive).
    pub fn is_802_1as(self) -> bool {
        self != Profile::Default
    }

    /// The sdoId statime writes and requires (majorSdoId in the top nibble of 12 bits).
    pub fn sdo_id(self) -> u16 {
        u16::from(self.major_sdo_id()) << 8
    }

    /// The majorSdoId (1588-2008's transportSpecific): the top nibble of a message's first octet.
    pub fn major_sdo_id(self) -> u8 {
        u8::from(self.is_802_1as())
    }

    /// The profile's default log₂ intervals (s): Sync, Announce, the delay request.
    pub fn default_intervals(self) -> (i8, i8, i8) {
        match self {
            Profile::Default => (0, 1, 0),
            Profile::Gptp | Profile::Automotive => (-3, 0, 0),
        }
    }

    /// Whether a received message of this majorSdoId is one of ours.
    pub fn accepts(self, msg: &[u8]) -> bool {
        msg.first().is_some_and(|b| b >> 4 == self.major_sdo_id())
    }
}

/// Byte 0's messageType.
fn message_type(msg: &[u8]) -> Option<u8> {
    msg.first().map(|b| b & 0x0F)
}

/// Sync (0), Follow_Up (8), Announce (0xB): the messages that carry time from a master, which 802.1AS sends and
/// takes only on an asCapable port.
pub fn carries_time(msg: &[u8]) -> bool {
    matches!(message_type(msg), Some(0x0 | 0x8 | 0xB))
}

/// An Announce from `sync`'s source, for statime's BMCA where no Announce is sent (the automotive profile): the
/// static master is a time source with priorities 248 (as linuxptp's automotive configurations), steps removed
/// 0, on the PTP timescale, announcing the Sync interval. `None` if `sync` is not a Sync with a full header.
pub fn announce_for(sync: &[u8]) -> Option<Vec<u8>> {
    if message_type(sync)? != 0x0 || sync.len() < 44 {
        return None;
    }
    let mut a = vec![0u8; 64];
    a[0] = (sync[0] & 0xF0) | 0xB;
    a[1] = sync[1];
    a[2..4].copy_from_slice(&64u16.to_be_bytes());
    a[4] = sync[4]; // domain
    a[5] = sync[5]; // minorSdoId
    a[7] = 0x08; // ptpTimescale
    a[20..30].copy_from_slice(&sync[20..30]); // sourcePortIdentity
    a[30..32].copy_from_slice(&sync[30..32]);
    a[32] = 5; // controlField: other
    a[33] = sync[33];
    // Body: originTimestamp (10, zero), currentUtcOffset (2), reserved, priority1, clockQuality (class 248,
    // accuracy unknown 0xFE, variance 0xFFFF), priority2, grandmasterIdentity, stepsRemoved 0, timeSource
    // internal oscillator (0xA0).
    a[47] = 248;
    a[48] = 248;
    a[49] = 0xFE;
    a[50..52].copy_from_slice(&[0xFF, 0xFF]);
    a[52] = 248;
    a[53..61].copy_from_slice(&sync[20..28]);
    a[63] = 0xA0;
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdo_ids_and_what_is_accepted() {
        assert_eq!(
            (Profile::Default.sdo_id(), Profile::Gptp.sdo_id(), Profile::Automotive.sdo_id()),
            (0, 0x100, 0x100)
        );
        let mut sync = vec![0u8; 44];
        sync[0] = 0x10;
        assert!(Profile::Gptp.accepts(&sync) && !Profile::Default.accepts(&sync));
        sync[0] = 0x00;
        assert!(!Profile::Automotive.accepts(&sync) && Profile::Default.accepts(&sync));
        sync[0] = 0x20;
        assert!(!Profile::Gptp.accepts(&sync) && !Profile::Default.accepts(&sync));
        assert!(!Profile::Default.accepts(&[]));
        assert_eq!(Profile::Gptp.default_intervals(), (-3, 0, 0));
    }

    /// The Announce made from a Sync names the Sync's sender as grandmaster, keeps its majorSdoId, domain,
    /// sequence and interval, and is what statime parses as an Announce (checked through the engine's tests).
    #[test]
    fn announce_from_a_sync() {
        let mut sync = vec![0u8; 44];
        sync[0] = 0x10;
        sync[1] = 0x12;
        sync[4] = 7;
        sync[20..30].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0, 1]);
        sync[30..32].copy_from_slice(&[0xAB, 0xCD]);
        sync[33] = (-3i8) as u8;
        let a = announce_for(&sync).unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!((a[0], a[1], u16::from_be_bytes([a[2], a[3]]), a[4]), (0x1B, 0x12, 64, 7));
        assert_eq!(&a[20..32], &sync[20..32]);
        assert_eq!(&a[53..61], &sync[20..28], "grandmasterIdentity: the Sync's clock");
        assert_eq!(a[33] as i8, -3);
        assert!(carries_time(&a) && carries_time(&sync));
        sync[0] = 0x12;
        assert!(!carries_time(&sync));
        assert_eq!(announce_for(&sync), None, "a Pdelay_Req is not a Sync");
        assert_eq!(announce_for(&[0x10; 43]), None);
    }
}
