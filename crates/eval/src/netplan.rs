//! `keepon eval network --plan DIR`: a whole network plan replayed on the simulator.
//!
//! **Talkers.** Every talker of the plan runs as itself: the real station (`keepon-core`) and loop
//! (`keepon-nic::driver`) on the simulated NIC, built from its planned runtime config (`stations/NAME.toml`: slot
//! size, ring, class masks, batch, policy, `[schedule] base_time`) with every planned flow at its offset, the
//! example host loop ([`crate::keepon::Host::example`]). Its NIC has an oscillator off by a seeded uniform draw in
//! `±oscillator_ppm` with `wander` (the simulator's model), and every millisecond the station's clock is given the
//! oscillator's exact frequency ([`keepon_nic::sim::Oracle::frequency_ppt`]: an ideal servo's frequency, without
//! its phase pull), so slot starts follow the schedule on network time; the largest departure error this leaves is
//! reported. What a real servo leaves is the **synchronisation error**: an AR(1) process per device
//! ([`crate::dist::Ar1`], σ `talker_sync_sd`, correlation time `sync_tau`) added to every departure of the talker.
//!
//! Why not the simulator's `Oracle` with its phase pull (−0.5 ppm per ns of error, every millisecond): a planned
//! station may post up to a whole ring ahead (`batch = slots − 1`: 2 ms of 1 µs slots), so a correction reaches the
//! wire a ring later while the pull keeps acting on the old error; that loop oscillated by ±2 µs in a first replay
//! of the 20-switch network. A servo on such a station must be slower than its ring's lead.
//!
//! **Switches** (802.1Qbv). A frame whose last bit reached a switch at `t` is ready at its egress port
//! `forwarding_delay` later. Each egress port has one FIFO per traffic class and the plan's gate control list
//! (`switches/NAME.json`, from the base time) read on the switch's own clock, which is off network time by its
//! own AR(1) synchronisation error (σ `switch_sync_sd`). The port starts, among the classes whose head frame's gate
//! is open now and stays open until the frame ends (length-aware), the highest class, when it is free; otherwise it
//! waits for the earliest such instant. Nothing is dropped: a frame that misses its window waits for the next
//! one. A **gate miss** is a frame that, when it is ready at its egress port, finds its class's gate closed or
//! closing before the frame would end: it is listed with the switch, port, stream and instance. Ports without a
//! gate list (no stream planned through them) are always open; a talker's own port is its station.
//!
//! **Latency** of an instance at a listener: its last bit received (true time), counted from its planned first bit
//! (the txtime its talker was given: the plan's departure), as the planner defines it. **Jitter**: the spread
//! (max − min) of a stream's latencies at one listener. A stream passes at a listener when every instance was sent
//! and arrived, the largest latency is within `max_latency` and the jitter within `max_jitter`, with no gate miss.
//!
//! Times inside are integer picoseconds from the plan's base time, as in [`crate::plandir`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use keepon_core::bytes::windows::{ClassWindows, Window, Windows};
use keepon_core::bytes::ByteConfig;
use keepon_core::ephc::ClockAdjust;
use keepon_core::face::StationFace;
use keepon_core::isolation::{ClassId, Ownership};
use keepon_core::station::StationConfig;
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig, NoFrames, Source};
use keepon_nic::sim::{Oracle, Oscillator, SimConfig, SimNic};
use keepon_nic::source::{split_id, FlowSource, FlowSpec, Pattern};
use keepon_nic::Nic;

use crate::dist::{Ar1, Draw};
use crate::keepon::Host;
use crate::plandir::{Gcl, Plan};

/// The devices' imperfections (every value an assumption: *chosen*).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Realism {
    /// Each talker NIC's oscillator is off by a uniform draw in `±oscillator_ppm` (IEEE 802.3 allows ±100 ppm;
    /// boards sit within tens).
    pub oscillator_ppm: f64,
    /// Random walk of that frequency, ppm/√s.
    pub wander: f64,
    /// Residual synchronisation error of a talker (software PTP on keepon's clock), AR(1) σ, ns.
    pub talker_sync_sd: f64,
    /// Residual synchronisation error of a switch's gate clock (hardware PTP), AR(1) σ, ns.
    pub switch_sync_sd: f64,
    /// Correlation time of those errors, ns.
    pub sync_tau: f64,
}

impl Realism {
    /// The defaults: ±20 ppm oscillators wandering 0.01 ppm/√s, talkers synchronised to σ 100 ns (as the case
    /// study's software stations), switches to σ 20 ns, correlation time 1 s.
    pub fn default_chosen() -> Realism {
        Realism { oscillator_ppm: 20.0, wander: 0.01, talker_sync_sd: 100.0, switch_sync_sd: 20.0, sync_tau: 1e9 }
    }

    /// No error at all (exact oscillators, perfect synchronisation): the plan's own arithmetic.
    pub fn ideal() -> Realism {
        Realism { oscillator_ppm: 0.0, wander: 0.0, talker_sync_sd: 0.0, switch_sync_sd: 0.0, sync_tau: 1e9 }
    }
}

/// Parameters of one replay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Seed of every draw.
    pub seed: u64,
    /// Network time replayed (every stream sends `duration / period` instances), ns.
    pub duration_ns: i64,
    /// The devices' imperfections.
    pub realism: Realism,
}

/// What one talker's station produced.
struct Talked {
    sent: Vec<Sent>,
    underruns: u64,
    ppm: f64,
    /// Largest |wire start − txtime| of its frames before the synchronisation error, ns.
    grid_error_ns: f64,
}

/// One frame a talker handed to its station.
#[derive(Clone, Debug, PartialEq)]
struct Sent {
    stream: usize,
    seq: u64,
    /// Its txtime (the planned departure), ps from the base time.
    planned: i64,
    /// True time its first bit left, ps from the base time (with the synchronisation error), if it was sent.
    departed: Option<i64>,
    /// `sent`, or the station's rejection reason.
    outcome: String,
}

/// A frame that found its gate closed (or closing before it would end) when it was ready at an egress port.
#[derive(Clone, Debug, PartialEq)]
pub struct GateMiss {
    /// Switch.
    pub switch: String,
    /// Egress port (interface name).
    pub port: String,
    /// Stream.
    pub stream: String,
    /// Instance (from the start of the replay).
    pub seq: u64,
    /// When it was ready, relative to its planned window's opening on that port (ns; negative: before it).
    pub ready_vs_plan_ns: f64,
    /// What the gate was doing.
    pub why: &'static str,
}

/// One stream at one listener.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamResult {
    /// Stream.
    pub stream: String,
    /// Talker.
    pub talker: String,
    /// Listener.
    pub listener: String,
    /// Switches on its route to this listener.
    pub switches: usize,
    /// Instances its talker was given.
    pub frames: u64,
    /// Instances its station rejected (by reason).
    pub rejected: BTreeMap<String, u64>,
    /// Latencies of the instances that arrived, ns.
    pub latencies_ns: Vec<f64>,
    /// Instances that waited in a switch queue (behind another frame or for a later window).
    pub queued: u64,
    /// Gate misses of this stream (on the way to any listener).
    pub gate_misses: u64,
    /// The plan's latency to this listener, ns.
    pub planned_ns: f64,
    /// The plan's guard, ns: a frame whose devices err by less arrives at most this much after its planned latency.
    pub guard_ns: f64,
    /// Bound, ns.
    pub max_latency_ns: i64,
    /// Bound on the jitter, ns.
    pub max_jitter_ns: i64,
}

impl StreamResult {
    /// Smallest, median and largest latency, ns (`NaN` if nothing arrived).
    pub fn min_median_max(&self) -> [f64; 3] {
        let mut v = self.latencies_ns.clone();
        if v.is_empty() {
            return [f64::NAN; 3];
        }
        v.sort_by(f64::total_cmp);
        [v[0], v[v.len() / 2], v[v.len() - 1]]
    }
    /// Max − min of the latencies, ns.
    pub fn jitter_ns(&self) -> f64 {
        let [lo, _, hi] = self.min_median_max();
        hi - lo
    }
    /// Instances that arrived.
    pub fn delivered(&self) -> u64 {
        self.latencies_ns.len() as u64
    }
    /// Every instance arrived, none later than the plan's latency + guard (its worst case with devices within the
    /// guard).
    pub fn within_planned_worst_case(&self) -> bool {
        let [_, _, hi] = self.min_median_max();
        self.delivered() == self.frames && hi <= self.planned_ns + self.guard_ns
    }
    /// Every instance arrived within the bounds, no gate miss.
    pub fn pass(&self) -> bool {
        let [_, _, hi] = self.min_median_max();
        self.delivered() == self.frames
            && self.gate_misses == 0
            && hi <= self.max_latency_ns as f64
            && self.jitter_ns() <= self.max_jitter_ns as f64
    }
}

/// What a replay found.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// Per (stream, listener), in plan order.
    pub streams: Vec<StreamResult>,
    /// Every gate miss, in time order.
    pub gate_misses: Vec<GateMiss>,
    /// Underruns the talkers' stations reported.
    pub underruns: u64,
    /// Per talker, its oscillator's drawn frequency error, ppm.
    pub oscillators: BTreeMap<String, f64>,
    /// Largest |wire start − txtime| of any frame on its talker's NIC, before the synchronisation error, ns: how well
    /// the stations keep the schedule on their drifting oscillators.
    pub grid_error_ns: f64,
}

/// The frames of every stream of one talker, run on its real station: the slot station, or the byte clock for a
/// talker planned on it (`link.timing = "bytes"`: frames unpadded at their txtimes, inside their class's windows).
fn talk(plan: &Plan, name: &str, p: &Params, index: u64, start: Tai) -> Result<Talked, String> {
    let st = &plan.talkers[name];
    let err = |e: String| format!("station '{name}': {e}");
    let rate = LinkRate::from_bps(st.rate_bps).map_err(|e| err(e.to_string()))?;
    let geometry = SlotGeometry::new(rate, st.slot_bytes).map_err(|e| err(e.to_string()))?;
    let host = Host::example();
    let mut draw = Draw::new(p.seed, 7_000 + index);
    let ppm = draw.uniform(-p.realism.oscillator_ppm, p.realism.oscillator_ppm);
    let mut sim = SimConfig::new(geometry, start);
    sim.seed = p.seed.wrapping_mul(1_000).wrapping_add(index);
    sim.host = host.model;
    sim.oscillator = Oscillator { ppm, wander: p.realism.wander };
    let span = Nanos(p.duration_ns.saturating_add(50_000_000));
    let loop_cfg = LoopConfig { poll_period: host.poll_period, max_duration: span };
    let talker = Talker { plan, name, p, index, start, ppm, span, host };
    match &st.byte_windows {
        None => {
            let cfg = StationConfig {
                geometry,
                ownership: Ownership::new(st.slots, &st.classes).map_err(|e| err(e.to_string()))?,
                batch: st.batch,
                policy: st.policy,
                max_pending: 4096,
                max_advance: Nanos::from_ms(1_000),
                post_latency: Nanos(0),
                base_time: Tai(st.base_time_ns),
                max_filler: keepon_core::time::MAX_SLOT_BYTES,
            };
            let d = Driver::new(SimNic::new(sim), cfg, loop_cfg).map_err(|e| err(e.to_string()))?;
            talker.run(d, |d, t| d.station.cycle_start_at_or_after(t))
        }
        Some((cycle, per_class)) => {
            let classes: Vec<ClassWindows> = st
                .classes
                .iter()
                .zip(per_class)
                .map(|(c, w)| ClassWindows {
                    name: c.name.clone(),
                    windows: w.iter().map(|&(o, l)| Window { offset: Nanos(o), length: Nanos(l) }).collect(),
                })
                .collect();
            let windows =
                Windows::new(Tai(st.base_time_ns), Nanos(*cycle), &classes, rate).map_err(|e| err(e.to_string()))?;
            // As `keepon run` sizes it: posted a batch of slot periods ahead, a ring that holds that in minimum frames.
            let lead = Nanos(i64::try_from(geometry.period().ceil_mul(u64::from(st.batch))).unwrap_or(i64::MAX));
            let per_min = rate.wire_time(keepon_core::time::MIN_FRAME_BYTES);
            let ring = (lead.0 as u128 * u128::from(per_min.den())).div_ceil(u128::from(per_min.num())) + 16;
            let cfg = ByteConfig {
                rate,
                windows: windows.clone(),
                ring: ring.clamp(64, 65_536) as u32,
                max_frame: keepon_core::time::MAX_STD_FRAME_BYTES,
                lead,
                max_pending: 4096,
                max_advance: Nanos::from_ms(1_000),
                post_latency: Nanos(0),
                policy: st.policy,
            };
            let d = Driver::bytes(SimNic::new(sim), cfg, loop_cfg).map_err(|e| err(e.to_string()))?;
            talker.run(d, move |_, t| i64::try_from(windows.cycle_start_at_or_after(t).ceil()).ok().map(Tai))
        }
    }
}

/// One talker's replay, whichever station it runs.
struct Talker<'a> {
    plan: &'a Plan,
    name: &'a str,
    p: &'a Params,
    index: u64,
    start: Tai,
    ppm: f64,
    span: Nanos,
    host: Host,
}

impl Talker<'_> {
    fn run<S: StationFace>(
        self,
        mut d: Driver<SimNic, S>,
        epoch_of: impl FnOnce(&Driver<SimNic, S>, Tai) -> Option<Tai>,
    ) -> Result<Talked, String> {
        let Talker { plan, name, p, index, start, ppm, span, host } = self;
        let st = &plan.talkers[name];
        let err = |e: String| format!("station '{name}': {e}");
        // The servo knows the oscillator's frequency from the start (a slave already locked), and follows its wander.
        let mut rate = Oracle::frequency_ppt(&d.nic);
        d.station.adjust_clock(ClockAdjust::Rate(rate)).map_err(|e| err(format!("{e:?}")))?;
        d.bring_up(&mut |_| {}).map_err(|e| err(e.to_string()))?;
        let epoch = epoch_of(&d, start + Nanos::from_ms(5)).ok_or_else(|| err("no epoch".into()))?;
        let mine: Vec<usize> = (0..plan.streams.len()).filter(|&i| plan.streams[i].talker == name).collect();
        let mut flows = Vec::new();
        for (k, &i) in mine.iter().enumerate() {
            let s = &plan.streams[i];
            let fl = st.flows.iter().find(|f| f.name == s.name).ok_or_else(|| err(format!("no flow '{}'", s.name)))?;
            flows.push(FlowSpec {
                flow: k as u16,
                class: st
                    .classes
                    .iter()
                    .position(|c| c.name == fl.class)
                    .map(|i| ClassId(i as u8))
                    .ok_or_else(|| err(format!("no class '{}'", fl.class)))?,
                pattern: Pattern::Periodic { offset: Nanos(fl.offset_ns), period: Nanos(fl.period_ns) },
                frame_bytes: fl.frame_bytes,
                count: (p.duration_ns / fl.period_ns).max(1) as u64,
                lead: Nanos(fl.lead_ns),
                dst: [2, 0, 0, 0, 0, 2],
                src: [2, 0, 0, 0, 0, 1],
                rtag: false,
            });
        }
        let base = plan.base_time_ns;
        let mut sent: Vec<Vec<Sent>> = flows
            .iter()
            .zip(&mine)
            .map(|(f, &i)| {
                (0..f.count)
                    .map(|seq| Sent {
                        stream: i,
                        seq,
                        planned: (f.time_of(epoch, seq).0 - base) * 1000,
                        departed: None,
                        outcome: "no-outcome".into(),
                    })
                    .collect()
            })
            .collect();
        let mut source = FlowSource::new(flows, epoch);
        let mut nothing = NoFrames;
        let mut next_steer = d.nic.now();
        let mut underruns = 0u64;
        let limit = d.nic.now() + span;
        loop {
            let done = source.next_due().is_none();
            if d.nic.now() > limit {
                return Err(err("the run did not finish within its time bound".into()));
            }
            let src: &mut dyn Source = if done { &mut nothing } else { &mut source };
            let mut sink = |e: Event| match e {
                Event::Outcome(o) => {
                    let (f, seq) = split_id(o.id);
                    if let Some(r) = sent.get_mut(usize::from(f)).and_then(|v| v.get_mut(seq as usize)) {
                        r.outcome = match o.result {
                            Ok(_) => "sent".into(),
                            Err(why) => why.as_str().into(),
                        };
                    }
                }
                Event::Wire(w) => {
                    if let (Some(id), Some(t)) = (w.frame, w.start) {
                        let (f, seq) = split_id(id);
                        if let Some(r) = sent.get_mut(usize::from(f)).and_then(|v| v.get_mut(seq as usize)) {
                            r.departed = Some((t.0 - base) * 1000);
                        }
                    }
                }
                Event::Underrun(_) => underruns += 1,
            };
            d.step(src, &mut sink).map_err(|e| err(e.to_string()))?;
            if d.nic.now() >= next_steer {
                next_steer = d.nic.now() + Nanos::from_ms(1);
                let now = Oracle::frequency_ppt(&d.nic);
                if now != rate && d.station.adjust_clock(ClockAdjust::Rate(now)).is_ok() {
                    rate = now;
                }
            }
            if done && d.station.in_flight() == 0 {
                d.station.shutdown();
                if d.station.drained() && d.nic.unfinished() == 0 {
                    break;
                }
            }
            d.nic.wait(host.poll_period);
        }
        // The residual synchronisation error, one process per talker along its departures.
        let mut all: Vec<Sent> = sent.into_iter().flatten().collect();
        all.sort_by_key(|s| (s.departed.unwrap_or(i64::MAX), s.stream, s.seq));
        let mut draw = Draw::new(p.seed, 8_000 + index);
        let mut e = Ar1::new(p.realism.talker_sync_sd, p.realism.sync_tau, &mut draw);
        let mut last: Option<i64> = None;
        let mut grid_error_ns: f64 = 0.0;
        for s in &mut all {
            if s.outcome != "sent" {
                s.departed = None;
            }
            if let Some(t) = s.departed {
                grid_error_ns = grid_error_ns.max((t - s.planned).abs() as f64 / 1e3);
                let x = e.step(last.map_or(0.0, |l| (t - l) as f64 / 1e3), &mut draw);
                last = Some(t);
                s.departed = Some(t + (x * 1e3).round() as i64);
            }
        }
        Ok(Talked { sent: all, underruns, ppm, grid_error_ns })
    }
}

/// A copy of an instance on its way through the tree.
struct Copy {
    stream: usize,
    seq: u64,
    planned: i64,
}

/// A switch's egress port in the replay.
struct Port {
    switch: usize,
    name: String,
    gcl: Option<Gcl>,
    byte_ps: i64,
    delay_ps: i64,
    /// Per traffic class: (ready time, copy, hop index in its stream).
    queues: [VecDeque<(i64, usize, usize)>; 8],
    busy_until: i64,
    wake: Option<i64>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A copy ready at a port: (port, copy, hop).
    Ready(usize, usize, usize),
    /// A port may start a frame.
    Wake(usize),
}

/// The switches' clocks: one AR(1) error per switch, read in time order.
struct SwitchClocks {
    errors: Vec<(Ar1, Draw, Option<i64>, i64)>,
}

impl SwitchClocks {
    /// The switch's clock error at true time `t`, ps (its clock reads `t + error`).
    fn error(&mut self, sw: usize, t: i64, tau: f64) -> i64 {
        let (ar, draw, last, x) = &mut self.errors[sw];
        if *last != Some(t) {
            let dt = last.map_or(0.0, |l| (t - l).max(0) as f64 / 1e3);
            *x = (ar.step(dt.min(tau * 10.0), draw) * 1e3).round() as i64;
            *last = Some(t);
        }
        *x
    }
}

/// Replay `plan` as `p` says.
pub fn run(plan: &Plan, p: &Params, progress: &mut dyn FnMut(&str)) -> Result<Replay, String> {
    if p.duration_ns <= 0 {
        return Err("the replay's duration must be positive".into());
    }
    let longest = plan.streams.iter().map(|s| s.period_ns).max().unwrap_or(1);
    if p.duration_ns < longest {
        return Err(format!("duration {} ns is shorter than the longest period ({longest} ns)", p.duration_ns));
    }
    // Every station's simulation starts at the same network time, a whole number of seconds after the base time.
    let start = Tai(plan.base_time_ns + 1_000_000_000);
    let mut sent: Vec<Sent> = Vec::new();
    let mut underruns = 0;
    let mut oscillators = BTreeMap::new();
    let mut grid_error_ns: f64 = 0.0;
    for (k, name) in plan.talkers.keys().enumerate() {
        progress(&format!("network: talker {name} ({} of {}) on the simulated NIC", k + 1, plan.talkers.len()));
        let t = talk(plan, name, p, k as u64, start)?;
        sent.extend(t.sent);
        underruns += t.underruns;
        oscillators.insert(name.clone(), t.ppm);
        grid_error_ns = grid_error_ns.max(t.grid_error_ns);
    }
    progress(&format!("network: {} frames through {} switches", sent.len(), plan.switches.len()));
    let (arrivals, misses, queued) = forward(plan, p, &sent);
    let mut out = Vec::new();
    for (i, s) in plan.streams.iter().enumerate() {
        let mut rejected: BTreeMap<String, u64> = BTreeMap::new();
        let mine: Vec<&Sent> = sent.iter().filter(|x| x.stream == i).collect();
        for x in &mine {
            if x.outcome != "sent" {
                *rejected.entry(x.outcome.clone()).or_default() += 1;
            }
        }
        let misses_here = misses.iter().filter(|m| m.stream == s.name).count() as u64;
        for l in &s.listeners {
            let latencies_ns: Vec<f64> =
                arrivals.get(&(i, l.clone())).map_or_else(Vec::new, |v| v.iter().map(|&ps| ps as f64 / 1e3).collect());
            let switches = route_to(plan, i, l).len().saturating_sub(2);
            out.push(StreamResult {
                stream: s.name.clone(),
                talker: s.talker.clone(),
                listener: l.clone(),
                switches,
                frames: mine.len() as u64,
                rejected: rejected.clone(),
                latencies_ns,
                queued: queued.get(&i).copied().unwrap_or(0),
                gate_misses: misses_here,
                planned_ns: s.latency_ps.get(l).map_or(f64::NAN, |&x| x as f64 / 1e3),
                guard_ns: plan.guard_ps as f64 / 1e3,
                max_latency_ns: s.max_latency_ns,
                max_jitter_ns: s.max_jitter_ns,
            });
        }
    }
    Ok(Replay { streams: out, gate_misses: misses, underruns, oscillators, grid_error_ns })
}

/// The nodes from stream `i`'s talker to `listener` along its tree.
fn route_to(plan: &Plan, i: usize, listener: &str) -> Vec<String> {
    let s = &plan.streams[i];
    let mut path = vec![listener.to_string()];
    while path.last() != Some(&s.talker) {
        match s.hops.iter().find(|(_, v)| Some(v) == path.last()) {
            Some((u, _)) => path.push(u.clone()),
            None => break,
        }
    }
    path.reverse();
    path
}

type Arrivals = HashMap<(usize, String), Vec<i64>>;

/// Send every departed frame through the switches: latencies per (stream, listener), gate misses, and how many
/// instances of each stream waited in a queue.
fn forward(plan: &Plan, p: &Params, sent: &[Sent]) -> (Arrivals, Vec<GateMiss>, HashMap<usize, u64>) {
    let sw_names: Vec<&String> = plan.switches.keys().collect();
    let sw_index: HashMap<&str, usize> = sw_names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    // Ports: every switch egress some stream leaves by.
    let mut ports: Vec<Port> = Vec::new();
    let mut port_of: HashMap<(String, String), usize> = HashMap::new();
    // Per stream, per hop: its port (None: the talker's own link), the link's byte time and delay.
    let mut hop_port: Vec<Vec<Option<usize>>> = Vec::new();
    for s in &plan.streams {
        let mut v = Vec::new();
        for (u, w) in &s.hops {
            let Some(&sw) = sw_index.get(u.as_str()) else {
                v.push(None);
                continue;
            };
            let key = (u.clone(), w.clone());
            let idx = *port_of.entry(key).or_insert_with(|| {
                let link = plan.link(u, w).expect("checked when read");
                let gate = plan.switches[u].gates.get(w).cloned();
                ports.push(Port {
                    switch: sw,
                    name: gate.as_ref().map_or_else(|| link.port_of(u).to_string(), |g| g.0.clone()),
                    gcl: gate.map(|g| g.1),
                    byte_ps: link.byte_ps(),
                    delay_ps: link.delay_ps,
                    queues: Default::default(),
                    busy_until: i64::MIN,
                    wake: None,
                });
                ports.len() - 1
            });
            v.push(Some(idx));
        }
        hop_port.push(v);
    }
    let mut clocks = SwitchClocks {
        errors: (0..sw_names.len())
            .map(|k| {
                let mut d = Draw::new(p.seed, 9_000 + k as u64);
                (Ar1::new(p.realism.switch_sync_sd, p.realism.sync_tau, &mut d), d, None, 0)
            })
            .collect(),
    };
    let mut copies: Vec<Copy> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(i64, Ev, u64)>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut arrivals: Arrivals = HashMap::new();
    let mut misses = Vec::new();
    let mut queued_seen: std::collections::HashSet<(usize, u64)> = Default::default();
    // A copy's last bit reached node `v` at `t` by hop `h` of its stream: forward it or deliver it.
    let reach = |copy: usize,
                 h: usize,
                 t: i64,
                 copies: &Vec<Copy>,
                 heap: &mut BinaryHeap<Reverse<(i64, Ev, u64)>>,
                 order: &mut u64,
                 arrivals: &mut Arrivals| {
        let c = &copies[copy];
        let s = &plan.streams[c.stream];
        let v = &s.hops[h].1;
        if let Some(sw) = plan.switches.get(v) {
            for (k, (u, _)) in s.hops.iter().enumerate() {
                if u == v {
                    if let Some(port) = hop_port[c.stream][k] {
                        *order += 1;
                        heap.push(Reverse((t + sw.forwarding_delay_ps, Ev::Ready(port, copy, k), *order)));
                    }
                }
            }
        } else {
            arrivals.entry((c.stream, v.clone())).or_default().push(t - c.planned);
        }
    };
    for x in sent {
        let Some(t) = x.departed else { continue };
        let s = &plan.streams[x.stream];
        copies.push(Copy { stream: x.stream, seq: x.seq, planned: x.planned });
        let copy = copies.len() - 1;
        // The talker's own link: hop 0, not gated (the station is its gate).
        let (u, w) = &s.hops[0];
        let link = plan.link(u, w).expect("checked when read");
        reach(copy, 0, t + link.wire_ps(s.wire_bytes) + link.delay_ps, &copies, &mut heap, &mut order, &mut arrivals);
    }
    while let Some(Reverse((t, ev, _))) = heap.pop() {
        match ev {
            Ev::Ready(port, copy, h) => {
                let c = &copies[copy];
                let s = &plan.streams[c.stream];
                let pt = &mut ports[port];
                let tx = (i64::from(s.wire_bytes) + 20) * pt.byte_ps;
                // A frame planned to wait in the queue finds its gate closed by design: it is judged when it starts.
                let waits = s.hop_plan.get(h).copied().flatten().is_some_and(|(_, w)| w);
                if let (Some(g), false) = (&pt.gcl, waits) {
                    let local = t + clocks.error(pt.switch, t, p.realism.sync_tau);
                    if !g.open_through(s.traffic_class, local, tx) {
                        let why = if g.open_through(s.traffic_class, local, 1) {
                            "gate closes before the frame ends"
                        } else {
                            "gate closed"
                        };
                        let planned_open = planned_hop_start(plan, c.stream, h) + c.planned - plan.guard_ps;
                        misses.push(GateMiss {
                            switch: sw_names[pt.switch].clone(),
                            port: pt.name.clone(),
                            stream: s.name.clone(),
                            seq: c.seq,
                            ready_vs_plan_ns: (t - planned_open) as f64 / 1e3,
                            why,
                        });
                    }
                }
                pt.queues[usize::from(s.traffic_class)].push_back((t, copy, h));
                if pt.wake.is_none_or(|w| t < w) {
                    pt.wake = Some(t);
                    order += 1;
                    heap.push(Reverse((t, Ev::Wake(port), order)));
                }
            }
            Ev::Wake(port) => {
                let pt = &mut ports[port];
                if pt.wake != Some(t) {
                    continue; // superseded by an earlier wake
                }
                pt.wake = None;
                if t < pt.busy_until {
                    pt.wake = Some(pt.busy_until);
                    order += 1;
                    heap.push(Reverse((pt.busy_until, Ev::Wake(port), order)));
                    continue;
                }
                let local = match pt.gcl {
                    Some(_) => t + clocks.error(pt.switch, t, p.realism.sync_tau),
                    None => t,
                };
                let mut next: Option<i64> = None;
                let mut chosen = None;
                for tc in (0..8u8).rev() {
                    let Some(&(ready, copy, h)) = pt.queues[usize::from(tc)].front() else { continue };
                    let tx = (i64::from(plan.streams[copies[copy].stream].wire_bytes) + 20) * pt.byte_ps;
                    match &pt.gcl {
                        None => {
                            chosen = Some((tc, ready, copy, h, tx));
                            break;
                        }
                        Some(g) if g.open_through(tc, local, tx) => {
                            chosen = Some((tc, ready, copy, h, tx));
                            break;
                        }
                        Some(g) => {
                            if let Some(at) = g.next_fit(tc, local, tx) {
                                let at = at - (local - t);
                                next = Some(next.map_or(at, |n: i64| n.min(at)));
                            }
                        }
                    }
                }
                if let Some((tc, ready, copy, h, tx)) = chosen {
                    pt.queues[usize::from(tc)].pop_front();
                    pt.busy_until = t + tx;
                    let c = &copies[copy];
                    let s = &plan.streams[c.stream];
                    if let Some((start, true)) = s.hop_plan.get(h).copied().flatten() {
                        // A planned wait: the frame must start in its planned window (its own length either side of
                        // the planned start, by the switch's clock), not in a later one.
                        let off = local - (start + c.planned);
                        if off.abs() > tx {
                            misses.push(GateMiss {
                                switch: sw_names[pt.switch].clone(),
                                port: pt.name.clone(),
                                stream: s.name.clone(),
                                seq: c.seq,
                                ready_vs_plan_ns: (ready - (start + c.planned)) as f64 / 1e3,
                                why: "started outside its planned window after a planned wait",
                            });
                        }
                    }
                    if t > ready {
                        queued_seen.insert((copies[copy].stream, copies[copy].seq));
                    }
                    let arrive = t + tx + pt.delay_ps;
                    pt.wake = Some(pt.busy_until);
                    order += 1;
                    heap.push(Reverse((pt.busy_until, Ev::Wake(port), order)));
                    reach(copy, h, arrive, &copies, &mut heap, &mut order, &mut arrivals);
                } else if let Some(n) = next {
                    let n = n.max(t + 1);
                    pt.wake = Some(n);
                    order += 1;
                    heap.push(Reverse((n, Ev::Wake(port), order)));
                }
            }
        }
    }
    let mut queued: HashMap<usize, u64> = HashMap::new();
    for (s, _) in queued_seen {
        *queued.entry(s).or_default() += 1;
    }
    (arrivals, misses, queued)
}

/// The planned start of hop `h` of stream `i` relative to its departure, ps: the plan's, or where the plan gives
/// no hop times, no-wait arithmetic on the plan's topology.
fn planned_hop_start(plan: &Plan, i: usize, h: usize) -> i64 {
    let s = &plan.streams[i];
    if let Some((start, _)) = s.hop_plan.get(h).copied().flatten() {
        return start;
    }
    let mut t = 0;
    let mut node = s.hops[h].0.clone();
    while node != s.talker {
        let Some((u, v)) = s.hops.iter().find(|(_, v)| *v == node) else { break };
        let link = plan.link(u, v).expect("checked when read");
        t += link.wire_ps(s.wire_bytes) + link.delay_ps + plan.switches.get(v).map_or(0, |sw| sw.forwarding_delay_ps);
        node = u.clone();
    }
    t
}
