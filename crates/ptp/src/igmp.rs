//! IGMPv2 membership of PTP's multicast group, sans-IO: what a station on UDPv4 needs so that a switch that snoops
//! IGMP (a Linux bridge by default, most managed switches) forwards `224.0.1.129` to its port.
//!
//! keepon sends its frames past the kernel's IP stack, so no kernel joins the group for it: a snooping switch then
//! learns the master's port for the group but not keepon's, and forwards the two directions of PTP by different
//! paths (measured on a Linux bridge: a slave bias that changed from run to run, −1.1 … +0.3 µs) or, once a querier
//! is present, not at all. [`Membership`] does what a host's IP stack would (RFC 2236):
//! - an unsolicited Membership Report when PTP starts, repeated [`STARTUP_REPORTS`] − 1 times a second apart (a
//!   first report may be lost while a switch port comes up), then every [`REFRESH`] — well within the
//!   membership interval of common switches (260 s on Linux bridges), so the entry lives without a querier too;
//! - an answer to every General Query and every Group-Specific Query for the group (IGMPv1, v2 and v3 queries),
//!   within the query's maximum response time.
//!
//! The peer-delay group `224.0.0.107` lies in the link-local block `224.0.0.0/24`, which switches flood without
//! membership (RFC 4541 §2.1.2): it is not joined.
//!
//! Frames are built and read by [`report`] and [`query`]: IPv4 with the Router Alert option (RFC 2113) and TTL 1,
//! the IGMP checksum checked on receipt.

use keepon_core::time::{Nanos, Tai};

use crate::wire::{ipv4_checksum, ETHERTYPE_IPV4};

/// IPv4 protocol number of IGMP.
const PROTO_IGMP: u8 = 2;
/// IGMP message types.
const MEMBERSHIP_QUERY: u8 = 0x11;
const V2_MEMBERSHIP_REPORT: u8 = 0x16;
/// Reports sent one second apart when membership starts.
pub const STARTUP_REPORTS: u32 = 2;
/// Spacing of the startup reports.
const STARTUP_SPACING: Nanos = Nanos::from_ms(1_000);
/// Unsolicited reports after the startup ones, this far apart.
pub const REFRESH: Nanos = Nanos::from_ms(60_000);

/// The Ethernet multicast address of an IPv4 group: `01:00:5E` and the group's low 23 bits.
pub fn group_mac(group: [u8; 4]) -> [u8; 6] {
    [0x01, 0x00, 0x5E, group[1] & 0x7F, group[2], group[3]]
}

/// An IGMPv2 Membership Report for `group` from MAC `mac`, IPv4 address `ip`: to the group itself, TTL 1, with
/// the Router Alert option (so the IPv4 header is 24 bytes). The frame is 46 bytes; a keepon station pads it to
/// its slot (the IPv4 total length delimits the datagram).
pub fn report(mac: [u8; 6], ip: [u8; 4], group: [u8; 4]) -> Vec<u8> {
    igmpv2(mac, ip, group, group, [V2_MEMBERSHIP_REPORT, 0])
}

/// An IGMPv2 Membership Query as a querier sends it: for `group` (`0.0.0.0`: a General Query, to 224.0.0.1),
/// with a Max Response Time of `max_response` (whole tenths of a second, at most 25.5 s). keepon is no querier;
/// tests use it to play one.
pub fn query_frame(mac: [u8; 6], ip: [u8; 4], group: [u8; 4], max_response: Nanos) -> Vec<u8> {
    let to = if group == [0; 4] { [224, 0, 0, 1] } else { group };
    let tenths = u8::try_from(max_response.0 / 100_000_000).unwrap_or(u8::MAX);
    igmpv2(mac, ip, to, group, [MEMBERSHIP_QUERY, tenths])
}

/// An IGMPv2 message `[type, code]` about `group`, to IPv4 address `to`.
fn igmpv2(mac: [u8; 6], ip: [u8; 4], to: [u8; 4], group: [u8; 4], kind: [u8; 2]) -> Vec<u8> {
    let mut f = Vec::with_capacity(46);
    f.extend_from_slice(&group_mac(to));
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let mut h = [0u8; 24];
    h[0] = 0x46; // version 4, 6 words: one option
    h[1] = 0xC0; // DSCP CS6 (network control), as hosts send IGMP
    h[2..4].copy_from_slice(&32u16.to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = 1; // TTL 1
    h[9] = PROTO_IGMP;
    h[12..16].copy_from_slice(&ip);
    h[16..20].copy_from_slice(&to);
    h[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]); // Router Alert, value 0
    let c = ipv4_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    let mut m = [kind[0], kind[1], 0, 0, group[0], group[1], group[2], group[3]];
    let c = ipv4_checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&m);
    f
}

/// A Membership Query as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    /// The group asked about; `0.0.0.0` for a General Query (every group).
    pub group: [u8; 4],
    /// The Max Response Time: a report must follow within it.
    pub max_response: Nanos,
}

/// A Membership Query, if `frame` is one (IGMPv1, v2 or v3; IPv4 options allowed, both checksums right).
pub fn query(frame: &[u8]) -> Option<Query> {
    if frame.get(12..14)? != ETHERTYPE_IPV4.to_be_bytes() {
        return None;
    }
    let ip = &frame[14..];
    let ihl = usize::from(*ip.first()? & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    if ip[0] >> 4 != 4 || ihl < 20 || total < ihl + 8 || ip.get(9) != Some(&PROTO_IGMP) {
        return None;
    }
    if ipv4_checksum(ip.get(..ihl)?) != 0 {
        return None;
    }
    let m = ip.get(ihl..total)?;
    if m[0] != MEMBERSHIP_QUERY || ipv4_checksum(m) != 0 {
        return None;
    }
    // Max Resp Code, in tenths of a second: 0 in IGMPv1 (meaning 10 s); in IGMPv3 (12 bytes or more) codes from
    // 128 on are a floating-point value, (mantissa | 0x10) << (exponent + 3).
    let code = u32::from(m[1]);
    let tenths = match code {
        0 => 100,
        c if c >= 128 && m.len() >= 12 => ((c & 0x0F) | 0x10) << (((c >> 4) & 0x07) + 3),
        c => c,
    };
    Some(Query { group: [m[4], m[5], m[6], m[7]], max_response: Nanos::from_ms(i64::from(tenths) * 100) })
}

/// Membership of one group: when the next report is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    group: [u8; 4],
    next: Tai,
    sent: u32,
}

impl Membership {
    /// Membership of `group` from `now`: the first report is due at once.
    pub fn new(group: [u8; 4], now: Tai) -> Membership {
        Membership { group, next: now, sent: 0 }
    }

    /// The group.
    pub fn group(&self) -> [u8; 4] {
        self.group
    }

    /// Reports sent so far.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// When the next report is due.
    pub fn next_due(&self) -> Tai {
        self.next
    }

    /// True if a report is due at `now`.
    pub fn due(&self, now: Tai) -> bool {
        now >= self.next
    }

    /// A report was sent at `now`: the next one is a startup repetition or a refresh.
    pub fn on_sent(&mut self, now: Tai) {
        self.sent = self.sent.saturating_add(1);
        self.next = now + if self.sent < STARTUP_REPORTS { STARTUP_SPACING } else { REFRESH };
    }

    /// A query arrived at `now`: if it asks about this group (or all), a report is due within half its maximum
    /// response time (the other half is left for the report's way to the querier). Returns true if it did.
    pub fn on_query(&mut self, q: Query, now: Tai) -> bool {
        if q.group != [0; 4] && q.group != self.group {
            return false;
        }
        self.next = self.next.min(now + Nanos(q.max_response.0 / 2));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PTP: [u8; 4] = [224, 0, 1, 129];

    /// A query frame of `len` IGMP bytes (12: IGMPv3) with a raw Max Resp Code, padded as on Ethernet.
    fn raw_query(group: [u8; 4], code: u8, len: usize) -> Vec<u8> {
        let mut f = query_frame([2, 0, 0, 0, 0, 9], [0; 4], group, Nanos::ZERO);
        f.truncate(14 + 24);
        f[14 + 2..14 + 4].copy_from_slice(&(24 + len as u16).to_be_bytes());
        f[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(&f[14..38]);
        f[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
        let mut m = vec![MEMBERSHIP_QUERY, code, 0, 0, group[0], group[1], group[2], group[3]];
        m.resize(len, 0);
        let c = ipv4_checksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&m);
        f.resize(60, 0);
        f
    }

    /// The report's bytes: to 01:00:5e:00:01:81 and the group, TTL 1, IGMP over IPv4 with Router Alert, both
    /// checksums right, type 0x16 naming the group.
    #[test]
    fn a_report_is_an_igmpv2_report_to_the_group() {
        let f = report(MAC, [10, 77, 0, 1], PTP);
        assert_eq!(f.len(), 46);
        assert_eq!(&f[..14], &[0x01, 0x00, 0x5E, 0x00, 0x01, 0x81, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        let ip = &f[14..38];
        assert_eq!((ip[0], ip[8], ip[9]), (0x46, 1, 2), "IHL 6, TTL 1, IGMP");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 32);
        assert_eq!(&ip[12..20], &[10, 77, 0, 1, 224, 0, 1, 129]);
        assert_eq!(&ip[20..24], &[0x94, 0x04, 0, 0], "Router Alert");
        assert_eq!(ipv4_checksum(ip), 0);
        assert_eq!(&f[38..], &[0x16, 0, 0x08, 0x7E, 224, 0, 1, 129]);
        assert_eq!(ipv4_checksum(&f[38..]), 0);
        // A report is not a query, and not PTP.
        assert_eq!(query(&f), None);
        let udp = crate::wire::Transport::UdpV4 { src: [10, 77, 0, 1] };
        assert_eq!(udp.parse(&f), Err(crate::wire::WireError::NotPtp));
    }

    /// Queries of every version are read with their response time; broken or foreign frames are not queries.
    #[test]
    fn queries_are_read_and_checked() {
        let general = query_frame([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], [0; 4], Nanos::from_ms(10_000));
        assert_eq!(&general[..6], &[0x01, 0x00, 0x5E, 0, 0, 1], "to 224.0.0.1");
        assert_eq!(query(&general), Some(Query { group: [0; 4], max_response: Nanos::from_ms(10_000) }));
        let specific = query_frame([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], PTP, Nanos::from_ms(1_000));
        assert_eq!(query(&specific), Some(Query { group: PTP, max_response: Nanos::from_ms(1_000) }));
        assert_eq!(query(&raw_query([0; 4], 0, 8)).unwrap().max_response, Nanos::from_ms(10_000), "IGMPv1");
        // IGMPv3 code 0x8A: mantissa 10, exponent 0 → (10 | 16) << 3 = 208 tenths.
        assert_eq!(query(&raw_query([0; 4], 0x8A, 12)).unwrap().max_response, Nanos::from_ms(20_800));
        // The same code in an IGMPv2 query is plain tenths.
        assert_eq!(query(&raw_query([0; 4], 0x8A, 8)).unwrap().max_response, Nanos::from_ms(13_800));
        let mut bad = general.clone();
        bad[14 + 24 + 4] ^= 1; // IGMP checksum no longer right
        assert_eq!(query(&bad), None);
        let mut bad = general.clone();
        bad[14 + 8] = 2; // IPv4 checksum no longer right
        assert_eq!(query(&bad), None);
        for n in 0..general.len() {
            let _ = query(&general[..n]); // truncated anywhere: no panic
        }
        assert_eq!(query(&general[..40]), None);
    }

    /// Two startup reports a second apart, then one per refresh; a query for the group or all groups brings the
    /// next report forward to half its response time, a query for another group does not.
    #[test]
    fn reports_follow_the_startup_the_refresh_and_queries() {
        let t0 = Tai(1_000_000_000_000);
        let mut m = Membership::new(PTP, t0);
        assert!(m.due(t0));
        m.on_sent(t0);
        assert_eq!(m.next_due(), t0 + Nanos::from_ms(1_000));
        let t1 = m.next_due();
        m.on_sent(t1);
        assert_eq!((m.sent(), m.next_due()), (2, t1 + REFRESH));
        let q = Query { group: [224, 0, 1, 1], max_response: Nanos::from_ms(10_000) };
        assert!(!m.on_query(q, t1));
        assert_eq!(m.next_due(), t1 + REFRESH);
        assert!(m.on_query(Query { group: [0; 4], ..q }, t1));
        assert_eq!(m.next_due(), t1 + Nanos::from_ms(5_000));
        assert!(m.on_query(Query { group: PTP, max_response: Nanos::from_ms(1_000) }, t1));
        assert_eq!(m.next_due(), t1 + Nanos::from_ms(500));
        assert!(!m.due(t1 + Nanos::from_ms(499)) && m.due(t1 + Nanos::from_ms(500)));
    }
}
