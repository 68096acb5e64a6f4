//! `keepon run`: a station with the configuration's flows on a backend, recording every frame.

use std::collections::HashMap;
use std::path::PathBuf;

use keepon_core::outcome::{Counters, FrameId};
use keepon_core::station::{Station, StationConfig, Underrun};
use keepon_core::testframe::ETHERTYPE_LOCAL_EXPERIMENTAL;
use keepon_core::time::{Nanos, Tai};
use keepon_nic::driver::{Driver, DriverError, Event, LoopConfig};
use keepon_nic::sim::{SimNic, WireStats};
use keepon_nic::source::{split_id, FlowSource};
use keepon_nic::{Nic, Timing, WireEvent};

use crate::config::Config;
use crate::pcap::PcapOut;
use crate::record::Record;

/// Options of a run beyond the configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Write the wire as a nanosecond pcap here.
    pub pcap: Option<PathBuf>,
    /// Include fillers in the pcap.
    pub pcap_fillers: bool,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// One record per frame, in flow then sequence order.
    pub records: Vec<Record>,
    /// Station counters.
    pub counters: Counters,
    /// Underruns detected.
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
    }
}

/// The schedule epoch of a station whose link is up: the first ring-cycle boundary of the schedule grid the
/// station actually uses at least `cfg.start` after the link came up — or, if bringing the link up took longer
/// than that, at least `cfg.start` after `now`. Reading the grid (not the `t0` guessed before the link
/// started) is what puts every txtime into the ring slot its class owns on every backend.
pub fn epoch(cfg: &Config, station: &Station<Vec<u8>>, now: Tai) -> Result<Tai, String> {
    let up = station.schedule().time_of(0);
    let from = up.0.max(now.0).checked_add(cfg.start.0).ok_or("run.start is beyond the clock's range")?;
    station.cycle_start_at_or_after(Tai(from)).ok_or_else(|| "run.start is beyond the clock's range".into())
}

/// Filler bytes as they appear in a pcap: reserved group address, local experimental EtherType, zeros.
fn filler_bytes(len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    b[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0x00, 0x00, 0x04]);
    b[12..14].copy_from_slice(&ETHERTYPE_LOCAL_EXPERIMENTAL.to_be_bytes());
    b
}

/// Drive a station with the configuration's flows over `nic`: bring the link up, take the flows' epoch from
/// the schedule grid the station uses, then run the flows.
pub fn drive<N: Nic>(cfg: &Config, nic: N, opts: &RunOptions) -> Result<RunOutput, String> {
    drive_with(cfg, nic, opts, |_| None)
}

/// [`drive`], reading wire statistics off the backend at the end.
fn drive_with<N: Nic>(
    cfg: &Config,
    nic: N,
    opts: &RunOptions,
    wire_stats: impl FnOnce(&N) -> Option<WireStats>,
) -> Result<RunOutput, String> {
    let loop_cfg = LoopConfig { poll_period: cfg.poll_period, max_duration: cfg.max_duration };
    let mut driver = Driver::new(nic, station_config(cfg), loop_cfg).map_err(|e| e.to_string())?;
    let epoch_cell = std::cell::Cell::new(Tai(0));
    let data_len = cfg.geometry.slot_bytes() as usize - 4;
    let mut pcap = match &opts.pcap {
        Some(p) => Some(PcapOut::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?),
        None => None,
    };
    let mut recs: HashMap<FrameId, Record> = HashMap::new();
    let mut wire: HashMap<FrameId, WireEvent> = HashMap::new();
    let mut underruns = Vec::new();
    let mut pcap_err = None;
    let mut sink = |e: Event| match e {
        Event::Outcome(o) => {
            let (flow, seq) = split_id(o.id);
            let f = &cfg.flows[usize::from(flow)];
            let txtime = (!f.spec.is_best_effort()).then(|| f.spec.time_of(epoch_cell.get(), seq).0);
            let mut r = Record::new(seq, &f.name, &f.class_name, txtime);
            match o.result {
                Ok(s) => r.sent_at(s.slot, s.ring_slot, s.time.0),
                Err(why) => r.rejected(why.as_str()),
            }
            recs.insert(o.id, r);
        }
        Event::Wire(w) => {
            if let (Some(p), Some(start)) = (pcap.as_mut(), w.start) {
                let bytes = match (&w.frame, &w.bytes) {
                    (Some(_), Some(b)) => {
                        let mut padded = b.clone();
                        padded.resize(data_len, 0);
                        padded
                    }
                    _ => filler_bytes(data_len),
                };
                if let Err(e) = p.write(start, &bytes) {
                    pcap_err.get_or_insert(e);
                }
            }
            if let Some(id) = w.frame {
                wire.insert(id, w);
            }
        }
        Event::Underrun(u) => underruns.push(u),
    };
    let result = match driver.bring_up(&mut sink) {
        Ok(()) => {
            let epoch = epoch(cfg, &driver.station, driver.nic.now())?;
            epoch_cell.set(epoch);
            let mut source = FlowSource::new(cfg.flows.iter().map(|f| f.spec.clone()).collect(), epoch);
            driver.run(&mut source, &mut sink)
        }
        Err(e) => Err(e),
    };
    if let Some(e) = pcap_err {
        return Err(format!("writing pcap: {e}"));
    }
    let timed_out = match result {
        Ok(()) => false,
        Err(DriverError::Timeout(_)) => true,
        Err(e) => return Err(e.to_string()),
    };
    for (id, w) in wire {
        if let Some(r) = recs.get_mut(&id) {
            if let Some(t) = w.start {
                r.tx_ns = Some(t.0);
            }
            r.rx_ns = w.rx.map(|t| t.0);
        }
    }
    let mut records: Vec<(FrameId, Record)> = recs.into_iter().collect();
    records.sort_by_key(|(id, _)| split_id(*id));
    Ok(RunOutput {
        records: records.into_iter().map(|(_, r)| r).collect(),
        counters: *driver.station.counters(),
        underruns,
        wire: wire_stats(&driver.nic),
        backend: driver.nic.describe(),
        timing: driver.nic.timing(),
        epoch: epoch_cell.get(),
        timed_out,
    })
}

/// Run the configuration on the simulated NIC, with its wire statistics.
pub fn run_sim(cfg: &Config, opts: &RunOptions) -> Result<RunOutput, String> {
    let mut sim = cfg.sim;
    sim.keep_fillers = opts.pcap.is_some() && opts.pcap_fillers;
    drive_with(cfg, SimNic::new(sim), opts, |nic| Some(nic.stats()))
}
