//! `keepon listen`: receive on one or more interfaces, recognise keepon test frames by their header (also as the
//! payload of a UDP datagram over IPv4, and behind an IEEE 802.1CB R-TAG), and write the same per-frame records as
//! `keepon run` (with receive timestamps), counting fillers and other frames apart.
//!
//! **FRER.** R-TAGged test frames go through sequence recovery ([`keepon_core::frer::recovery`]), one instance per
//! stream (a stream is a flow number of the test header): the first copy of each sequence number is passed, the
//! others are discarded, whichever interface they arrived on. Every copy gets a record (its interface, its
//! R-TAG sequence number, `passed`/`discarded`/`rogue`); the per-flow sequence check and the summary count only
//! what was passed. With several interfaces each has its own receive socket; frames are taken in order of their
//! receive timestamps across the sockets (each socket is read one frame ahead). Without R-TAGs nothing of this
//! applies: one interface, untagged frames, the records and counts are what they always were.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keepon_core::frer::recovery::{Counters, Recovery, RecoveryConfig};
use keepon_core::frer::rtag;
use keepon_core::testframe::TestHeader;
use keepon_core::time::Tai;
use keepon_nic::linux::rx::{Receiver, TimestampKind};

use crate::config::Config;
use crate::record::Record;

/// What a listen produced.
#[derive(Debug, Default)]
pub struct ListenOutput {
    /// One record per keepon test frame received (every copy of an R-TAGged one), in arrival order.
    pub records: Vec<Record>,
    /// Filler frames seen (reserved group address 01-80-C2-00-00-0x, or EtherType 0x88B5 without the magic).
    pub fillers: u64,
    /// Other frames (not keepon's).
    pub other: u64,
    /// Receive timestamp kind of the last frame.
    pub timestamps: Option<TimestampKind>,
    /// Per flow: (received, sequence gaps, out-of-order arrivals) — of R-TAGged flows, the copies passed, in their
    /// R-TAG sequence numbers.
    pub per_flow: BTreeMap<String, (u64, u64, u64)>,
    /// Per flow that had R-TAGged frames: the sequence recovery's counters.
    pub frer: BTreeMap<String, Counters>,
    /// Per interface, in the order given: keepon test frames received on it (every copy).
    pub per_iface: Vec<(String, u64)>,
    /// Frames the kernel dropped at the listener's sockets (receive buffer full: the listener fell behind).
    pub socket_drops: u64,
}

/// True for keepon's reserved-address fillers and other frames to the 802.1 reserved block.
pub fn is_filler(b: &[u8]) -> bool {
    b.len() >= 14 && b[..5] == [0x01, 0x80, 0xC2, 0x00, 0x00] && b[5] <= 0x0F
        || (b.len() >= 18 && b[12..14] == [0x88, 0xB5] && b[14..18] != keepon_core::testframe::MAGIC)
}

/// Largest jump in a flow's sequence numbers counted as lost frames (a million: far more than any run loses
/// between two frames it delivers).
pub const MAX_SEQ_GAP: u64 = 1 << 20;

/// Count a received sequence number against the flow's previous one: `(received, missing, out of order)`.
/// Sequence numbers come from the wire: a jump beyond [`MAX_SEQ_GAP`] is not counted as that many lost frames but
/// as out of order (a corrupt or foreign sequence), and nothing here can overflow.
pub fn track_sequence(prev: Option<u64>, seq: u64, e: &mut (u64, u64, u64)) {
    match prev {
        Some(p) if seq > p && seq - p - 1 <= MAX_SEQ_GAP => e.1 += seq - p - 1,
        Some(_) => e.2 += 1,
        None => {}
    }
}

/// A 16-bit R-TAG sequence number unwrapped against the previous unwrapped one (the nearest number with those low
/// 16 bits), so that sequence checks see 65535 → 0 as one step. Starts at 2³² so that it never goes below zero.
pub fn unwrap_rtag(prev: Option<u64>, seq: u16) -> u64 {
    match prev {
        None => (1 << 32) + u64::from(seq),
        Some(p) => p.saturating_add_signed(i64::from(seq.wrapping_sub(p as u16) as i16)),
    }
}

/// Longest the listener keeps reading, after it was told to stop, the frames that arrived before that.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// One frame as received: its bytes, receive timestamp and where that came from.
type Received = (Vec<u8>, Tai, TimestampKind);

/// The receive sockets, read in order of arrival: each holds at most one frame read ahead.
struct Inputs {
    rx: Vec<Receiver>,
    ahead: Vec<Option<Received>>,
}

impl Inputs {
    /// Read ahead on every socket whose frame was taken (without waiting).
    fn fill(&mut self) -> Result<(), String> {
        for (rx, slot) in self.rx.iter_mut().zip(&mut self.ahead) {
            if slot.is_none() {
                *slot = rx.recv(Duration::ZERO).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// The earliest frame read ahead (by receive timestamp), waiting at most `timeout` for one; with its socket's
    /// index.
    fn next(&mut self, timeout: Duration) -> Result<Option<(usize, Received)>, String> {
        self.fill()?;
        if self.ahead.iter().all(Option::is_none) && !timeout.is_zero() {
            if !Receiver::wait_any(&self.rx, timeout).map_err(|e| e.to_string())? {
                return Ok(None);
            }
            self.fill()?;
        }
        let first = self.ahead.iter().enumerate().filter_map(|(i, a)| Some((a.as_ref()?.1, i))).min();
        Ok(first.and_then(|(_, i)| Some((i, self.ahead[i].take()?))))
    }
}

/// Receive on `ifaces` until `duration` passes, `count` test frames arrived or `stop` is set (a signal): what was
/// received is returned in every case. A frame that arrived before the end (by its receive timestamp) is counted
/// even if the listener had not read it yet: after the end it reads what the sockets still hold (for at most
/// [`DRAIN_LIMIT`]), so a listener that fell behind a fast talker loses nothing to being stopped. `ready` is called
/// once the sockets receive, with what they receive on: a talker started after that is heard from its first
/// frame. R-TAGged test frames are recovered per stream with `frer`'s settings. `count` counts every record,
/// copies included.
pub fn listen(
    ifaces: &[String],
    cfg: Option<&Config>,
    frer: RecoveryConfig,
    duration: Duration,
    count: Option<u64>,
    stop: &AtomicBool,
    ready: impl FnOnce(&str),
) -> Result<ListenOutput, String> {
    if ifaces.is_empty() {
        return Err("listen needs at least one interface (--iface)".into());
    }
    let mut rx = Vec::new();
    let mut on = Vec::new();
    for (k, iface) in ifaces.iter().enumerate() {
        if ifaces[..k].contains(iface) {
            return Err(format!("--iface {iface} is given twice"));
        }
        let r = Receiver::open(iface).map_err(|e| format!("{iface}: {e}"))?;
        on.push(format!(
            "{iface} ({} receive timestamps)",
            if r.hardware_timestamps() { "hardware" } else { "software" }
        ));
        rx.push(r);
    }
    ready(&on.join(", "));
    let mut inputs = Inputs { ahead: rx.iter().map(|_| None).collect(), rx };
    let mut l = Listener {
        out: ListenOutput { per_iface: ifaces.iter().map(|i| (i.clone(), 0)).collect(), ..ListenOutput::default() },
        last_seq: BTreeMap::new(),
        recovery: BTreeMap::new(),
        frer,
        cfg,
    };
    let want = |out: &ListenOutput| count.is_none_or(|c| (out.records.len() as u64) < c);
    let end = Instant::now() + duration;
    while Instant::now() < end && want(&l.out) && !stop.load(Ordering::Relaxed) {
        let left = end.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        if let Some((i, (bytes, ts, kind))) = inputs.next(left)? {
            let host = inputs.rx[i].now();
            l.take(i, &bytes, ts, kind, host);
        }
    }
    // The end, on the clock the kernel stamps arrivals with; then what had arrived by then.
    let ended = inputs.rx[0].now();
    let drain_until = Instant::now() + DRAIN_LIMIT;
    while want(&l.out) && Instant::now() < drain_until {
        let Some((i, (bytes, ts, kind))) = inputs.next(Duration::ZERO)? else { break };
        // Hardware stamps are on the NIC's clock, not comparable with `ended`: the queue is read to its end.
        if kind != TimestampKind::Hardware && ts > ended {
            break;
        }
        let host = inputs.rx[i].now();
        l.take(i, &bytes, ts, kind, host);
    }
    for r in &mut inputs.rx {
        l.out.socket_drops += r.stats().map_err(|e| e.to_string())?.drops;
    }
    for (flow, r) in &l.recovery {
        l.out.frer.insert(l.name(*flow).0, r.counters());
    }
    Ok(l.out)
}

/// What the listener keeps between frames.
struct Listener<'a> {
    out: ListenOutput,
    /// Per flow number: the last sequence number passed (R-TAGged flows: unwrapped R-TAG sequence numbers).
    last_seq: BTreeMap<u16, u64>,
    /// Per flow number that had R-TAGged frames: its sequence recovery.
    recovery: BTreeMap<u16, Recovery>,
    frer: RecoveryConfig,
    cfg: Option<&'a Config>,
}

impl Listener<'_> {
    /// A flow's name and class (from the configuration, else `flow-N`).
    fn name(&self, flow: u16) -> (String, String) {
        match self.cfg.and_then(|c| c.flows.get(usize::from(flow))) {
            Some(f) => (f.name.clone(), f.class_name.clone()),
            None => (format!("flow-{flow}"), String::new()),
        }
    }

    /// Count one frame received on interface `i` at `ts` (`host`: host time when it was read, for the recovery's
    /// reset timer where `ts` is on a NIC's clock): a keepon test frame becomes a record, anything else a filler or
    /// another frame.
    fn take(&mut self, i: usize, bytes: &[u8], ts: Tai, kind: TimestampKind, host: Tai) {
        self.out.timestamps = Some(kind);
        let (tag, frame) = match rtag::strip(bytes) {
            Ok((t, f)) => (Some(t.seq), Cow::Owned(f)),
            Err(_) => (None, Cow::Borrowed(bytes)),
        };
        let h = match TestHeader::parse_any(&frame) {
            Ok(h) => h,
            Err(_) if is_filler(bytes) => {
                self.out.fillers += 1;
                return;
            }
            Err(_) => {
                self.out.other += 1;
                return;
            }
        };
        self.out.per_iface[i].1 += 1;
        let (flow, class) = self.name(h.flow);
        // Sequence recovery for a stream once it has had an R-TAG (later untagged frames of it count `tagless`).
        let now = if kind == TimestampKind::Hardware { host } else { ts };
        let verdict = match (tag, self.recovery.contains_key(&h.flow)) {
            (None, false) => None,
            _ => Some(self.recovery.entry(h.flow).or_insert_with(|| Recovery::new(self.frer)).recover(now, tag)),
        };
        if verdict.is_none_or(|v| v.passes()) {
            let e = self.out.per_flow.entry(flow.clone()).or_default();
            e.0 += 1;
            let prev = self.last_seq.get(&h.flow).copied();
            let seq = tag.map_or(h.seq, |s| unwrap_rtag(prev, s));
            track_sequence(prev, seq, e);
            self.last_seq.insert(h.flow, seq);
        }
        let mut r = Record::new(h.seq, &flow, &class, (h.txtime != 0).then_some(h.txtime));
        r.outcome = "sent".into();
        r.rx_ns = Some(ts.0);
        if self.out.per_iface.len() > 1 || tag.is_some() {
            r.iface = self.out.per_iface[i].0.clone();
        }
        r.rtag_seq = tag;
        if let (Some(v), Some(_)) = (verdict, tag) {
            r.frer = v.name().into();
        }
        self.out.records.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile sequence numbers neither overflow nor count as billions of lost frames.
    #[test]
    fn sequence_numbers_from_the_wire_are_bounded() {
        let mut e = (0, 0, 0);
        track_sequence(Some(u64::MAX), 3, &mut e);
        track_sequence(Some(3), u64::MAX, &mut e);
        track_sequence(Some(u64::MAX), u64::MAX, &mut e);
        assert_eq!(e, (0, 0, 3));
        track_sequence(Some(10), 14, &mut e);
        track_sequence(None, 0, &mut e);
        assert_eq!(e, (0, 3, 3));
    }

    /// R-TAG sequence numbers unwrap across 65535 → 0, in both directions, from any start.
    #[test]
    fn rtag_sequence_numbers_unwrap() {
        let a = unwrap_rtag(None, 65_534);
        let b = unwrap_rtag(Some(a), 65_535);
        let c = unwrap_rtag(Some(b), 0);
        let d = unwrap_rtag(Some(c), 3);
        assert_eq!((b - a, c - b, d - c), (1, 1, 3));
        assert_eq!(unwrap_rtag(Some(d), 65_535), c - 1);
        assert_eq!(unwrap_rtag(Some(0), 65_000), 0, "never below zero");
    }
}
