//! What the kernel offers for time-based transmission on an interface: its qdiscs (read over rtnetlink, to find
//! an ETF qdisc and its parameters), installing ETF with `tc`, and AF_XDP launch-time metadata.
//!
//! keepon never installs a qdisc behind the user's back: `--backend etf` refuses an interface without an ETF
//! qdisc and prints the `tc` command; `--install-qdisc` runs that command itself (needs `CAP_NET_ADMIN`).

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::process::Command;

use crate::NicError;

use super::sys;

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_ETF_PARMS: u16 = 1;
const TC_ETF_DEADLINE_MODE_ON: u32 = 1 << 0;
const TC_ETF_OFFLOAD_ON: u32 = 1 << 1;
const NLMSG_HDR: usize = 16;
const TCMSG_LEN: usize = 20;

/// `CLOCK_TAI` as the kernel numbers it (what ETF must be configured with for keepon's txtimes).
pub const CLOCKID_TAI: i32 = 11;

/// Parameters of an ETF qdisc (`struct tc_etf_qopt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtfParams {
    /// How long before its txtime ETF dequeues a frame (ns).
    pub delta_ns: i32,
    /// The clock of the txtimes.
    pub clockid: i32,
    /// The NIC's LaunchTime does the timing (`offload`).
    pub offload: bool,
    /// `deadline_mode`: a txtime is a deadline, frames leave as soon as possible.
    pub deadline_mode: bool,
}

/// One qdisc of an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qdisc {
    /// `etf`, `mq`, `pfifo_fast`, `noqueue`, …
    pub kind: String,
    /// Handle (`major:minor` as one number).
    pub handle: u32,
    /// Parent handle (`0xFFFF_FFFF` for the root).
    pub parent: u32,
    /// ETF parameters when `kind == "etf"`.
    pub etf: Option<EtfParams>,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(i..i + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// Iterate the `rtattr`s in `b`: `(type, payload)`.
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0;
    std::iter::from_fn(move || {
        let len = u16_at(b, off)? as usize;
        let ty = u16_at(b, off + 2)?;
        if len < 4 || off + len > b.len() {
            return None;
        }
        let payload = &b[off + 4..off + len];
        off += align4(len);
        Some((ty & 0x3FFF, payload))
    })
}

/// Parse one `RTM_NEWQDISC` message body (after the netlink header): `(ifindex, qdisc)`.
fn parse_qdisc(body: &[u8]) -> Option<(u32, Qdisc)> {
    let ifindex = u32_at(body, 4)?;
    let handle = u32_at(body, 8)?;
    let parent = u32_at(body, 12)?;
    let mut kind = String::new();
    let mut options: &[u8] = &[];
    for (ty, p) in attrs(body.get(TCMSG_LEN..)?) {
        match ty {
            TCA_KIND => kind = String::from_utf8_lossy(p).trim_end_matches('\0').to_string(),
            TCA_OPTIONS => options = p,
            _ => {}
        }
    }
    let etf = if kind == "etf" {
        attrs(options).find(|(t, _)| *t == TCA_ETF_PARMS).and_then(|(_, p)| {
            let flags = u32_at(p, 8)?;
            Some(EtfParams {
                delta_ns: u32_at(p, 0)? as i32,
                clockid: u32_at(p, 4)? as i32,
                offload: flags & TC_ETF_OFFLOAD_ON != 0,
                deadline_mode: flags & TC_ETF_DEADLINE_MODE_ON != 0,
            })
        })
    } else {
        None
    };
    Some((ifindex, Qdisc { kind, handle, parent, etf }))
}

/// The qdiscs attached to interface `ifindex` (an rtnetlink dump).
pub fn qdiscs(ifindex: u32) -> io::Result<Vec<Qdisc>> {
    let mut body = [0u8; TCMSG_LEN];
    body[0] = libc::AF_UNSPEC as u8;
    body[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    let req = nl_message(RTM_GETQDISC, (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16, &body);
    let mut out = Vec::new();
    exchange(libc::NETLINK_ROUTE, &req, |ty, msg| {
        if ty == RTM_NEWQDISC {
            if let Some((i, q)) = parse_qdisc(msg) {
                if i == ifindex {
                    out.push(q);
                }
            }
        }
    })?;
    Ok(out)
}

/// A netlink message: header (length, type, flags, sequence 1) and body.
fn nl_message(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDR + body.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

/// A netlink attribute, padded to 4 bytes.
fn nl_attr(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(align4(4 + payload.len()));
    a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&ty.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize(align4(a.len()), 0);
    a
}

/// Send one request on a netlink socket of `proto` and hand each reply (type, body after the netlink header) to
/// `each`, until the kernel says it is done (`NLMSG_DONE`, or the acknowledgement of a request that is not a
/// dump). A netlink error is returned as the OS error it carries.
fn exchange(proto: libc::c_int, req: &[u8], mut each: impl FnMut(u16, &[u8])) -> io::Result<()> {
    let fd = sys::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto)?;
    sys::send(fd.as_fd(), req)?;
    let dump = u16_at(req, 6).is_some_and(|f| f & libc::NLM_F_DUMP as u16 != 0);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: `buf` is a valid writable buffer of its length for the duration of the call.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let (mut off, n) = (0, n as usize);
        while off + NLMSG_HDR <= n {
            let len = u32_at(&buf, off).unwrap_or(0) as usize;
            let ty = u16_at(&buf, off + 4).unwrap_or(0);
            if len < NLMSG_HDR || off + len > n {
                return Err(io::Error::other("malformed netlink reply"));
            }
            match ty {
                t if t == libc::NLMSG_DONE as u16 => return Ok(()),
                t if t == libc::NLMSG_ERROR as u16 => {
                    let errno = u32_at(&buf, off + NLMSG_HDR).unwrap_or(0) as i32;
                    return if errno != 0 { Err(io::Error::from_raw_os_error(-errno)) } else { Ok(()) };
                }
                _ => each(ty, &buf[off + NLMSG_HDR..off + len]),
            }
            off += align4(len);
        }
        if !dump {
            return Ok(());
        }
    }
}

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;
/// `NETDEV_XSK_FLAGS_TX_LAUNCH_TIME_FIFO`: the driver honours `XDP_TXMD_FLAGS_LAUNCH_TIME` (Linux ≥ 6.15).
pub const XSK_TX_LAUNCH_TIME_FIFO: u64 = 4;

/// A generic netlink request: `genlmsghdr` (command, version 1) and attributes.
fn genl_request(family: u16, cmd: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![cmd, 1, 0, 0];
    for a in attrs {
        body.extend_from_slice(a);
    }
    nl_message(family, libc::NLM_F_REQUEST as u16, &body)
}

/// The id of generic netlink family `name`, or `None` if this kernel has no such family.
fn genl_family(name: &str) -> io::Result<Option<u16>> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    let req = genl_request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &[nl_attr(CTRL_ATTR_FAMILY_NAME, &cname)]);
    let mut id = None;
    match exchange(libc::NETLINK_GENERIC, &req, |_, msg| {
        let found = msg.get(4..).and_then(|a| attrs(a).find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID));
        id = id.or_else(|| found.and_then(|(_, p)| u16_at(p, 0)));
    }) {
        Ok(()) => Ok(id),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The AF_XDP TX metadata features (`xsk-features` of the netdev family) the driver of `ifindex` advertises, or
/// `None` on a kernel that does not report them.
pub fn xsk_features(ifindex: u32) -> io::Result<Option<u64>> {
    let Some(family) = genl_family("netdev")? else { return Ok(None) };
    let req = genl_request(family, NETDEV_CMD_DEV_GET, &[nl_attr(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())]);
    let mut features = None;
    exchange(libc::NETLINK_GENERIC, &req, |_, msg| {
        let found = msg.get(4..).and_then(|a| attrs(a).find(|(t, _)| *t == NETDEV_A_DEV_XSK_FEATURES));
        features = features.or_else(|| found.and_then(|(_, p)| Some(u64::from_ne_bytes(p.get(..8)?.try_into().ok()?))));
    })?;
    Ok(features)
}

/// The `tc` command that gives `iface` a root ETF qdisc for keepon (`delta_ns` ahead of each txtime).
pub fn etf_command(iface: &str, delta_ns: i32, offload: bool) -> String {
    format!(
        "tc qdisc replace dev {iface} root etf clockid CLOCK_TAI delta {delta_ns}{}",
        if offload { " offload" } else { "" }
    )
}

fn tc_path() -> String {
    ["/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc"]
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .map_or_else(|| "tc".to_string(), |p| p.to_string())
}

/// Install a root ETF qdisc on `iface` with `tc` (needs `CAP_NET_ADMIN`). Errors say what is missing: the
/// `tc` program, the kernel's ETF qdisc (`sch_etf`), or LaunchTime offload in the driver.
pub fn install_etf(iface: &str, delta_ns: i32, offload: bool) -> Result<(), NicError> {
    let cmd = etf_command(iface, delta_ns, offload);
    let tc = tc_path();
    let args: Vec<&str> = cmd.split(' ').skip(1).collect();
    let out = Command::new(&tc)
        .args(&args)
        .output()
        .map_err(|e| NicError::Unsupported(format!("cannot run `{tc}` to install ETF ({e}); install iproute2")))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let why = if said.contains("kind is unknown") || said.contains("No such file") {
        "this kernel has no ETF qdisc (sch_etf is neither built in nor loadable)".to_string()
    } else if offload && (said.contains("not supported") || said.contains("Operation not supported")) {
        format!("{iface}'s driver has no LaunchTime offload for ETF; drop `offload` to use ETF in software mode")
    } else if said.contains("Operation not permitted") {
        "installing a qdisc needs CAP_NET_ADMIN".to_string()
    } else {
        "tc failed".to_string()
    };
    Err(NicError::Unsupported(format!("{why}: `{cmd}` said: {said}")))
}

/// Kernel release `(major, minor)` from `uname`.
pub fn kernel_version() -> Option<(u32, u32)> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Whether AF_XDP launch time (`XDP_TXMD_FLAGS_LAUNCH_TIME`, Linux ≥ 6.15) is available on interface `ifindex`:
/// the driver's `tx-launch-time-fifo` xsk-feature, read from the netdev generic-netlink family. keepon's AF_XDP
/// backend does not use launch time (its slots are timed by the ring), so this is reported, not relied on.
pub fn xdp_launch_time(ifindex: u32) -> String {
    let kernel = kernel_version().map_or_else(|| "kernel".to_string(), |(a, b)| format!("kernel {a}.{b}"));
    match xsk_features(ifindex) {
        Ok(Some(f)) if f & XSK_TX_LAUNCH_TIME_FIFO != 0 => {
            "AF_XDP launch time: the driver advertises tx-launch-time-fifo".to_string()
        }
        Ok(Some(_)) => {
            "AF_XDP launch time: not offered (the driver does not advertise tx-launch-time-fifo)".to_string()
        }
        Ok(None) => format!("AF_XDP launch time: not offered ({kernel} reports no netdev xsk-features)"),
        Err(e) => format!("AF_XDP launch time: unknown (netdev netlink query failed: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        v.resize(align4(v.len()), 0);
        v
    }

    #[test]
    fn an_etf_qdisc_message_parses_with_its_parameters() {
        let mut body = vec![0u8; TCMSG_LEN];
        body[4..8].copy_from_slice(&7u32.to_ne_bytes());
        body[8..12].copy_from_slice(&0x8001_0000u32.to_ne_bytes());
        body[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        body.extend(attr(TCA_KIND, b"etf\0"));
        let mut qopt = Vec::new();
        qopt.extend_from_slice(&200_000i32.to_ne_bytes());
        qopt.extend_from_slice(&CLOCKID_TAI.to_ne_bytes());
        qopt.extend_from_slice(&TC_ETF_OFFLOAD_ON.to_ne_bytes());
        body.extend(attr(TCA_OPTIONS, &attr(TCA_ETF_PARMS, &qopt)));
        let (ifindex, q) = parse_qdisc(&body).unwrap();
        assert_eq!(ifindex, 7);
        assert_eq!(q.kind, "etf");
        assert_eq!(q.parent, u32::MAX);
        assert_eq!(
            q.etf,
            Some(EtfParams { delta_ns: 200_000, clockid: CLOCKID_TAI, offload: true, deadline_mode: false })
        );
        // A truncated attribute ends the list instead of reading past the buffer.
        let mut cut = body.clone();
        cut.truncate(TCMSG_LEN + 6);
        assert_eq!(parse_qdisc(&cut).unwrap().1.kind, "");
    }

    #[test]
    fn loopback_qdiscs_are_readable_and_hold_no_etf() {
        let lo = sys::if_index("lo").unwrap();
        let q = qdiscs(lo).unwrap();
        assert!(q.iter().all(|q| q.kind != "etf"), "{q:?}");
        assert_eq!(
            etf_command("eth0", 300_000, true),
            "tc qdisc replace dev eth0 root etf clockid CLOCK_TAI delta 300000 offload"
        );
    }

    /// The netdev family answers for loopback: it has no AF_XDP TX metadata, so no launch time (on a kernel
    /// without the family the answer is `None` and says so).
    #[test]
    fn loopback_offers_no_xdp_launch_time() {
        let lo = 1; // loopback is always ifindex 1
        match xsk_features(lo).unwrap() {
            Some(f) => assert_eq!(f & XSK_TX_LAUNCH_TIME_FIFO, 0),
            None => assert!(xdp_launch_time(lo).contains("reports no netdev xsk-features")),
        }
        assert!(xdp_launch_time(lo).contains("not offered"), "{}", xdp_launch_time(lo));
        // An interface that does not exist is an error, not a silent "no".
        assert!(xsk_features(0x7fff_fff0).is_err());
    }
}
