//! A simulated NIC and host, in virtual time.
//!
//! **The NIC.** It fetches descriptors `fetch_ahead` slots ahead of the wire (the driver sees a slot as
//! consumed once fetched, as with a real consumer index). Posted slots leave back to back at line rate: a slot starts at
//! `max(end of the previous slot, time its post lands)` and lasts exactly its length on the wire (its bytes, FCS,
//! preamble and gap: `δ` for a slot of the nominal size). While the producer stays ahead, slot `k` therefore
//! starts at exactly `T0 + (bytes before it)·8/rate`. Times are kept in ticks of `1/den` ns (where a byte takes
//! `num/den` ns), so nothing is ever rounded on the wire. If a post lands after the previous slot ended,
//! the wire was idle: a real gap, reported through [`NicObservation::gaps`] as soon as the post makes it
//! certain (standing in for hardware TX timestamps, which a real backend would read after the fact).
//!
//! The first post brings the link up at exactly `t0`; the host starts `post_latency + poll_overhead` before it.
//!
//! **The host.** One poll-loop iteration costs `poll_overhead + per_slot·(slots reclaimed + posted)`; a post
//! lands `post_latency + U[0, post_jitter]` after that work (doorbell, DMA fetch). Between iterations the loop
//! sleeps: `0` for a busy poll, otherwise `period + wake_latency + wake_slack·period` (the shape of
//! `usleep_range` overshoot) and then spends `wake_cost` of CPU waking, plus `U[0, jitter]`, plus with probability `spike_ppm/10⁶` a preemption of
//! `spike`. Every draw comes from one ChaCha8 stream seeded by `seed`: a run is a pure function of its
//! configuration.
//!
//! **The oscillator** ([`Oscillator`]) sets the byte time: the NIC's clock runs fast by `ppm` (plus a seeded
//! random walk of `wander` ppm/√s, one step per millisecond of wire time), so a slot lasts `δ/(1 + ppm·10⁻⁶)`
//! of true (network) time. Slot lengths are whole ticks with the remainder carried, so the grid never drifts from the
//! model. The default (0 ppm, no wander) is the exact grid above and draws nothing from the host's stream.
//!
//! **The receiver** timestamps each real frame's start plus `rx_delay`, floored to a multiple of `rx_quantum`
//! (8 ns like an Intel i210).
//!
//! **Faults** ([`Faults`], off by default): stalled DMA fetches that leave the wire idle before a slot (revealed
//! to the host only by that slot's completion, as a real NIC's TX timestamps would), and late completion
//! write-backs that hold back the consumed count the host sees. See [`crate::faults`].

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use keepon_core::outcome::FrameId;
use keepon_core::ring::{SlotKind, SlotView};
use keepon_core::station::Gap;
use keepon_core::time::{Nanos, SlotGeometry, Tai};

use crate::faults::{FaultDraws, FaultStats, Faults};
use crate::{Nic, NicError, NicObservation, Timing, WireEvent};

/// The host's poll-loop model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostModel {
    /// Fixed cost of one iteration.
    pub poll_overhead: Nanos,
    /// Cost per slot reclaimed or posted.
    pub per_slot: Nanos,
    /// Fixed oversleep of a non-zero sleep.
    pub wake_latency: Nanos,
    /// CPU time a loop spends after waking from a sleep before its work can start (the core leaving its idle
    /// state, caches and TLB cold): busy, and part of the iteration's length. A busy poll never pays it, which is
    /// why one model fits both a busy-polling loop's throughput and a sleeping loop's CPU time.
    pub wake_cost: Nanos,
    /// Oversleep as parts per million of the requested period.
    pub wake_slack_ppm: u32,
    /// Uniform extra delay per iteration, `[0, jitter]` (0 = off): the poll thread's scheduling latency — within a
    /// few µs on a real-time kernel with an isolated core (the isochron measurements the Linux TSN overview
    /// reports: sleep-based sending within 3.5 µs), far more on a loaded general-purpose kernel.
    pub jitter: Nanos,
    /// Probability of a preemption per iteration, parts per million (0 = off): the poll thread losing its core
    /// for `spike` to an interrupt storm, a higher-priority thread or firmware.
    pub spike_ppm: u32,
    /// Length of a preemption.
    pub spike: Nanos,
}

/// One poll-loop iteration under a [`HostModel`]: how long it lasted and how much of that the core was busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Iteration {
    /// From the start of its work to the start of the next iteration's (at least 1 ns).
    pub length: Nanos,
    /// CPU time: the work and the wake-up's cost, or all of `length` for a busy poll (it never yields the core).
    pub busy: Nanos,
}

impl HostModel {
    /// An iteration that did `work` and then sleeps `period` (0 = busy poll): the sleep overshoots by
    /// `wake_latency + wake_slack·period` and the core then spends `wake_cost` busy before the next iteration's
    /// work, then `U[0, jitter]` and, with probability `spike_ppm/10⁶`, a `spike`
    /// are added (in that order, drawn from `rng`). Every poll loop on the simulator — the station's TX loop
    /// ([`SimNic`]) and the dual clock's RX loop ([`crate::rxring`]) — runs on this one model.
    pub fn iteration(&self, work: Nanos, period: Nanos, rng: &mut impl Rng) -> Iteration {
        let mut d = work.0;
        if period.0 > 0 {
            d += period.0
                + self.wake_latency.0
                + period.0 * i64::from(self.wake_slack_ppm) / 1_000_000
                + self.wake_cost.0;
        }
        if self.jitter.0 > 0 {
            d += rng.gen_range(0..=self.jitter.0);
        }
        if self.spike_ppm > 0 && rng.gen_range(0..1_000_000u32) < self.spike_ppm {
            d += self.spike.0;
        }
        let length = Nanos(d.max(1));
        Iteration { length, busy: if period.0 > 0 { work + self.wake_cost } else { length } }
    }
}

impl Default for HostModel {
    fn default() -> Self {
        HostModel {
            poll_overhead: Nanos(500),
            per_slot: Nanos(5),
            wake_latency: Nanos(0),
            wake_cost: Nanos(0),
            wake_slack_ppm: 0,
            jitter: Nanos(0),
            spike_ppm: 0,
            spike: Nanos(0),
        }
    }
}

/// The NIC's oscillator error, relative to true (virtual) time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Oscillator {
    /// Initial frequency error, ppm (positive: slots are shorter, the NIC runs fast).
    pub ppm: f64,
    /// Random-walk wander of the frequency, ppm per √s.
    pub wander: f64,
}

/// Configuration of the simulated NIC and host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimConfig {
    /// Line rate and slot size.
    pub geometry: SlotGeometry,
    /// Wire start of slot 0 when the first post lands on time.
    pub t0: Tai,
    /// Seed of every random draw.
    pub seed: u64,
    /// Poll loop costs and jitter.
    pub host: HostModel,
    /// Delay from the end of the poll's work to the NIC being able to start a posted slot.
    pub post_latency: Nanos,
    /// Uniform extra post latency `[0, post_jitter]`.
    pub post_jitter: Nanos,
    /// Receiver timestamp resolution.
    pub rx_quantum: Nanos,
    /// Wire and receiver latency added to receive timestamps.
    pub rx_delay: Nanos,
    /// Report fillers in [`Nic::drain_wire`] too (for a pcap with fillers).
    pub keep_fillers: bool,
    /// Descriptors the NIC fetches ahead of the slot on the wire: slot `j` is fetched (and seen by the driver
    /// as consumed) once it is posted and slot `j − fetch_ahead` has started. 0 = fetched as it starts.
    pub fetch_ahead: u32,
    /// The NIC's oscillator (default: exact).
    pub oscillator: Oscillator,
    /// Longest frame the NIC sends (L2 with FCS; default 1518, or the slot size if larger).
    pub max_frame: u32,
    /// The NIC's own failure modes (default: off).
    pub faults: Faults,
}

impl SimConfig {
    /// Defaults for a geometry: busy-ish host, 1 µs post latency, i210-like receiver.
    pub fn new(geometry: SlotGeometry, t0: Tai) -> SimConfig {
        SimConfig {
            geometry,
            t0,
            seed: 1,
            host: HostModel::default(),
            post_latency: Nanos(1_000),
            post_jitter: Nanos(0),
            rx_quantum: Nanos(8),
            rx_delay: Nanos(0),
            keep_fillers: false,
            fetch_ahead: 1,
            oscillator: Oscillator::default(),
            max_frame: geometry.slot_bytes().max(keepon_core::time::MAX_STD_FRAME_BYTES),
            faults: Faults::OFF,
        }
    }
}

#[derive(Debug)]
struct InFlight {
    start: u128,
    /// When the driver sees the slot consumed: the NIC fetched its descriptor then, or (a late completion
    /// write-back) reported it then. Never decreases along the ring.
    visible: u128,
    /// Idle wire time just before this slot, ticks.
    idle_before: u128,
    /// Length of this slot on the wire, ticks.
    dur: u128,
    frame: Option<FrameId>,
    bytes: Option<Vec<u8>>,
}

/// Wire statistics of a simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    /// Slots that left the wire.
    pub slots: u64,
    /// Real frames among them.
    pub real: u64,
    /// Gaps (idle periods between slots).
    pub gaps: u64,
    /// Total idle time between the first slot's start and the last slot's end, ns.
    pub idle_ns: u128,
    /// Wire time from the first slot's start to the last finished slot's end, ns.
    pub span_ns: u128,
}

impl WireStats {
    /// Fraction of the span the wire was busy, in parts per million.
    pub fn busy_ppm(&self) -> u64 {
        if self.span_ns == 0 {
            return 0;
        }
        ((self.span_ns - self.idle_ns.min(self.span_ns)) * 1_000_000 / self.span_ns) as u64
    }
}

/// The simulated NIC, its host and its receiver.
pub struct SimNic {
    cfg: SimConfig,
    rng: ChaCha8Rng,
    /// Ticks per ns (`den`) and ticks per byte on the wire (`num`).
    den: u128,
    num: u128,
    now: Tai,
    /// Slots whose transmission has completed (popped from `inflight`).
    completed: u64,
    /// Slots the NIC has fetched: what the driver sees as consumed.
    consumed: u64,
    /// Slots posted.
    posted: u64,
    /// End of the last scheduled slot, ticks.
    busy_until: Option<u128>,
    first_start: Option<u128>,
    inflight: VecDeque<InFlight>,
    /// Gaps in wire order, each with the time (ticks) from which the host can know it: at once for a gap the
    /// host's own late post made, at the slot's completion for one a stalled fetch made.
    gaps: VecDeque<(u128, Gap)>,
    work_slots: u64,
    /// Host CPU time the poll loop used: each iteration's work, plus the whole iteration when it busy-polls.
    host_busy: Nanos,
    wire: Vec<WireEvent>,
    stats: WireStats,
    idle_ticks: u128,
    /// The oscillator's error now, parts per trillion; the slot-length remainder; its own random stream; the
    /// wire time of its next wander step, ticks.
    osc_ppt: i128,
    osc_rem: u128,
    osc_rng: ChaCha8Rng,
    osc_next: Option<u128>,
    faults: FaultDraws,
    /// When the last posted slot becomes visible as consumed, ticks.
    last_visible: u128,
}

impl SimNic {
    /// A simulated NIC whose first post lands exactly at `t0` if the host keeps to its model.
    pub fn new(cfg: SimConfig) -> SimNic {
        let p = cfg.geometry.rate().byte_time();
        let mut nic = SimNic {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            den: u128::from(p.den()),
            num: u128::from(p.num()),
            now: cfg.t0,
            completed: 0,
            consumed: 0,
            posted: 0,
            busy_until: None,
            first_start: None,
            inflight: VecDeque::new(),
            gaps: VecDeque::new(),
            work_slots: 0,
            host_busy: Nanos(0),
            wire: Vec::new(),
            stats: WireStats::default(),
            idle_ticks: 0,
            osc_ppt: (cfg.oscillator.ppm * 1e6).round() as i128,
            osc_rem: 0,
            osc_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x05c1_11a7_0a5c_111a),
            osc_next: None,
            faults: FaultDraws::new(cfg.faults, cfg.seed),
            last_visible: 0,
            cfg,
        };
        // Start the host early enough that the first post lands at t0.
        nic.now = cfg.t0 - cfg.post_latency - cfg.host.poll_overhead;
        nic
    }

    /// The oscillator's frequency error now, ppm.
    pub fn oscillator_ppm(&self) -> f64 {
        self.osc_ppt as f64 / 1e6
    }

    /// The length of the next slot, `wire_bytes` long (L2, FCS, preamble and gap), starting at `start` (ticks):
    /// `wire_bytes·byte/(1 + ppt·10⁻¹²)`, remainder carried.
    fn slot_ticks(&mut self, start: u128, wire_bytes: u128) -> u128 {
        let nominal = wire_bytes * self.num;
        if self.cfg.oscillator.wander > 0.0 {
            let ms = 1_000_000 * self.den;
            let next = *self.osc_next.get_or_insert(start + ms);
            if start >= next {
                // Sum of 12 uniforms − 6: a seeded, platform-independent, approximately normal draw.
                let z: f64 = (0..12).map(|_| self.osc_rng.gen::<f64>()).sum::<f64>() - 6.0;
                self.osc_ppt += (self.cfg.oscillator.wander * 1e-3f64.sqrt() * z * 1e6).round() as i128;
                self.osc_next = Some(next + ms);
            }
        }
        if self.osc_ppt == 0 && self.osc_rem == 0 {
            return nominal;
        }
        let per = (1_000_000_000_000i128 + self.osc_ppt).max(1) as u128;
        let total = nominal * 1_000_000_000_000 + self.osc_rem;
        self.osc_rem = total % per;
        total / per
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Jump the host clock forward to `t` (a host that slept longer than its model, e.g. a simulator kept
    /// in step with the wall clock). Never moves it back.
    pub fn advance_to(&mut self, t: Tai) {
        if t > self.now {
            self.now = t;
            self.work_slots = 0;
        }
    }

    /// The slots that finished on the wire by `t` and that the driver has not been told of yet (its next
    /// observation reports them), in wire order, each as (its place in the NIC's wire order, the same as a wire
    /// event's `nic_slot`; its start; its bytes, `None` for a filler): what a receiver at the far end has that
    /// this NIC's driver does not know yet. A two-station harness's receiver takes these between the wire events
    /// the driver reports at its polls.
    pub fn finished_unreported(&self, t: Tai) -> impl Iterator<Item = (u64, Tai, Option<&[u8]>)> + '_ {
        let t = self.to_ticks(t);
        self.inflight
            .iter()
            .take_while(move |f| f.start + f.dur <= t)
            .enumerate()
            .map(|(j, f)| (self.completed + j as u64, self.floor_ns(f.start), f.bytes.as_deref()))
    }

    /// CPU time the host's poll loop has used so far (simulated): each iteration's work (`poll_overhead +
    /// per_slot·slots`), or the whole iteration when it busy-polls. Divided by the elapsed time it is the poll
    /// core's utilisation, as `mpstat` would show it.
    pub fn host_busy(&self) -> Nanos {
        self.host_busy
    }

    /// What the injected faults did so far (all zero while they are off).
    pub fn fault_stats(&self) -> FaultStats {
        self.faults.stats
    }

    /// Wire statistics so far.
    pub fn stats(&self) -> WireStats {
        let mut s = self.stats;
        s.idle_ns = self.idle_ticks / self.den;
        s
    }

    fn to_ticks(&self, t: Tai) -> u128 {
        // Virtual times are after 1970 in every configuration we accept.
        u128::from(t.0.max(0) as u64) * self.den
    }

    /// A duration in ticks (negative durations are 0).
    fn ticks(&self, d: Nanos) -> u128 {
        u128::from(d.0.max(0) as u64) * self.den
    }

    fn floor_ns(&self, ticks: u128) -> Tai {
        Tai((ticks / self.den) as i64)
    }

    fn uniform(&mut self, max: Nanos) -> i64 {
        if max.0 <= 0 {
            0
        } else {
            self.rng.gen_range(0..=max.0)
        }
    }

    fn work(&self) -> Nanos {
        Nanos(self.cfg.host.poll_overhead.0 + self.cfg.host.per_slot.0 * self.work_slots as i64)
    }
}

impl Nic for SimNic {
    fn describe(&self) -> String {
        format!(
            "sim: {} link, {} B slots (δ = {}), post latency {} ns, seed {}",
            self.cfg.geometry.rate(),
            self.cfg.geometry.slot_bytes(),
            self.cfg.geometry.period(),
            self.cfg.post_latency.0,
            self.cfg.seed
        )
    }

    fn timing(&self) -> Timing {
        Timing::Simulated
    }

    fn observe(&mut self) -> Result<NicObservation, NicError> {
        let now_t = self.to_ticks(self.now);
        // Fetched (and reported) descriptors count as consumed.
        while let Some(f) = self.inflight.get((self.consumed - self.completed) as usize) {
            if f.visible > now_t {
                break;
            }
            self.consumed += 1;
            self.work_slots += 1;
        }
        // Finished slots leave the wire (and reach the receiver).
        while let Some(f) = self.inflight.front() {
            if f.start + f.dur > now_t || self.completed >= self.consumed {
                break;
            }
            let Some(f) = self.inflight.pop_front() else { break };
            let nic_slot = self.completed;
            self.completed += 1;
            self.stats.slots += 1;
            self.idle_ticks += f.idle_before;
            self.stats.span_ns = (f.start + f.dur - self.first_start.unwrap_or(f.start)) / self.den;
            if f.frame.is_some() {
                self.stats.real += 1;
            }
            if f.frame.is_some() || self.cfg.keep_fillers {
                let start = self.floor_ns(f.start);
                let rx_raw = start.0 + self.cfg.rx_delay.0;
                let q = self.cfg.rx_quantum.0.max(1);
                let rx = Tai(rx_raw - rx_raw.rem_euclid(q));
                self.wire.push(WireEvent {
                    nic_slot,
                    start: Some(start),
                    rx: f.frame.map(|_| rx),
                    frame: f.frame,
                    bytes: f.bytes,
                    released: None,
                    stamped: false,
                    released_ephc: None,
                    ephc: None,
                    grid: None,
                    locked: false,
                });
            }
        }
        // Gaps are reported as soon as the host can know them, in wire order: at once when a post makes them
        // certain; at the slot's completion (its TX timestamp) when a stalled fetch made them.
        let mut gaps = Vec::new();
        while self.gaps.front().is_some_and(|(known, _)| *known <= now_t) {
            if let Some((_, g)) = self.gaps.pop_front() {
                gaps.push(g);
            }
        }
        Ok(NicObservation { consumed: self.consumed, now: self.now, gaps })
    }

    fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError> {
        let mut first = true;
        let mut avail = 0;
        for s in slots {
            self.work_slots += 1;
            if first {
                first = false;
                let lat = self.cfg.post_latency + Nanos(self.uniform(self.cfg.post_jitter));
                avail = self.to_ticks(self.now + self.work() + lat);
            }
            // The slot starts when the previous one ends, or when the post lands on an idle wire.
            let (nominal, end) = match self.busy_until {
                None => {
                    // The first post brings the link up at exactly t0 (the station anchors slot 0 there).
                    avail = self.to_ticks(self.cfg.t0);
                    self.first_start = Some(avail);
                    (avail, None)
                }
                Some(end) => (end.max(avail), Some(end)),
            };
            // The NIC fetches slot j once it is posted and slot j − F has started (F = fetch_ahead).
            let f = u64::from(self.cfg.fetch_ahead);
            let ahead = match self.posted.checked_sub(f) {
                _ if f == 0 => Some(nominal),
                Some(j) if j >= self.completed => self.inflight.get((j - self.completed) as usize).map(|s| s.start),
                _ => None,
            };
            let fetch = ahead.map_or(avail, |s| s.max(avail));
            // A stalled fetch (never the link-up slot): the data arrives `stall` after the descriptor, and the
            // slot cannot start before it (the TX FIFO ran dry).
            let stall = if end.is_some() { self.faults.fetch_stall() } else { Nanos(0) };
            let stall = self.ticks(stall);
            let start = nominal.max(fetch + stall);
            let wire_bytes = s.bytes.len() as u128 + 4 + u128::from(keepon_core::time::WIRE_OVERHEAD_BYTES);
            let dur = self.slot_ticks(start, wire_bytes);
            self.busy_until = Some(start + dur);
            // The host sees the slot consumed once fetched, or later if its completion write-back is late
            // (write-backs are in order).
            let late = self.faults.completion_delay();
            let visible = self.last_visible.max(fetch + self.ticks(late));
            self.last_visible = visible;
            let mut idle_before = 0;
            if let Some(end) = end.filter(|&e| start > e) {
                self.stats.gaps += 1;
                idle_before = start - end;
                // A gap the host's late post made is certain at once; one a stalled fetch made shows only in
                // the slot's completion (its TX timestamp), once it has left and been reported.
                let known = if start > nominal {
                    self.faults.stats.wire_gaps += 1;
                    (start + dur).max(visible)
                } else {
                    0
                };
                self.gaps.push_back((known, Gap { at: self.posted, restart: self.floor_ns(start) }));
            }
            let (frame, bytes) = match s.kind {
                SlotKind::Real { id, len, .. } => (Some(id), Some(s.bytes[..len as usize].to_vec())),
                SlotKind::Filler => (None, if self.cfg.keep_fillers { Some(s.bytes.to_vec()) } else { None }),
            };
            self.inflight.push_back(InFlight { start, visible, idle_before, dur, frame, bytes });
            self.posted += 1;
        }
        Ok(())
    }

    fn drain_wire(&mut self, out: &mut Vec<WireEvent>) {
        out.append(&mut self.wire);
    }

    fn wait(&mut self, period: Nanos) {
        let it = self.cfg.host.iteration(self.work(), period, &mut self.rng);
        self.host_busy = self.host_busy + it.busy;
        self.now += it.length;
        self.work_slots = 0;
    }

    fn now(&self) -> Tai {
        self.now
    }

    fn post_latency(&self) -> Nanos {
        self.cfg.host.poll_overhead + self.cfg.post_latency
    }

    fn max_frame_bytes(&self) -> u32 {
        self.cfg.max_frame
    }

    fn unfinished(&self) -> u64 {
        self.consumed - self.completed
    }
}

/// A stand-in for a synchronisation servo on the simulator (tests and benchmarks): it knows the oscillator's
/// true frequency and measures the EPHC's true error on the wire (`EPHC − true start` of the slots that left),
/// and steers the station's EPHC with them — the frequency, plus a proportional pull on the error every
/// `every`, or a step when the error exceeds 2 µs. An ideal PTP slave, with an error of a few ns; it judges
/// the disciplined grid against an ideal network clock (the simulator's virtual time).
#[derive(Clone, Copy, Debug)]
pub struct Oracle {
    every: Nanos,
    next: Option<Tai>,
    /// The EPHC's error on the last slot that left, ns (`EPHC − true start`).
    pub last_err: i64,
}

impl Oracle {
    /// An oracle that steers every `every` of simulated time (its pull takes half the error per interval; for a
    /// stable loop, `every` should exceed how far ahead of the wire slots are posted).
    pub fn new(every: Nanos) -> Oracle {
        Oracle { every, next: None, last_err: 0 }
    }

    /// Take a wire event (after the driver filled in its EPHC time).
    pub fn observe(&mut self, w: &WireEvent) {
        if let (Some(start), Some(ephc)) = (w.start, w.ephc) {
            self.last_err = ephc.0 - start.0;
        }
    }

    /// The EPHC frequency adjustment (ppt) that makes the clock count network time on `nic`'s oscillator.
    pub fn frequency_ppt(nic: &SimNic) -> i64 {
        let f = nic.oscillator_ppm() * 1e-6;
        ((1.0 / (1.0 + f) - 1.0) * 1e12).round() as i64
    }

    /// Steer `station` (the slot station or the byte clock) if it is time.
    pub fn steer<S: keepon_core::face::StationFace>(&mut self, nic: &SimNic, station: &mut S) {
        use keepon_core::ephc::{ClockAdjust, MAX_PPT};
        let now = nic.now();
        if self.next.is_some_and(|t| now < t) {
            return;
        }
        self.next = Some(now + self.every);
        let adj = if self.last_err.abs() > 2_000 {
            ClockAdjust::Step(Nanos(-self.last_err))
        } else {
            // Half the error per interval: 0.5 ppm per ns over a millisecond, proportionally less over longer
            // intervals (a servo slower than the slots it steers are posted ahead must be, or it oscillates).
            let every = self.every.0.max(1) as i128;
            let pull = i128::from(self.last_err) * 500_000 * 1_000_000 / every;
            let ppt = Self::frequency_ppt(nic) - i64::try_from(pull).unwrap_or(i64::MAX / 2 * pull.signum() as i64);
            ClockAdjust::Rate(ppt.clamp(-MAX_PPT + 1, MAX_PPT - 1))
        };
        if station.adjust_clock(adj).is_ok() {
            if let ClockAdjust::Step(_) = adj {
                self.last_err = 0;
            }
        }
    }
}
