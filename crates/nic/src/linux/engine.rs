//! The part every Linux backend shares: the [`Nic`] protocol over a kernel TX path, host pacing, and the
//! bookkeeping that keeps the slot count honest.
//!
//! ```text
//!   station ──post──► pending (not yet accepted by the kernel) ──release──► TxPath::send ──► kernel/NIC
//!                                                                                          │
//!   station ◄─observe── consumed = TxPath::completed()  ◄──────── completions (a count) ───┘
//!
//!   invariant:  consumed ≤ accepted ≤ posted,   accepted + pending.len() = posted
//! ```
//!
//! **Line rate** (a NIC with a wire clock): every posted slot is offered to the kernel at once; the NIC paces
//! them and completions say how many finished. **Host paced** (veth, tap: no wire clock, instant
//! completion): a slot is released to the kernel at `anchor + (bytes before it since the anchor)·8/rate` read
//! from `CLOCK_TAI` (slots are as long as the station made them: fillers it trimmed leave sooner, lengthened ones
//! later), so the count tracks real time to within the loop's sleep accuracy (microseconds). A slot is never
//! released before its time; a host that stalls with slots pending releases the overdue ones at once and
//! stays on schedule (late, never early). A slot the station posts only after its release time, with
//! nothing left pending, is a gap on the "wire": the schedule is re-anchored at the post and the gap
//! reported, exactly as a NIC whose ring ran dry would restart late.
//!
//! A frame the kernel does not accept stays pending and is offered again (the kernel did not send it, so
//! order and count are preserved); one it drops after accepting surfaces as [`NicError::Dropped`].

use std::collections::VecDeque;

use keepon_core::outcome::FrameId;
use keepon_core::ring::{SlotKind, SlotView};
use keepon_core::station::Gap;
use keepon_core::time::{Nanos, SlotPeriod, Tai};

use crate::{Nic, NicError, NicObservation, Timing, WireEvent};

use super::{link, sys};

/// One slot's content as a TX path sees it.
#[derive(Clone, Copy, Debug)]
pub enum TxFrame<'a> {
    /// The link's filler with this many data bytes (its length on the wire minus the FCS; the path knows its
    /// bytes).
    Filler(usize),
    /// A real frame: its data and zero padding to the slot's length, without FCS.
    Real(&'a [u8]),
}

/// A kernel transmit path (AF_PACKET `sendmmsg`, `PACKET_TX_RING`, AF_XDP) as the engine drives it.
pub trait TxPath: Send {
    /// Short name, e.g. `af_packet sendmmsg`.
    fn label(&self) -> String;
    /// Offer `frames` (consecutive slots, in order) to the kernel; returns how many of the first ones it
    /// accepted. The rest were not sent and will be offered again.
    fn send(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, NicError>;
    /// Frames the kernel has finished with since the path opened (never more than were accepted).
    fn completed(&mut self) -> Result<u64, NicError>;
    /// Push frames the path holds but the kernel has not taken yet (doorbells, retries).
    fn flush(&mut self) -> Result<(), NicError> {
        Ok(())
    }
    /// Frames the kernel refused and the path offered again (they may show in the interface's `tx_dropped`).
    fn refused(&self) -> u64 {
        0
    }
    /// Ask the kernel for a software TX timestamp of every real frame from now on; false if this path cannot
    /// (then release times are interpolated within the send call).
    fn stamp_real_frames(&mut self) -> bool {
        false
    }
    /// TX timestamps that have arrived since the last call: `(n, t)` for the `n`-th real frame the path
    /// accepted since it opened (0-based), taken by the kernel at host time `t` (`CLOCK_TAI`).
    fn tx_stamps(&mut self) -> Result<Vec<(u64, Tai)>, NicError> {
        Ok(Vec::new())
    }
}

/// How slots are released to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Host-paced on links without a wire clock (veth, tap, no reported speed), line rate otherwise.
    Auto,
    /// Hand slots to the kernel as soon as they are posted; the NIC's line rate paces them.
    LineRate,
    /// Release each slot at its wire time by the host's `CLOCK_TAI` (approximate, µs).
    HostPaced,
}

/// The host-paced release schedule: the slot starting at byte `p` of the wire (preamble and gap included) is
/// released at `anchor + (p − anchor_pos)·8/rate`.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    byte: SlotPeriod,
    anchor_pos: u64,
    anchor: Tai,
}

impl Schedule {
    fn release_time(&self, p: u64) -> Tai {
        let d = self.byte.floor_mul(p.saturating_sub(self.anchor_pos));
        self.anchor + Nanos(i64::try_from(d).unwrap_or(i64::MAX))
    }
}

#[derive(Debug)]
struct Pending {
    slot: u64,
    /// Start byte on the wire.
    pos: u64,
    real: bool,
    /// A filler's data bytes (without FCS).
    len: usize,
    bytes: Vec<u8>,
}

/// Counters of a Linux backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinuxStats {
    /// Slots accepted by the kernel.
    pub accepted: u64,
    /// Slots the kernel finished (consumed).
    pub consumed: u64,
    /// Real frames among the consumed slots.
    pub real: u64,
    /// Offers the kernel refused and that were made again.
    pub refused: u64,
    /// Host-paced gaps (the station posted after a slot's release time).
    pub gaps: u64,
    /// Real frames whose release time is the kernel's software TX timestamp (the rest are interpolated).
    pub tx_stamped: u64,
}

/// Static settings of the engine.
#[derive(Clone, Debug)]
pub(crate) struct EngineConfig {
    pub describe: String,
    pub iface: String,
    pub host_paced: bool,
    /// Time of one byte on the wire.
    pub byte: SlotPeriod,
    /// Most data bytes (without FCS) a slot may have: the longest filler the path sends.
    pub max_data: usize,
    pub post_latency: Nanos,
    /// Test only: the link's clock runs off the host's (see [`crate::emulation`]).
    pub emulation: Option<crate::emulation::Emulation>,
}

/// How long the kernel may refuse every offer before the backend gives up.
const STALL_LIMIT: Nanos = Nanos::from_ms(1_000);
/// How often the interface's `tx_dropped` counter is compared with the refusals.
const DROP_CHECK_EVERY: Nanos = Nanos::from_ms(20);
/// Retry interval while the kernel refuses frames.
const BUSY_RETRY: Nanos = Nanos::from_us(20);
/// Frames per `send` call.
const CHUNK: usize = 64;

/// A Linux NIC queue in keepon's slot model: a [`TxPath`] plus pacing and bookkeeping.
pub struct LinuxNic<P: TxPath> {
    path: P,
    cfg: EngineConfig,
    schedule: Option<Schedule>,
    pending: VecDeque<Pending>,
    pool: Vec<Vec<u8>>,
    posted: u64,
    /// Start byte of the next slot to be posted (wire bytes since the backend opened).
    next_pos: u64,
    accepted: u64,
    consumed: u64,
    reals: VecDeque<(u64, FrameId, Vec<u8>)>,
    /// Host-paced: when each real slot was handed to the kernel, in slot order: (slot, index among the real
    /// frames accepted, link time, from a kernel TX timestamp).
    released: VecDeque<(u64, u64, Tai, bool)>,
    /// Real frames the kernel accepted so far.
    reals_accepted: u64,
    wire: Vec<WireEvent>,
    gaps: Vec<Gap>,
    station_saw_idle: bool,
    deferred: Option<NicError>,
    last_progress: Tai,
    last_completion: Tai,
    drops_base: Option<u64>,
    next_drop_check: Tai,
    slack_set: bool,
    stats: LinuxStats,
}

fn tai_now() -> Tai {
    Tai(sys::clock_ns(libc::CLOCK_TAI))
}

impl<P: TxPath> LinuxNic<P> {
    pub(crate) fn with_path(mut path: P, cfg: EngineConfig) -> Self {
        let now = cfg.emulation.map_or_else(tai_now, |e| e.link(tai_now()));
        if cfg.host_paced {
            // Best effort: where the path cannot, release times are interpolated.
            let _ = path.stamp_real_frames();
        }
        let drops_base = link::tx_dropped(&cfg.iface);
        LinuxNic {
            path,
            cfg,
            schedule: None,
            pending: VecDeque::new(),
            pool: Vec::new(),
            posted: 0,
            next_pos: 0,
            accepted: 0,
            consumed: 0,
            reals: VecDeque::new(),
            released: VecDeque::new(),
            reals_accepted: 0,
            wire: Vec::new(),
            gaps: Vec::new(),
            station_saw_idle: false,
            deferred: None,
            last_progress: now,
            last_completion: now,
            drops_base,
            next_drop_check: now,
            slack_set: false,
            stats: LinuxStats::default(),
        }
    }

    /// The link's clock: the host's `CLOCK_TAI`, or the emulated one (tests).
    fn clock(&self) -> Tai {
        self.link_time(tai_now())
    }

    /// The kernel path (for tests and benchmarks).
    pub fn path(&self) -> &P {
        &self.path
    }

    /// Take the kernel path out (for a bare TX loop in benchmarks).
    pub fn into_path(self) -> P {
        self.path
    }

    /// Counters so far.
    pub fn stats(&self) -> LinuxStats {
        LinuxStats { refused: self.path.refused(), ..self.stats }
    }

    fn copy_of(&mut self, data: &[u8]) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(data);
        b
    }

    /// Offer every pending slot that is due to the kernel, in order, until it refuses one.
    fn flush_due(&mut self, now: Tai) -> Result<(), NicError> {
        self.path.flush()?;
        if self.pending.is_empty() {
            self.last_progress = now;
            return Ok(());
        }
        let due = match &self.schedule {
            Some(s) if self.cfg.host_paced => self.pending.iter().take_while(|p| s.release_time(p.pos) <= now).count(),
            _ => self.pending.len(),
        };
        let mut done = 0;
        while done < due {
            let chunk = (due - done).min(CHUNK);
            let frames: Vec<TxFrame<'_>> = self
                .pending
                .iter()
                .take(chunk)
                .map(|p| if p.real { TxFrame::Real(&p.bytes) } else { TxFrame::Filler(p.len) })
                .collect();
            let before = self.clock();
            let n = self.path.send(&frames)?.min(chunk);
            let after = self.clock();
            for i in 0..n {
                if let Some(p) = self.pending.pop_front() {
                    if p.real {
                        if self.cfg.host_paced {
                            // Until its kernel TX timestamp arrives: the kernel sends a chunk's frames one after
                            // another inside the call, so frame `i` of `n` is taken to leave at the middle of its
                            // share of the call's duration.
                            let share = (after - before).0 * (2 * i as i64 + 1) / (2 * n.max(1) as i64);
                            self.released.push_back((p.slot, self.reals_accepted, before + Nanos(share), false));
                        }
                        self.reals_accepted += 1;
                        self.pool.push(p.bytes);
                    }
                }
            }
            self.accepted += n as u64;
            done += n;
            if self.cfg.host_paced {
                self.take_tx_stamps()?;
            }
            if n < chunk {
                break;
            }
        }
        if done > 0 || due == 0 {
            self.last_progress = now;
        } else if now - self.last_progress > STALL_LIMIT {
            return Err(NicError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "{}: the kernel refused every frame for {} ms (driver queue stuck or link down)",
                    self.cfg.iface,
                    STALL_LIMIT.0 / 1_000_000
                ),
            )));
        }
        Ok(())
    }

    /// Replace interpolated release times by the kernel's TX timestamps that have arrived.
    fn take_tx_stamps(&mut self) -> Result<(), NicError> {
        for (n, host) in self.path.tx_stamps()? {
            let t = self.link_time(host);
            if let Some(r) = self.released.iter_mut().find(|r| r.1 == n && !r.3) {
                (r.2, r.3) = (t, true);
                self.stats.tx_stamped += 1;
            }
        }
        Ok(())
    }

    /// Compare the interface's drop counter with the refusals we know about.
    fn check_drops(&mut self, now: Tai) -> Result<(), NicError> {
        if now < self.next_drop_check {
            return Ok(());
        }
        self.next_drop_check = now + DROP_CHECK_EVERY;
        let Some(d) = link::tx_dropped(&self.cfg.iface) else { return Ok(()) };
        let base = *self.drops_base.get_or_insert(d);
        let unexplained = d.saturating_sub(base).saturating_sub(self.path.refused());
        if unexplained > 0 {
            return Err(NicError::Dropped { slots: unexplained });
        }
        Ok(())
    }

    /// Host pacing at a post of slot `k`, starting at byte `p`: anchor the schedule, or notice that the link went
    /// idle.
    fn pace_post(&mut self, k: u64, p: u64, now: Tai) {
        let idle = self.pending.is_empty() && self.accepted == self.posted;
        match self.schedule {
            None => {
                self.schedule = Some(Schedule { byte: self.cfg.byte, anchor_pos: p, anchor: now });
                self.gaps.push(Gap { at: k, restart: now });
            }
            Some(s) if idle => {
                // Everything posted has been released: the "link" is idle until this slot goes out.
                let sched = s.release_time(p);
                if now > sched {
                    // Late: restart now, so that no slot is ever released before its EPHC time.
                    self.schedule = Some(Schedule { byte: self.cfg.byte, anchor_pos: p, anchor: now });
                    self.gaps.push(Gap { at: k, restart: now });
                    self.stats.gaps += 1;
                } else if self.station_saw_idle {
                    // The station took this for an underrun and guessed the restart; tell it the real one.
                    self.gaps.push(Gap { at: k, restart: sched });
                }
            }
            Some(_) => {}
        }
    }
}

impl<P: TxPath> Nic for LinuxNic<P> {
    fn describe(&self) -> String {
        self.cfg.describe.clone()
    }

    fn timing(&self) -> Timing {
        if self.cfg.host_paced {
            Timing::HostPaced
        } else {
            Timing::LineRate
        }
    }

    fn observe(&mut self) -> Result<NicObservation, NicError> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let now = self.clock();
        self.flush_due(now)?;
        let c = self.path.completed()?;
        if c > self.accepted || c < self.consumed {
            return Err(NicError::Io(std::io::Error::other(format!(
                "{}: completion count {c} outside [{}, {}]",
                self.path.label(),
                self.consumed,
                self.accepted
            ))));
        }
        if c > self.consumed || c == self.accepted {
            self.last_completion = now;
        } else if now - self.last_completion > STALL_LIMIT {
            return Err(NicError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "{}: the kernel refused or held {} accepted frames without completing any for {} ms \
                     (driver queue stuck, carrier down, or link paused)",
                    self.cfg.iface,
                    self.accepted - c,
                    STALL_LIMIT.0 / 1_000_000
                ),
            )));
        }
        self.consumed = c;
        self.stats.consumed = c;
        self.stats.accepted = self.accepted;
        while self.reals.front().is_some_and(|r| r.0 < c) {
            if let Some((nic_slot, id, bytes)) = self.reals.pop_front() {
                self.stats.real += 1;
                while self.released.front().is_some_and(|r| r.0 < nic_slot) {
                    self.released.pop_front();
                }
                let (released, stamped) = match self.released.front() {
                    Some(&(k, _, t, stamped)) if k == nic_slot => {
                        self.released.pop_front();
                        (Some(t), stamped)
                    }
                    _ => (None, false),
                };
                let (start, rx, frame, bytes) = (None, None, Some(id), Some(bytes));
                let released_ephc = None;
                self.wire.push(WireEvent {
                    nic_slot,
                    start,
                    rx,
                    frame,
                    bytes,
                    released,
                    stamped,
                    released_ephc,
                    ephc: None,
                    grid: None,
                    locked: false,
                });
            }
        }
        self.check_drops(now)?;
        self.station_saw_idle = c == self.posted;
        Ok(NicObservation { consumed: c, now, gaps: std::mem::take(&mut self.gaps) })
    }

    fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError> {
        let views: Vec<SlotView<'a>> = slots.collect();
        let Some(first) = views.first() else { return Ok(()) };
        let now = self.clock();
        if first.slot != self.posted {
            return Err(NicError::Unsupported(format!(
                "slot {} posted where slot {} was expected: slots must be posted once each, in order",
                first.slot, self.posted
            )));
        }
        if self.cfg.host_paced {
            self.pace_post(first.slot, self.next_pos, now);
        }
        for (i, v) in views.iter().enumerate() {
            if v.slot != first.slot + i as u64 || !(60..=self.cfg.max_data).contains(&v.bytes.len()) {
                return Err(NicError::Unsupported(format!(
                    "slot {} is malformed (out of order, or {} B outside 60..={} B)",
                    v.slot,
                    v.bytes.len(),
                    self.cfg.max_data
                )));
            }
            if let SlotKind::Real { id, len, .. } = v.kind {
                let copy = self.copy_of(&v.bytes[..(len as usize).min(v.bytes.len())]);
                self.reals.push_back((v.slot, id, copy));
            }
        }
        self.posted += views.len() as u64;
        let mut from = 0;
        if !self.cfg.host_paced && self.pending.is_empty() {
            // Line rate and nothing queued: hand the station's buffers straight to the kernel.
            while from < views.len() {
                let chunk = &views[from..(from + CHUNK).min(views.len())];
                let frames: Vec<TxFrame<'_>> = chunk
                    .iter()
                    .map(|v| match v.kind {
                        SlotKind::Real { .. } => TxFrame::Real(v.bytes),
                        SlotKind::Filler => TxFrame::Filler(v.bytes.len()),
                    })
                    .collect();
                let n = self.path.send(&frames)?.min(chunk.len());
                self.accepted += n as u64;
                from += n;
                if n < chunk.len() {
                    break;
                }
            }
        }
        let mut pos = self.next_pos;
        let mut starts = Vec::with_capacity(views.len());
        for v in &views {
            starts.push(pos);
            pos += (v.bytes.len() + 4) as u64 + u64::from(keepon_core::time::WIRE_OVERHEAD_BYTES);
        }
        self.next_pos = pos;
        for (v, &pos) in views[from..].iter().zip(&starts[from..]) {
            let real = matches!(v.kind, SlotKind::Real { .. });
            let bytes = if real { self.copy_of(v.bytes) } else { Vec::new() };
            self.pending.push_back(Pending { slot: v.slot, pos, real, len: v.bytes.len(), bytes });
        }
        if !self.pending.is_empty() {
            self.flush_due(now)?;
        }
        Ok(())
    }

    fn drain_wire(&mut self, out: &mut Vec<WireEvent>) {
        out.append(&mut self.wire);
    }

    fn wait(&mut self, period: Nanos) {
        if self.cfg.host_paced && !self.slack_set {
            sys::tight_timer_slack();
            self.slack_set = true;
        }
        let start = self.clock();
        let deadline = start + period;
        loop {
            let now = self.clock();
            if self.deferred.is_none() {
                if let Err(e) = self.flush_due(now) {
                    self.deferred = Some(e);
                }
            }
            if now >= deadline || self.deferred.is_some() {
                return;
            }
            let mut until = deadline;
            if let Some(front) = self.pending.front() {
                let release = match &self.schedule {
                    Some(s) if self.cfg.host_paced => s.release_time(front.pos),
                    _ => now,
                };
                // Due but refused: the kernel is busy, retry shortly.
                let next = if release <= now { now + BUSY_RETRY } else { release };
                until = until.min(next);
            }
            sys::sleep_until(libc::CLOCK_TAI, self.host_time(until).0);
        }
    }

    fn now(&self) -> Tai {
        self.clock()
    }

    fn link_time(&self, host: Tai) -> Tai {
        self.cfg.emulation.map_or(host, |e| e.link(host))
    }

    fn host_time(&self, link: Tai) -> Tai {
        self.cfg.emulation.map_or(link, |e| e.host(link))
    }

    fn post_latency(&self) -> Nanos {
        self.cfg.post_latency
    }

    fn max_frame_bytes(&self) -> u32 {
        self.cfg.max_data as u32 + 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use keepon_core::isolation::ClassId;
    use keepon_core::time::{LinkRate, SlotGeometry};

    /// A kernel path with room for `room` frames in flight that completes them on demand.
    struct FakePath {
        room: usize,
        log: Vec<Option<Vec<u8>>>,
        done: u64,
    }

    impl TxPath for FakePath {
        fn label(&self) -> String {
            "fake".into()
        }
        fn send(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, NicError> {
            let n = frames.len().min(self.room - (self.log.len() - self.done as usize));
            for f in &frames[..n] {
                self.log.push(match f {
                    TxFrame::Filler(_) => None,
                    TxFrame::Real(d) => Some(d.to_vec()),
                });
            }
            Ok(n)
        }
        fn completed(&mut self) -> Result<u64, NicError> {
            Ok(self.done)
        }
    }

    fn nic(room: usize, host_paced: bool) -> LinuxNic<FakePath> {
        let g = SlotGeometry::new(LinkRate::from_mbps(100).unwrap(), 64).unwrap();
        let cfg = EngineConfig {
            describe: "fake".into(),
            iface: "lo".into(),
            host_paced,
            emulation: None,
            byte: g.rate().byte_time(),
            max_data: 60,
            post_latency: Nanos(0),
        };
        LinuxNic::with_path(FakePath { room, log: Vec::new(), done: 0 }, cfg)
    }

    fn slots(bufs: &[Vec<u8>], from: u64) -> Vec<SlotView<'_>> {
        bufs.iter()
            .enumerate()
            .map(|(i, b)| {
                let k = from + i as u64;
                let kind = if b[0] != 0 {
                    SlotKind::Real { id: FrameId(k), class: ClassId(0), txtime: None, len: 20, ring_slot: k as u32 }
                } else {
                    SlotKind::Filler
                };
                SlotView { slot: k, kind, bytes: b }
            })
            .collect()
    }

    #[test]
    fn schedule_releases_a_slot_at_its_byte_time() {
        let byte = LinkRate::from_mbps(100).unwrap().byte_time(); // 80 ns
        let s = Schedule { byte, anchor_pos: 3_200, anchor: Tai(1_000_000) };
        assert_eq!(s.release_time(3_200), Tai(1_000_000));
        // Five 300-byte slots (320 bytes on the wire each) later: 5 × 25.6 µs.
        assert_eq!(s.release_time(3_200 + 5 * 320), Tai(1_128_000));
        // A 64-byte filler (84 wire bytes) takes 6.72 µs.
        assert_eq!(s.release_time(3_200 + 84), Tai(1_006_720));
    }

    #[test]
    fn refused_slots_are_offered_again_in_order_and_counted_only_when_completed() {
        let mut n = nic(3, false);
        let bufs: Vec<Vec<u8>> = (0..8u8).map(|i| if i % 3 == 1 { vec![i; 60] } else { vec![0; 60] }).collect();
        n.post(&mut slots(&bufs, 0).into_iter()).unwrap();
        assert_eq!(n.path().log.len(), 3, "the kernel took only 3");
        assert_eq!(n.observe().unwrap().consumed, 0, "accepted is not completed");
        // Each observe offers the rest again as room frees up.
        n.path.done = 3;
        assert_eq!(n.observe().unwrap().consumed, 3);
        assert_eq!(n.path().log.len(), 6);
        n.path.done = 6;
        assert_eq!(n.observe().unwrap().consumed, 6);
        n.path.done = 8;
        assert_eq!(n.observe().unwrap().consumed, 8);
        let want: Vec<Option<Vec<u8>>> = bufs.iter().map(|b| (b[0] != 0).then(|| b.clone())).collect();
        assert_eq!(n.path().log, want, "every slot reached the kernel once, in order");
        let mut wire = Vec::new();
        n.drain_wire(&mut wire);
        let reals: Vec<(u64, usize)> =
            wire.iter().map(|w| (w.nic_slot, w.bytes.as_ref().map_or(0, Vec::len))).collect();
        assert_eq!(reals, vec![(1, 20), (4, 20), (7, 20)], "real frames reported once consumed, frame bytes only");
        // Out-of-order posts are refused loudly.
        let again = vec![vec![0u8; 60]];
        assert!(n.post(&mut slots(&again, 3).into_iter()).is_err());
        // A completion count beyond what was accepted is a broken backend.
        n.path.done = 99;
        assert!(n.observe().is_err());
    }

    #[test]
    fn host_pacing_anchors_at_the_first_post_and_reports_it_as_the_restart() {
        let mut n = nic(1_000, true);
        let bufs = vec![vec![0u8; 60]; 50];
        let before = n.now();
        n.post(&mut slots(&bufs, 0).into_iter()).unwrap();
        assert!(n.path().log.len() < 50, "slots are released over time, not at once");
        let obs = n.observe().unwrap();
        assert_eq!(obs.gaps.len(), 1);
        assert_eq!(obs.gaps[0].at, 0);
        assert!(obs.gaps[0].restart >= before);
        // 50 slots of 6.72 µs: all released within a few hundred µs of waiting.
        for _ in 0..100 {
            n.wait(Nanos::from_us(50));
            if n.path().log.len() == 50 {
                break;
            }
        }
        assert_eq!(n.path().log.len(), 50);
        let s = n.schedule.unwrap();
        assert!(n.now() >= s.release_time(49), "slot 49 was not released before its time");
    }
}
