//! The one place with `unsafe`: thin, typed wrappers over the Linux system calls the backends use.
//!
//! Everything above this module is safe Rust. Each `unsafe` block states why it is sound. Kernel ABI
//! constants and structures that `libc` does not carry on every target are declared here with the name
//! of the uapi header they come from; their layouts are checked by size assertions below.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

// <linux/if_packet.h>
pub const SOL_PACKET: libc::c_int = 263;
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
pub const PACKET_STATISTICS: libc::c_int = 6;
pub const PACKET_VERSION: libc::c_int = 10;
pub const PACKET_TX_RING: libc::c_int = 13;
pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
pub const PACKET_MR_PROMISC: u16 = 1;
pub const TPACKET_V2: libc::c_int = 1;
pub const TP_STATUS_AVAILABLE: u32 = 0;
pub const TP_STATUS_SEND_REQUEST: u32 = 1;
pub const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Offset of the frame data in a TPACKET_V2 TX frame: `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`.
pub const TPACKET2_TX_DATA_OFFSET: usize = 32;
// <linux/if_ether.h>
pub const ETH_P_ALL: u16 = 0x0003;
// <asm-generic/socket.h>
pub const SO_SNDBUFFORCE: libc::c_int = 32;
pub const SO_RCVBUFFORCE: libc::c_int = 33;
pub const SO_TIMESTAMPING: libc::c_int = 37;
pub const SO_NOFCS: libc::c_int = 43;
// <linux/net_tstamp.h>
pub const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
pub const SOF_TIMESTAMPING_RX_HARDWARE: u32 = 1 << 2;
pub const SOF_TIMESTAMPING_RX_SOFTWARE: u32 = 1 << 3;
pub const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
pub const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;
pub const HWTSTAMP_FILTER_ALL: i32 = 1;
// <linux/sockios.h>
pub const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
pub const SIOCGIFMTU: libc::c_ulong = 0x8921;
pub const SIOCGIFHWADDR: libc::c_ulong = 0x8927;
pub const SIOCOUTQ: libc::c_ulong = 0x5411;
pub const SIOCETHTOOL: libc::c_ulong = 0x8946;
pub const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
// <linux/ethtool.h>
pub const ETHTOOL_GSET: u32 = 0x1;
pub const ETHTOOL_GDRVINFO: u32 = 0x3;
// <linux/if_xdp.h>
pub const AF_XDP: libc::c_int = 44;
pub const SOL_XDP: libc::c_int = 283;
pub const XDP_COPY: u16 = 1 << 1;
pub const XDP_ZEROCOPY: u16 = 1 << 2;
pub const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub const XDP_TX_RING: libc::c_int = 3;
pub const XDP_UMEM_REG: libc::c_int = 4;
pub const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
pub const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;

/// `struct tpacket_req` (<linux/if_packet.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketReq {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
}

/// `struct tpacket_stats` (<linux/if_packet.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketStats {
    pub packets: u32,
    pub drops: u32,
}

/// `struct packet_mreq` (<linux/if_packet.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketMreq {
    pub ifindex: i32,
    pub kind: u16,
    pub alen: u16,
    pub address: [u8; 8],
}

/// `struct hwtstamp_config` (<linux/net_tstamp.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HwtstampConfig {
    pub flags: i32,
    pub tx_type: i32,
    pub rx_filter: i32,
}

/// `struct xdp_umem_reg` in its first (v1) layout, which every kernel with AF_XDP accepts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpUmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
}

/// `struct xdp_ring_offset` (<linux/if_xdp.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpRingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// `struct xdp_mmap_offsets` (<linux/if_xdp.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpMmapOffsets {
    pub rx: XdpRingOffset,
    pub tx: XdpRingOffset,
    pub fr: XdpRingOffset,
    pub cr: XdpRingOffset,
}

/// `struct sockaddr_xdp` (<linux/if_xdp.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_desc` (<linux/if_xdp.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// `struct ifreq`: 16 bytes of name and a 24-byte union (on 64- and 32-bit Linux ABIs alike for our uses).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug)]
pub struct IfReq {
    pub name: [u8; 16],
    pub data: [u8; 24],
}

const _: () = assert!(size_of::<TpacketReq>() == 16);
const _: () = assert!(size_of::<PacketMreq>() == 16);
const _: () = assert!(size_of::<HwtstampConfig>() == 12);
const _: () = assert!(size_of::<XdpUmemReg>() == 24);
const _: () = assert!(size_of::<XdpMmapOffsets>() == 128);
const _: () = assert!(size_of::<SockaddrXdp>() == 16);
const _: () = assert!(size_of::<XdpDesc>() == 16);
const _: () = assert!(size_of::<IfReq>() == 40);

impl IfReq {
    /// An `ifreq` naming `iface` (at most 15 bytes, no NUL).
    pub fn new(iface: &str) -> io::Result<IfReq> {
        let b = iface.as_bytes();
        if b.is_empty() || b.len() > 15 || b.contains(&0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {iface:?}")));
        }
        let mut name = [0u8; 16];
        name[..b.len()].copy_from_slice(b);
        Ok(IfReq { name, data: [0; 24] })
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `socket(2)`, close-on-exec.
pub fn socket(domain: libc::c_int, ty: libc::c_int, proto: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes plain integers; a non-negative result is a new descriptor we own.
    let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain-old-data value.
pub fn setsockopt<T: Copy>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` readable bytes for the duration of the call; T is Copy (POD).
    cvt(unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t)
    })?;
    Ok(())
}

/// `getsockopt(2)` into a plain-old-data value; returns the length the kernel wrote.
pub fn getsockopt<T: Copy + Default>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<(T, usize)> {
    let mut value = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, which is a valid, writable T of that size;
    // all our T are plain integer structs for which any byte pattern is valid.
    cvt(unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&mut value as *mut T).cast(), &mut len) })?;
    Ok((value, len as usize))
}

/// An `ioctl(2)` taking a pointer to `T`.
pub fn ioctl<T>(fd: BorrowedFd<'_>, req: libc::c_ulong, arg: &mut T) -> io::Result<libc::c_int> {
    // SAFETY: every request we pass takes a pointer to a structure of type T (ifreq, int, hwtstamp_config),
    // which is valid and writable for the duration of the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg as *mut T) })
}

/// `SIOCETHTOOL`: `ifr_data` points at `buf`, whose first `u32` is the ethtool command.
pub fn ethtool(fd: BorrowedFd<'_>, iface: &str, buf: &mut [u8]) -> io::Result<()> {
    let mut ifr = IfReq::new(iface)?;
    let ptr = buf.as_mut_ptr() as usize;
    ifr.data[..size_of::<usize>()].copy_from_slice(&ptr.to_ne_bytes());
    // SAFETY: `ifr.ifr_data` points at `buf`, which outlives the call and is as large as the command's
    // structure (the callers size it for the command in its first word).
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr as *mut IfReq) })?;
    Ok(())
}

/// `SIOCSHWTSTAMP` with `ifr_data` pointing at `cfg`.
pub fn set_hwtstamp(fd: BorrowedFd<'_>, iface: &str, cfg: &mut HwtstampConfig) -> io::Result<()> {
    let mut ifr = IfReq::new(iface)?;
    let ptr = cfg as *mut HwtstampConfig as usize;
    ifr.data[..size_of::<usize>()].copy_from_slice(&ptr.to_ne_bytes());
    // SAFETY: `ifr.ifr_data` points at `cfg`, a valid hwtstamp_config that outlives the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), SIOCSHWTSTAMP as _, &mut ifr as *mut IfReq) })?;
    Ok(())
}

/// `if_nametoindex(3)`; `None` if there is no such interface (in this thread's network namespace).
pub fn if_index(iface: &str) -> Option<u32> {
    let c = CString::new(iface).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// `bind(2)` an AF_PACKET socket to an interface and protocol (host byte order).
pub fn bind_packet(fd: BorrowedFd<'_>, ifindex: u32, proto: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `bind(2)` an AF_XDP socket to queue `queue` of an interface.
pub fn bind_xdp(fd: BorrowedFd<'_>, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sxdp = SockaddrXdp { family: AF_XDP as u16, flags, ifindex, queue_id: queue, shared_umem_fd: 0 };
    // SAFETY: `sxdp` is a valid sockaddr_xdp and the length passed is its size.
    cvt(unsafe {
        libc::bind(fd.as_raw_fd(), (&sxdp as *const SockaddrXdp).cast(), size_of::<SockaddrXdp>() as libc::socklen_t)
    })?;
    Ok(())
}

/// One message for [`sendmmsg`]: up to two byte slices sent back to back as one frame.
pub type IoMsg<'a> = [&'a [u8]; 2];

/// `sendmmsg(2)` with `MSG_DONTWAIT` on a bound socket (returns how many messages the kernel accepted),
/// asking for a software TX timestamp (`SOF_TIMESTAMPING_TX_SOFTWARE`, per message through an
/// `SO_TIMESTAMPING` control message) of every message `i` with `stamp[i]` (missing entries: no stamp). The
/// stamps arrive on the socket's error queue ([`recv_errqueue`]).
pub fn sendmmsg_stamped(fd: BorrowedFd<'_>, msgs: &[IoMsg<'_>], stamp: &[bool]) -> io::Result<usize> {
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(msgs.len() * 2);
    for m in msgs {
        for part in m {
            if !part.is_empty() {
                iov.push(libc::iovec { iov_base: part.as_ptr() as *mut libc::c_void, iov_len: part.len() });
            }
        }
    }
    // One control buffer for every stamped message (they are identical and the kernel only reads them).
    // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
    let (space, len) = unsafe { (libc::CMSG_SPACE(4) as usize, libc::CMSG_LEN(4) as usize) };
    let mut control = [0u64; 4];
    debug_assert!(space <= size_of::<[u64; 4]>());
    // SAFETY: `control` is 8-byte aligned and larger than one cmsghdr with a 4-byte payload; we write the
    // header fields and the payload inside it.
    unsafe {
        let c = control.as_mut_ptr().cast::<libc::cmsghdr>();
        (*c).cmsg_len = len as _;
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = SO_TIMESTAMPING;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u32>(), SOF_TIMESTAMPING_TX_SOFTWARE);
    }
    let mut hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(msgs.len());
    let mut at = 0usize;
    for (i, m) in msgs.iter().enumerate() {
        let n = m.iter().filter(|p| !p.is_empty()).count();
        // SAFETY: msghdr is plain data; all-zero (no name, no control) is valid.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_iov = iov[at..].as_mut_ptr();
        h.msg_iovlen = n as _;
        if stamp.get(i).copied().unwrap_or(false) {
            h.msg_control = control.as_mut_ptr().cast();
            h.msg_controllen = space as _;
        }
        at += n;
        hdrs.push(libc::mmsghdr { msg_hdr: h, msg_len: 0 });
    }
    // SAFETY: every header points into `iov` (into the caller's slices) and at most into `control`; all of
    // them outlive the call, and the kernel only reads them (and writes `msg_len` into `hdrs`, which we own).
    let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), hdrs.as_mut_ptr(), hdrs.len() as _, libc::MSG_DONTWAIT) };
    cvt(r).map(|n| n as usize)
}

/// `send(fd, buf, MSG_DONTWAIT)` on a bound socket.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length for the duration of the call.
    cvt_size(unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) })
}

/// Empty `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`: the TX doorbell of TX_RING and AF_XDP sockets.
pub fn kick(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: a null buffer of length 0 and no address are valid arguments.
    cvt_size(unsafe { libc::sendto(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) })
}

/// Wait until `fd` is readable or `timeout_ms` passes; true if readable.
pub fn poll_in(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: `p` is one valid pollfd.
    let n = cvt(unsafe { libc::poll(&mut p, 1, timeout_ms) });
    match n {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// `poll(2)` for input on any of `fds`: true if one is readable (false on timeout or a signal).
pub fn poll_in_any(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<bool> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfds for the duration of the call.
    let n = cvt(unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) });
    match n {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// Timestamps from an `SCM_TIMESTAMPING` control message: `[software, (deprecated), raw hardware]`, ns.
pub type ScmTimestamps = [Option<i64>; 3];

/// `recvmsg(2)` with `MSG_DONTWAIT` into `buf`: frame length (untruncated), and the timestamps.
pub fn recv_timestamped(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<(usize, ScmTimestamps)>> {
    recv_stamped(fd, buf, libc::MSG_TRUNC)
}

/// One entry of the socket's error queue (`MSG_ERRQUEUE`): a TX timestamp, with the frame it belongs to in
/// `buf` (length, untruncated) — `None` when the queue is empty.
pub fn recv_errqueue(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<(usize, ScmTimestamps)>> {
    recv_stamped(fd, buf, libc::MSG_ERRQUEUE | libc::MSG_TRUNC)
}

fn recv_stamped(fd: BorrowedFd<'_>, buf: &mut [u8], flags: libc::c_int) -> io::Result<Option<(usize, ScmTimestamps)>> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 64];
    // SAFETY: msghdr is plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 64]>() as _;
    // SAFETY: `msg` points at `iov` (into `buf`) and `control`, both valid and writable during the call.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | flags) };
    let n = match cvt_size(r) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut ts: ScmTimestamps = [None; 3];
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR walk only inside `msg_control` up to the
    // `msg_controllen` the kernel set, and each SCM_TIMESTAMPING payload is three `struct timespec`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPING {
                let data = libc::CMSG_DATA(c) as *const libc::timespec;
                for (i, slot) in ts.iter_mut().enumerate() {
                    let t = std::ptr::read_unaligned(data.add(i));
                    if t.tv_sec != 0 || t.tv_nsec != 0 {
                        *slot = Some(timespec_ns(&t));
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Some((n, ts)))
}

/// Read a clock, in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec; CLOCK_TAI/REALTIME/MONOTONIC always exist on Linux ≥ 3.10, so the
    // call cannot fail (if it did, `t` stays 0 and callers see time 0, never UB).
    unsafe { libc::clock_gettime(clock, &mut t) };
    timespec_ns(&t)
}

/// Nanoseconds of a timespec (`time_t` and `long` are 32-bit on some targets, hence the conversions).
#[allow(clippy::useless_conversion)]
fn timespec_ns(t: &libc::timespec) -> i64 {
    i64::from(t.tv_sec) * 1_000_000_000 + i64::from(t.tv_nsec)
}

/// The kernel's TAI offset, `CLOCK_TAI − CLOCK_REALTIME`, in whole seconds (`adjtimex`, read only).
pub fn tai_offset_s() -> io::Result<i64> {
    // SAFETY: timex is plain data; all-zero (modes = 0) asks adjtimex to read, never to change, the clock.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, writable timex for the duration of the call.
    cvt(unsafe { libc::adjtimex(&mut tx) })?;
    Ok(i64::from(tx.tai))
}

/// Sleep until `clock` reads `deadline_ns` (absolute), restarting after signals.
pub fn sleep_until(clock: libc::clockid_t, deadline_ns: i64) {
    let t = libc::timespec {
        tv_sec: deadline_ns.div_euclid(1_000_000_000) as _,
        tv_nsec: deadline_ns.rem_euclid(1_000_000_000) as _,
    };
    loop {
        // SAFETY: `t` is a valid timespec and the remaining-time pointer may be null with TIMER_ABSTIME.
        let r = unsafe { libc::clock_nanosleep(clock, libc::TIMER_ABSTIME, &t, std::ptr::null_mut()) };
        if r != libc::EINTR {
            return;
        }
    }
}

/// Ask for 1 µs timer slack on this thread (the default 50 µs would make every paced sleep late).
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only affects the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0) };
}

/// Run the calling thread under `SCHED_FIFO` at `priority` (1–99).
pub fn realtime(priority: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: priority };
    // SAFETY: `p` is a valid sched_param; pid 0 means the calling thread.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) })?;
    Ok(())
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() }
}

/// Move the calling thread into the network namespace open at `fd` (e.g. `/run/netns/NAME`).
pub fn setns_net(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns(2) takes a descriptor and a flag; it affects only the calling thread.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// A memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access goes through `&self`/`&mut self` methods
// or through atomics, so moving it to another thread is sound.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Map `len` bytes of `fd` at `offset` (a ring of a packet or XDP socket), shared, read-write, populated.
    pub fn socket(fd: BorrowedFd<'_>, len: usize, offset: i64) -> io::Result<Mmap> {
        Self::map(fd.as_raw_fd(), len, offset, libc::MAP_SHARED | libc::MAP_POPULATE)
    }

    /// Anonymous zeroed memory (an AF_XDP UMEM), private, populated.
    pub fn anonymous(len: usize) -> io::Result<Mmap> {
        Self::map(-1, len, 0, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE)
    }

    fn map(fd: RawFd, len: usize, offset: i64, flags: libc::c_int) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel picks does not alias any Rust object.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset as libc::off_t)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { ptr, len })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Start address (for registering a UMEM).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Copy `data` to `offset`. Panics (a programming error) if out of bounds.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(offset.checked_add(data.len()).is_some_and(|e| e <= self.len), "mmap write out of bounds");
        // SAFETY: the range is inside the mapping (checked above) and `data` cannot overlap it (it is a
        // separate Rust borrow; the mapping is not handed out as a slice).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len()) };
    }

    /// The `u32` at `offset` (4-aligned, in bounds) as an atomic shared with the kernel.
    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset & 3 == 0 && offset + 4 <= self.len, "mmap atomic out of bounds");
        // SAFETY: in bounds and aligned (checked above; the mapping is page aligned); the kernel accesses
        // these words atomically too, and `AtomicU32` has the layout of `u32`.
        unsafe { &*(self.ptr.as_ptr().add(offset) as *const AtomicU32) }
    }

    /// Load-acquire the `u32` at `offset`.
    pub fn load_u32(&self, offset: usize) -> u32 {
        self.atomic_u32(offset).load(Ordering::Acquire)
    }

    /// Store-release the `u32` at `offset`.
    pub fn store_u32(&self, offset: usize, v: u32) {
        self.atomic_u32(offset).store(v, Ordering::Release)
    }

    /// Plain write of the `u32` at `offset` (published later by a release store).
    pub fn put_u32(&mut self, offset: usize, v: u32) {
        self.write(offset, &v.to_ne_bytes());
    }

    /// Plain write of the `u64` at `offset`.
    pub fn put_u64(&mut self, offset: usize, v: u64) {
        self.write(offset, &v.to_ne_bytes());
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created and nobody else unmaps; no borrow of it outlives
        // `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A single-producer/single-consumer ring shared with the kernel (AF_XDP TX or completion ring).
///
/// ```text
///   cached_cons ≤ consumer ≤ producer ≤ cached_cons + size     (indices are free-running u32)
///   entry i lives at desc + (i & mask) · entry_size
/// ```
#[derive(Debug)]
pub struct XdpRing {
    map: Mmap,
    producer: usize,
    consumer: usize,
    desc: usize,
    mask: u32,
    entry: usize,
}

impl XdpRing {
    /// Map an AF_XDP ring of `size` entries of `entry` bytes at page offset `pgoff` with the kernel's offsets.
    pub fn map(fd: BorrowedFd<'_>, off: &XdpRingOffset, size: u32, entry: usize, pgoff: i64) -> io::Result<XdpRing> {
        let len = off.desc as usize + size as usize * entry;
        let map = Mmap::socket(fd, len, pgoff)?;
        Ok(XdpRing {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            desc: off.desc as usize,
            mask: size - 1,
            entry,
        })
    }

    /// The producer index (kernel's for the completion ring, ours for TX).
    pub fn producer(&self) -> u32 {
        self.map.load_u32(self.producer)
    }

    /// The consumer index (ours for the completion ring, kernel's for TX).
    pub fn consumer(&self) -> u32 {
        self.map.load_u32(self.consumer)
    }

    /// TX: write descriptor `i` (not yet published).
    pub fn put_tx_desc(&mut self, i: u32, addr: u64, len: u32) {
        debug_assert_eq!(self.entry, size_of::<XdpDesc>());
        let at = self.desc + (i & self.mask) as usize * self.entry;
        self.map.put_u64(at, addr);
        self.map.put_u32(at + 8, len);
        self.map.put_u32(at + 12, 0);
    }

    /// Publish our producer index (release: the descriptors written before become visible).
    pub fn set_producer(&self, v: u32) {
        self.map.store_u32(self.producer, v)
    }

    /// Publish our consumer index (release: the kernel may reuse the entries).
    pub fn set_consumer(&self, v: u32) {
        self.map.store_u32(self.consumer, v)
    }
}

/// A `PACKET_TX_RING` (TPACKET_V2) mapping: `frame_nr` frames of `frame_size` bytes, each starting with a
/// `tpacket2_hdr` whose first word is the status shared with the kernel.
#[derive(Debug)]
pub struct TxRing {
    map: Mmap,
    frame_size: usize,
    frame_nr: u32,
    frames_per_block: u32,
    block_size: usize,
}

impl TxRing {
    /// Map the ring configured by `req`.
    pub fn map(fd: BorrowedFd<'_>, req: &TpacketReq) -> io::Result<TxRing> {
        let len = req.block_size as usize * req.block_nr as usize;
        let map = Mmap::socket(fd, len, 0)?;
        Ok(TxRing {
            map,
            frame_size: req.frame_size as usize,
            frame_nr: req.frame_nr,
            frames_per_block: req.block_size / req.frame_size,
            block_size: req.block_size as usize,
        })
    }

    /// Frames in the ring.
    pub fn frames(&self) -> u32 {
        self.frame_nr
    }

    fn base(&self, i: u32) -> usize {
        let b = (i / self.frames_per_block) as usize;
        let f = (i % self.frames_per_block) as usize;
        b * self.block_size + f * self.frame_size
    }

    /// Status word of frame `i`.
    pub fn status(&self, i: u32) -> u32 {
        self.map.load_u32(self.base(i))
    }

    /// Write frame `i`'s data (the parts back to back) and length; the status is left alone.
    pub fn fill(&mut self, i: u32, parts: &[&[u8]], write_data: bool) {
        let base = self.base(i);
        let mut len = 0usize;
        for p in parts {
            if write_data {
                self.map.write(base + TPACKET2_TX_DATA_OFFSET + len, p);
            }
            len += p.len();
        }
        debug_assert!(TPACKET2_TX_DATA_OFFSET + len <= self.frame_size);
        self.map.put_u32(base + 4, len as u32); // tp_len
    }

    /// Hand frame `i` to the kernel (release: its data becomes visible first).
    pub fn send_request(&self, i: u32) {
        self.map.store_u32(self.base(i), TP_STATUS_SEND_REQUEST)
    }
}
