//! The listener's receiver: every frame on an interface, with the kernel's receive timestamp.
//!
//! An AF_PACKET socket (`ETH_P_ALL`, outgoing frames ignored) with the interface in promiscuous mode
//! (`PACKET_ADD_MEMBERSHIP`, undone when the socket closes). Timestamps via `SO_TIMESTAMPING`:
//!
//! - **hardware** when the NIC has them: `SIOCSHWTSTAMP` asks for all RX frames and the raw hardware stamp
//!   (`SOF_TIMESTAMPING_RAW_HARDWARE`) is in the PHC's time base — TAI only if the PHC is disciplined to TAI;
//! - otherwise **software**: the kernel stamps the frame in `CLOCK_REALTIME` on arrival. keepon runs on TAI,
//!   so each software stamp is converted with the kernel's TAI offset, `CLOCK_TAI − CLOCK_REALTIME` (whole
//!   seconds, read exactly with `adjtimex` at each receive: 37 s when set, e.g. by ptp4l/chrony or NTP; 0 on a
//!   host that never set it — then "TAI" is UTC, as everywhere on that host);
//! - **user space** as a last resort (no control message): `CLOCK_TAI` read after the receive.

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use keepon_core::time::Tai;

use crate::NicError;

use super::link::{os_error, LinkInfo};
use super::sys;

/// Where a receive timestamp comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampKind {
    /// The NIC's hardware clock (PHC time base).
    Hardware,
    /// The kernel's software stamp on arrival, converted from `CLOCK_REALTIME` to TAI.
    Software,
    /// `CLOCK_TAI` read in user space after the frame was received.
    User,
}

/// Receive statistics of the socket (`PACKET_STATISTICS`, cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames the socket received.
    pub packets: u64,
    /// Frames the socket dropped (receive buffer full).
    pub drops: u64,
}

/// An AF_PACKET receiver on one interface.
#[derive(Debug)]
pub struct Receiver {
    fd: OwnedFd,
    link: LinkInfo,
    hardware: bool,
    buf: Vec<u8>,
    stats: RxStats,
}

impl Receiver {
    /// Open a receiver on `iface` (in the calling thread's network namespace).
    pub fn open(iface: &str) -> Result<Receiver, NicError> {
        let link = LinkInfo::probe(iface)?;
        // Protocol 0 until bound: a socket opened with ETH_P_ALL would receive every interface's frames before
        // `bind` narrows it to this one.
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(|e| os_error("AF_PACKET socket", e))?;
        let s = fd.as_fd();
        sys::bind_packet(s, link.ifindex, sys::ETH_P_ALL).map_err(|e| os_error(&format!("bind to {iface}"), e))?;
        let one: libc::c_int = 1;
        // Frames we send ourselves are not "received" (kernels before 4.20 lack this; then they show up).
        let _ = sys::setsockopt(s, sys::SOL_PACKET, sys::PACKET_IGNORE_OUTGOING, &one);
        let rcvbuf: libc::c_int = 16 << 20;
        if sys::setsockopt(s, libc::SOL_SOCKET, sys::SO_RCVBUFFORCE, &rcvbuf).is_err() {
            let _ = sys::setsockopt(s, libc::SOL_SOCKET, libc::SO_RCVBUF, &rcvbuf);
        }
        let mreq = sys::PacketMreq {
            ifindex: link.ifindex as i32,
            kind: sys::PACKET_MR_PROMISC,
            ..sys::PacketMreq::default()
        };
        sys::setsockopt(s, sys::SOL_PACKET, sys::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|e| os_error("PACKET_ADD_MEMBERSHIP (promiscuous)", e))?;

        // Hardware timestamps if the driver has them; a refusal is the normal case on virtual links.
        let mut hw = sys::HwtstampConfig { flags: 0, tx_type: 0, rx_filter: sys::HWTSTAMP_FILTER_ALL };
        let hardware = sys::set_hwtstamp(s, iface, &mut hw).is_ok() && hw.rx_filter != 0;
        let mut flags = sys::SOF_TIMESTAMPING_RX_SOFTWARE | sys::SOF_TIMESTAMPING_SOFTWARE;
        if hardware {
            flags |= sys::SOF_TIMESTAMPING_RX_HARDWARE | sys::SOF_TIMESTAMPING_RAW_HARDWARE;
        }
        sys::setsockopt(s, libc::SOL_SOCKET, sys::SO_TIMESTAMPING, &flags)
            .map_err(|e| os_error("SO_TIMESTAMPING", e))?;
        Ok(Receiver { fd, link, hardware, buf: vec![0; 65_536], stats: RxStats::default() })
    }

    /// The interface.
    pub fn link(&self) -> &LinkInfo {
        &self.link
    }

    /// True if the NIC gives hardware receive timestamps.
    pub fn hardware_timestamps(&self) -> bool {
        self.hardware
    }

    /// The next frame (without FCS), its timestamp and where that came from; `None` if nothing arrived
    /// within `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<(Vec<u8>, Tai, TimestampKind)>, NicError> {
        let end = Instant::now() + timeout;
        loop {
            if let Some((n, ts)) = sys::recv_timestamped(self.fd.as_fd(), &mut self.buf).map_err(NicError::Io)? {
                let tai = sys::clock_ns(libc::CLOCK_TAI);
                let (at, kind) = match ts {
                    [_, _, Some(hw)] if self.hardware => (Tai(hw), TimestampKind::Hardware),
                    [Some(sw), _, _] => {
                        let offset = sys::tai_offset_s().map_err(NicError::Io)?;
                        (Tai(sw + offset * 1_000_000_000), TimestampKind::Software)
                    }
                    _ => (Tai(tai), TimestampKind::User),
                };
                let n = n.min(self.buf.len());
                return Ok(Some((self.buf[..n].to_vec(), at, kind)));
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            sys::poll_in(self.fd.as_fd(), ms).map_err(NicError::Io)?;
        }
    }

    /// Wait at most `timeout` until one of `receivers` has a frame to read: true if one has (a signal ends the
    /// wait early, as nothing arrived).
    pub fn wait_any(receivers: &[Receiver], timeout: Duration) -> Result<bool, NicError> {
        let fds: Vec<_> = receivers.iter().map(|r| r.fd.as_fd()).collect();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        sys::poll_in_any(&fds, ms).map_err(NicError::Io)
    }

    /// Now, on the time base of software and user-space stamps (`CLOCK_TAI`); hardware stamps are on the NIC's
    /// clock instead.
    pub fn now(&self) -> Tai {
        Tai(sys::clock_ns(libc::CLOCK_TAI))
    }

    /// Cumulative receive statistics (frames received, dropped for lack of buffer).
    pub fn stats(&mut self) -> Result<RxStats, NicError> {
        // PACKET_STATISTICS resets the kernel's counters on each read, so accumulate here.
        let (s, _) = sys::getsockopt::<sys::TpacketStats>(self.fd.as_fd(), sys::SOL_PACKET, sys::PACKET_STATISTICS)
            .map_err(|e| os_error("PACKET_STATISTICS", e))?;
        self.stats.packets += u64::from(s.packets);
        self.stats.drops += u64::from(s.drops);
        Ok(self.stats)
    }
}
