//! What a profile does to the messages of one port, between statime and the wire (see the [module
//! docs](super)): [`ProfilePolicy::inbound`] judges each received message before statime sees it,
//! [`ProfilePolicy::outbound`] each message statime asks to send, and [`ProfilePolicy::on_request_sent`] takes
//! our Pdelay_Req TX times for the [`Neighbor`].

use keepon_core::time::{Nanos, Tai};

use super::neighbor::{Neighbor, NeighborStatus};
use super::tlv::{self, FollowUpInfo};
use super::{announce_for, carries_time, Profile};

/// What happened to messages because of the profile, counted since start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileCounts {
    /// Received with another majorSdoId (transportSpecific), dropped.
    pub foreign_sdo: u64,
    /// Follow_Ups received without a valid Follow_Up information TLV (802.1AS), dropped.
    pub no_follow_up_info: u64,
    /// Sync, Follow_Up and Announce received while not asCapable, dropped.
    pub dropped_not_capable: u64,
    /// Sync, Follow_Up and Announce not sent while not asCapable.
    pub held_not_capable: u64,
}

/// The profile's view of the port now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileStatus {
    /// The profile.
    pub profile: Profile,
    /// The neighbour (asCapable, delay, rate ratio), from this port's own Pdelay exchanges.
    pub neighbor: NeighborStatus,
    /// The Follow_Up information TLV last received.
    pub follow_up_info: Option<FollowUpInfo>,
    /// The counters.
    pub counts: ProfileCounts,
}

impl ProfileStatus {
    /// The grandmaster's frequency over ours: the last TLV's rate ratio (the master's view of the grandmaster)
    /// times the neighbour rate ratio (802.1AS's rateRatio), once both are known.
    pub fn gm_rate_ratio(&self) -> Option<f64> {
        Some(self.follow_up_info?.rate_ratio() * self.neighbor.rate_ratio?)
    }
}

/// What to do with a received message.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Inbound {
    /// Hand it to statime.
    Take,
    /// Hand it to statime, then this Announce made for it (the automotive profile's static master).
    TakeWithAnnounce(Vec<u8>),
    /// Drop it (counted).
    Drop,
}

/// One port's profile bookkeeping.
#[derive(Clone, Debug)]
pub struct ProfilePolicy {
    profile: Profile,
    identity: [u8; 8],
    neighbor: Neighbor,
    follow_up_info: Option<FollowUpInfo>,
    counts: ProfileCounts,
}

/// A PTP timestamp (48-bit seconds, 32-bit ns) at `at` in `msg`.
fn timestamp(msg: &[u8], at: usize) -> Option<Tai> {
    let b = msg.get(at..at + 10)?;
    let mut s = [0u8; 8];
    s[2..].copy_from_slice(&b[..6]);
    let ns = u32::from_be_bytes([b[6], b[7], b[8], b[9]]);
    let secs = i64::try_from(u64::from_be_bytes(s)).ok()?;
    Some(Tai(secs.checked_mul(1_000_000_000)?.checked_add(i64::from(ns))?))
}

/// The correctionField in whole ns.
fn correction(msg: &[u8]) -> Option<Nanos> {
    let b: [u8; 8] = msg.get(8..16)?.try_into().ok()?;
    Some(Nanos(i64::from_be_bytes(b) >> 16))
}

/// The sequenceId.
fn sequence(msg: &[u8]) -> Option<u16> {
    crate::wire::sequence_id(msg)
}

impl ProfilePolicy {
    /// The policy of a port whose clock identity is `identity`, judging asCapable against `threshold`.
    pub fn new(profile: Profile, identity: [u8; 8], threshold: Nanos) -> ProfilePolicy {
        ProfilePolicy {
            profile,
            identity,
            neighbor: Neighbor::new(threshold, profile == Profile::Automotive),
            follow_up_info: None,
            counts: ProfileCounts::default(),
        }
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// asCapable now (the default profile has no such condition: always true).
    pub fn as_capable(&self) -> bool {
        !self.profile.is_802_1as() || self.neighbor.as_capable()
    }

    /// The profile's view now.
    pub fn status(&self) -> ProfileStatus {
        ProfileStatus {
            profile: self.profile,
            neighbor: self.neighbor.status(),
            follow_up_info: self.follow_up_info,
            counts: self.counts,
        }
    }

    /// The port's clock was stepped or its frequency changed a lot (see [`Neighbor::on_clock_change`]).
    pub fn on_clock_change(&mut self) {
        self.neighbor.on_clock_change();
    }

    /// Our Pdelay_Req `seq` left at `t1`.
    pub fn on_request_sent(&mut self, seq: u16, t1: Tai) {
        self.neighbor.on_request_sent(seq, t1);
    }

    /// Whether `msg` (a Pdelay_Resp or its follow-up) answers a request of ours.
    fn answers_us(&self, msg: &[u8]) -> bool {
        msg.get(44..52) == Some(&self.identity[..])
    }

    /// A message received at `rx` (RX latency already subtracted): what to do with it. Peer-delay answers to our
    /// requests feed the neighbour whatever the verdict.
    pub fn inbound(&mut self, msg: &[u8], rx: Tai) -> Inbound {
        if !self.profile.accepts(msg) {
            self.counts.foreign_sdo += 1;
            return Inbound::Drop;
        }
        let kind = msg[0] & 0x0F;
        match kind {
            0x3 if self.answers_us(msg) => {
                if let (Some(seq), Some(t2), Some(c)) = (sequence(msg), timestamp(msg, 34), correction(msg)) {
                    self.neighbor.on_response(seq, t2, rx - c);
                }
            }
            0xA if self.answers_us(msg) => {
                if let (Some(seq), Some(t3), Some(c)) = (sequence(msg), timestamp(msg, 34), correction(msg)) {
                    self.neighbor.on_response_follow_up(seq, t3 + c);
                }
            }
            _ => {}
        }
        if !self.profile.is_802_1as() {
            return Inbound::Take;
        }
        if carries_time(msg) && !self.neighbor.as_capable() {
            self.counts.dropped_not_capable += 1;
            return Inbound::Drop;
        }
        match kind {
            0x8 => match tlv::find(msg) {
                Ok(info) => {
                    self.follow_up_info = Some(info);
                    Inbound::Take
                }
                Err(_) => {
                    self.counts.no_follow_up_info += 1;
                    Inbound::Drop
                }
            },
            0x0 if self.profile == Profile::Automotive => match announce_for(msg) {
                Some(a) => Inbound::TakeWithAnnounce(a),
                None => Inbound::Take,
            },
            _ => Inbound::Take,
        }
    }

    /// A message statime asks to send: false to hold it back (counted); a Follow_Up gets the Follow_Up information
    /// TLV of a grandmaster (keepon is an end station: when it is master, it is the grandmaster).
    pub fn outbound(&mut self, msg: &mut Vec<u8>) -> bool {
        if !self.profile.is_802_1as() {
            return true;
        }
        let kind = msg.first().map(|b| b & 0x0F);
        if self.profile == Profile::Automotive && kind == Some(0xB) {
            return false; // static roles: no Announce
        }
        if carries_time(msg) && !self.neighbor.as_capable() {
            self.counts.held_not_capable += 1;
            return false;
        }
        if kind == Some(0x8) {
            // A Follow_Up is statime's 44 bytes: the TLV always fits.
            return tlv::append(msg, &FollowUpInfo::GRANDMASTER).is_ok();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: [u8; 8] = [2, 0, 0, 0xFF, 0xFE, 0, 0, 1];

    fn header(kind: u8, len: usize, seq: u16) -> Vec<u8> {
        let mut m = vec![0u8; len];
        m[0] = 0x10 | kind;
        m[1] = 0x02;
        m[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        m[30..32].copy_from_slice(&seq.to_be_bytes());
        m
    }

    /// A Pdelay_Resp (or its follow-up, `kind` 0xA) to `to` with timestamp `t` ns and correction `c` ns.
    fn answer(kind: u8, seq: u16, t: i64, c: i64, to: [u8; 8]) -> Vec<u8> {
        let mut m = header(kind, 54, seq);
        m[8..16].copy_from_slice(&(c << 16).to_be_bytes());
        m[36..40].copy_from_slice(&((t / 1_000_000_000) as u32).to_be_bytes());
        m[40..44].copy_from_slice(&((t % 1_000_000_000) as u32).to_be_bytes());
        m[44..52].copy_from_slice(&to);
        m
    }

    /// One exchange of `delay` ns each way (peer clock = ours + 1 s), all through `inbound`.
    fn exchange(p: &mut ProfilePolicy, seq: u16, delay: i64) {
        let t1 = i64::from(seq) * 1_000_000_000;
        p.on_request_sent(seq, Tai(t1));
        let resp = answer(0x3, seq, 1_000_000_000 + t1 + delay, 0, ME);
        assert_eq!(p.inbound(&resp, Tai(t1 + 2 * delay + 10_000)), Inbound::Take);
        let fup = answer(0xA, seq, 1_000_000_000 + t1 + delay + 10_000, 0, ME);
        assert_eq!(p.inbound(&fup, Tai(t1 + 2 * delay + 20_000)), Inbound::Take);
    }

    #[test]
    fn gptp_gates_time_on_as_capable_and_requires_the_tlv() {
        let mut p = ProfilePolicy::new(Profile::Gptp, ME, Nanos(800));
        let mut sync = header(0x0, 44, 1);
        assert!(!p.outbound(&mut sync), "not asCapable before any exchange");
        assert_eq!(p.inbound(&sync, Tai(0)), Inbound::Drop);
        assert_eq!((p.status().counts.held_not_capable, p.status().counts.dropped_not_capable), (1, 1));
        let mut req = header(0x2, 54, 1);
        assert!(p.outbound(&mut req), "peer delay goes out regardless");
        for seq in 1..=3 {
            exchange(&mut p, seq, 600);
        }
        let s = p.status();
        assert!(s.neighbor.as_capable, "{s:?}");
        assert_eq!(s.neighbor.delay, Some(Nanos(600)));
        assert_eq!(s.neighbor.rate_ratio, Some(1.0));
        assert!(p.outbound(&mut sync));
        // Our Follow_Up gets the grandmaster's TLV.
        let mut fup = header(0x8, 44, 1);
        assert!(p.outbound(&mut fup));
        assert_eq!(tlv::find(&fup), Ok(FollowUpInfo::GRANDMASTER));
        // A Follow_Up received without the TLV is dropped and counted; with it, taken and kept.
        assert_eq!(p.inbound(&header(0x8, 44, 2), Tai(0)), Inbound::Drop);
        assert_eq!(p.status().counts.no_follow_up_info, 1);
        let info = FollowUpInfo { cumulative_scaled_rate_offset: 2_199_023, ..FollowUpInfo::GRANDMASTER };
        let mut theirs = header(0x8, 44, 3);
        tlv::append(&mut theirs, &info).unwrap();
        assert_eq!(p.inbound(&theirs, Tai(0)), Inbound::Take);
        let gm = p.status().gm_rate_ratio().unwrap();
        assert!((gm - 1.000_001).abs() < 1e-9, "{gm}");
        // transportSpecific 0 (the default profile's) is dropped and counted.
        let mut foreign = sync.clone();
        foreign[0] &= 0x0F;
        assert_eq!(p.inbound(&foreign, Tai(0)), Inbound::Drop);
        assert_eq!(p.status().counts.foreign_sdo, 1);
        // Answers to another port's requests are not ours.
        let before = p.status().neighbor.exchanges;
        p.on_request_sent(9, Tai(9_000_000_000));
        let _ = p.inbound(&answer(0x3, 9, 0, 0, [9; 8]), Tai(9_000_001_000));
        let _ = p.inbound(&answer(0xA, 9, 0, 0, [9; 8]), Tai(9_000_002_000));
        assert_eq!(p.status().neighbor.exchanges, before);
    }

    #[test]
    fn a_far_neighbor_is_not_as_capable() {
        let mut p = ProfilePolicy::new(Profile::Gptp, ME, Nanos(800));
        for seq in 1..=3 {
            exchange(&mut p, seq, 5_000);
        }
        assert!(!p.as_capable());
        assert_eq!(p.status().neighbor.delay, Some(Nanos(5_000)));
        let mut p = ProfilePolicy::new(Profile::Gptp, ME, Nanos(10_000));
        exchange(&mut p, 1, 5_000);
        assert!(p.as_capable(), "the threshold is the configured one");
    }

    #[test]
    fn automotive_sends_no_announce_and_makes_one_from_each_sync() {
        let mut p = ProfilePolicy::new(Profile::Automotive, ME, Nanos(800));
        assert!(p.as_capable(), "forced");
        assert!(!p.outbound(&mut header(0xB, 64, 1)));
        assert!(p.outbound(&mut header(0x0, 44, 1)));
        let sync = header(0x0, 44, 5);
        match p.inbound(&sync, Tai(0)) {
            Inbound::TakeWithAnnounce(a) => assert_eq!(a, announce_for(&sync).unwrap()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_default_profile_changes_nothing() {
        let mut p = ProfilePolicy::new(Profile::Default, ME, Nanos(800));
        let mut fup = header(0x8, 44, 1);
        fup[0] &= 0x0F;
        let was = fup.clone();
        assert!(p.outbound(&mut fup));
        assert_eq!(fup, was);
        assert_eq!(p.inbound(&fup, Tai(0)), Inbound::Take);
        assert!(p.as_capable());
        let mut gptp = fup.clone();
        gptp[0] |= 0x10;
        assert_eq!(p.inbound(&gptp, Tai(0)), Inbound::Drop, "transportSpecific 1 is not the default profile's");
    }
}
