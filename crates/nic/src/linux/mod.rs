//! keepon on real Linux interfaces: AF_PACKET and AF_XDP backends, fillers, host pacing, and a receiver.
//!
//! - [`afpacket::AfPacketNic`]: AF_PACKET, `sendmmsg` (bad-FCS fillers possible with `SO_NOFCS`) or
//!   `PACKET_TX_RING` + `PACKET_QDISC_BYPASS`.
//! - [`afxdp::AfXdpNic`]: AF_XDP on one queue, copy mode everywhere, zero-copy when asked and supported.
//! - [`FillerMode`]: bad FCS (first hop drops on FCS error) or a reserved group address (first bridge never
//!   forwards it).
//! - [`Pacing`]: links without a wire clock (veth, tap) complete instantly, so a slot count would mean
//!   nothing in time; host pacing releases slot `k` at `T0 + k·δ` by `CLOCK_TAI` instead.
//! - [`etf::EtfNic`]: the conventional path: real frames only, each with `SO_TXTIME` through the kernel's ETF
//!   qdisc (software or LaunchTime offload), for comparing keepon's ring with the kernel's own timing.
//! - [`rx::Receiver`]: AF_PACKET capture with kernel timestamps, for the listener.
//!
//! Open a backend from plain parameters with [`open`]. Errors name the problem: no such interface, missing
//! privileges, a driver without `SO_NOFCS`, a kernel without AF_XDP, a slot larger than the MTU.
//!
//! What the kernel cannot tell userspace, and what keepon therefore assumes: the backend is the only
//! transmitter on its queue; on a real NIC, pause frames and EEE are off (they stop the transmitter and
//! break the slot grid); completions are counts, not times, so the EPHC is anchored by the station, and
//! host-paced timing is only as exact as the host's sleeps (microseconds).

pub mod afpacket;
pub mod afxdp;
pub mod engine;
pub mod etf;
pub mod frame;
pub mod link;
pub mod qdisc;
pub mod rx;
mod sys;

use std::fs::File;
use std::os::fd::AsFd;

use keepon_core::time::{Nanos, SlotGeometry, Tai};

use crate::{Nic, NicError};

pub use engine::{LinuxNic, LinuxStats, Pacing, TxFrame, TxPath};
pub use frame::{FillerMode, Framing};
pub use link::LinkInfo;

/// Which kernel interface transmits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// AF_PACKET with `sendmmsg` (supports bad-FCS fillers via `SO_NOFCS`).
    AfPacket,
    /// AF_PACKET with `PACKET_TX_RING` and `PACKET_QDISC_BYPASS` (no `SO_NOFCS`).
    AfPacketRing,
    /// AF_XDP on one queue (copy mode, or zero-copy when asked).
    AfXdp,
}

/// Everything needed to open a Linux backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinuxNicConfig {
    /// Kernel interface.
    pub backend: Backend,
    /// Interface name.
    pub iface: String,
    /// TX queue for AF_XDP. AF_PACKET cannot choose one: the kernel picks it (XPS or flow hash), so on a
    /// multi-queue NIC keepon must be the only transmitter on the interface, or steer its CPU with XPS.
    pub queue: u32,
    /// How fillers are made.
    pub filler: FillerMode,
    /// How slots are released.
    pub pacing: Pacing,
    /// Line rate and slot size.
    pub geometry: SlotGeometry,
    /// Source MAC of fillers (default: the interface's).
    pub src_mac: Option<[u8; 6]>,
    /// AF_XDP zero-copy (fails if the driver has none).
    pub zero_copy: bool,
    /// Test only: an emulated oscillator error of the link's clock (host-paced links only; see
    /// [`crate::emulation`]). The origin is set when the backend opens.
    pub emulation: Option<crate::emulation::EmulatedError>,
}

impl LinuxNicConfig {
    /// AF_PACKET `sendmmsg` on queue 0, automatic filler mode and pacing.
    pub fn new(iface: &str, geometry: SlotGeometry) -> LinuxNicConfig {
        LinuxNicConfig {
            backend: Backend::AfPacket,
            iface: iface.to_string(),
            queue: 0,
            filler: FillerMode::Auto,
            pacing: Pacing::Auto,
            geometry,
            src_mac: None,
            zero_copy: false,
            emulation: None,
        }
    }
}

/// Open the configured backend.
pub fn open(cfg: &LinuxNicConfig) -> Result<Box<dyn Nic + Send>, NicError> {
    Ok(match cfg.backend {
        Backend::AfPacket | Backend::AfPacketRing => Box::new(afpacket::AfPacketNic::open(cfg)?),
        Backend::AfXdp => Box::new(afxdp::AfXdpNic::open(cfg)?),
    })
}

/// True if the process runs as root (network namespaces, raw sockets).
pub fn is_root() -> bool {
    sys::euid() == 0
}

/// Run the calling thread (the station loop) under `SCHED_FIFO` at `priority` (1–99), so that other work on
/// the host cannot stall it for longer than the posted slots last. Needs root or `CAP_SYS_NICE`.
pub fn set_realtime_priority(priority: i32) -> Result<(), NicError> {
    sys::realtime(priority).map_err(|e| realtime_error(priority, e))
}

/// What a refused `SCHED_FIFO` means: not the socket capabilities [`link::os_error`] names, but CAP_SYS_NICE or an
/// RLIMIT_RTPRIO.
fn realtime_error(priority: i32, e: std::io::Error) -> NicError {
    match e.raw_os_error() {
        Some(libc::EPERM) => NicError::Unsupported(format!(
            "SCHED_FIFO {priority}: permission denied: run as root, grant CAP_SYS_NICE, or raise RLIMIT_RTPRIO \
             (ulimit -r, limits.conf rtprio)"
        )),
        _ => link::os_error(&format!("SCHED_FIFO {priority}"), e),
    }
}

/// Move the calling thread into the named network namespace (`/run/netns/NAME`, as `ip netns add` makes).
/// Sockets the thread opens afterwards live in that namespace.
pub fn enter_netns(name: &str) -> Result<(), NicError> {
    let f = File::open(format!("/run/netns/{name}"))
        .map_err(|e| NicError::Unsupported(format!("network namespace {name:?}: {e}")))?;
    sys::setns_net(f.as_fd()).map_err(|e| link::os_error(&format!("setns into {name:?}"), e))
}

/// Probe the interface and check what every backend needs: it exists, is up, and a slot fits its MTU.
pub(crate) fn checked_link(cfg: &LinuxNicConfig) -> Result<LinkInfo, NicError> {
    let link = LinkInfo::probe(&cfg.iface)?;
    if !link.up {
        return Err(NicError::Unsupported(format!("{} is down (ip link set {} up)", link.iface, link.iface)));
    }
    let data = cfg.geometry.slot_bytes() - 4;
    if data > link.mtu + 14 {
        return Err(NicError::Unsupported(format!(
            "a {} B slot needs an MTU of at least {} B; {} has MTU {}",
            cfg.geometry.slot_bytes(),
            data - 14,
            link.iface,
            link.mtu
        )));
    }
    Ok(link)
}

/// The longest frame (L2 with FCS) the interface sends: its MTU plus header and FCS, at least the slot size, at
/// most `limit` (what the TX path can hold).
pub(crate) fn max_frame(cfg: &LinuxNicConfig, link: &LinkInfo, limit: u32) -> u32 {
    (link.mtu + 18).min(limit).min(keepon_core::time::MAX_SLOT_BYTES).max(cfg.geometry.slot_bytes())
}

/// Resolve pacing and build the engine's settings and description.
pub(crate) fn engine_config(
    cfg: &LinuxNicConfig,
    link: &LinkInfo,
    label: &str,
    filler: FillerMode,
    filler_why: &str,
    max_frame: u32,
) -> Result<engine::EngineConfig, NicError> {
    let rate = cfg.geometry.rate();
    let configured = rate.bps() / 1_000_000;
    let (host_paced, pacing_why) = match (cfg.pacing, link.wire_clock()) {
        (Pacing::Auto, Err(why)) => (true, why),
        (Pacing::Auto, Ok(s)) if s == configured => (false, format!("link runs at {s} Mb/s")),
        (Pacing::Auto, Ok(s)) => {
            (false, format!("WARNING: link runs at {s} Mb/s but {rate} is configured: slot times will be wrong"))
        }
        (Pacing::HostPaced, _) => (true, "as configured".to_string()),
        (Pacing::LineRate, Ok(s)) if s == configured => (false, "as configured".to_string()),
        (Pacing::LineRate, Ok(s)) => {
            (false, format!("as configured; WARNING: link runs at {s} Mb/s, not {rate}: slot times will be wrong"))
        }
        (Pacing::LineRate, Err(why)) => {
            (false, format!("as configured; WARNING: {why}, so the slot count does not track time"))
        }
    };
    let emulation = match cfg.emulation {
        None => None,
        Some(_) if !host_paced => {
            return Err(NicError::Unsupported(
                "an emulated oscillator error needs a host-paced link (a PHY paces a line-rate link)".into(),
            ))
        }
        Some(e) if e.ppb.abs() > crate::emulation::MAX_PPB => {
            return Err(NicError::Unsupported(format!("emulated frequency error {} ppb is beyond ±1000 ppm", e.ppb)))
        }
        Some(e) => Some(crate::emulation::Emulation::new(e, Tai(sys::clock_ns(libc::CLOCK_TAI)))),
    };
    let mut pacing = if host_paced { format!("host-paced at {rate}") } else { format!("line rate {rate}") };
    if let Some(e) = &emulation {
        pacing.push_str(&format!(", TEST: emulated clock error {} ns {:+.3} ppm", e.offset.0, e.ppb as f64 / 1000.0));
        if let Some((at, by)) = e.step {
            pacing.push_str(&format!(", step {:+} ns after {} ms", by.0, (at - e.origin).0 / 1_000_000));
        }
    }
    let queue = match cfg.backend {
        Backend::AfXdp => format!("queue {}; {}", cfg.queue, qdisc::xdp_launch_time(link.ifindex)),
        // AF_PACKET cannot bind a queue: the kernel picks it (XPS / hash), so keepon must be the only sender.
        Backend::AfPacket | Backend::AfPacketRing => "queue picked by the kernel".to_string(),
    };
    let describe = format!(
        "{label} on {} {queue}, {} B slots, filler {filler} ({filler_why}) of 64…{max_frame} B, {pacing} ({pacing_why})",
        link.iface,
        cfg.geometry.slot_bytes()
    );
    Ok(engine::EngineConfig {
        describe,
        iface: link.iface.clone(),
        host_paced,
        byte: cfg.geometry.rate().byte_time(),
        max_data: max_frame as usize - 4,
        post_latency: if host_paced { Nanos::from_us(10) } else { Nanos::from_us(30) },
        emulation,
    })
}

#[cfg(test)]
mod realtime_tests {
    use super::*;

    /// A refused SCHED_FIFO names what grants it (it used to advise CAP_NET_RAW, which does not).
    #[test]
    fn a_refused_sched_fifo_names_cap_sys_nice() {
        let e = realtime_error(50, std::io::Error::from_raw_os_error(libc::EPERM)).to_string();
        assert!(e.contains("SCHED_FIFO 50") && e.contains("CAP_SYS_NICE") && e.contains("RLIMIT_RTPRIO"), "{e}");
        assert!(!e.contains("CAP_NET_RAW"), "{e}");
        let e = realtime_error(50, std::io::Error::from_raw_os_error(libc::EINVAL)).to_string();
        assert!(e.contains("SCHED_FIFO 50"), "{e}");
    }
}
