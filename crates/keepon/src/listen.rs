//! `keepon listen`: receive on an interface, recognise keepon test frames by their header (also as the payload of
//! a UDP datagram over IPv4), and write the same per-frame records as `keepon run` (with receive timestamps),
//! counting fillers and other frames apart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keepon_core::testframe::TestHeader;
use keepon_core::time::Tai;
use keepon_nic::linux::rx::{Receiver, TimestampKind};

use crate::config::Config;
use crate::record::Record;

/// What a listen produced.
#[derive(Debug, Default)]
pub struct ListenOutput {
    /// One record per keepon test frame received, in arrival order.
    pub records: Vec<Record>,
    /// Filler frames seen (reserved group address 01-80-C2-00-00-0x, or EtherType 0x88B5 without the magic).
    pub fillers: u64,
    /// Other frames (not keepon's).
    pub other: u64,
    /// Receive timestamp kind of the last frame.
    pub timestamps: Option<TimestampKind>,
    /// Per flow: (received, sequence gaps, out-of-order arrivals).
    pub per_flow: BTreeMap<String, (u64, u64, u64)>,
    /// Frames the kernel dropped at the listener's socket (receive buffer full: the listener fell behind).
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

/// Longest the listener keeps reading, after it was told to stop, the frames that arrived before that.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// Receive on `iface` until `duration` passes, `count` test frames arrived or `stop` is set (a signal): what was
/// received is returned in every case. A frame that arrived before the end (by its receive timestamp) is counted
/// even if the listener had not read it yet: after the end it reads what the socket still holds (for at most
/// [`DRAIN_LIMIT`]), so a listener that fell behind a fast talker loses nothing to being stopped. `ready` is called
/// once the socket receives, with what it receives on: a talker started after that is heard from its first frame.
pub fn listen(
    iface: &str,
    cfg: Option<&Config>,
    duration: Duration,
    count: Option<u64>,
    stop: &AtomicBool,
    ready: impl FnOnce(&str),
) -> Result<ListenOutput, String> {
    let mut rx = Receiver::open(iface).map_err(|e| e.to_string())?;
    let stamps = if rx.hardware_timestamps() { "hardware" } else { "software" };
    ready(&format!("{iface} ({stamps} receive timestamps)"));
    let mut out = ListenOutput::default();
    let mut last_seq: BTreeMap<u16, u64> = BTreeMap::new();
    let want = |out: &ListenOutput| count.is_none_or(|c| (out.records.len() as u64) < c);
    let end = Instant::now() + duration;
    while Instant::now() < end && want(&out) && !stop.load(Ordering::Relaxed) {
        let left = end.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        if let Some((bytes, ts, kind)) = rx.recv(left).map_err(|e| e.to_string())? {
            take(&mut out, &mut last_seq, cfg, &bytes, ts, kind);
        }
    }
    // The end, on the clock the kernel stamps arrivals with; then what had arrived by then.
    let ended = rx.now();
    let drain_until = Instant::now() + DRAIN_LIMIT;
    while want(&out) && Instant::now() < drain_until {
        let Some((bytes, ts, kind)) = rx.recv(Duration::ZERO).map_err(|e| e.to_string())? else { break };
        // Hardware stamps are on the NIC's clock, not comparable with `ended`: the queue is read to its end.
        if kind != TimestampKind::Hardware && ts > ended {
            break;
        }
        take(&mut out, &mut last_seq, cfg, &bytes, ts, kind);
    }
    out.socket_drops = rx.stats().map_err(|e| e.to_string())?.drops;
    Ok(out)
}

/// Count one received frame: a keepon test frame becomes a record, anything else a filler or another frame.
fn take(
    out: &mut ListenOutput,
    last_seq: &mut BTreeMap<u16, u64>,
    cfg: Option<&Config>,
    bytes: &[u8],
    ts: Tai,
    kind: TimestampKind,
) {
    out.timestamps = Some(kind);
    let h = match TestHeader::parse_any(bytes) {
        Ok(h) => h,
        Err(_) if is_filler(bytes) => {
            out.fillers += 1;
            return;
        }
        Err(_) => {
            out.other += 1;
            return;
        }
    };
    let (flow, class) = match cfg.and_then(|c| c.flows.get(usize::from(h.flow))) {
        Some(f) => (f.name.clone(), f.class_name.clone()),
        None => (format!("flow-{}", h.flow), String::new()),
    };
    let e = out.per_flow.entry(flow.clone()).or_default();
    e.0 += 1;
    track_sequence(last_seq.insert(h.flow, h.seq), h.seq, e);
    let mut r = Record::new(h.seq, &flow, &class, (h.txtime != 0).then_some(h.txtime));
    r.outcome = "sent".into();
    r.rx_ns = Some(ts.0);
    out.records.push(r);
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
}
