//! keepon itself: the real station (`keepon-core`) driven by the real loop (`keepon-nic::driver`) on the
//! simulated NIC. Nothing here models keepon; it only configures and runs it and reads the wire.
//!
//! Setup (shared by the microbenchmarks): 1 Gb/s, 1230-byte slots (δ = 10 µs exactly, so a 1 ms period is
//! exactly 100 slots and every frame of the stream falls in ring slot 0), a 100-slot ring whose slot 0 the
//! real-time class owns, best effort in every other slot, batch 8, strict policy. Smaller frames travel in the
//! same slots (keepon pads them). The host poll loop is the simulator's model with the example
//! configuration's costs (20 µs poll period, 4 µs + 6.6 % wake-up overshoot, 5 µs uniform jitter): host
//! jitter that never reaches the wire as long as the ring stays ahead.

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::sim::{HostModel, SimConfig, SimNic};
use keepon_nic::source::{split_id, FlowSource, FlowSpec, Pattern};
use keepon_nic::Nic;

use crate::model::{Background, Stream, TxRecord};

/// Slot size of the microbenchmarks (L2 bytes incl. FCS): δ = 10 µs at 1 Gb/s.
pub const SLOT_BYTES: u32 = 1230;

/// keepon's station for one microbenchmark cell.
#[derive(Clone, Copy, Debug)]
pub struct KeeponSetup {
    /// The real-time stream.
    pub stream: Stream,
    /// Best-effort traffic through the station's unowned slots.
    pub background: Background,
    /// Slot size, bytes.
    pub slot_bytes: u32,
    /// Descriptors the station keeps posted ahead of the wire.
    pub batch: u32,
    /// Seed of the simulated host.
    pub seed: u64,
}

/// What keepon's run produced.
#[derive(Clone, Debug)]
pub struct KeeponRun {
    /// The real-time frames' records, on the station's own (simulated NIC) timescale, relative to the flow's
    /// epoch.
    pub records: Vec<TxRecord>,
    /// Best-effort background frames that left on the wire.
    pub background_sent: u64,
}

/// Run keepon for one cell. `progress` is called with the fraction of the run done, now and then.
pub fn run(setup: &KeeponSetup, progress: &mut dyn FnMut(f64)) -> Result<KeeponRun, String> {
    let s = setup.stream;
    let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).map_err(|e| e.to_string())?, setup.slot_bytes)
        .map_err(|e| e.to_string())?;
    let slots_per_period = geometry.period().slots_in(Nanos(s.period));
    if geometry.period().floor_mul(slots_per_period) != s.period as u128 || slots_per_period < 2 {
        return Err(format!(
            "period {} ns is not a whole number (≥ 2) of {} ns slots; keepon's schedule needs it to be",
            s.period,
            geometry.period()
        ));
    }
    let ring = u32::try_from(slots_per_period).map_err(|_| "period too long for one ring".to_string())?;
    let ownership = Ownership::new(
        ring,
        &[ClassSpec { name: "rt".into(), slots: vec![0] }, ClassSpec { name: "be".into(), slots: vec![] }],
    )
    .map_err(|e| e.to_string())?;
    let station = StationConfig {
        geometry,
        ownership,
        batch: setup.batch.min(ring - 1),
        policy: Policy::Strict,
        max_pending: 4_096,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos(0),
    };
    let mut sim = SimConfig::new(geometry, Tai(1_700_000_000_000_000_000));
    sim.seed = setup.seed;
    sim.host = HostModel {
        poll_overhead: Nanos(1_000),
        per_slot: Nanos(10),
        wake_latency: Nanos(4_000),
        wake_slack_ppm: 66_000,
        jitter: Nanos(5_000),
        spike_ppm: 0,
        spike: Nanos(0),
    };
    let span = Nanos(s.period.saturating_mul(s.count as i64 + 20));
    let loop_cfg = LoopConfig { poll_period: Nanos(20_000), max_duration: span };
    let mut d = Driver::new(SimNic::new(sim), station, loop_cfg).map_err(|e| e.to_string())?;
    let mut recs: Vec<TxRecord> =
        (0..s.count).map(|seq| TxRecord { seq, txtime: 0.0, wire: None, outcome: "no-outcome".into() }).collect();
    let mut ignore = |_: Event| {};
    d.bring_up(&mut ignore).map_err(|e| e.to_string())?;
    let from = d.nic.now() + Nanos::from_ms(1);
    let epoch = d.station.cycle_start_at_or_after(from).ok_or("epoch beyond the clock's range")?;
    let mut flows = vec![FlowSpec {
        flow: 0,
        class: ClassId(0),
        pattern: Pattern::Periodic { offset: Nanos(0), period: Nanos(s.period) },
        frame_bytes: s.frame_bytes,
        count: s.count,
        lead: Nanos(s.advance),
        dst: [2, 0, 0, 0, 0, 2],
        src: [2, 0, 0, 0, 0, 1],
    }];
    if setup.background.load > 0.0 {
        // Best effort at `load` of the line rate: one frame every (frame time / load), for the whole run.
        let every = (setup.background.frame_ns() / setup.background.load).round() as i64;
        flows.push(FlowSpec {
            flow: 1,
            class: ClassId(1),
            pattern: Pattern::BestEffort { offset: Nanos(0), period: Nanos(every.max(1)) },
            frame_bytes: setup.background.frame_bytes.min(setup.slot_bytes),
            count: (s.period as u64 * s.count) / every.max(1) as u64,
            lead: Nanos(0),
            dst: [2, 0, 0, 0, 0, 3],
            src: [2, 0, 0, 0, 0, 1],
        });
    }
    for (seq, r) in recs.iter_mut().enumerate() {
        r.txtime = (flows[0].time_of(epoch, seq as u64) - epoch).0 as f64;
    }
    let mut source = FlowSource::new(flows, epoch);
    let total = s.count.max(1) as f64;
    let mut done = 0u64;
    let mut background_sent = 0u64;
    let mut sink = |e: Event| match e {
        Event::Outcome(o) => {
            let (flow, seq) = split_id(o.id);
            if flow == 0 {
                if let Some(r) = recs.get_mut(seq as usize) {
                    match o.result {
                        Ok(_) => r.outcome = "sent".into(),
                        Err(why) => r.outcome = why.as_str().into(),
                    }
                }
                done += 1;
                if done.is_multiple_of(10_000) {
                    progress(done as f64 / total);
                }
            }
        }
        Event::Wire(w) => {
            if let (Some(id), Some(start)) = (w.frame, w.start) {
                let (flow, seq) = split_id(id);
                if flow == 1 {
                    background_sent += 1;
                } else if let Some(r) = recs.get_mut(seq as usize) {
                    r.wire = Some((start - epoch).0 as f64);
                }
            }
        }
        Event::Underrun(_) => {}
    };
    d.run(&mut source, &mut sink).map_err(|e| format!("keepon station: {e}"))?;
    Ok(KeeponRun { records: recs, background_sent })
}
