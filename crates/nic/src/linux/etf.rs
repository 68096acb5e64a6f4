//! `--backend etf`: the conventional path. Each real frame is handed to the kernel's ETF qdisc ahead of time with
//! `SO_TXTIME` (`CLOCK_TAI`, `SOF_TXTIME_REPORT_ERRORS`) and an `SCM_TXTIME` equal to its slot's time; ETF (or the
//! NIC's LaunchTime with `offload`) sends it then. No fillers: the kernel paces, keepon only keeps the slot grid.
//!
//! ```text
//!   slot k's time   = anchor + (bytes from the anchor slot to k)·8/rate   (anchor: first post + lead, or a
//!                     restart after idle; slots are as long as the station made them, δ nominally)
//!   real frame      → sendmsg(SCM_TXTIME = slot time)  → ETF  → wire
//!   verdict         = TX software timestamp (sent)  |  error queue SO_EE_ORIGIN_TXTIME (rejected)
//!   consumed        = slots whose time has passed and whose real frames all have a verdict
//! ```
//!
//! A refusal at `sendmsg` (`ENOBUFS` with `SO_EE_CODE_TXTIME_INVALID_PARAM`: the txtime had passed) and a drop at
//! dequeue (`SO_EE_CODE_TXTIME_MISSED`) become the frame's rejection `late`; any other refusal (a full qdisc)
//! `link-fault`. A frame
//! with neither a timestamp nor an error [`VERDICT_GRACE`] after its txtime is rejected `link-fault` (the driver
//! timestamps nothing, or the kernel lost it): nothing is reported sent without evidence. The sent time recorded is
//! the slot time, i.e. the txtime ETF was asked for: the timing is the kernel's, not measured by keepon
//! ([`Timing::KernelTxtime`]).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use keepon_core::outcome::{FrameId, Reason};
use keepon_core::ring::{SlotKind, SlotView};
use keepon_core::station::Gap;
use keepon_core::time::{Nanos, SlotPeriod, Tai};

use crate::{Nic, NicError, NicObservation, Timing, WireEvent};

use super::link::os_error;
use super::qdisc::{self, EtfParams};
use super::{sys, LinuxNicConfig};

const SO_TXTIME: libc::c_int = 61;
const SOF_TXTIME_REPORT_ERRORS: u32 = 1 << 1;
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
const SO_EE_ORIGIN_TXTIME: u8 = 6;
const SO_EE_CODE_TXTIME_INVALID_PARAM: u8 = 1;
const SO_EE_CODE_TXTIME_MISSED: u8 = 2;
const PACKET_TX_TIMESTAMP: libc::c_int = 16;
const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
const SOF_TIMESTAMPING_OPT_ID: u32 = 1 << 7;
const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;

/// How long after its txtime a frame may stay without a verdict before it is rejected `link-fault`.
pub const VERDICT_GRACE: Nanos = Nanos::from_ms(500);
/// Lead added to ETF's `delta` for the first slot: `sendmsg` and the poll loop must reach the qdisc in time.
const LEAD_MARGIN: Nanos = Nanos::from_ms(2);

/// ETF options of [`EtfNic::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtfOptions {
    /// Install a root ETF qdisc with `tc` (needs `CAP_NET_ADMIN`) instead of requiring one.
    pub install_qdisc: bool,
    /// `delta` of an installed qdisc (ns).
    pub delta_ns: i32,
    /// Install with `offload` (the NIC's LaunchTime).
    pub offload: bool,
}

impl Default for EtfOptions {
    fn default() -> Self {
        EtfOptions { install_qdisc: false, delta_ns: 500_000, offload: false }
    }
}

#[derive(Debug)]
struct InFlight {
    slot: u64,
    id: FrameId,
    txtime: Tai,
    /// OPT_ID key of the frame's TX timestamp.
    key: u32,
    bytes: Vec<u8>,
    verdict: Option<Result<(), Reason>>,
}

/// A keepon link whose real frames the kernel's ETF qdisc sends at their slot times.
pub struct EtfNic {
    fd: OwnedFd,
    describe: String,
    /// Nominal slot period δ, and the time of one byte.
    period: SlotPeriod,
    byte: SlotPeriod,
    /// Start bytes of slots `consumed..=posted` (the last: where the next slot to post starts).
    starts: VecDeque<u64>,
    max_data: usize,
    data_len: usize,
    lead: Nanos,
    anchor: Option<(u64, u64, Tai)>,
    /// Anchors (slot, start byte, time) of slots still unconsumed (a restart re-anchors; earlier slots keep theirs).
    anchors: VecDeque<(u64, u64, Tai)>,
    posted: u64,
    consumed: u64,
    next_key: u32,
    inflight: VecDeque<InFlight>,
    by_txtime: HashMap<i64, u64>,
    rejected: Vec<(FrameId, Reason)>,
    saw_idle: bool,
    wire: Vec<WireEvent>,
    gaps: Vec<Gap>,
}

fn tai_now() -> Tai {
    Tai(sys::clock_ns(libc::CLOCK_TAI))
}

/// Find the interface's ETF qdisc, or install one when asked; refuse clearly otherwise.
fn etf_qdisc(iface: &str, ifindex: u32, o: &EtfOptions) -> Result<EtfParams, NicError> {
    let find = || -> Result<Option<EtfParams>, NicError> {
        let qs = qdisc::qdiscs(ifindex).map_err(|e| os_error(&format!("reading {iface}'s qdiscs"), e))?;
        Ok(qs.iter().find_map(|q| q.etf))
    };
    if o.install_qdisc {
        qdisc::install_etf(iface, o.delta_ns, o.offload)?;
    }
    let Some(p) = find()? else {
        return Err(NicError::Unsupported(format!(
            "{iface} has no ETF qdisc, and keepon will not send SO_TXTIME frames without one (the txtime would be \
             ignored). Install it with `{}` (needs the kernel's sch_etf and CAP_NET_ADMIN; add `offload` where the \
             NIC has LaunchTime), or pass --install-qdisc",
            qdisc::etf_command(iface, o.delta_ns, o.offload)
        )));
    };
    if p.clockid != qdisc::CLOCKID_TAI {
        return Err(NicError::Unsupported(format!(
            "{iface}'s ETF qdisc uses clock id {}, keepon's txtimes are CLOCK_TAI: reinstall it with clockid CLOCK_TAI",
            p.clockid
        )));
    }
    if p.deadline_mode {
        return Err(NicError::Unsupported(format!(
            "{iface}'s ETF qdisc is in deadline_mode (frames leave as soon as possible, not at their txtime): \
             reinstall it without deadline_mode"
        )));
    }
    Ok(p)
}

impl EtfNic {
    /// Open the ETF backend on `cfg.iface` (fillers, pacing and queue of `cfg` do not apply).
    pub fn open(cfg: &LinuxNicConfig, o: &EtfOptions) -> Result<EtfNic, NicError> {
        let link = super::checked_link(cfg)?;
        let params = etf_qdisc(&link.iface, link.ifindex, o)?;
        Self::with_params(cfg, &link, params)
    }

    fn with_params(cfg: &LinuxNicConfig, link: &super::LinkInfo, params: EtfParams) -> Result<EtfNic, NicError> {
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| os_error("AF_PACKET socket", e))?;
        sys::bind_packet(fd.as_fd(), link.ifindex, 0).map_err(|e| os_error(&format!("bind to {}", link.iface), e))?;
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct SockTxtime {
            clockid: libc::clockid_t,
            flags: u32,
        }
        let st = SockTxtime { clockid: libc::CLOCK_TAI, flags: SOF_TXTIME_REPORT_ERRORS };
        sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, SO_TXTIME, &st).map_err(|e| os_error("SO_TXTIME", e))?;
        let ts: u32 = SOF_TIMESTAMPING_TX_SOFTWARE
            | SOF_TIMESTAMPING_SOFTWARE
            | SOF_TIMESTAMPING_OPT_ID
            | SOF_TIMESTAMPING_OPT_TSONLY;
        sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, sys::SO_TIMESTAMPING, &ts)
            .map_err(|e| os_error("SO_TIMESTAMPING", e))?;
        let sndbuf: libc::c_int = 4 << 20;
        let _ = sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, sys::SO_SNDBUFFORCE, &sndbuf);
        let lead = Nanos(i64::from(params.delta_ns.max(0))) + LEAD_MARGIN;
        let describe = format!(
            "etf on {}: SO_TXTIME through the kernel's ETF qdisc (clockid TAI, delta {} ns, {}), no fillers, \
             {} B slots, lead {} µs; timing: kernel ETF, not measured; {}",
            link.iface,
            params.delta_ns,
            if params.offload { "offload: the NIC's LaunchTime" } else { "software mode" },
            cfg.geometry.slot_bytes(),
            lead.0 / 1000,
            qdisc::xdp_launch_time(link.ifindex)
        );
        Ok(EtfNic {
            fd,
            describe,
            period: cfg.geometry.period(),
            byte: cfg.geometry.rate().byte_time(),
            starts: VecDeque::from([0]),
            max_data: cfg.geometry.slot_bytes().max(keepon_core::time::MAX_STD_FRAME_BYTES) as usize - 4,
            data_len: cfg.geometry.slot_bytes() as usize - 4,
            lead,
            anchor: None,
            anchors: VecDeque::new(),
            posted: 0,
            consumed: 0,
            next_key: 0,
            inflight: VecDeque::new(),
            by_txtime: HashMap::new(),
            rejected: Vec::new(),
            saw_idle: false,
            wire: Vec::new(),
            gaps: Vec::new(),
        })
    }

    /// Start byte of slot `k` (exact for `consumed..=posted`, nominal beyond).
    fn pos_of(&self, k: u64) -> u64 {
        let wire = self.data_len as u64 + 4 + u64::from(keepon_core::time::WIRE_OVERHEAD_BYTES);
        let i = k.saturating_sub(self.consumed) as usize;
        match self.starts.get(i) {
            Some(p) => *p,
            None => self.starts[self.starts.len() - 1] + (i + 1 - self.starts.len()) as u64 * wire,
        }
    }

    fn slot_time(&self, k: u64) -> Tai {
        let (_, p, t) = self.anchors.iter().rev().find(|(s, _, _)| *s <= k).copied().or(self.anchor).unwrap_or((
            k,
            self.pos_of(k),
            Tai(0),
        ));
        t + Nanos(i64::try_from(self.byte.floor_mul(self.pos_of(k).saturating_sub(p))).unwrap_or(i64::MAX))
    }

    /// Restart the grid at slot `k`, no earlier than `at`: on the first slot boundary of the old grid at or after
    /// `at`, so that slot times keep their phase (frames stay in the slots that hold their txtimes).
    fn reanchor(&mut self, k: u64, at: Tai) {
        let at = match self.anchor {
            Some(_) => {
                let old = self.slot_time(k);
                let p = self.period_ns().0.max(1);
                let behind = (at - old).0.max(0);
                old + Nanos((behind + p - 1) / p * p)
            }
            None => at,
        };
        let p = self.pos_of(k);
        self.anchor = Some((k, p, at));
        self.anchors.push_back((k, p, at));
        self.gaps.push(Gap { at: k, restart: at });
    }

    /// Hand one real frame to ETF; a refusal is its verdict.
    fn send_frame(&mut self, slot: u64, id: FrameId, data: &[u8], padded: usize) -> Result<(), NicError> {
        let txtime = self.slot_time(slot);
        let key = self.next_key;
        // OPT_ID counts every frame that reached the socket's skb allocation, refused ones included.
        self.next_key = self.next_key.wrapping_add(1);
        let mut f = InFlight { slot, id, txtime, key, bytes: data.to_vec(), verdict: None };
        let mut frame = data.to_vec();
        frame.resize(padded, 0);
        match send_txtime(&self.fd, &frame, txtime) {
            Ok(()) => {}
            Err(e) => match e.raw_os_error() {
                // ENOBUFS: the qdisc dropped it at enqueue. ETF does so for a txtime that has passed (and queues
                // INVALID_PARAM, which then finds the verdict set); a full qdisc drops silently.
                Some(libc::ENOBUFS) => {
                    let passed = txtime <= tai_now();
                    f.verdict = Some(Err(if passed { Reason::Late } else { Reason::LinkFault }));
                }
                Some(libc::EINVAL) => f.verdict = Some(Err(Reason::LinkFault)),
                // The socket buffer is full: refused before the skb (and its OPT_ID key) existed.
                Some(libc::EAGAIN) => {
                    self.next_key = key;
                    f.verdict = Some(Err(Reason::LinkFault));
                }
                _ => return Err(os_error("sendmsg with SCM_TXTIME", e)),
            },
        }
        self.by_txtime.insert(txtime.0, slot);
        self.inflight.push_back(f);
        Ok(())
    }

    /// Read the error queue: TX timestamps (sent) and ETF errors (rejected).
    fn read_errqueue(&mut self) -> Result<(), NicError> {
        loop {
            let ev = match recv_errqueue(&self.fd) {
                Ok(Some(ev)) => ev,
                Ok(None) => return Ok(()),
                Err(e) => return Err(os_error("recvmsg(MSG_ERRQUEUE)", e)),
            };
            match ev {
                ErrEvent::Sent { key } => {
                    if let Some(f) = self.inflight.iter_mut().find(|f| f.key == key && f.verdict.is_none()) {
                        f.verdict = Some(Ok(()));
                    }
                }
                ErrEvent::Txtime { code, txtime } => {
                    let reason = match code {
                        SO_EE_CODE_TXTIME_INVALID_PARAM | SO_EE_CODE_TXTIME_MISSED => Reason::Late,
                        _ => Reason::LinkFault,
                    };
                    if let Some(slot) = self.by_txtime.get(&txtime).copied() {
                        if let Some(f) = self.inflight.iter_mut().find(|f| f.slot == slot) {
                            // A refusal at sendmsg already set it; a later MISSED overrides a timestamp never.
                            if f.verdict.is_none() {
                                f.verdict = Some(Err(reason));
                            }
                        }
                    }
                }
            }
        }
    }
}

enum ErrEvent {
    Sent { key: u32 },
    Txtime { code: u8, txtime: i64 },
}

fn send_txtime(fd: &OwnedFd, frame: &[u8], txtime: Tai) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: frame.as_ptr() as *mut libc::c_void, iov_len: frame.len() };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(8) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the sendmsg call.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    m.msg_control = control.as_mut_ptr().cast();
    m.msg_controllen = space as _;
    // SAFETY: `control` holds one cmsghdr with 8 bytes of data (CMSG_SPACE(8)); CMSG_FIRSTHDR is non-null.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&m);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = SO_TXTIME;
        (*c).cmsg_len = libc::CMSG_LEN(8) as _;
        std::ptr::copy_nonoverlapping(txtime.0.to_ne_bytes().as_ptr(), libc::CMSG_DATA(c), 8);
        if libc::sendmsg(fd.as_raw_fd(), &m, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn recv_errqueue(fd: &OwnedFd) -> io::Result<Option<ErrEvent>> {
    let mut data = [0u8; 64];
    let mut control = [0u8; 512];
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
    // SAFETY: as in send_txtime; the buffers outlive the call.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    m.msg_control = control.as_mut_ptr().cast();
    m.msg_controllen = control.len() as _;
    // SAFETY: valid msghdr; MSG_DONTWAIT never blocks.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut m, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel filled `control` up to msg_controllen; CMSG_* walk it within bounds.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            if (*c).cmsg_level == sys::SOL_PACKET && (*c).cmsg_type == PACKET_TX_TIMESTAMP {
                let ee: libc::sock_extended_err = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                if ee.ee_origin == SO_EE_ORIGIN_TXTIME {
                    let txtime = (u64::from(ee.ee_data) << 32 | u64::from(ee.ee_info)) as i64;
                    return Ok(Some(ErrEvent::Txtime { code: ee.ee_code, txtime }));
                }
                if ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING {
                    return Ok(Some(ErrEvent::Sent { key: ee.ee_data }));
                }
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
    }
    // Something else on the error queue (not ours to interpret): keep reading.
    Ok(Some(ErrEvent::Txtime { code: 0, txtime: i64::MIN }))
}

impl Nic for EtfNic {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn timing(&self) -> Timing {
        Timing::KernelTxtime
    }

    fn observe(&mut self) -> Result<NicObservation, NicError> {
        self.read_errqueue()?;
        let now = tai_now();
        // Slots advance with time; a real frame holds the count until its verdict (or its grace) is in.
        while self.consumed < self.posted && self.slot_time(self.consumed + 1) <= now {
            let k = self.consumed;
            if let Some(f) = self.inflight.front_mut().filter(|f| f.slot == k) {
                if f.verdict.is_none() {
                    if now - f.txtime < VERDICT_GRACE {
                        break;
                    }
                    f.verdict = Some(Err(Reason::LinkFault));
                }
                if let Some(f) = self.inflight.pop_front() {
                    self.by_txtime.remove(&f.txtime.0);
                    match f.verdict {
                        Some(Err(r)) => self.rejected.push((f.id, r)),
                        _ => self.wire.push(WireEvent {
                            nic_slot: f.slot,
                            start: None,
                            rx: None,
                            frame: Some(f.id),
                            bytes: Some(f.bytes),
                            released: None,
                            stamped: false,
                            released_ephc: None,
                            ephc: None,
                            grid: None,
                            locked: false,
                        }),
                    }
                }
            }
            self.consumed += 1;
            self.starts.pop_front();
        }
        while self.anchors.len() > 1 && self.anchors[1].0 <= self.consumed {
            self.anchors.pop_front();
        }
        self.saw_idle = self.consumed == self.posted;
        Ok(NicObservation { consumed: self.consumed, now, gaps: std::mem::take(&mut self.gaps) })
    }

    fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError> {
        let views: Vec<SlotView<'a>> = slots.collect();
        let Some(first) = views.first() else { return Ok(()) };
        if first.slot != self.posted {
            return Err(NicError::Unsupported(format!(
                "slot {} posted where slot {} was expected: slots must be posted once each, in order",
                first.slot, self.posted
            )));
        }
        let now = tai_now();
        let idle = self.consumed == self.posted;
        if self.anchor.is_none() || (idle && self.slot_time(first.slot) < now + self.lead) {
            // The first post, or the grid ran dry and this slot's time has (nearly) passed: restart one lead ahead.
            self.reanchor(first.slot, now + self.lead);
        } else if idle && self.saw_idle {
            // The station took the idle grid for an underrun and guessed the restart; tell it the real one.
            self.gaps.push(Gap { at: first.slot, restart: self.slot_time(first.slot) });
        }
        for (i, v) in views.iter().enumerate() {
            if v.slot != first.slot + i as u64 || !(60..=self.max_data).contains(&v.bytes.len()) {
                return Err(NicError::Unsupported(format!(
                    "slot {} is malformed (out of order, or {} B outside 60..={} B)",
                    v.slot,
                    v.bytes.len(),
                    self.max_data
                )));
            }
            let end =
                self.pos_of(v.slot) + (v.bytes.len() + 4) as u64 + u64::from(keepon_core::time::WIRE_OVERHEAD_BYTES);
            self.starts.push_back(end);
            if let SlotKind::Real { id, len, .. } = v.kind {
                self.send_frame(v.slot, id, &v.bytes[..(len as usize).min(v.bytes.len())], v.bytes.len())?;
            }
            self.posted += 1;
        }
        Ok(())
    }

    fn drain_wire(&mut self, out: &mut Vec<WireEvent>) {
        out.append(&mut self.wire);
    }

    fn drain_refused(&mut self, out: &mut Vec<(FrameId, Reason)>) {
        out.append(&mut self.rejected);
    }

    fn wait(&mut self, period: Nanos) {
        sys::sleep_until(libc::CLOCK_TAI, (tai_now() + period).0);
    }

    fn now(&self) -> Tai {
        tai_now()
    }

    fn post_latency(&self) -> Nanos {
        self.lead
    }

    fn max_frame_bytes(&self) -> u32 {
        self.max_data as u32 + 4
    }
}

impl EtfNic {
    fn period_ns(&self) -> Nanos {
        Nanos(i64::try_from(self.period.floor_mul(1)).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use keepon_core::isolation::ClassId;
    use keepon_core::time::{LinkRate, SlotGeometry};

    fn cfg() -> LinuxNicConfig {
        // δ = (1230 + 20)·8 / 100 Mb/s = 100 µs exactly.
        LinuxNicConfig::new("lo", SlotGeometry::new(LinkRate::from_mbps(100).unwrap(), 1230).unwrap())
    }

    #[test]
    fn an_interface_without_etf_is_refused_with_the_tc_command() {
        let Err(e) = EtfNic::open(&cfg(), &EtfOptions::default()) else { panic!("lo has no ETF qdisc") };
        let e = e.to_string();
        assert!(e.contains("lo has no ETF qdisc"), "{e}");
        assert!(e.contains("tc qdisc replace dev lo root etf clockid CLOCK_TAI delta 500000"), "{e}");
    }

    fn views(bufs: &[Vec<u8>], from: u64) -> Vec<SlotView<'_>> {
        bufs.iter()
            .enumerate()
            .map(|(i, b)| {
                let k = from + i as u64;
                let kind = if b[0] != 0 {
                    SlotKind::Real { id: FrameId(k), class: ClassId(0), txtime: None, len: 60, ring_slot: k as u32 }
                } else {
                    SlotKind::Filler
                };
                SlotView { slot: k, kind, bytes: b }
            })
            .collect()
    }

    /// The bookkeeping on loopback, which has no ETF (the kernel ignores the txtime, loopback timestamps every
    /// frame): slots are consumed by time, a real frame once its TX timestamp is in; an idle grid restarts on its
    /// own phase. Root (AF_PACKET); skips otherwise.
    #[test]
    fn slots_follow_the_clock_and_frames_their_timestamps_on_loopback() {
        if !super::super::is_root() {
            eprintln!("skipped: needs root (AF_PACKET)");
            return;
        }
        let c = cfg();
        let link = super::super::checked_link(&c).unwrap();
        let params = EtfParams { delta_ns: 100_000, clockid: qdisc::CLOCKID_TAI, offload: false, deadline_mode: false };
        let mut nic = EtfNic::with_params(&c, &link, params).unwrap();
        assert_eq!(nic.timing(), Timing::KernelTxtime);
        let mut bufs = vec![vec![0u8; 1226]; 20];
        for k in [3usize, 4, 17] {
            bufs[k][0] = 0x02; // a unicast destination: a real frame
        }
        let before = nic.now();
        nic.post(&mut views(&bufs, 0).into_iter()).unwrap();
        let obs = nic.observe().unwrap();
        assert_eq!(obs.gaps.len(), 1, "the first post anchors the grid");
        let t0 = obs.gaps[0].restart;
        assert!(t0 >= before + nic.post_latency(), "the first slot is one lead ahead");
        let mut wire = Vec::new();
        let deadline = before + Nanos::from_ms(2_000);
        let mut consumed = obs.consumed;
        while consumed < 20 && nic.now() < deadline {
            nic.wait(Nanos::from_us(200));
            let o = nic.observe().unwrap();
            if o.consumed > 0 {
                // A slot is consumed only once it has ended.
                assert!(o.now >= t0 + Nanos(100_000 * o.consumed as i64), "slot {} consumed early", o.consumed - 1);
            }
            consumed = o.consumed;
        }
        assert_eq!(consumed, 20, "every slot consumed within 2 s");
        nic.drain_wire(&mut wire);
        let ids: Vec<u64> = wire.iter().filter_map(|w| w.frame.map(|f| f.0)).collect();
        assert_eq!(ids, vec![3, 4, 17], "each real frame reported sent once, in order");
        assert!(wire.iter().all(|w| w.bytes.as_ref().is_some_and(|b| b.len() == 60)));
        let mut refused = Vec::new();
        nic.drain_refused(&mut refused);
        assert!(refused.is_empty(), "{refused:?}");
        // Idle now; a later post restarts the grid on its phase: a whole number of δ after the old grid.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let more = vec![vec![0u8; 1226]; 4];
        nic.post(&mut views(&more, 20).into_iter()).unwrap();
        let o = nic.observe().unwrap();
        assert_eq!(o.gaps.len(), 1, "{:?}", o.gaps);
        let shift = (o.gaps[0].restart - t0).0;
        assert_eq!(shift % 100_000, 0, "restart {shift} ns after the first slot: not on the grid");
        assert!(o.gaps[0].restart >= o.now, "the restart lies ahead");
    }
}
