//! Facts about a network interface: index, MAC, MTU, driver, link speed, drop counter.
//!
//! Everything is read through sockets and `/proc/thread-self`, never `/sys/class/net`: sysfs shows the
//! namespace it was mounted in, while a thread that entered another network namespace with `setns` must see
//! its own interfaces.

use std::io;
use std::os::fd::AsFd;

use crate::NicError;

use super::sys;

/// Drivers whose "speed" is not a wire clock: they complete a transmission as soon as it is handed over.
const VIRTUAL_DRIVERS: &[&str] =
    &["veth", "tun", "bridge", "dummy", "macvlan", "ipvlan", "vxlan", "geneve", "ifb", "netkit", "loopback"];

/// What the kernel says about an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// Name.
    pub iface: String,
    /// Interface index.
    pub ifindex: u32,
    /// MAC address.
    pub mac: [u8; 6],
    /// MTU (L3 bytes).
    pub mtu: u32,
    /// Administratively up.
    pub up: bool,
    /// Driver name (ethtool), if the driver reports one.
    pub driver: Option<String>,
    /// Link speed in Mb/s (ethtool), if known.
    pub speed_mbps: Option<u64>,
}

/// Map an OS error from a privileged call to an error that names the likely cause.
pub(crate) fn os_error(what: &str, e: io::Error) -> NicError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => NicError::Unsupported(format!(
            "{what}: permission denied: run as root or grant CAP_NET_RAW (and CAP_NET_ADMIN)"
        )),
        Some(libc::ENODEV) => NicError::Unsupported(format!("{what}: no such interface")),
        Some(libc::ENETDOWN) => NicError::Unsupported(format!("{what}: interface is down")),
        _ => NicError::Io(io::Error::new(e.kind(), format!("{what}: {e}"))),
    }
}

impl LinkInfo {
    /// Probe `iface` in the calling thread's network namespace.
    pub fn probe(iface: &str) -> Result<LinkInfo, NicError> {
        let Some(ifindex) = sys::if_index(iface) else {
            return Err(NicError::Unsupported(format!("no such interface {iface:?} (in this network namespace)")));
        };
        let sock = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(|e| os_error("control socket", e))?;
        let fd = sock.as_fd();
        let mut ifr = sys::IfReq::new(iface).map_err(NicError::Io)?;
        sys::ioctl(fd, sys::SIOCGIFHWADDR, &mut ifr).map_err(|e| os_error("SIOCGIFHWADDR", e))?;
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&ifr.data[2..8]);
        let mut ifr = sys::IfReq::new(iface).map_err(NicError::Io)?;
        sys::ioctl(fd, sys::SIOCGIFMTU, &mut ifr).map_err(|e| os_error("SIOCGIFMTU", e))?;
        let mtu = u32::from_ne_bytes([ifr.data[0], ifr.data[1], ifr.data[2], ifr.data[3]]);
        let mut ifr = sys::IfReq::new(iface).map_err(NicError::Io)?;
        sys::ioctl(fd, sys::SIOCGIFFLAGS, &mut ifr).map_err(|e| os_error("SIOCGIFFLAGS", e))?;
        let flags = i16::from_ne_bytes([ifr.data[0], ifr.data[1]]) as i32;
        let up = flags & libc::IFF_UP != 0;

        // ETHTOOL_GDRVINFO: struct ethtool_drvinfo is 196 bytes; `driver[32]` follows the command word.
        let mut drv = [0u8; 196];
        drv[..4].copy_from_slice(&sys::ETHTOOL_GDRVINFO.to_ne_bytes());
        let driver = sys::ethtool(fd, iface, &mut drv).ok().and_then(|()| {
            let name = &drv[4..36];
            let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
            let s = String::from_utf8_lossy(&name[..end]).into_owned();
            (!s.is_empty()).then_some(s)
        });
        // ETHTOOL_GSET: struct ethtool_cmd is 44 bytes; speed (u16) at 12, speed_hi (u16) at 28.
        let mut cmd = [0u8; 44];
        cmd[..4].copy_from_slice(&sys::ETHTOOL_GSET.to_ne_bytes());
        let speed_mbps = sys::ethtool(fd, iface, &mut cmd).ok().and_then(|()| {
            let lo = u16::from_ne_bytes([cmd[12], cmd[13]]) as u32;
            let hi = u16::from_ne_bytes([cmd[28], cmd[29]]) as u32;
            let s = lo | (hi << 16);
            // SPEED_UNKNOWN is (u32)-1; 0 means "not reported".
            (s != 0 && s != u32::MAX).then_some(u64::from(s))
        });
        Ok(LinkInfo { iface: iface.to_string(), ifindex, mac, mtu, up, driver, speed_mbps })
    }

    /// True for drivers with no wire clock (veth, tun, …), whatever speed they claim.
    pub fn is_virtual(&self) -> bool {
        self.driver.as_deref().is_some_and(|d| VIRTUAL_DRIVERS.contains(&d))
    }

    /// The line rate in Mb/s that paces the wire, or why there is none.
    pub fn wire_clock(&self) -> Result<u64, String> {
        let drv = self.driver.as_deref().unwrap_or("unknown driver");
        match (self.is_virtual(), self.speed_mbps) {
            (true, Some(s)) => Err(format!("{drv} has no wire clock (it reports {s} Mb/s but completes instantly)")),
            (true, None) => Err(format!("{drv} has no wire clock")),
            (false, None) => Err(format!("{} reports no link speed ({drv})", self.iface)),
            (false, Some(s)) => Ok(s),
        }
    }
}

/// The interface's `tx_dropped` counter, from `/proc/thread-self/net/dev` (this thread's namespace).
pub fn tx_dropped(iface: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
    parse_tx_dropped(&text, iface)
}

fn parse_tx_dropped(text: &str, iface: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != iface {
            return None;
        }
        // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop …
        rest.split_whitespace().nth(11)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0\n  \
            veth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
        assert_eq!(parse_tx_dropped(text, "veth0"), Some(12));
        assert_eq!(parse_tx_dropped(text, "lo"), Some(0));
        assert_eq!(parse_tx_dropped(text, "eth9"), None);
    }

    #[test]
    fn loopback_is_probed() {
        let l = LinkInfo::probe("lo").unwrap();
        assert_eq!(l.mac, [0; 6]);
        assert!(l.mtu >= 1500);
        assert!(LinkInfo::probe("no-such-if0").is_err());
    }
}
