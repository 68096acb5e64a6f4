//! AF_XDP backend: one socket on one queue, TX ring + completion ring over a UMEM of slot-sized chunks.
//!
//! ```text
//!   UMEM:  chunk 0 … chunk T−1 │ chunk T
//!          real frame of NIC slot k in chunk k mod T │ the filler (every filler descriptor points here)
//!
//!   TX ring (T entries):   completed ≤ kernel consumer ≤ producer ≤ completed + T
//! ```
//!
//! Slot `k` is descriptor `k`; a real frame is copied into chunk `k mod T`, which is free again once slot
//! `k − T` completed (accepted − completed ≤ T is kept, and completions come back in order). No XDP program
//! is needed for TX. In copy mode (`XDP_COPY`, any driver) each `sendto` doorbell makes the kernel build and
//! transmit up to its per-call budget of frames, so the doorbell is rung until the ring is drained; in
//! zero-copy mode (`XDP_ZEROCOPY`) the NIC reads the UMEM directly. A frame the kernel refuses while busy
//! stays in the ring (`EAGAIN`); one it drops after taking it (`EBUSY`: "completed but not sent") cannot be
//! resent in order and is reported as [`NicError::Dropped`].
//!
//! AF_XDP has no FCS control, so fillers use the reserved-address mode.

use std::os::fd::{AsFd, OwnedFd};

use crate::NicError;

use super::engine::{LinuxNic, TxFrame, TxPath};
use super::frame::{FillerMode, Framing};
use super::link::os_error;
use super::{sys, LinuxNicConfig};

/// An AF_XDP queue in keepon's slot model.
pub type AfXdpNic = LinuxNic<AfXdpTx>;

/// TX ring (and completion ring) entries.
const TX_ENTRIES: u32 = 2048;
/// The fill ring must exist for the bind; TX never uses it.
const FILL_ENTRIES: u32 = 64;
/// Doorbells per flush at most (each lets the kernel send its per-call budget, 32 frames on most kernels).
const MAX_KICKS: u32 = 128;

/// The kernel path of an [`AfXdpNic`].
#[derive(Debug)]
pub struct AfXdpTx {
    tx: sys::XdpRing,
    cq: sys::XdpRing,
    umem: sys::Mmap,
    fd: OwnedFd,
    framing: Framing,
    chunk: usize,
    zero_copy: bool,
    /// Our TX producer index (free running).
    prod: u32,
    /// Our completion consumer index (free running).
    cq_cons: u32,
    accepted: u64,
    completed: u64,
    refused: u64,
}

impl AfXdpNic {
    /// Open an AF_XDP socket on `cfg.iface` queue `cfg.queue`.
    pub fn open(cfg: &LinuxNicConfig) -> Result<AfXdpNic, NicError> {
        let link = super::checked_link(cfg)?;
        let (filler, why) = match cfg.filler {
            FillerMode::BadFcs => {
                return Err(NicError::Unsupported(
                    "bad-FCS fillers need the AF_PACKET sendmmsg backend: AF_XDP has no FCS control".into(),
                ))
            }
            FillerMode::Auto => (FillerMode::reserved(), "AF_XDP has no FCS control"),
            m @ FillerMode::ReservedAddress { .. } => (m, "as configured"),
        };
        // Chunks hold a slot's data; the filler chunk the longest filler (at most a chunk).
        let data = cfg.geometry.slot_bytes() as usize - 4;
        let chunk = if data <= 2048 {
            2048
        } else if data <= 4096 {
            4096
        } else {
            return Err(NicError::Unsupported(format!(
                "AF_XDP: {} B slots need multi-buffer frames (at most 4100 B slots are supported)",
                cfg.geometry.slot_bytes()
            )));
        };

        let max_frame = super::max_frame(cfg, &link, chunk as u32 + 4);
        let framing = Framing::new(filler, cfg.src_mac.unwrap_or(link.mac), cfg.geometry.slot_bytes(), max_frame);
        let fd = sys::socket(sys::AF_XDP, libc::SOCK_RAW, 0).map_err(|e| match e.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => {
                NicError::Unsupported("AF_XDP is not supported by this kernel (CONFIG_XDP_SOCKETS)".into())
            }
            _ => os_error("AF_XDP socket", e),
        })?;
        let s = fd.as_fd();
        let mut umem = sys::Mmap::anonymous((TX_ENTRIES as usize + 1) * chunk).map_err(|e| os_error("UMEM", e))?;
        let reg = sys::XdpUmemReg { addr: umem.addr(), len: umem.len() as u64, chunk_size: chunk as u32, headroom: 0 };
        sys::setsockopt(s, sys::SOL_XDP, sys::XDP_UMEM_REG, &reg).map_err(|e| os_error("XDP_UMEM_REG", e))?;
        sys::setsockopt(s, sys::SOL_XDP, sys::XDP_UMEM_FILL_RING, &FILL_ENTRIES)
            .map_err(|e| os_error("XDP_UMEM_FILL_RING", e))?;
        sys::setsockopt(s, sys::SOL_XDP, sys::XDP_UMEM_COMPLETION_RING, &TX_ENTRIES)
            .map_err(|e| os_error("XDP_UMEM_COMPLETION_RING", e))?;
        sys::setsockopt(s, sys::SOL_XDP, sys::XDP_TX_RING, &TX_ENTRIES).map_err(|e| os_error("XDP_TX_RING", e))?;
        let (off, len) = sys::getsockopt::<sys::XdpMmapOffsets>(s, sys::SOL_XDP, sys::XDP_MMAP_OFFSETS)
            .map_err(|e| os_error("XDP_MMAP_OFFSETS", e))?;
        if len != std::mem::size_of::<sys::XdpMmapOffsets>() {
            return Err(NicError::Unsupported("AF_XDP: kernel too old (XDP_MMAP_OFFSETS without ring flags)".into()));
        }
        let tx = sys::XdpRing::map(s, &off.tx, TX_ENTRIES, 16, sys::XDP_PGOFF_TX_RING)
            .map_err(|e| os_error("mmap AF_XDP TX ring", e))?;
        let cq = sys::XdpRing::map(s, &off.cr, TX_ENTRIES, 8, sys::XDP_UMEM_PGOFF_COMPLETION_RING)
            .map_err(|e| os_error("mmap AF_XDP completion ring", e))?;
        let flags = if cfg.zero_copy { sys::XDP_ZEROCOPY } else { sys::XDP_COPY };
        // A socket closed just before may still hold the queue while the kernel tears it down: retry briefly.
        let mut bound = sys::bind_xdp(s, link.ifindex, cfg.queue, flags);
        let start = std::time::Instant::now();
        while bound.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
            && start.elapsed() < std::time::Duration::from_secs(1)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            bound = sys::bind_xdp(s, link.ifindex, cfg.queue, flags);
        }
        bound.map_err(|e| match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EPROTONOSUPPORT) if cfg.zero_copy => NicError::Unsupported(format!(
                "{}: driver {} has no AF_XDP zero-copy (XDP_ZEROCOPY); use copy mode",
                link.iface,
                link.driver.as_deref().unwrap_or("(unknown)")
            )),
            Some(libc::EBUSY) => NicError::Unsupported(format!(
                "AF_XDP: {} queue {} is owned by another AF_XDP socket or XDP program",
                link.iface, cfg.queue
            )),
            Some(libc::EINVAL) => NicError::Unsupported(format!(
                "AF_XDP bind to {} queue {} failed: no such queue, or another socket owns it ({e})",
                link.iface, cfg.queue
            )),
            _ => os_error(&format!("AF_XDP bind to {} queue {}", link.iface, cfg.queue), e),
        })?;
        umem.write(TX_ENTRIES as usize * chunk, framing.filler_of(framing.max_data()).0);
        let prod = tx.producer();
        let cq_cons = cq.consumer();
        let path = AfXdpTx {
            tx,
            cq,
            umem,
            fd,
            framing,
            chunk,
            zero_copy: cfg.zero_copy,
            prod,
            cq_cons,
            accepted: 0,
            completed: 0,
            refused: 0,
        };
        let engine = super::engine_config(cfg, &link, &path.label(), filler, why, max_frame)?;
        Ok(LinuxNic::with_path(path, engine))
    }
}

impl AfXdpTx {
    /// Ring the doorbell until the kernel has taken every descriptor (or refuses for now).
    fn kick(&mut self) -> Result<(), NicError> {
        for _ in 0..MAX_KICKS {
            if self.tx.consumer() == self.prod {
                return Ok(());
            }
            match sys::kick(self.fd.as_fd()) {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    // Budget used up, or the driver queue is busy: the descriptors stay in the ring.
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                    Some(libc::ENOBUFS) => {
                        self.refused += 1;
                        return Ok(());
                    }
                    Some(libc::EBUSY) => return Err(NicError::Dropped { slots: 1 }),
                    _ => return Err(os_error("AF_XDP sendto", e)),
                },
            }
        }
        Ok(())
    }
}

impl TxPath for AfXdpTx {
    fn label(&self) -> String {
        if self.zero_copy {
            "af_xdp zero-copy".to_string()
        } else {
            "af_xdp copy".to_string()
        }
    }

    fn send(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, NicError> {
        self.completed()?;
        let room = u64::from(TX_ENTRIES) - (self.accepted - self.completed);
        let n = frames.len().min(room as usize);
        let filler_addr = (TX_ENTRIES as usize * self.chunk) as u64;
        for (i, f) in frames[..n].iter().enumerate() {
            let slot = self.accepted + i as u64;
            match f {
                TxFrame::Filler(len) => {
                    let len = self.framing.filler_of(*len).0.len() as u32;
                    self.tx.put_tx_desc(self.prod, filler_addr, len)
                }
                TxFrame::Real(d) => {
                    let at = (slot % u64::from(TX_ENTRIES)) as usize * self.chunk;
                    self.umem.write(at, d);
                    self.tx.put_tx_desc(self.prod, at as u64, d.len() as u32);
                }
            }
            self.prod = self.prod.wrapping_add(1);
        }
        if n > 0 {
            self.tx.set_producer(self.prod);
            self.accepted += n as u64;
            self.kick()?;
        }
        Ok(n)
    }

    fn completed(&mut self) -> Result<u64, NicError> {
        let p = self.cq.producer();
        let n = p.wrapping_sub(self.cq_cons);
        if n > 0 {
            self.cq_cons = p;
            self.cq.set_consumer(p);
            self.completed += u64::from(n);
        }
        Ok(self.completed)
    }

    fn flush(&mut self) -> Result<(), NicError> {
        if self.tx.consumer() != self.prod {
            self.kick()?;
        }
        Ok(())
    }

    fn refused(&self) -> u64 {
        self.refused
    }
}
