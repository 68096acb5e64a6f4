//! `keepon talk`: submit the configuration's periodic flows through a running daemon, in real time, and
//! record the outcome the daemon reports for every frame.
//!
//! Times are the daemon's network time (its EPHC): if the daemon runs PTP, the talker first waits until it
//! reports synchronised (at most `sync_wait`), then reads the EPHC's offset from the host clock once (`Time`)
//! and schedules every frame in network time. The offset is read once: over a long talk, a host clock that is
//! not itself disciplined drifts from it (by its own frequency error).

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use keepon_core::outcome::FrameId;
use keepon_core::time::{SlotGeometry, Tai};
use keepon_nic::driver::Source;
use keepon_nic::source::{split_id, FlowSource};

use keepon_core::time::Nanos;

use crate::api::{Client, Delivery, Request, Response, SyncState};
use crate::clock::host_tai;
use crate::config::Config;
use crate::record::Record;

/// What a talk produced.
#[derive(Debug)]
pub struct TalkOutput {
    /// One record per frame submitted (rx empty: see `keepon listen`).
    pub records: Vec<Record>,
    /// The schedule epoch used.
    pub epoch: Tai,
    /// Frames with no outcome by the end (should be 0).
    pub missing: usize,
    /// Frames this process submitted more than half their lead after their due time (the host stalled it): the
    /// daemon may rightly find them `late`.
    pub behind: usize,
}

/// The first ring-cycle boundary (ring slot 0) at or after `not_before`, from the daemon's `cycle_start`.
fn align(cycle_start: i64, geometry: SlotGeometry, ring: u32, not_before: Tai) -> Tai {
    let p = geometry.period();
    let n = i128::from(ring);
    let (num, den) = (i128::from(p.num()), i128::from(p.den()));
    let span = i128::from(not_before.0) - i128::from(cycle_start);
    // Smallest m with ⌊m·N·num/den⌋ ≥ span.
    let mut m = (span * den).div_euclid(n * num);
    while (m * n * num).div_euclid(den) < span {
        m += 1;
    }
    Tai(i64::try_from(i128::from(cycle_start) + (m * n * num).div_euclid(den)).unwrap_or(i64::MAX))
}

/// Wait until the daemon behind `client` is synchronised (or runs free, without PTP) for at most `limit`;
/// returns its EPHC's offset from the host clock then.
fn network_offset(client: &mut Client, limit: Duration) -> Result<Nanos, String> {
    let start = std::time::Instant::now();
    loop {
        let t = client.time().map_err(|e| format!("daemon time: {e}"))?;
        if t.sync != SyncState::NotSynchronised {
            return Ok(Nanos(t.ephc_now.saturating_sub(t.host_now)));
        }
        if start.elapsed() >= limit {
            return Err(format!(
                "the daemon is not synchronised after {} s (PTP servo {:?}, offset {:?} ns): its scheduled frames \
                 would all be refused `not-synchronised`; raise --sync-wait or check the PTP master",
                limit.as_secs(),
                t.servo,
                t.offset
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Run the talker against the daemon at `socket`; wait at most `sync_wait` for it to be synchronised.
pub fn talk(cfg: &Config, socket: &Path, grace: Duration, sync_wait: Duration) -> Result<TalkOutput, String> {
    let mut client = Client::connect(socket).map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
    let offset = network_offset(&mut client, sync_wait)?;
    let net_now = || host_tai() + offset;
    let info = client.info().map_err(|e| format!("daemon info: {e}"))?;
    if info.slot_bytes != cfg.geometry.slot_bytes() || info.ring != cfg.ownership.ring() {
        return Err(format!(
            "the daemon runs {} B slots on a {}-slot ring; this config says {} B and {}",
            info.slot_bytes,
            info.ring,
            cfg.geometry.slot_bytes(),
            cfg.ownership.ring()
        ));
    }
    // Release times: on host-paced links the records then say when each frame really left the host.
    let release_times = client.subscribe_release_times().map_err(|e| format!("daemon subscribe: {e}"))?;
    // The flows' epoch on the daemon's schedule on network time: base_time + m·(hyperperiod), as `keepon run`.
    let epoch = crate::run::flow_epoch(cfg, Tai(info.base_time), info.cycle.0, net_now() + cfg.start)
        .unwrap_or_else(|| align(info.cycle_start, cfg.geometry, info.ring, net_now() + cfg.start));
    let mut source = FlowSource::new(cfg.flows.iter().map(|f| f.spec.clone()).collect(), epoch);

    // Outcomes are read on their own thread so that submission keeps to its times.
    let (tx, rx) = mpsc::channel();
    let mut reader = client.try_clone().map_err(|e| e.to_string())?;
    let handle = std::thread::spawn(move || {
        while let Ok(Some(r)) = reader.recv() {
            if tx.send(r).is_err() {
                break;
            }
        }
    });

    let mut sent: HashMap<FrameId, Option<i64>> = HashMap::new();
    let mut behind = 0;
    while let Some(due) = source.next_due() {
        let wait = due - net_now();
        if wait.0 > 0 {
            std::thread::sleep(Duration::from_nanos(wait.0 as u64));
        }
        let Some(frame) = source.take() else { break };
        // Frames meant to be late (txtime before their due time) are not counted.
        if let Some(lead) = frame.txtime.map(|t| (t - due).0).filter(|&lead| lead > 0) {
            if (net_now() - due).0 > lead / 2 {
                behind += 1;
            }
        }
        let (flow, _) = split_id(frame.id);
        let class = cfg.flows[usize::from(flow)].class_name.clone();
        sent.insert(frame.id, frame.txtime.map(|t| t.0));
        client
            .send(&Request::Submit { tag: frame.id.0, class, txtime: frame.txtime.map(|t| t.0), frame: frame.data })
            .map_err(|e| format!("daemon went away: {e}"))?;
    }

    let mut outcomes: HashMap<FrameId, Delivery> = HashMap::new();
    let mut released: HashMap<FrameId, Option<i64>> = HashMap::new();
    let mut sent_outcomes = 0;
    let deadline = std::time::Instant::now() + grace;
    // Every frame's outcome, and with release times a `Released` after each sent one.
    while outcomes.len() < sent.len() || (release_times && released.len() < sent_outcomes) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(Response::Outcome { tag, delivery }) => {
                sent_outcomes += usize::from(matches!(delivery, Delivery::Sent { .. }));
                outcomes.insert(FrameId(tag), delivery);
            }
            Ok(Response::Released { tag, released: at, .. }) => {
                released.insert(FrameId(tag), at);
            }
            Ok(Response::Error(e)) => return Err(format!("daemon: {e}")),
            Ok(Response::Info(_) | Response::Time(_) | Response::Subscribed { .. }) => {}
            Err(_) => break,
        }
    }
    // End of stream tells the daemon we are done; it closes, and the reader thread ends.
    let _ = client.close_write();
    drop(handle);

    let mut records = Vec::new();
    let mut missing = 0;
    let mut ids: Vec<&FrameId> = sent.keys().collect();
    ids.sort_by_key(|id| split_id(**id));
    for id in ids {
        let (flow, seq) = split_id(*id);
        let f = &cfg.flows[usize::from(flow)];
        let mut r = Record::new(seq, &f.name, &f.class_name, sent[id]);
        match outcomes.get(id) {
            Some(Delivery::Sent { slot, time, ring_slot, off_schedule }) => {
                r.sent_at(*slot, *ring_slot, *time);
                r.off_schedule = Some(*off_schedule);
                r.released_ns = released.get(id).copied().flatten();
            }
            Some(Delivery::Rejected(why)) => r.rejected(why.as_str()),
            None => {
                missing += 1;
                r.rejected("no-outcome");
            }
        }
        records.push(r);
    }
    Ok(TalkOutput { records, epoch, missing, behind })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keepon_core::time::LinkRate;

    #[test]
    fn align_finds_the_next_cycle_boundary() {
        let g = SlotGeometry::new(LinkRate::from_mbps(10_000).unwrap(), 64).unwrap(); // 67.2 ns
                                                                                      // 16 slots = 1075.2 ns per cycle.
        assert_eq!(align(1000, g, 16, Tai(1000)), Tai(1000));
        assert_eq!(align(1000, g, 16, Tai(1001)), Tai(1000 + 1075));
        assert_eq!(align(1000, g, 16, Tai(2076)), Tai(1000 + 2150));
        assert_eq!(align(5000, g, 16, Tai(0)), Tai(5000 - 4 * 1075 - 1));
    }
}
