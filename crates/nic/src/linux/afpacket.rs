//! AF_PACKET backends: `sendmmsg` (the only userspace path that can send bad-FCS frames, via `SO_NOFCS`)
//! and `PACKET_TX_RING` with `PACKET_QDISC_BYPASS`.
//!
//! **Completions.** `sendmmsg`: a frame is finished when the kernel accepted it and freed its buffer; the
//! buffers still held are read with `SIOCOUTQ` (bytes of socket memory in flight, a whole multiple of one
//! frame's `truesize`, since every slot has the same length). `TX_RING`: a frame is finished when its status
//! word returns to `TP_STATUS_AVAILABLE` (the kernel's skb destructor, i.e. the driver's TX completion).
//!
//! **Refusals.** A full driver queue with qdisc bypass makes the kernel refuse a frame (`ENOBUFS`); the
//! refused frame was not sent, so it is offered again and order and count survive. `TX_RING` leaves a
//! refused frame in `TP_STATUS_SEND_REQUEST` and the next doorbell retries it. A frame that the kernel
//! accepted and a driver then dropped can only be seen in the interface's `tx_dropped` counter, which the
//! engine compares with the refusals and turns into [`NicError::Dropped`].

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use keepon_core::time::Tai;

use crate::NicError;

use super::engine::{LinuxNic, TxFrame, TxPath};
use super::frame::{FillerMode, Framing};
use super::link::{os_error, LinkInfo};
use super::{sys, Backend, LinuxNicConfig};

/// An AF_PACKET queue in keepon's slot model (`sendmmsg` or `TX_RING`).
pub type AfPacketNic = LinuxNic<AfPacketTx>;

/// The kernel path of an [`AfPacketNic`].
#[derive(Debug)]
pub struct AfPacketTx {
    fd: OwnedFd,
    framing: Framing,
    mode: Mode,
    refused: u64,
    stamps: Option<Stamps>,
}

/// Software TX timestamps of real frames (`sendmmsg` only): the kernel stamps a frame when the driver takes
/// it (`skb_tx_timestamp`) and queues the stamp with a copy of the frame on the socket's error queue; a
/// stamp is matched to its frame by the frame's bytes (hash), in order.
#[derive(Debug)]
struct Stamps {
    /// Real frames sent and not stamped yet: (index among the real frames accepted, hash of the bytes).
    waiting: VecDeque<(u64, u64)>,
    /// Real frames accepted so far.
    reals: u64,
    buf: Vec<u8>,
}

/// Frames waiting for a stamp beyond this many are given up (the kernel lost their stamps).
const STAMPS_WAITING_MAX: usize = 4096;

/// FNV-1a over the parts of a frame.
fn frame_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[derive(Debug)]
enum Mode {
    Sendmmsg {
        accepted: u64,
        completed: u64,
        /// Socket memory of one in-flight frame (learned as the gcd of `SIOCOUTQ` readings).
        truesize: u64,
    },
    Ring {
        ring: sys::TxRing,
        /// Bytes of the reserved-address filler frame `i` already holds (0: none).
        holds_filler: Vec<usize>,
        head: u64,
        tail: u64,
        needs_kick: bool,
    },
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Open an AF_PACKET socket bound to `link` that receives nothing (protocol 0) and bypasses the qdisc.
pub(crate) fn tx_socket(link: &LinkInfo) -> Result<OwnedFd, NicError> {
    let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| os_error("AF_PACKET socket", e))?;
    sys::bind_packet(fd.as_fd(), link.ifindex, 0).map_err(|e| os_error(&format!("bind to {}", link.iface), e))?;
    let sndbuf: libc::c_int = 4 << 20;
    if sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, sys::SO_SNDBUFFORCE, &sndbuf).is_err() {
        let _ = sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf);
    }
    let one: libc::c_int = 1;
    sys::setsockopt(fd.as_fd(), sys::SOL_PACKET, sys::PACKET_QDISC_BYPASS, &one)
        .map_err(|e| os_error("PACKET_QDISC_BYPASS", e))?;
    Ok(fd)
}

/// The message naming a driver without `SO_NOFCS` support.
fn nofcs_unsupported(link: &LinkInfo) -> String {
    format!(
        "{}: driver {} does not support SO_NOFCS (IFF_SUPP_NOFCS), so bad-FCS fillers are impossible; \
         use reserved-address fillers",
        link.iface,
        link.driver.as_deref().unwrap_or("(unknown)")
    )
}

/// Turn on `SO_NOFCS` and send one bad-FCS filler to learn whether the driver honours it. The probe is a
/// filler, which the first hop drops. Returns `Ok(false)` (and turns `SO_NOFCS` off again) if it does not.
pub(crate) fn probe_nofcs(fd: &OwnedFd, link: &LinkInfo, filler: &[u8]) -> Result<bool, NicError> {
    let on: libc::c_int = 1;
    sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, sys::SO_NOFCS, &on).map_err(|e| os_error("SO_NOFCS", e))?;
    match sys::send(fd.as_fd(), filler) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) || e.raw_os_error() == Some(libc::ENOBUFS) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) => {
            let off: libc::c_int = 0;
            sys::setsockopt(fd.as_fd(), libc::SOL_SOCKET, sys::SO_NOFCS, &off).map_err(|e| os_error("SO_NOFCS", e))?;
            Ok(false)
        }
        Err(e) => Err(os_error(&format!("probe send on {}", link.iface), e)),
    }
}

impl AfPacketNic {
    /// Open an AF_PACKET backend (`cfg.backend` picks `sendmmsg` or `TX_RING`).
    pub fn open(cfg: &LinuxNicConfig) -> Result<AfPacketNic, NicError> {
        let link = super::checked_link(cfg)?;
        let ring = match cfg.backend {
            Backend::AfPacket => false,
            Backend::AfPacketRing => true,
            Backend::AfXdp => {
                return Err(NicError::Unsupported("AfPacketNic::open called with the AF_XDP backend".into()))
            }
        };
        let src = cfg.src_mac.unwrap_or(link.mac);
        let slot_bytes = cfg.geometry.slot_bytes();
        let fd = tx_socket(&link)?;
        let (mode_filler, filler_why) = match (cfg.filler, ring) {
            (FillerMode::BadFcs, true) => {
                return Err(NicError::Unsupported(
                    "bad-FCS fillers need the AF_PACKET sendmmsg backend: PACKET_TX_RING ignores SO_NOFCS".into(),
                ))
            }
            (FillerMode::BadFcs, false) => {
                let probe = Framing::new(FillerMode::BadFcs, src, slot_bytes, slot_bytes);
                if !probe_nofcs(&fd, &link, probe.filler())? {
                    return Err(NicError::Unsupported(nofcs_unsupported(&link)));
                }
                (FillerMode::BadFcs, "as configured; driver supports SO_NOFCS".to_string())
            }
            (FillerMode::Auto, false) => {
                let probe = Framing::new(FillerMode::BadFcs, src, slot_bytes, slot_bytes);
                if probe_nofcs(&fd, &link, probe.filler())? {
                    (FillerMode::BadFcs, format!("{} supports SO_NOFCS", link.driver.as_deref().unwrap_or("driver")))
                } else {
                    let d = link.driver.as_deref().unwrap_or("driver");
                    (FillerMode::reserved(), format!("{d} lacks IFF_SUPP_NOFCS"))
                }
            }
            (FillerMode::Auto, true) => (FillerMode::reserved(), "PACKET_TX_RING ignores SO_NOFCS".to_string()),
            (m @ FillerMode::ReservedAddress { .. }, _) => (m, "as configured".to_string()),
        };
        let max_frame = super::max_frame(cfg, &link, u32::MAX);
        let framing = Framing::new(mode_filler, src, slot_bytes, max_frame);
        let mode =
            if ring { ring_mode(&fd, &framing)? } else { Mode::Sendmmsg { accepted: 0, completed: 0, truesize: 0 } };
        let path = AfPacketTx { fd, framing, mode, refused: 0, stamps: None };
        let engine = super::engine_config(cfg, &link, &path.label(), mode_filler, &filler_why, max_frame)?;
        Ok(LinuxNic::with_path(path, engine))
    }
}

fn ring_mode(fd: &OwnedFd, framing: &Framing) -> Result<Mode, NicError> {
    let v: libc::c_int = sys::TPACKET_V2;
    sys::setsockopt(fd.as_fd(), sys::SOL_PACKET, sys::PACKET_VERSION, &v).map_err(|e| os_error("PACKET_VERSION", e))?;
    let frame_size = (sys::TPACKET2_TX_DATA_OFFSET + framing.wire_len()).next_power_of_two().max(128) as u32;
    let block_size = frame_size.max(1 << 16);
    let target = if frame_size <= 2048 { 2048 } else { 512 };
    let per_block = block_size / frame_size;
    let block_nr = (target / per_block).max(1);
    let req = sys::TpacketReq { block_size, block_nr, frame_size, frame_nr: block_nr * per_block };
    sys::setsockopt(fd.as_fd(), sys::SOL_PACKET, sys::PACKET_TX_RING, &req)
        .map_err(|e| os_error("PACKET_TX_RING", e))?;
    let ring = sys::TxRing::map(fd.as_fd(), &req).map_err(|e| os_error("mmap PACKET_TX_RING", e))?;
    Ok(Mode::Ring { holds_filler: vec![0; ring.frames() as usize], ring, head: 0, tail: 0, needs_kick: false })
}

impl AfPacketTx {
    /// The framing (filler bytes, FCS mode).
    pub fn framing(&self) -> &Framing {
        &self.framing
    }

    /// Ring the TX_RING doorbell; a refusal leaves the frame queued for the next one.
    fn ring_kick(fd: &OwnedFd, needs_kick: &mut bool, refused: &mut u64) -> Result<(), NicError> {
        match sys::kick(fd.as_fd()) {
            Ok(_) => {
                *needs_kick = false;
                Ok(())
            }
            Err(e) => match e.raw_os_error() {
                Some(libc::ENOBUFS) => {
                    *refused += 1;
                    *needs_kick = true;
                    Ok(())
                }
                Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    *needs_kick = true;
                    Ok(())
                }
                _ => Err(os_error("PACKET_TX_RING send", e)),
            },
        }
    }

    fn sendmmsg(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, NicError> {
        let fcs: Vec<[u8; 4]> = frames
            .iter()
            .map(|f| match f {
                TxFrame::Real(d) if self.framing.software_fcs => super::frame::fcs(d),
                _ => [0; 4],
            })
            .collect();
        let framing = &self.framing;
        let msgs: Vec<sys::IoMsg<'_>> = frames
            .iter()
            .zip(&fcs)
            .map(|(f, c)| match f {
                TxFrame::Filler(len) => {
                    let (data, fcs) = framing.filler_of(*len);
                    [data, fcs]
                }
                TxFrame::Real(d) if self.framing.software_fcs => [*d, &c[..]],
                TxFrame::Real(d) => [*d, &[][..]],
            })
            .collect();
        let stamp: Vec<bool> = match self.stamps {
            Some(_) => frames.iter().map(|f| matches!(f, TxFrame::Real(_))).collect(),
            None => Vec::new(),
        };
        let mut sent = 0;
        while sent < msgs.len() {
            match sys::sendmmsg_stamped(self.fd.as_fd(), &msgs[sent..], stamp.get(sent..).unwrap_or(&[])) {
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOBUFS) => {
                        self.refused += 1;
                        break;
                    }
                    Some(libc::EAGAIN) | Some(libc::EINTR) => break,
                    Some(libc::EPROTONOSUPPORT) => {
                        return Err(NicError::Unsupported(
                            "driver does not support SO_NOFCS (IFF_SUPP_NOFCS)".to_string(),
                        ))
                    }
                    Some(libc::EMSGSIZE) => {
                        return Err(NicError::Unsupported(format!(
                            "a {} B slot is larger than the interface MTU allows",
                            self.framing.wire_len()
                        )))
                    }
                    _ => return Err(os_error("sendmmsg", e)),
                },
            }
        }
        if let Mode::Sendmmsg { accepted, .. } = &mut self.mode {
            *accepted += sent as u64;
        }
        if let Some(st) = &mut self.stamps {
            for (f, m) in frames.iter().zip(&msgs).take(sent) {
                if matches!(f, TxFrame::Real(_)) {
                    st.waiting.push_back((st.reals, frame_hash(m)));
                    st.reals += 1;
                }
            }
            while st.waiting.len() > STAMPS_WAITING_MAX {
                st.waiting.pop_front();
            }
        }
        Ok(sent)
    }
}

impl TxPath for AfPacketTx {
    fn label(&self) -> String {
        match self.mode {
            Mode::Sendmmsg { .. } => "af_packet sendmmsg".to_string(),
            Mode::Ring { .. } => "af_packet tx_ring".to_string(),
        }
    }

    fn send(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, NicError> {
        let Mode::Ring { ring, holds_filler, head, tail, needs_kick } = &mut self.mode else {
            return self.sendmmsg(frames);
        };
        let nr = u64::from(ring.frames());
        let mut n = 0;
        for f in frames {
            // Ring invariant: tail ≤ head ≤ tail + frame_nr; frame head mod frame_nr is free iff AVAILABLE.
            if *head - *tail >= nr {
                break;
            }
            let i = (*head % nr) as u32;
            if ring.status(i) != sys::TP_STATUS_AVAILABLE {
                break;
            }
            match f {
                TxFrame::Filler(len) => {
                    // A ring frame that already holds at least this much of the (reserved-address) filler is
                    // sent as is with the new length; a bad-FCS filler ends in its own FCS, so it is rewritten.
                    let (data, fcs) = self.framing.filler_of(*len);
                    let held = &mut holds_filler[i as usize];
                    let write = !fcs.is_empty() || data.len() > *held;
                    ring.fill(i, &[data, fcs], write);
                    *held = if fcs.is_empty() { (*held).max(data.len()) } else { 0 };
                }
                TxFrame::Real(d) => {
                    ring.fill(i, &[d], true);
                    holds_filler[i as usize] = 0;
                }
            }
            ring.send_request(i);
            *head += 1;
            n += 1;
        }
        if n > 0 {
            Self::ring_kick(&self.fd, needs_kick, &mut self.refused)?;
        }
        Ok(n)
    }

    fn completed(&mut self) -> Result<u64, NicError> {
        match &mut self.mode {
            Mode::Sendmmsg { accepted, completed, truesize } => {
                let mut outq: libc::c_int = 0;
                sys::ioctl(self.fd.as_fd(), sys::SIOCOUTQ, &mut outq).map_err(|e| os_error("SIOCOUTQ", e))?;
                let outq = outq.max(0) as u64;
                let in_flight = if outq == 0 {
                    0
                } else {
                    *truesize = gcd(*truesize, outq);
                    outq.div_ceil(*truesize)
                };
                *completed = (*completed).max(accepted.saturating_sub(in_flight));
                Ok(*completed)
            }
            Mode::Ring { ring, head, tail, .. } => {
                let nr = u64::from(ring.frames());
                while *tail < *head {
                    let st = ring.status((*tail % nr) as u32);
                    if st == sys::TP_STATUS_AVAILABLE {
                        *tail += 1;
                    } else if st & sys::TP_STATUS_WRONG_FORMAT != 0 {
                        return Err(NicError::Io(io::Error::other(format!(
                            "PACKET_TX_RING: the kernel rejected frame {} as malformed",
                            *tail
                        ))));
                    } else {
                        break;
                    }
                }
                Ok(*tail)
            }
        }
    }

    fn flush(&mut self) -> Result<(), NicError> {
        if let Mode::Ring { needs_kick: needs @ true, .. } = &mut self.mode {
            Self::ring_kick(&self.fd, needs, &mut self.refused)?;
        }
        Ok(())
    }

    fn refused(&self) -> u64 {
        self.refused
    }

    fn stamp_real_frames(&mut self) -> bool {
        if !matches!(self.mode, Mode::Sendmmsg { .. }) {
            // TX_RING takes its control messages per doorbell, not per frame.
            return false;
        }
        // Report software stamps; which frames are stamped is asked per message.
        let flags = sys::SOF_TIMESTAMPING_SOFTWARE as libc::c_int;
        if sys::setsockopt(self.fd.as_fd(), libc::SOL_SOCKET, sys::SO_TIMESTAMPING, &flags).is_err() {
            return false;
        }
        let rcvbuf: libc::c_int = 4 << 20;
        if sys::setsockopt(self.fd.as_fd(), libc::SOL_SOCKET, sys::SO_RCVBUFFORCE, &rcvbuf).is_err() {
            let _ = sys::setsockopt(self.fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf);
        }
        let len = self.framing.wire_len() + 64;
        self.stamps = Some(Stamps { waiting: VecDeque::new(), reals: 0, buf: vec![0; len] });
        true
    }

    fn tx_stamps(&mut self) -> Result<Vec<(u64, Tai)>, NicError> {
        let Some(st) = &mut self.stamps else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        let mut offset = None;
        while let Some((n, ts)) = sys::recv_errqueue(self.fd.as_fd(), &mut st.buf).map_err(NicError::Io)? {
            let (Some(sw), true) = (ts[0], n <= st.buf.len()) else { continue };
            let h = frame_hash(&[&st.buf[..n]]);
            let Some(at) = st.waiting.iter().position(|w| w.1 == h) else { continue };
            let (index, _) = st.waiting[at];
            st.waiting.drain(..=at);
            // Software stamps are CLOCK_REALTIME; keepon runs on TAI.
            let off = match offset {
                Some(o) => o,
                None => *offset.insert(sys::tai_offset_s().map_err(NicError::Io)? * 1_000_000_000),
            };
            out.push((index, Tai(sw + off)));
        }
        Ok(out)
    }
}
