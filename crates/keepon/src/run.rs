//! `keepon run`: a station with the configuration's flows on a backend, recording every frame.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use keepon_core::bytes::windows::Windows;
use keepon_core::bytes::{ByteConfig, ByteStation};
use keepon_core::face::StationFace;
use keepon_core::outcome::{Counters, FrameId};
use keepon_core::station::{Station, StationConfig, Underrun};
use keepon_core::time::{Nanos, Tai};
use keepon_nic::driver::{Driver, DriverError, Event, LoopConfig, DRAIN_GRACE};
use keepon_nic::sim::{SimNic, WireStats};
use keepon_nic::source::{split_id, FlowSource, Pattern};
use keepon_nic::{Nic, Timing};

use crate::config::{Config, WireTiming};
use crate::pcap::WireTap;
use crate::record::{Record, RecordWriter};
use crate::summary::Summary;

/// Options of a run beyond the configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Write per-frame records here, as outcomes arrive.
    pub records: Option<PathBuf>,
    /// Write the wire as a nanosecond pcap here.
    pub pcap: Option<PathBuf>,
    /// Include fillers in the pcap.
    pub pcap_fillers: bool,
    /// Set by a signal: stop taking frames, let the posted ones leave, write every outcome and end.
    pub stop: Option<&'static AtomicBool>,
}

/// Underruns kept in [`RunOutput::underruns`] (the count is in the counters).
pub const MAX_UNDERRUNS_KEPT: usize = 1000;

/// What a run produced. Records went to their file as they arrived; this holds only what the summary needs, so
/// a run's memory is bounded by the frames in flight, not by its length.
#[derive(Debug)]
pub struct RunOutput {
    /// Per-flow and schedule statistics, accumulated as records were written.
    pub summary: Summary,
    /// Records written.
    pub records_written: u64,
    /// Station counters.
    pub counters: Counters,
    /// The first [`MAX_UNDERRUNS_KEPT`] underruns detected.
    pub underruns: Vec<Underrun>,
    /// Wire statistics (simulator only).
    pub wire: Option<WireStats>,
    /// Backend description.
    pub backend: String,
    /// Timing quality of the backend.
    pub timing: Timing,
    /// The schedule epoch.
    pub epoch: Tai,
    /// The run stopped at its time bound.
    pub timed_out: bool,
    /// A signal stopped the run early (see [`RunOptions::stop`]).
    pub stopped: bool,
    /// A secondary output (pcap) failed during the run: the records are complete, this output is not.
    pub output_error: Option<String>,
    /// The schedule on network time and how far the wire was off it.
    pub grid: GridReport,
}

/// The schedule on network time (`[schedule]`) and how far the wire kept to it.
#[derive(Debug, Clone)]
pub struct GridReport {
    /// Base time (TAI ns).
    pub base_time: Tai,
    /// Cycle time `N·δ`.
    pub cycle: keepon_core::time::SlotPeriod,
    /// Wire slot start − schedule time on the EPHC, as the station posted the slots.
    pub alignment: keepon_core::station::Alignment,
    /// Simulator only: the EPHC's own error (EPHC − true wire start) over every reported slot, ns: (min, max).
    pub ephc_error: Option<(i64, i64)>,
    /// Simulator only: true wire start − schedule time of slots posted locked, ns: (min, max).
    pub true_alignment: Option<(i64, i64)>,
}

impl GridReport {
    /// The lines of the run summary.
    pub fn render(&self) -> String {
        if self.alignment == keepon_core::station::Alignment::default() {
            // The byte clock has no slot grid to align: its frames' deviations are in the schedule line.
            return format!(
                "grid: schedule base_time {} ns, cycle {} (cycle n at base_time + n·cycle of network time)\n",
                self.base_time.0, self.cycle
            );
        }
        let mut s = format!(
            "grid: schedule base_time {} ns, cycle {} (cycle n at base_time + n·cycle of network time)\n  wire slot \
             start − schedule time on the EPHC: {}\n",
            self.base_time.0,
            self.cycle,
            self.alignment.summary()
        );
        if let (Some((emin, emax)), Some((amin, amax))) = (self.ephc_error, self.true_alignment) {
            s.push_str(&format!(
                "  simulated wire: EPHC error {emin}…{emax} ns; true slot start − schedule time {amin}…{amax} ns \
                 (locked slots)\n"
            ));
        }
        s
    }
}

/// Folds (min, max) of a value.
fn widen(range: &mut Option<(i64, i64)>, v: i64) {
    let r = range.get_or_insert((v, v));
    r.0 = r.0.min(v);
    r.1 = r.1.max(v);
}

/// The station configuration of a runtime configuration.
pub fn station_config(cfg: &Config) -> StationConfig {
    StationConfig {
        geometry: cfg.geometry,
        ownership: cfg.ownership.clone(),
        batch: cfg.batch,
        policy: cfg.policy,
        max_pending: cfg.max_pending,
        max_advance: cfg.max_advance,
        post_latency: Nanos(0),
        base_time: cfg.base_time,
        max_filler: cfg.max_frame,
    }
}

/// The schedule epoch of a station whose link is up: the first start of a hyperperiod of the schedule on network
/// time — `base_time + m·H`, `H` the least common multiple of the cycle and every flow's period (or repeat) —
/// at least `cfg.start` after `now`. Every flow's offsets are read from it, so two stations running the same plan
/// put the same frames at the same network times, and every txtime falls in the ring slot its class owns on every
/// backend. `now` is host time.
pub fn epoch(cfg: &Config, station: &Station<Vec<u8>>, now: Tai) -> Result<Tai, String> {
    let now = station.ephc_at(now); // host time → the station's clock (they differ once synchronisation moves it)
    let from = now.0.checked_add(cfg.start.0).ok_or("run.start is beyond the clock's range")?;
    let epoch = flow_epoch(cfg, station.base_time(), station.cycle_time().num(), Tai(from))
        .ok_or("run.start is beyond the clock's range")?;
    // Exactly a cycle start (the hyperperiod is whole cycles); the check guards the arithmetic.
    station.cycle_start_at_or_after(epoch).ok_or_else(|| "run.start is beyond the clock's range".into())
}

/// The first `base_time + m·H` at or after `from`, `H` the hyperperiod of `cfg`'s flows and the cycle
/// (`cycles` ns: the shortest whole number of ns made of whole cycles, the exact cycle's numerator).
pub fn flow_epoch(cfg: &Config, base_time: Tai, cycles: u64, from: Tai) -> Option<Tai> {
    let h = hyperperiod(cfg, cycles);
    let base = i128::from(base_time.0);
    let m = (i128::from(from.0) - base - 1).div_euclid(h) + 1;
    i64::try_from(base + m * h).ok().map(Tai)
}

/// The least common multiple of `cycles` (a whole number of ns made of whole cycles) and every flow's period or
/// repeat, in ns; `cycles` alone if that exceeds 10 s (a run would wait that long for its epoch; flows then share
/// only the cycle's phase).
fn hyperperiod(cfg: &Config, cycles: u64) -> i128 {
    fn gcd(a: i128, b: i128) -> i128 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut h = i128::from(cycles.max(1));
    for f in &cfg.flows {
        let p = match &f.spec.pattern {
            Pattern::Periodic { period, .. } | Pattern::BestEffort { period, .. } => period.0,
            Pattern::Listed { repeat, .. } => repeat.0,
        };
        let p = i128::from(p.max(1));
        let l = h / gcd(h, p) * p;
        if l > 10_000_000_000 {
            return i128::from(cycles.max(1));
        }
        h = l;
    }
    h
}

/// Drive a station with the configuration's flows over `nic`: bring the link up, take the flows' epoch from
/// the schedule grid the station uses, then run the flows.
pub fn drive<N: Nic>(cfg: &Config, nic: N, opts: &RunOptions) -> Result<RunOutput, String> {
    drive_with(cfg, nic, opts, |_| None)
}

/// Classic pcap stores whole seconds in 32 bits: the last time it can hold.
const PCAP_MAX_SECONDS: i64 = u32::MAX as i64;

/// [`drive`], reading wire statistics off the backend at the end: on the slot station or the byte clock
/// (`link.timing`).
fn drive_with<N: Nic>(
    cfg: &Config,
    nic: N,
    opts: &RunOptions,
    wire_stats: impl FnOnce(&N) -> Option<WireStats>,
) -> Result<RunOutput, String> {
    let loop_cfg = LoopConfig { poll_period: cfg.poll_period, max_duration: cfg.max_duration };
    match cfg.timing {
        WireTiming::Slots => {
            let driver = Driver::new(nic, station_config(cfg), loop_cfg).map_err(|e| e.to_string())?;
            let grid = |d: &Driver<N>, ephc_error, true_alignment| GridReport {
                base_time: d.station.base_time(),
                cycle: d.station.cycle_time(),
                alignment: d.station.alignment().clone(),
                ephc_error,
                true_alignment,
            };
            drive_engine(cfg, driver, opts, wire_stats, |d, now| epoch(cfg, &d.station, now), grid)
        }
        WireTiming::Bytes => {
            let driver = Driver::bytes(nic, byte_config(cfg), loop_cfg).map_err(|e| e.to_string())?;
            let grid = |_: &Driver<N, ByteStation<Vec<u8>>>, ephc_error, true_alignment| GridReport {
                base_time: cfg.base_time,
                cycle: cycle_of(cfg),
                alignment: Default::default(),
                ephc_error,
                true_alignment,
            };
            let epoch = |d: &Driver<N, ByteStation<Vec<u8>>>, now: Tai| {
                let from =
                    d.station.ephc_at(now).0.checked_add(cfg.start.0).ok_or("run.start is beyond the clock's range")?;
                flow_epoch(cfg, cfg.base_time, cycle_of(cfg).num(), Tai(from))
                    .ok_or_else(|| "run.start is beyond the clock's range".to_string())
            };
            drive_engine(cfg, driver, opts, wire_stats, epoch, grid)
        }
    }
}

/// The byte clock's cycle, exactly: the class windows' (`schedule.cycle_time`), or the ring's `N·δ`.
fn cycle_of(cfg: &Config) -> keepon_core::time::SlotPeriod {
    match &cfg.windows {
        Some(w) => {
            let c = w.cycle();
            keepon_core::time::SlotPeriod::new(c.num as u64, c.den as u64)
        }
        None => {
            let d = cfg.geometry.period();
            keepon_core::time::SlotPeriod::new(d.num() * u64::from(cfg.ownership.ring()), d.den())
        }
    }
}

/// The byte-clock configuration of a runtime configuration: the slot masks as time windows on the schedule,
/// the wire posted `batch` slots of time ahead, enough descriptors for that lead in minimum frames.
pub fn byte_config(cfg: &Config) -> ByteConfig {
    let delta = cfg.geometry.period();
    let lead = Nanos(i64::try_from(delta.ceil_mul(u64::from(cfg.batch))).unwrap_or(i64::MAX));
    let per_min = cfg.geometry.rate().wire_time(keepon_core::time::MIN_FRAME_BYTES);
    let ring = (lead.0 as u128 * u128::from(per_min.den())).div_ceil(u128::from(per_min.num())) + 16;
    ByteConfig {
        rate: cfg.geometry.rate(),
        windows: cfg
            .windows
            .clone()
            .unwrap_or_else(|| Windows::from_slots(cfg.base_time, cfg.geometry, &cfg.ownership)),
        ring: ring.clamp(64, 65_536) as u32,
        max_frame: cfg.max_frame,
        lead,
        max_pending: cfg.max_pending,
        max_advance: cfg.max_advance,
        post_latency: Nanos(0),
        policy: cfg.policy,
    }
}

/// [`drive_with`] on one station: bring the link up, take the flows' epoch (`epoch_of`), run the flows, and
/// report how the wire kept to the schedule (`grid_of`).
fn drive_engine<N: Nic, S: StationFace>(
    cfg: &Config,
    mut driver: Driver<N, S>,
    opts: &RunOptions,
    wire_stats: impl FnOnce(&N) -> Option<WireStats>,
    epoch_of: impl FnOnce(&Driver<N, S>, Tai) -> Result<Tai, String>,
    grid_of: impl FnOnce(&Driver<N, S>, Option<(i64, i64)>, Option<(i64, i64)>) -> GridReport,
) -> Result<RunOutput, String> {
    // Every output is opened (and checked) before the run, so none can fail after it and lose it.
    let mut pcap = match &opts.pcap {
        Some(p) => Some(open_pcap(p, cfg, driver.nic.now())?),
        None => None,
    };
    let mut writer = match &opts.records {
        Some(p) => Some(RecordWriter::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?),
        None => None,
    };
    let epoch_cell = std::cell::Cell::new(Tai(0));
    let mut join = Join::default();
    let mut summary = Summary::new(cfg);
    let mut underruns = Vec::new();
    let mut rec_err: Option<std::io::Error> = None;
    let simulated = driver.nic.timing() == Timing::Simulated;
    let (mut ephc_error, mut true_alignment) = (None, None);
    let mut emit = |r: Record, summary: &mut Summary| {
        summary.add(&r);
        if let (Some(w), None) = (writer.as_mut(), rec_err.as_ref()) {
            if let Err(e) = w.write(&r) {
                rec_err = Some(e);
            }
        }
    };
    let mut sink = |e: Event| match e {
        Event::Outcome(o) => {
            let r = outcome_record(cfg, epoch_cell.get(), &o);
            if o.result.is_err() {
                emit(r, &mut summary);
            } else if let Some(r) = join.sent(o.id, r) {
                emit(finish(r, cfg.tolerance), &mut summary);
            }
        }
        Event::Wire(w) => {
            if let (true, Some(start), Some(ephc)) = (simulated, w.start, w.ephc) {
                widen(&mut ephc_error, ephc.0 - start.0);
                if let (Some(grid), true) = (w.grid, w.locked) {
                    widen(&mut true_alignment, start.0 - grid.0);
                }
            }
            if let (Some(p), Some(start)) = (pcap.as_mut(), w.start) {
                p.wire(&w, start);
            }
            if let Some(id) = w.frame {
                if let Some(r) = join.wire(id, WireTimes { start: w.start, rx: w.rx, released: w.released_ephc }) {
                    emit(finish(r, cfg.tolerance), &mut summary);
                }
            }
        }
        Event::Underrun(u) => {
            if underruns.len() < MAX_UNDERRUNS_KEPT {
                underruns.push(u);
            }
        }
    };
    let result = match driver.bring_up(&mut sink) {
        Ok(()) => {
            let epoch = epoch_of(&driver, driver.nic.now())?;
            epoch_cell.set(epoch);
            let mut source = FlowSource::new(cfg.flows.iter().map(|f| f.spec.clone()).collect(), epoch);
            match opts.stop {
                Some(stop) => driver.run_until(&mut source, &mut sink, stop),
                None => driver.run(&mut source, &mut sink),
            }
        }
        Err(e) => Err(e),
    };
    // Sent frames whose wire event never came (a backend that stopped reporting) keep their EPHC time.
    for r in join.rest() {
        emit(finish(r, cfg.tolerance), &mut summary);
    }
    let timed_out = match result {
        Ok(()) => false,
        Err(DriverError::Timeout(_)) => true,
        Err(e) => return Err(e.to_string()),
    };
    let records_written = writer.as_ref().map_or(0, RecordWriter::rows);
    if let Some(e) = rec_err {
        return Err(format!("writing the records failed: {e}"));
    }
    if let Some(w) = writer {
        w.finish().map_err(|e| format!("writing the records failed: {e}"))?;
    }
    let pcap_err = pcap.map(WireTap::finish).and_then(Result::err);
    Ok(RunOutput {
        summary,
        records_written,
        counters: driver.counters(),
        underruns,
        wire: wire_stats(&driver.nic),
        backend: driver.nic.describe(),
        timing: driver.nic.timing(),
        epoch: epoch_cell.get(),
        timed_out,
        stopped: opts.stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)),
        output_error: pcap_err,
        grid: grid_of(&driver, ephc_error, true_alignment),
    })
}

/// The wire capture of `--pcap`, refused where this run's times cannot be held in a classic pcap.
fn open_pcap(p: &std::path::Path, cfg: &Config, now: Tai) -> Result<WireTap, String> {
    let last = now.0.saturating_add(cfg.max_duration.0).saturating_add(2 * DRAIN_GRACE.0);
    if now.0 < 0 || last / 1_000_000_000 > PCAP_MAX_SECONDS {
        return Err(format!(
            "--pcap: this run's times (from {} ns to up to {last} ns TAI with run.max_duration) fall outside \
             what a classic pcap can hold (seconds 0..=2^32−1, until 2106); lower sim.t0 or run.max_duration, \
             or run without --pcap",
            now.0
        ));
    }
    WireTap::create(p, cfg)
}

/// A frame's record from its outcome: its flow, sequence and txtime on `epoch`, and where it was sent or why not.
fn outcome_record(cfg: &Config, epoch: Tai, o: &keepon_core::outcome::Outcome) -> Record {
    let (flow, seq) = split_id(o.id);
    let f = &cfg.flows[usize::from(flow)];
    let txtime = (!f.spec.is_best_effort()).then(|| f.spec.time_of(epoch, seq).0);
    let mut r = Record::new(seq, &f.name, &f.class_name, txtime);
    match o.result {
        Ok(s) => {
            r.sent_at(s.slot, s.ring_slot, s.time.0);
            r.sched_ns = s.scheduled.map(|t| t.0);
        }
        Err(why) => r.rejected(why.as_str()),
    }
    r
}

/// Flag a sent real-time record that left further than `tolerance` from its schedule slot.
fn finish(mut r: Record, tolerance: Nanos) -> Record {
    if let Some(d) = r.deviation() {
        r.off_schedule = Some(d.unsigned_abs() > tolerance.0.unsigned_abs());
    }
    r
}

/// What a wire event says about its frame (see [`keepon_nic::WireEvent`]).
#[derive(Clone, Copy, Debug)]
struct WireTimes {
    start: Option<Tai>,
    rx: Option<Tai>,
    released: Option<Tai>,
}

impl WireTimes {
    fn fill(self, r: &mut Record) {
        if let Some(t) = self.start {
            r.tx_ns = Some(t.0);
        }
        r.rx_ns = self.rx.map(|t| t.0);
        r.released_ns = self.released.map(|t| t.0);
    }
}

/// Joins a sent frame's outcome with its wire event (either may come first; both come within a ring of slots,
/// so this holds at most about a ring of frames).
#[derive(Default)]
struct Join {
    outcome_first: HashMap<FrameId, Record>,
    wire_first: HashMap<FrameId, WireTimes>,
}

impl Join {
    /// The outcome arrived: the record, if its wire event is already here.
    fn sent(&mut self, id: FrameId, mut r: Record) -> Option<Record> {
        match self.wire_first.remove(&id) {
            Some(w) => {
                w.fill(&mut r);
                Some(r)
            }
            None => {
                self.outcome_first.insert(id, r);
                None
            }
        }
    }

    /// The wire event arrived: the record, if its outcome is already here.
    fn wire(&mut self, id: FrameId, w: WireTimes) -> Option<Record> {
        match self.outcome_first.remove(&id) {
            Some(mut r) => {
                w.fill(&mut r);
                Some(r)
            }
            None => {
                self.wire_first.insert(id, w);
                None
            }
        }
    }

    /// Outcomes still waiting for a wire event.
    fn rest(&mut self) -> Vec<Record> {
        self.wire_first.clear();
        self.outcome_first.drain().map(|(_, r)| r).collect()
    }
}

/// Run the configuration on the simulated NIC, with its wire statistics.
pub fn run_sim(cfg: &Config, opts: &RunOptions) -> Result<RunOutput, String> {
    let mut sim = cfg.sim;
    sim.keep_fillers = opts.pcap.is_some() && opts.pcap_fillers;
    drive_with(cfg, SimNic::new(sim), opts, |nic| Some(nic.stats()))
}
