//! The application API of `keepon daemon`: `SO_TXTIME`-like submission with a per-frame outcome.
//!
//! A client connects to the daemon's UNIX stream socket and exchanges length-prefixed messages (`u32`
//! little-endian length, then the message). Every `Submit` gets exactly one `Outcome`, like the ETF error
//! queue but for every frame: sent in slot `k` at time `t`, or rejected with a reason.
//!
//! ```text
//! request  Info     : ver=1 | kind=1
//! request  Time     : ver=1 | kind=3
//! request  Subscribe: ver=1 | kind=4 | flags u8 (bit 0: release times)
//! request  Submit   : ver=1 | kind=2 | flags (bit 0: has txtime) | class_len u8 | tag u64 | txtime i64 |
//!                     class (UTF-8, class_len bytes) | frame (L2 bytes without FCS)
//! response Info     : ver=1 | kind=0x81 | rate_bps u64 | slot_bytes u32 | ring u32 | batch u32 |
//!                     now i64 | cycle_start i64 | base_time i64 | cycle_num u64 | cycle_den u64 |
//!                     host u32 (bit 0: poll loop SCHED_FIFO, bit 1: memory locked, bit 2: poll loop pinned,
//!                               bit 3: the host refused something `[realtime]` asked for) |
//!                     classes, to the end: name_len u8 | name (UTF-8) | windows u16 |
//!                                          windows × (offset_ns u64 | length_ns u64)
//! response Outcome  : ver=1 | kind=0x82 | status (0 sent, 1 rejected, 2 sent off schedule) | reason u8 | tag u64 | slot u64 |
//!                     time i64 | ring_slot u32
//! response Error    : ver=1 | kind=0x83 | UTF-8 text        (malformed request; the connection stays open)
//! response Time     : ver=1 | kind=0x84 | sync u8 | port u8 | servo u8 | flags u8 (bit 0: offset valid,
//!                     bit 1: path delay valid, bit 2: alignment valid) | ephc_now i64 | host_now i64 |
//!                     offset i64 | freq_ppt i64 | path_delay i64 | align_p50 i64 | align_p99 i64 | align_max i64
//! response Released : ver=1 | kind=0x85 | flags u8 (bit 0: time valid, bit 1: kernel TX stamp) | 0 | tag u64 |
//!                     released i64
//! response Subscribed: ver=1 | kind=0x86 | flags u8 (as the daemon now does them)
//! request  Stats    : ver=1 | kind=5
//! response Stats    : ver=1 | kind=0x87 | UTF-8 text: the daemon's metrics in the Prometheus text format
//! request  Schedule : ver=1 | kind=6 | base_time i64 |
//!                     classes, to the end: name_len u8 | name (UTF-8) | slots u16 | slots × ring slot u16
//! request  ScheduleWindows: ver=1 | kind=7 | base_time i64 |
//!                     classes, to the end: name_len u8 | name (UTF-8) | windows u16 | windows × (offset u64 |
//!                     length u64), ns into the cycle
//! response Scheduled: ver=1 | kind=0x88 | status u8 (0 accepted, 1 refused) | 0 | time i64 | rejected u64 |
//!                     UTF-8 text (why it was refused)
//! ```
//!
//! **Live schedule change** (IEEE 802.1Qbv's admin → oper): `Schedule` gives every class's ring slots from network
//! time `base_time` on (the first slot starting at or after it); the ring, the slot size and the classes stay as
//! configured, and a class left out keeps its slots. `Scheduled` says when it takes effect (`time`) and how many
//! frames already submitted it left without a slot (rejected `schedule-change`); or, refused (a base time whose
//! slot the NIC already has — Qbv's `config-change-error` —, another ring, an unknown class, a uid that may not),
//! why. Only root and the daemon's own user may change the schedule. `ScheduleWindows` is the same change given
//! as each class's windows in the cycle (what `Info` reports): the byte clock takes it (and only it) from the first
//! cycle start at or after `base_time`; the slot station takes it where every window edge is a slot boundary
//! (`⌈i·δ⌉`), as ring slots.
//!
//! **Release times** (opt-in per connection, `Subscribe` with bit 0, like `SOF_TIMESTAMPING_TX_SOFTWARE` next to
//! the ETF error queue): on a host-paced link a frame leaves when the host hands it to the kernel, later than its
//! slot by the host's release lag (microseconds; milliseconds after a stall). After `Subscribe`, every frame of
//! the connection that is *sent* (an `Outcome` with status 0 or 2) is followed by exactly one `Released`: the time
//! on the EPHC (TAI ns) when the host released it — the kernel's software TX timestamp where the backend gets one
//! (bit 1), otherwise interpolated within the call that handed it over. The time is not valid (bit 0 clear)
//! where the NIC paces the link itself (the simulated NIC, line-rate NICs: the slot time is the wire time), or
//! when no report came within [`RELEASE_WAIT`]. Rejected frames get no `Released`. A half-closed connection is
//! closed once its `Released` messages are written too.
//!
//! `Time` reads the station's network time like `clock_gettime` on a PHC: `ephc_now` is the EPHC (TAI ns) and
//! `host_now` the host's `CLOCK_TAI` at the same instant (one host clock read, converted). `sync`: 0 the EPHC
//! runs free (no `[ptp]`), 1 synchronised, 2 not synchronised (scheduled submits are refused
//! `not-synchronised`). `port`: 0 neither master nor slave (listening, or no PTP), 1 master, 2 slave. `servo`:
//! 0 unlocked, 1 stepping, 2 locked. `offset` is the servo's last estimate of EPHC − master (ns), `freq_ppt`
//! the frequency adjustment it applies (parts per trillion), `path_delay` its mean path delay estimate (ns).
//!
//! **The schedule on network time.** `Info` gives the schedule the way an 802.1Qbv gate control list does:
//! cycle `n` starts at `base_time + n·cycle` (TAI ns; `cycle = cycle_num/cycle_den` ns exactly, `ring` slots
//! of δ), and each class's windows are offsets in the cycle: a txtime `base_time + n·cycle + offset + x`,
//! `0 ≤ x < length`, is in the class's window (offsets and lengths are whole ns, rounded up from the exact slot
//! boundaries `i·δ`). A client computes its txtimes once from these and never needs to re-read anything: the
//! schedule does not move, whatever the NIC's oscillator, synchronisation or underruns do. `cycle_start` is one
//! cycle start at least a ring of slots ahead (a convenience). `Time` adds how far the wire kept to the schedule:
//! the magnitude of wire slot start − schedule time on the EPHC (ns): median, 99th percentile and maximum of the
//! slots posted while the grid was locked (on the byte clock, which keeps no grid: of the real-time frames sent,
//! wire start − txtime).
//!
//! All integers are little-endian. Messages are parsed from untrusted bytes with checked
//! lengths; a request's length prefix beyond [`MAX_MESSAGE`] (16 KiB) ends the connection (the stream cannot be
//! resynchronised). Replies are at most [`MAX_REPLY`] (96 KiB): the largest `Info` of a legal configuration (64
//! classes with 255-byte names, 4 096 windows) fits by construction, and `Stats` is cut to fit.

use keepon_core::outcome::Reason;

/// Protocol version.
pub const VERSION: u8 = 1;
/// Largest request the daemon accepts (a 9018-byte slot plus headers, rounded up).
pub const MAX_MESSAGE: usize = 16 * 1024;

/// Largest reply the daemon sends, and clients accept: the largest `Info` of a legal configuration fits by
/// construction ([`MAX_INFO`]).
pub const MAX_REPLY: usize = 96 * 1024;

/// The largest `Info` reply of a legal configuration: [`MAX_CLASSES`](keepon_core::isolation::MAX_CLASSES) classes
/// with 255-byte names and [`MAX_WINDOWS`] windows in all.
pub const MAX_INFO: usize = INFO_FIXED + keepon_core::isolation::MAX_CLASSES * (1 + 255 + 2) + MAX_WINDOWS * 16;

/// Most windows all classes together may have: a slot mask has at most one per ring slot, and the byte clock's
/// `[[class]] windows` are held to as many.
pub const MAX_WINDOWS: usize = keepon_core::isolation::MAX_RING_SLOTS as usize;

const _: () = assert!(MAX_INFO <= MAX_REPLY);

const K_INFO: u8 = 1;
const K_SUBMIT: u8 = 2;
const K_INFO_REPLY: u8 = 0x81;
const K_OUTCOME: u8 = 0x82;
const K_ERROR: u8 = 0x83;
const K_TIME: u8 = 3;
const K_TIME_REPLY: u8 = 0x84;
const K_SUBSCRIBE: u8 = 4;
const K_RELEASED: u8 = 0x85;
const K_SUBSCRIBED: u8 = 0x86;
const K_STATS: u8 = 5;
const K_STATS_REPLY: u8 = 0x87;
const K_SCHEDULE: u8 = 6;
const K_SCHEDULE_WINDOWS: u8 = 7;
const K_SCHEDULED: u8 = 0x88;
const SCHEDULED_FIXED: usize = 4 + 8 + 8;
const RELEASED_LEN: usize = 4 + 8 + 8;

/// How long the daemon waits for a sent frame's release report before it says it has none.
pub const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
const TIME_REPLY_LEN: usize = 6 + 8 * 8;
/// Fixed part of an `Info` reply before the classes.
const INFO_FIXED: usize = 2 + 8 + 4 * 3 + 8 * 5 + 4;

/// `Info::host`: the poll loop runs `SCHED_FIFO`.
pub const HOST_FIFO: u32 = 1;
/// `Info::host`: the daemon's memory is locked.
pub const HOST_MEMORY_LOCKED: u32 = 2;
/// `Info::host`: the poll loop is pinned to a CPU.
pub const HOST_PINNED: u32 = 4;
/// `Info::host`: the host refused something `[realtime]` asked for (the daemon's status line says what).
pub const HOST_REFUSED: u32 = 8;
const SUBMIT_HEADER: usize = 4 + 8 + 8;

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Ask for the link's geometry and clock.
    Info,
    /// Ask for the station's network time and synchronisation state.
    Time,
    /// Choose what the daemon reports beyond outcomes (replied with `Subscribed`).
    Subscribe {
        /// A `Released` message after the outcome of every sent frame.
        release_times: bool,
    },
    /// Ask for the daemon's metrics (replied with `Stats`).
    Stats,
    /// Change the schedule from `base_time` on (replied with `Scheduled`).
    Schedule {
        /// Network time (TAI ns) from which the new slots govern.
        base_time: i64,
        /// Classes by name and their ring slots under the new schedule.
        classes: Vec<(String, Vec<u32>)>,
    },
    /// Change the schedule from the first cycle start at or after `base_time` on, given as windows (replied with
    /// `Scheduled`).
    ScheduleWindows {
        /// Network time (TAI ns) from which the new windows govern.
        base_time: i64,
        /// Classes by name and their windows in the cycle, (offset, length) ns.
        classes: Vec<(String, Vec<(u64, u64)>)>,
    },
    /// Send a frame.
    Submit {
        /// Client's identifier, echoed in the outcome.
        tag: u64,
        /// Class name.
        class: String,
        /// Scheduled time (TAI ns); `None` for best effort.
        txtime: Option<i64>,
        /// L2 bytes without FCS.
        frame: Vec<u8>,
    },
}

/// The link as the daemon describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// Line rate, b/s.
    pub rate_bps: u64,
    /// Slot size, bytes.
    pub slot_bytes: u32,
    /// Ring size.
    pub ring: u32,
    /// Batch.
    pub batch: u32,
    /// EPHC time now (TAI ns).
    pub now: i64,
    /// A slot start whose ring slot is 0.
    pub cycle_start: i64,
    /// A cycle starts at this TAI time (and every `cycle` before and after).
    pub base_time: i64,
    /// The cycle time, `cycle.0 / cycle.1` ns exactly.
    pub cycle: (u64, u64),
    /// Class names, by index.
    pub classes: Vec<String>,
    /// Each class's windows in the cycle, (offset, length) in ns (empty for best effort), by class index.
    pub windows: Vec<Vec<(u64, u64)>>,
    /// What the host granted the daemon ([`HOST_FIFO`], [`HOST_MEMORY_LOCKED`], [`HOST_PINNED`],
    /// [`HOST_REFUSED`]).
    pub host: u32,
}

/// Whether the EPHC is network time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncState {
    /// No `[ptp]`: the EPHC runs free on the link's clock; scheduled submits are not gated.
    FreeRunning = 0,
    /// Master, or a slave locked within the sync threshold.
    Synchronised = 1,
    /// PTP is configured but the station is not synchronised (scheduled submits are refused).
    NotSynchronised = 2,
}

/// The PTP port's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRole {
    /// Neither master nor slave (listening, passive, or no PTP).
    None = 0,
    /// Master.
    Master = 1,
    /// Slave.
    Slave = 2,
}

/// The servo's state, as in `keepon_ptp::servo::ServoState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServoCode {
    /// Unlocked.
    Unlocked = 0,
    /// Its last measurement stepped the clock.
    Stepping = 1,
    /// Locked.
    Locked = 2,
}

/// The station's network time and synchronisation state (the `Time` reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeInfo {
    /// Synchronisation state.
    pub sync: SyncState,
    /// The PTP port's role.
    pub port: PortRole,
    /// The servo's state.
    pub servo: ServoCode,
    /// EPHC time now (TAI ns).
    pub ephc_now: i64,
    /// Host `CLOCK_TAI` at the same instant.
    pub host_now: i64,
    /// The servo's last offset estimate, EPHC − master (ns).
    pub offset: Option<i64>,
    /// The servo's frequency adjustment, parts per trillion.
    pub freq_ppt: i64,
    /// The servo's mean path delay estimate (ns).
    pub path_delay: Option<i64>,
    /// |wire slot start − schedule time| on the EPHC of the slots posted while locked: (median, p99, max) ns.
    pub alignment: Option<(i64, i64, i64)>,
}

/// A frame's result as the daemon reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Sent in `slot` at `time`, in ownership ring slot `ring_slot`.
    Sent {
        /// EPHC slot count.
        slot: u64,
        /// Wire time (TAI ns).
        time: i64,
        /// Ownership ring slot.
        ring_slot: u32,
        /// The frame left further than the daemon's tolerance (`run.tolerance`, default half a slot) from the
        /// start of the schedule slot that holds its txtime (an underrun, or the relaxed policy, moved it).
        off_schedule: bool,
    },
    /// Rejected.
    Rejected(Reason),
}

/// A response from the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Reply to `Info`.
    Info(Info),
    /// The single outcome of a submitted frame.
    Outcome {
        /// The submit's tag.
        tag: u64,
        /// What happened.
        delivery: Delivery,
    },
    /// A malformed request.
    Error(String),
    /// Reply to `Time`.
    Time(TimeInfo),
    /// When a sent frame was released to the link (after its `Outcome`; only with release times subscribed).
    Released {
        /// The submit's tag.
        tag: u64,
        /// Release time on the EPHC (TAI ns); `None` where the NIC paces the link or no report came.
        released: Option<i64>,
        /// `released` is the kernel's TX timestamp (not interpolated).
        stamped: bool,
    },
    /// Reply to `Stats`: the daemon's metrics in the Prometheus text exposition format (what `keepon status`
    /// shows and the metrics file holds).
    Stats(String),
    /// Reply to `Subscribe`: what the daemon now reports.
    Subscribed {
        /// Release times are on.
        release_times: bool,
    },
    /// Reply to `Schedule`.
    Scheduled(Result<Scheduled, String>),
}

/// An accepted schedule change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    /// When it takes effect (TAI ns): the first slot start at or after the requested base time.
    pub time: i64,
    /// Frames already submitted that it left without a slot (rejected `schedule-change`).
    pub rejected: u64,
}

/// Why bytes are not a valid message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ProtocolError {}

fn perr<T>(msg: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(msg.into()))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn check_header(b: &[u8]) -> Result<u8, ProtocolError> {
    if b.len() < 2 {
        return perr(format!("message of {} bytes is shorter than its 2-byte header", b.len()));
    }
    if b[0] != VERSION {
        return perr(format!("protocol version {} is not {VERSION}", b[0]));
    }
    Ok(b[1])
}

mod framing;
mod request;
mod response;

pub use framing::{frame_message, message_len, reply_len, split_messages};

pub use crate::client::{Client, DEFAULT_TIMEOUT, MAX_HELD};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_byte_literal() {
        let r = Request::Submit { tag: 7, class: "tc-0".into(), txtime: Some(1000), frame: vec![1, 2, 3] };
        let b = r.emit();
        assert_eq!(&b[..4], &[1, 2, 1, 4]);
        assert_eq!(&b[4..12], &7u64.to_le_bytes());
        assert_eq!(&b[20..24], b"tc-0");
        assert_eq!(Request::parse(&b).unwrap(), r);
        assert_eq!(Request::parse(&Request::Info.emit()).unwrap(), Request::Info);
        assert_eq!(Request::Time.emit(), vec![1, 3]);
        assert_eq!(Request::parse(&[1, 3]).unwrap(), Request::Time);
        assert_eq!(Request::Subscribe { release_times: true }.emit(), vec![1, 4, 1]);
        for on in [false, true] {
            let r = Request::Subscribe { release_times: on };
            assert_eq!(Request::parse(&r.emit()).unwrap(), r);
        }
        assert!(Request::parse(&[1, 4, 2]).unwrap_err().0.contains("unknown bits"));
        assert!(Request::parse(&[1, 4]).unwrap_err().0.contains("expected 3"));
        let r = Request::Schedule { base_time: -7, classes: vec![("tc-0".into(), vec![4, 12]), ("be".into(), vec![])] };
        let b = r.emit();
        assert_eq!(&b[..10], &[&[1u8, 6][..], &(-7i64).to_le_bytes()[..]].concat()[..]);
        assert_eq!(&b[10..20], &[4, b't', b'c', b'-', b'0', 2, 0, 4, 0, 12]);
        assert_eq!(Request::parse(&b).unwrap(), r);
        assert!(Request::parse(&b[..b.len() - 1]).unwrap_err().0.contains("cut short"));
        assert!(Request::parse(&[1, 6, 0]).unwrap_err().0.contains("header"));
        let r = Request::ScheduleWindows {
            base_time: 9,
            classes: vec![("ctrl".into(), vec![(20_000, 5_000), (u64::MAX, 1)]), ("be".into(), vec![])],
        };
        let b = r.emit();
        assert_eq!(&b[..10], &[&[1u8, 7][..], &9i64.to_le_bytes()[..]].concat()[..]);
        assert_eq!(&b[10..17], &[4, b'c', b't', b'r', b'l', 2, 0]);
        assert_eq!(&b[17..33], &[&20_000u64.to_le_bytes()[..], &5_000u64.to_le_bytes()[..]].concat()[..]);
        assert_eq!(Request::parse(&b).unwrap(), r);
        for cut in [b.len() - 1, 17 + 15, 12] {
            assert!(Request::parse(&b[..cut]).unwrap_err().0.contains("cut short"), "cut at {cut}");
        }
        assert!(Request::parse(&[1, 7, 0]).unwrap_err().0.contains("header"));
    }

    /// `Released`: flags, tag and time in their places; an invalid time reads back as none.
    #[test]
    fn released_byte_literal() {
        let r = Response::Released { tag: 0x0102, released: Some(-2), stamped: true };
        let b = r.emit();
        assert_eq!(&b[..4], &[1, 0x85, 3, 0]);
        assert_eq!(&b[4..12], &0x0102u64.to_le_bytes());
        assert_eq!(&b[12..20], &(-2i64).to_le_bytes());
        let none = Response::Released { tag: 1, released: None, stamped: false };
        assert_eq!(none.emit()[2], 0);
        assert_eq!(Response::Subscribed { release_times: true }.emit(), vec![1, 0x86, 1]);
        let mut bad = b.clone();
        bad[2] = 4;
        assert!(Response::parse(&bad).unwrap_err().0.contains("unknown bits"));
        assert!(Response::parse(&b[..19]).unwrap_err().0.contains("expected 20"));
    }

    #[test]
    fn responses_round_trip() {
        for r in [
            Response::Outcome {
                tag: 9,
                delivery: Delivery::Sent { slot: 5, time: -3, ring_slot: 1, off_schedule: false },
            },
            Response::Outcome {
                tag: 9,
                delivery: Delivery::Sent { slot: 5, time: 7, ring_slot: 1, off_schedule: true },
            },
            Response::Outcome { tag: 9, delivery: Delivery::Rejected(Reason::Forbidden) },
            Response::Error("bad".into()),
            Response::Released { tag: 3, released: Some(1_700_000_000_000_000_456), stamped: true },
            Response::Released { tag: 4, released: Some(5), stamped: false },
            Response::Released { tag: 5, released: None, stamped: false },
            Response::Subscribed { release_times: false },
            Response::Subscribed { release_times: true },
            Response::Scheduled(Ok(Scheduled { time: 1_700_000_000_000_000_000, rejected: 3 })),
            Response::Scheduled(Err("base time has passed".into())),
            Response::Time(TimeInfo {
                sync: SyncState::Synchronised,
                port: PortRole::Slave,
                servo: ServoCode::Locked,
                ephc_now: 1_700_000_000_000_000_123,
                host_now: -5,
                offset: Some(-42),
                freq_ppt: 50_000_000,
                path_delay: Some(3_100),
                alignment: None,
            }),
            Response::Time(TimeInfo {
                sync: SyncState::FreeRunning,
                port: PortRole::None,
                servo: ServoCode::Unlocked,
                ephc_now: 7,
                host_now: 7,
                offset: None,
                freq_ppt: 0,
                path_delay: None,
                alignment: Some((1, 7, 9)),
            }),
            Response::Info(Info {
                rate_bps: 1_000_000_000,
                slot_bytes: 1230,
                ring: 32,
                batch: 8,
                now: 5,
                cycle_start: 6,
                base_time: 1_000_000_000,
                cycle: (21_504, 10),
                host: HOST_FIFO | HOST_REFUSED,
                classes: vec!["a".into(), "bb".into()],
                windows: vec![vec![(0, 10_000), (40_000, 20_000)], vec![]],
            }),
        ] {
            assert_eq!(Response::parse(&r.emit()).unwrap(), r);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Request::parse(&[]).is_err());
        assert!(Request::parse(&[2, 1]).unwrap_err().0.contains("version"));
        assert!(Request::parse(&[1, 9]).unwrap_err().0.contains("unknown request kind"));
        let mut t = vec![1, 0x84, 1, 2, 2, 3];
        t.extend_from_slice(&[0; 64]);
        assert!(Response::parse(&t).is_ok());
        assert!(Response::parse(&t[..69]).unwrap_err().0.contains("expected 70"));
        t[2] = 9;
        assert!(Response::parse(&t).unwrap_err().0.contains("sync state"));
        t[2] = 1;
        t[5] = 8;
        assert!(Response::parse(&t).unwrap_err().0.contains("flags"));
        // An info reply whose class claims more windows than it carries.
        let mut i = Response::Info(Info {
            rate_bps: 1,
            slot_bytes: 64,
            ring: 2,
            batch: 1,
            now: 0,
            cycle_start: 0,
            base_time: 0,
            cycle: (1, 1),
            host: 0,
            classes: vec!["a".into()],
            windows: vec![vec![(0, 1)]],
        })
        .emit();
        i.truncate(i.len() - 1);
        assert!(Response::parse(&i).unwrap_err().0.contains("cut short"));
        assert!(Request::parse(&[1, 2, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let mut buf = vec![0xff, 0xff, 0xff, 0x7f];
        assert!(split_messages(&mut buf).is_err());
        let mut buf = Vec::new();
        frame_message(&[1, 1], &mut buf);
        buf.extend_from_slice(&[3, 0]);
        assert_eq!(split_messages(&mut buf).unwrap(), vec![vec![1, 1]]);
        assert_eq!(buf, vec![3, 0]);
    }

    /// Issue 29 point 4: the largest `Info` of a legal configuration (64 classes with 255-byte names, not ASCII,
    /// 4 096 windows) is within [`MAX_REPLY`], and a client splits and parses it.
    #[test]
    fn the_largest_info_fits_one_reply() {
        let classes: Vec<String> =
            (0..keepon_core::isolation::MAX_CLASSES).map(|k| format!("{k:02}{}", "é".repeat(126)) + "x").collect();
        assert!(classes.iter().all(|c| c.len() == 255));
        let per = MAX_WINDOWS / classes.len();
        let windows = (0..classes.len()).map(|k| (0..per).map(|w| ((k * per + w) as u64 * 2, 1)).collect()).collect();
        let info = Response::Info(Info {
            rate_bps: 1_000_000_000,
            slot_bytes: 64,
            ring: 4096,
            batch: 32,
            now: 1,
            cycle_start: 2,
            base_time: 3,
            cycle: (4096 * 672, 1),
            host: 0,
            classes,
            windows,
        });
        let body = info.emit();
        assert_eq!(body.len(), MAX_INFO, "every class and window carried");
        let mut buf = Vec::new();
        frame_message(&body, &mut buf);
        let msgs = split_messages(&mut buf).unwrap();
        assert_eq!(Response::parse(&msgs[0]).unwrap(), info);
        // One byte over the reply limit is refused.
        let mut buf = ((MAX_REPLY + 1) as u32).to_le_bytes().to_vec();
        assert!(split_messages(&mut buf).unwrap_err().0.contains("exceeds"));
    }

    proptest::proptest! {
        /// Untrusted bytes never panic the parsers, and whatever parses re-emits to the same bytes' meaning.
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Ok(r) = Request::parse(&bytes) {
                proptest::prop_assert_eq!(Request::parse(&r.emit()).unwrap(), r);
            }
            let _ = Response::parse(&bytes);
            let mut buf = bytes.clone();
            let _ = split_messages(&mut buf);
        }

        #[test]
        fn submit_round_trips(tag: u64, txtime: Option<i64>, class in "[a-z0-9-]{0,20}", frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100)) {
            let r = Request::Submit { tag, class, txtime, frame };
            proptest::prop_assert_eq!(Request::parse(&r.emit()).unwrap(), r);
        }
    }
}
