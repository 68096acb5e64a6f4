//! Choosing and opening a backend from the command line and configuration.

use keepon_core::time::{Nanos, Tai};
use keepon_nic::linux::etf::{EtfNic, EtfOptions};
use keepon_nic::linux::{self, Backend, FillerMode, LinuxNicConfig, Pacing};
use keepon_nic::sim::SimNic;
use keepon_nic::{Nic, Timing};

use crate::clock::{host_tai, WallClockSim};
use crate::config::Config;

/// Backend options given on the command line.
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    /// `sim`, `afpacket`, `afpacket-ring`, `afxdp` or `etf` (default: `run.backend` of the config).
    pub backend: Option<String>,
    /// Interface for real backends.
    pub iface: Option<String>,
    /// TX queue (AF_XDP).
    pub queue: u32,
    /// `auto`, `reserved-address` or `bad-fcs`.
    pub filler: Option<String>,
    /// `auto`, `host` or `line`.
    pub pacing: Option<String>,
    /// AF_XDP zero-copy.
    pub zero_copy: bool,
    /// ETF backend: who installs the qdisc, and how.
    pub etf: EtfOptions,
}

/// The shortest lead (`batch·δ`, how far the posted slots reach ahead of the wire) a host-paced link can keep:
/// the host releases each slot at its time, so every poll must come before the posted slots run out, and a
/// poll loop on a general-purpose host wakes tens of microseconds late (REFERENCE: sleep accuracy, RT
/// throttling). Below this, every poll would find the link idle, each an underrun, and no scheduled frame would
/// keep its slot.
pub const MIN_HOST_PACED_LEAD: Nanos = Nanos::from_us(20);

/// Refuse a host-paced link whose ring cannot stay ahead of the host (see [`MIN_HOST_PACED_LEAD`]).
pub fn check_host_pacing(cfg: &Config, timing: Timing) -> Result<(), String> {
    if timing != Timing::HostPaced {
        return Ok(());
    }
    let lead = cfg.lead();
    if lead < MIN_HOST_PACED_LEAD.0 as u128 {
        return Err(format!(
            "this link is host-paced (no line clock, e.g. veth), and the ring keeps only batch·δ = {lead} ns of \
             slots ahead of the host; a host-paced link needs at least {} µs, or every poll underruns the link and no \
             scheduled frame keeps its slot. Raise ring.batch or ring.slot_bytes, or lower link.rate (for tests on \
             veth), or use a NIC with a line clock",
            MIN_HOST_PACED_LEAD.0 / 1000
        ));
    }
    Ok(())
}

/// Open the backend: the simulator in virtual time (`wall_clock = false`, for `keepon run`) or held to the
/// wall clock (for the daemon), or a Linux interface.
pub fn open(cfg: &Config, o: &BackendOptions, wall_clock: bool) -> Result<(Box<dyn Nic + Send>, Tai), String> {
    let name = o.backend.clone().unwrap_or_else(|| cfg.backend.clone());
    if name == "sim" && cfg.emulation.is_some() {
        return Err("link.emulated_offset / link.emulated_ppm emulate an oscillator error on a host-paced Linux \
                    link (tests only); the simulator has its own oscillator model (sim.oscillator)"
            .into());
    }
    if name == "sim" {
        let mut sim = cfg.sim;
        if wall_clock {
            sim.t0 = host_tai() + Nanos::from_ms(2);
            let nic = SimNic::new(sim);
            return Ok((Box::new(WallClockSim::new(nic)), sim.t0));
        }
        return Ok((Box::new(SimNic::new(sim)), sim.t0));
    }
    if name == "etf" {
        let iface = o.iface.clone().ok_or("backend `etf` needs --iface")?;
        let nic = EtfNic::open(&LinuxNicConfig::new(&iface, cfg.geometry), &o.etf).map_err(|e| e.to_string())?;
        let t0 = nic.now() + nic.post_latency();
        return Ok((Box::new(nic), t0));
    }
    let backend = match name.as_str() {
        "afpacket" => Backend::AfPacket,
        "afpacket-ring" => Backend::AfPacketRing,
        "afxdp" => Backend::AfXdp,
        other => return Err(format!("unknown backend `{other}`: use one of {}", crate::config::BACKENDS.join(", "))),
    };
    let iface = o.iface.clone().ok_or_else(|| format!("backend `{name}` needs --iface"))?;
    let mut lc = LinuxNicConfig::new(&iface, cfg.geometry);
    lc.backend = backend;
    lc.queue = o.queue;
    lc.zero_copy = o.zero_copy;
    lc.emulation = cfg.emulation;
    lc.filler = match o.filler.as_deref().unwrap_or("auto") {
        "auto" => FillerMode::Auto,
        "reserved-address" => FillerMode::reserved(),
        "bad-fcs" => FillerMode::BadFcs,
        f => return Err(format!("--filler {f}: use auto, reserved-address or bad-fcs")),
    };
    lc.pacing = match o.pacing.as_deref().unwrap_or("auto") {
        "auto" => Pacing::Auto,
        "host" => Pacing::HostPaced,
        "line" => Pacing::LineRate,
        p => return Err(format!("--pacing {p}: use auto, host or line")),
    };
    let nic = linux::open(&lc).map_err(|e| e.to_string())?;
    check_host_pacing(cfg, nic.timing())?;
    let t0 = nic.now() + nic.post_latency();
    Ok((nic, t0))
}

/// The backend's description for a station on `cfg`'s timing: on the byte clock the backend's slot geometry ("1230 B
/// slots (δ = …)") is replaced by what the wire does (the start banner, `keepon status` and the metrics say it).
pub fn describe_for(cfg: &Config, described: String) -> String {
    match cfg.timing {
        crate::config::WireTiming::Bytes => {
            let slots = format!("{} B slots (δ = {})", cfg.geometry.slot_bytes(), cfg.geometry.period());
            let bytes = format!("byte clock (frames unpadded, up to {} B)", cfg.geometry.slot_bytes());
            described.replacen(&slots, &bytes, 1)
        }
        crate::config::WireTiming::Slots => described,
    }
}
