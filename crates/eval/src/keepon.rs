//! keepon itself: the real station (`keepon-core`) driven by the real loop (`keepon-nic::driver`) on the
//! simulated NIC. Nothing here models keepon; it only configures and runs it and reads the wire.
//!
//! The caller chooses the slot size, the batch, the host loop ([`Host`]) and the real-time flows (each its own
//! class owning the ring slot of its offset); the ring is one period of slots, so the period must be a whole
//! number of slots. Best effort uses every slot no class owns (minus `reserved`), at most 256 frames pending
//! per class (a bounded backlog, like a socket buffer). Frames shorter than the slot travel padded. Fig 15's
//! setup: 1 Gb/s, 1230-byte slots (δ = 10 µs, a 1 ms period is 100 slots), batch 8, strict policy, the
//! example host loop ([`Host::example`]), whose jitter never reaches the wire while the ring stays ahead.

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig};
use keepon_nic::faults::Faults;
use keepon_nic::sim::{HostModel, SimConfig, SimNic};
use keepon_nic::source::{split_id, FlowSource, FlowSpec, Pattern};
use keepon_nic::Nic;

use crate::model::{Background, Stream, TxRecord};

/// Slot size of the microbenchmarks (L2 bytes incl. FCS): δ = 10 µs at 1 Gb/s.
pub const SLOT_BYTES: u32 = 1230;

/// The simulated host's poll loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Host {
    /// Requested sleep between polls (0 = busy poll).
    pub poll_period: Nanos,
    /// Costs and jitter of the loop (the simulator's model).
    pub model: HostModel,
}

impl Host {
    /// The example configuration's loop: 20 µs sleeps overshooting by 4 µs + 6.6 %, 1 µs + 10 ns/slot per
    /// iteration, 5 µs uniform jitter.
    pub fn example() -> Host {
        Host {
            poll_period: Nanos(20_000),
            model: HostModel {
                poll_overhead: Nanos(1_000),
                per_slot: Nanos(10),
                wake_latency: Nanos(4_000),
                wake_cost: Nanos(0),
                wake_slack_ppm: 66_000,
                jitter: Nanos(5_000),
                spike_ppm: 0,
                spike: Nanos(0),
            },
        }
    }

    /// A busy-polling core (the paper's CP-PMD for short advances): 500 ns + 5 ns/slot per iteration,
    /// 200 ns uniform jitter, no sleeps.
    pub fn busy_poll() -> Host {
        Host {
            poll_period: Nanos(0),
            model: HostModel {
                poll_overhead: Nanos(500),
                per_slot: Nanos(5),
                wake_latency: Nanos(0),
                wake_cost: Nanos(0),
                wake_slack_ppm: 0,
                jitter: Nanos(200),
                spike_ppm: 0,
                spike: Nanos(0),
            },
        }
    }
}

/// keepon's station for one microbenchmark cell.
#[derive(Clone, Debug)]
pub struct KeeponSetup {
    /// The real-time stream (one flow per entry of `offsets`, each its own class owning one ring slot).
    pub stream: Stream,
    /// Offset of each real-time flow within the period, ns (each a whole number of slots; `[0]` for one flow).
    pub offsets: Vec<i64>,
    /// Best-effort traffic through the station's unowned slots.
    pub background: Background,
    /// Ring slots reserved for an idle class (best effort may not use them; they carry fillers).
    pub reserved: Vec<u32>,
    /// Slot size, bytes.
    pub slot_bytes: u32,
    /// Descriptors the station keeps posted ahead of the wire.
    pub batch: u32,
    /// The host's poll loop.
    pub host: Host,
    /// Seed of the simulated host.
    pub seed: u64,
}

/// What [`run`] keeps at its defaults and [`run_with`] varies: the insertion policy, how many ring slots after
/// its own each flow's class also owns (room for the relaxed policy to move a displaced frame), and the
/// simulated NIC's faults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Variant {
    /// Insertion policy (default strict).
    pub policy: Policy,
    /// Ring slots after the flow's own that its class also owns (default 0).
    pub extra_slots: u32,
    /// The simulated NIC's failure modes (default off).
    pub faults: Faults,
}

/// What keepon's run produced.
#[derive(Clone, Debug)]
pub struct KeeponRun {
    /// Per real-time flow, its frames' records, on the station's own (simulated NIC) timescale, relative to
    /// the flows' epoch (`txtime` includes the flow's offset).
    pub records: Vec<Vec<TxRecord>>,
    /// Best-effort background frames that left on the wire within the stream's span (`count` periods from the
    /// epoch).
    pub background_sent: u64,
    /// Best-effort background frames the station refused (e.g. `queue-full` when offered beyond its share).
    pub background_rejected: u64,
    /// Per real-time flow, the time each frame's `Sent` outcome reported (same timescale as `records`), or
    /// `None` if it was not sent: it differs from the wire time only for frames a wire gap the station learnt
    /// of too late shifted.
    pub reported: Vec<Vec<Option<f64>>>,
    /// Underruns the station reported.
    pub underruns: u64,
}

/// Run keepon for one cell. `progress` is called with the fraction of the run done, now and then.
pub fn run(setup: &KeeponSetup, progress: &mut dyn FnMut(f64)) -> Result<KeeponRun, String> {
    run_with(setup, &Variant::default(), progress)
}

/// [`run`] with a policy, wider class windows or NIC faults.
pub fn run_with(setup: &KeeponSetup, v: &Variant, progress: &mut dyn FnMut(f64)) -> Result<KeeponRun, String> {
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
    let mut classes = Vec::new();
    for (i, &o) in setup.offsets.iter().enumerate() {
        let k = geometry.period().slots_in(Nanos(o));
        if o < 0 || o >= s.period || geometry.period().floor_mul(k) != o as u128 {
            return Err(format!(
                "flow offset {o} ns: must be a whole number of {} ns slots within the period",
                geometry.period()
            ));
        }
        let slots = (0..=v.extra_slots).map(|e| ((k as u32) + e) % ring).collect();
        classes.push(ClassSpec { name: format!("rt{i}"), slots });
    }
    let n_rt = classes.len();
    classes.push(ClassSpec { name: "be".into(), slots: vec![] });
    if !setup.reserved.is_empty() {
        classes.push(ClassSpec { name: "reserved".into(), slots: setup.reserved.clone() });
    }
    let ownership = Ownership::new(ring, &classes).map_err(|e| e.to_string())?;
    let station = StationConfig {
        geometry,
        ownership,
        batch: setup.batch.min(ring - 1),
        policy: v.policy,
        max_pending: 256,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos(0),
        base_time: Tai(1_700_000_000_000_000_000),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    };
    let mut sim = SimConfig::new(geometry, Tai(1_700_000_000_000_000_000));
    sim.seed = setup.seed;
    sim.host = setup.host.model;
    sim.faults = v.faults;
    // The stream, the epoch's 1 ms after bring-up, and 10 ms of margin.
    let span = Nanos(s.period.saturating_mul(s.count as i64 + 20).saturating_add(s.advance).saturating_add(11_000_000));
    let loop_cfg = LoopConfig { poll_period: setup.host.poll_period, max_duration: span };
    let mut d = Driver::new(SimNic::new(sim), station, loop_cfg).map_err(|e| e.to_string())?;
    let mut recs: Vec<Vec<TxRecord>> = (0..n_rt)
        .map(|_| {
            (0..s.count).map(|seq| TxRecord { seq, txtime: 0.0, wire: None, outcome: "no-outcome".into() }).collect()
        })
        .collect();
    let mut ignore = |_: Event| {};
    d.bring_up(&mut ignore).map_err(|e| e.to_string())?;
    let from = d.nic.now() + Nanos::from_ms(1);
    let epoch = d.station.cycle_start_at_or_after(from).ok_or("epoch beyond the clock's range")?;
    let mut flows: Vec<FlowSpec> = setup
        .offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| FlowSpec {
            flow: i as u16,
            class: ClassId(i as u8),
            pattern: Pattern::Periodic { offset: Nanos(o), period: Nanos(s.period) },
            frame_bytes: s.frame_bytes,
            count: s.count,
            lead: Nanos(s.advance),
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            rtag: false,
        })
        .collect();
    if setup.background.load > 0.0 {
        // Best effort at `load` of the line rate: one frame every (frame time / load), for the whole run.
        let every = (setup.background.frame_ns() / setup.background.load).round() as i64;
        flows.push(FlowSpec {
            flow: n_rt as u16,
            class: ClassId(n_rt as u8),
            pattern: Pattern::BestEffort { offset: Nanos(0), period: Nanos(every.max(1)) },
            frame_bytes: setup.background.frame_bytes.min(setup.slot_bytes),
            count: (s.period as u64 * s.count) / every.max(1) as u64,
            lead: Nanos(0),
            dst: [2, 0, 0, 0, 0, 3],
            src: [2, 0, 0, 0, 0, 1],
            rtag: false,
        });
    }
    for (f, rs) in recs.iter_mut().enumerate() {
        for (seq, r) in rs.iter_mut().enumerate() {
            r.txtime = (flows[f].time_of(epoch, seq as u64) - epoch).0 as f64;
        }
    }
    let mut source = FlowSource::new(flows, epoch);
    let total = (s.count.max(1) * n_rt as u64) as f64;
    let mut done = 0u64;
    let stream_span = s.period.saturating_mul(s.count as i64);
    let mut background_sent = 0u64;
    let mut background_rejected = 0u64;
    let mut reported: Vec<Vec<Option<f64>>> = (0..n_rt).map(|_| vec![None; s.count as usize]).collect();
    let mut underruns = 0u64;
    let mut sink = |e: Event| match e {
        Event::Outcome(o) => {
            let (flow, seq) = split_id(o.id);
            if usize::from(flow) >= n_rt && o.result.is_err() {
                background_rejected += 1;
            }
            if usize::from(flow) < n_rt {
                if let Some(r) = recs[usize::from(flow)].get_mut(seq as usize) {
                    match o.result {
                        Ok(sent) => {
                            r.outcome = "sent".into();
                            reported[usize::from(flow)][seq as usize] = Some((sent.time - epoch).0 as f64);
                        }
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
                if usize::from(flow) >= n_rt {
                    // Only the stream's span counts (not the drain of a backlog after it).
                    if (start - epoch).0 < stream_span {
                        background_sent += 1;
                    }
                } else if let Some(r) = recs[usize::from(flow)].get_mut(seq as usize) {
                    r.wire = Some((start - epoch).0 as f64);
                }
            }
        }
        Event::Underrun(_) => underruns += 1,
    };
    d.run(&mut source, &mut sink).map_err(|e| format!("keepon station: {e}"))?;
    Ok(KeeponRun { records: recs, background_sent, background_rejected, reported, underruns })
}
