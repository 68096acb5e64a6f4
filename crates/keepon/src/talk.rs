//! `keepon talk`: submit the configuration's periodic flows through a running daemon, in real time, and
//! record the outcome the daemon reports for every frame.
//!
//! Times are the daemon's network time (its EPHC): if the daemon runs PTP, the talker first waits until it
//! reports synchronised (at most `sync_wait`), then reads the EPHC's offset from the host clock once (`Time`)
//! and schedules every frame in network time. The offset is read once: over a long talk, a host clock that is
//! not itself disciplined drifts from it (by its own frequency error).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use keepon_core::outcome::FrameId;
use keepon_core::time::{SlotGeometry, Tai};
use keepon_nic::driver::Source;
use keepon_nic::source::{split_id, FlowSource};

use keepon_core::time::Nanos;

use crate::api::{Client, Delivery, Request, Response, SyncState, DEFAULT_TIMEOUT};
use crate::clock::host_tai;
use crate::config::Config;
use crate::record::{Record, RecordWriter};
use crate::summary::Summary;

/// Longest sleep between checks of the stop flag while waiting for a frame's submission time.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// What a talk produced. Records are written to the file as outcomes arrive (nothing is kept per frame beyond
/// the frames still in flight), so memory does not grow with the talk's length.
#[derive(Debug)]
pub struct TalkOutput {
    /// Frames submitted.
    pub frames: u64,
    /// Of these, sent.
    pub sent: u64,
    /// Rejected, by reason (`no-outcome` for frames with none by the end).
    pub rejected: BTreeMap<String, u64>,
    /// Per-flow and release statistics of every record.
    pub summary: Summary,
    /// The schedule epoch used.
    pub epoch: Tai,
    /// Frames with no outcome by the end (should be 0).
    pub missing: usize,
    /// Frames this process submitted more than half their lead after their due time (the host stalled it): the
    /// daemon may rightly find them `late`.
    pub behind: usize,
    /// A signal stopped the talk before its last frame: the frames after it were never submitted.
    pub stopped: bool,
    /// Why submission ended before the last frame other than by a signal (the daemon went away, or took no
    /// frame within the timeout); the frames already submitted still had `grace` for their outcomes.
    pub failed: Option<String>,
    /// Rows written to the records file.
    pub records_written: u64,
}

/// Frames in flight and the records of those that finished: each record is counted and written once, when its
/// frame has its outcome (and, with release times, its `Released`).
struct Ledger<'a> {
    cfg: &'a Config,
    /// Submitted, no outcome yet (the record is filled in when it comes).
    pending: HashMap<FrameId, Record>,
    /// Sent, waiting for the release time.
    releasing: HashMap<FrameId, Record>,
    release_times: bool,
    out: TalkOutput,
    writer: Option<RecordWriter>,
    write_error: Option<std::io::Error>,
}

impl Ledger<'_> {
    fn submitted(&mut self, id: FrameId, txtime: Option<i64>) {
        let (flow, seq) = split_id(id);
        let f = &self.cfg.flows[usize::from(flow)];
        self.pending.insert(id, Record::new(seq, &f.name, &f.class_name, txtime));
        self.out.frames += 1;
    }

    /// Take one message from the daemon; an `Error` ends the talk.
    fn take(&mut self, r: Response) -> Result<(), String> {
        match r {
            Response::Outcome { tag, delivery } => {
                let id = FrameId(tag);
                let Some(mut rec) = self.pending.remove(&id) else { return Ok(()) };
                match delivery {
                    Delivery::Sent { slot, time, ring_slot, off_schedule } => {
                        rec.sent_at(slot, ring_slot, time);
                        rec.off_schedule = Some(off_schedule);
                        if self.release_times {
                            self.releasing.insert(id, rec);
                        } else {
                            self.finish(rec);
                        }
                    }
                    Delivery::Rejected(why) => {
                        rec.rejected(why.as_str());
                        self.finish(rec);
                    }
                }
            }
            Response::Released { tag, released, .. } => {
                if let Some(mut rec) = self.releasing.remove(&FrameId(tag)) {
                    rec.released_ns = released;
                    self.finish(rec);
                }
            }
            Response::Error(e) => return Err(format!("daemon: {e}")),
            Response::Info(_)
            | Response::Time(_)
            | Response::Subscribed { .. }
            | Response::Stats(_)
            | Response::Scheduled(_) => {}
        }
        Ok(())
    }

    fn finish(&mut self, rec: Record) {
        if rec.sent() {
            self.out.sent += 1;
        } else {
            *self.out.rejected.entry(rec.reason.clone()).or_default() += 1;
        }
        self.out.summary.add(&rec);
        if let (Some(w), None) = (self.writer.as_mut(), self.write_error.as_ref()) {
            if let Err(e) = w.write(&rec) {
                self.write_error = Some(e);
            }
        }
    }

    /// Nothing more comes: frames still without an outcome are `no-outcome`; sent frames whose release time did
    /// not come keep their record without it.
    fn close(mut self) -> Result<TalkOutput, String> {
        let mut late: Vec<Record> = self.releasing.drain().map(|(_, r)| r).collect();
        let mut lost: Vec<Record> = self.pending.drain().map(|(_, r)| r).collect();
        late.sort_by(|a, b| (&a.flow, a.seq).cmp(&(&b.flow, b.seq)));
        lost.sort_by(|a, b| (&a.flow, a.seq).cmp(&(&b.flow, b.seq)));
        self.out.missing = lost.len();
        for r in late {
            self.finish(r);
        }
        for mut r in lost {
            r.rejected("no-outcome");
            self.finish(r);
        }
        if let Some(e) = self.write_error {
            return Err(format!("writing the records failed: {e}"));
        }
        if let Some(w) = self.writer {
            self.out.records_written = w.rows();
            w.finish().map_err(|e| format!("writing the records failed: {e}"))?;
        }
        Ok(self.out)
    }
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

/// A failed exchange before the first frame, said as what happened: a signal, or the daemon's error.
fn before_first_frame(what: &str, e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::Interrupted {
        format!("stopped by a signal while waiting for the daemon ({what}); no frame was sent")
    } else {
        format!("daemon {what}: {e}")
    }
}

/// Wait until the daemon behind `client` is synchronised (or runs free, without PTP) for at most `limit`;
/// returns its EPHC's offset from the host clock then.
fn network_offset(client: &mut Client, limit: Duration, stop: &AtomicBool) -> Result<Nanos, String> {
    let start = std::time::Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("stopped by a signal while waiting for the daemon to synchronise; no frame was sent".into());
        }
        let t = client.time().map_err(|e| before_first_frame("time", e))?;
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

/// Run the talker against the daemon at `socket`; wait at most `sync_wait` for it to be synchronised. Records go to
/// `records` as outcomes arrive. `stop` (a signal) ends the submission early: the frames already submitted still
/// get their outcomes (within `grace`) and their records.
///
/// Nothing waits for ever: connecting and each request take at most [`DEFAULT_TIMEOUT`], a frame the daemon does
/// not take within it ends the submission (`failed`), and `stop` interrupts every wait within
/// [`crate::deadline::SLICE`] — after it, the frames already submitted get at most `grace` for their outcomes.
/// `stop` is a static: a signal handler sets it.
pub fn talk(
    cfg: &Config,
    socket: &Path,
    grace: Duration,
    sync_wait: Duration,
    records: Option<&Path>,
    stop: &'static AtomicBool,
) -> Result<TalkOutput, String> {
    // The records file is opened first, so a bad path fails before any frame is sent.
    let writer = match records {
        Some(p) => Some(RecordWriter::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?),
        None => None,
    };
    let mut client = Client::connect_within(socket, Some(DEFAULT_TIMEOUT), Some(stop)).map_err(|e| match e.kind() {
        std::io::ErrorKind::Interrupted => "stopped by a signal while connecting; no frame was sent".to_string(),
        _ => format!("cannot connect to {}: {e}", socket.display()),
    })?;
    let offset = network_offset(&mut client, sync_wait, stop)?;
    let net_now = || host_tai() + offset;
    let info = client.info().map_err(|e| before_first_frame("info", e))?;
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
    let release_times = client.subscribe_release_times().map_err(|e| before_first_frame("subscribe", e))?;
    // The flows' epoch on the daemon's schedule on network time: base_time + m·(hyperperiod), as `keepon run`.
    let epoch = crate::run::flow_epoch(cfg, Tai(info.base_time), info.cycle.0, net_now() + cfg.start)
        .unwrap_or_else(|| align(info.cycle_start, cfg.geometry, info.ring, net_now() + cfg.start));
    let mut source = FlowSource::new(cfg.flows.iter().map(|f| f.spec.clone()).collect(), epoch);

    let (rx, handle) = read_outcomes(&client)?;

    let mut ledger = Ledger {
        cfg,
        pending: HashMap::new(),
        releasing: HashMap::new(),
        release_times,
        out: TalkOutput {
            frames: 0,
            sent: 0,
            rejected: BTreeMap::new(),
            summary: Summary::new(cfg),
            epoch,
            missing: 0,
            behind: 0,
            stopped: false,
            failed: None,
            records_written: 0,
        },
        writer,
        write_error: None,
    };
    submit_all(&mut client, &mut source, &mut ledger, &rx, offset, stop)?;
    await_outcomes(&mut ledger, &rx, grace)?;
    // End of stream tells the daemon we are done; it closes, and the reader thread ends.
    let _ = client.close_write();
    drop(handle);
    ledger.close()
}

/// Read the daemon's replies on a thread of their own (so that submission keeps to its times), into a channel.
fn read_outcomes(client: &Client) -> Result<(mpsc::Receiver<Response>, std::thread::JoinHandle<()>), String> {
    let (tx, rx) = mpsc::channel();
    let mut reader = client.try_clone().map_err(|e| e.to_string())?;
    // Outcomes may be far apart, and after a signal they are still wanted: the main thread's `grace` bounds this.
    reader.set_timeout(None).map_err(|e| e.to_string())?;
    reader.set_stop(None);
    let handle = std::thread::spawn(move || {
        while let Ok(Some(r)) = reader.recv() {
            if tx.send(r).is_err() {
                break;
            }
        }
    });
    Ok((rx, handle))
}

/// Submit every frame of `source` at its due time on network time (the host's TAI plus `offset`), taking the
/// outcomes that arrived meanwhile; until the flows end, `stop` is set, or the daemon takes no more.
fn submit_all(
    client: &mut Client,
    source: &mut FlowSource,
    ledger: &mut Ledger<'_>,
    rx: &mpsc::Receiver<Response>,
    offset: Nanos,
    stop: &AtomicBool,
) -> Result<(), String> {
    let cfg = ledger.cfg;
    let net_now = || host_tai() + offset;
    while let Some(due) = source.next_due() {
        // Outcomes so far: their records are written now, so only frames in flight are kept.
        while let Ok(r) = rx.try_recv() {
            ledger.take(r)?;
        }
        if stop.load(Ordering::Relaxed) {
            ledger.out.stopped = true;
            break;
        }
        let wait = due - net_now();
        if wait.0 > 0 {
            // In short naps, so a signal is noticed within one.
            std::thread::sleep(Duration::from_nanos(wait.0 as u64).min(STOP_CHECK));
            continue;
        }
        let Some(frame) = source.take() else { break };
        // Frames meant to be late (txtime before their due time) are not counted.
        let lead = frame.txtime.map(|t| (t - due).0).filter(|&lead| lead > 0);
        let (flow, _) = split_id(frame.id);
        let class = cfg.flows[usize::from(flow)].class_name.clone();
        let submit = Request::Submit { tag: frame.id.0, class, txtime: frame.txtime.map(|t| t.0), frame: frame.data };
        match client.send(&submit) {
            Ok(()) => {
                // Behind schedule: handed over more than half its lead late — judged once the daemon has it, so
                // that a stall of this process between taking the frame and sending it counts too.
                if lead.is_some_and(|lead| (net_now() - due).0 > lead / 2) {
                    ledger.out.behind += 1;
                }
                ledger.submitted(frame.id, frame.txtime.map(|t| t.0))
            }
            // The frame may be half written: the frames before it still get `grace` for their outcomes.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                ledger.out.stopped = true;
                break;
            }
            Err(e) => {
                ledger.out.failed = Some(match e.kind() {
                    std::io::ErrorKind::TimedOut => {
                        format!("the daemon took no frame for {} s", DEFAULT_TIMEOUT.as_secs())
                    }
                    _ => format!("the daemon went away: {e}"),
                });
                break;
            }
        }
    }
    Ok(())
}

/// Every submitted frame's outcome (and with release times a `Released` after each sent one), for at most `grace`.
fn await_outcomes(ledger: &mut Ledger<'_>, rx: &mpsc::Receiver<Response>, grace: Duration) -> Result<(), String> {
    let deadline = std::time::Instant::now() + grace;
    while !ledger.pending.is_empty() || !ledger.releasing.is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => ledger.take(r)?,
            Err(_) => break,
        }
    }
    Ok(())
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
