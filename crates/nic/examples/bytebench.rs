//! Benchmark of the byte clock's descriptor economy (not a test): on the simulated NIC, the same real-time
//! stream — one 64-byte frame every 100 µs at a phase that is not on any slot boundary — sent in slot mode with
//! 64 B, 300 B and 1230 B slots and on the byte clock, at 1 and 10 Gb/s. Reports, per mode: descriptors per
//! link-second (what the NIC fetches and the host writes), the poll loop's CPU per link-second (station and
//! simulated NIC together, wall time of this process on an otherwise idle core; compare the ratios, measured side
//! by side in one run), the station's own CPU per descriptor (the time inside its `submit`, `poll` and
//! `drain_outcomes`, each call timed with `Instant` and the median cost of an empty `Instant` pair subtracted;
//! reading a posted descriptor is the backend's), the largest |wire start − txtime| (slot mode puts a frame at
//! the start of its txtime's slot: up to δ early; the byte clock on the byte nearest it), and the advance each
//! needed (the posted lead). Goal (issue 30): the byte clock ≤ 20 ns of station CPU per descriptor.
//!
//! Timing each call costs about as much as a byte-clock poll, so the byte clock is also run without the
//! simulated NIC (`alone`): the loop plays an ideal NIC that takes each posted descriptor when its EPHC start
//! time has come, and the wall time of the whole loop over the descriptors posted is an upper bound of the
//! station's CPU per descriptor, with no timer inside.
//!
//! ```sh
//! cargo run --release -p keepon-nic --example bytebench -- 2         # simulated seconds per point (default 1)
//! cargo run --release -p keepon-nic --example bytebench -- 2 bytes   # the byte clock only (to profile it)
//! cargo run --release -p keepon-nic --example bytebench -- 2 alone   # the byte clock without the simulated NIC
//! cargo run --release -p keepon-nic --example bytebench -- 1 alone 1000   # … at one rate (Mb/s)
//! ```

use std::time::Instant;

use keepon_core::bytes::windows::{ClassWindows, Window, Windows};
use keepon_core::bytes::ByteConfig;
use keepon_core::ephc::{ClockAdjust, EphcError};
use keepon_core::face::{NextPlace, StationFace};
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Counters, Frame, FrameId, Outcome, Reason};
use keepon_core::ring::{Ring, RingError, SlotView};
use keepon_core::station::StationConfig;
use keepon_core::station::{Observation, Poll};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig, Source};
use keepon_nic::sim::{SimConfig, SimNic};
use keepon_nic::Nic;

const T0: Tai = Tai(1_700_000_000_000_000_000);
const PERIOD: i64 = 100_000;
/// Not a multiple of any slot period used here, nor of a byte at 1 Gb/s.
const PHASE: i64 = 37_411;

/// One frame every 100 µs from `first`, handed in 1 ms ahead.
struct Stream {
    first: Tai,
    i: u64,
    n: u64,
}

impl Source for Stream {
    fn next_due(&self) -> Option<Tai> {
        (self.i < self.n).then(|| self.at(self.i) - Nanos::from_ms(1))
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        let t = self.at(self.i);
        self.i += 1;
        Some(Frame { id: FrameId(self.i - 1), class: ClassId(0), txtime: Some(t), data: vec![0; 60] })
    }
}

impl Stream {
    fn at(&self, i: u64) -> Tai {
        self.first + Nanos(i as i64 * PERIOD + PHASE)
    }
}

/// A station whose calls from the loop are timed (see the module doc): what it spent, and in how many calls.
struct Timed<S> {
    inner: S,
    ns: u128,
    calls: u64,
}

impl<S> Timed<S> {
    fn time<R>(&mut self, f: impl FnOnce(&mut S) -> R) -> R {
        let a = Instant::now();
        let r = f(&mut self.inner);
        self.ns += a.elapsed().as_nanos();
        self.calls += 1;
        r
    }
}

impl<S: StationFace> StationFace for Timed<S> {
    fn submit(&mut self, frame: Frame<Vec<u8>>, now: Tai) -> Result<(), Reason> {
        self.time(|s| s.submit(frame, now))
    }
    fn poll(&mut self, obs: Observation<'_>) -> Result<Poll, RingError> {
        self.time(|s| s.poll(obs))
    }
    fn view(&self, k: u64) -> SlotView<'_> {
        self.inner.view(k)
    }
    fn drain_outcomes(&mut self) -> std::vec::Drain<'_, Outcome> {
        let a = Instant::now();
        let d = self.inner.drain_outcomes();
        self.ns += a.elapsed().as_nanos();
        self.calls += 1;
        d
    }
    fn ring(&self) -> &Ring {
        self.inner.ring()
    }
    fn carried_time(&self, k: u64) -> Option<(Tai, bool)> {
        self.inner.carried_time(k)
    }
    fn ephc(&self) -> &keepon_core::ephc::Ephc {
        self.inner.ephc()
    }
    fn clock_at(&self, host: Tai) -> Tai {
        self.inner.clock_at(host)
    }
    fn wire_position(&self, k: u64) -> u64 {
        self.inner.wire_position(k)
    }
    fn alignment(&self) -> &keepon_core::station::Alignment {
        self.inner.alignment()
    }
    fn base_time(&self) -> Tai {
        self.inner.base_time()
    }
    fn cycle(&self) -> keepon_core::bytes::windows::Rat {
        self.inner.cycle()
    }
    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai> {
        self.inner.cycle_start_at_or_after(t)
    }
    fn next_place(&self, class: ClassId, lead: Nanos, len: usize, after: Option<i128>) -> Option<NextPlace> {
        self.inner.next_place(class, lead, len, after)
    }
    fn schedule_windows(&self) -> keepon_core::bytes::windows::Windows {
        self.inner.schedule_windows()
    }
    fn pending_windows(&self) -> Option<(Tai, keepon_core::bytes::windows::Windows)> {
        self.inner.pending_windows()
    }
    fn pending_change_time(&self) -> Option<Tai> {
        self.inner.pending_change_time()
    }
    fn pad_to(&self) -> usize {
        self.inner.pad_to()
    }
    fn ptp_lead(&self) -> Nanos {
        self.inner.ptp_lead()
    }
    fn ephc_at(&self, host: Tai) -> Tai {
        self.inner.ephc_at(host)
    }
    fn slot_time(&self, k: u64) -> Tai {
        self.inner.slot_time(k)
    }
    fn schedule_settled(&self) -> bool {
        self.inner.schedule_settled()
    }
    fn shutdown(&mut self) {
        self.time(|s| s.shutdown())
    }
    fn drained(&self) -> bool {
        self.inner.drained()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn counters(&self) -> &Counters {
        self.inner.counters()
    }
    fn ring_span(&self) -> Nanos {
        self.inner.ring_span()
    }
    fn adjust_clock(&mut self, adj: ClockAdjust) -> Result<(), EphcError> {
        self.time(|s| s.adjust_clock(adj))
    }
}

/// The median cost of an empty `Instant` pair, ns (subtracted per timed call).
fn timer_overhead() -> u128 {
    let mut v: Vec<u128> = (0..10_001)
        .map(|_| {
            let a = Instant::now();
            a.elapsed().as_nanos()
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

struct Point {
    descriptors: u64,
    cpu_ns: u128,
    /// The station's own CPU, ns (timer overhead subtracted).
    station_ns: u128,
    max_dev: i64,
    sent: u64,
    lead: Nanos,
}

fn drive<S: StationFace>(mut d: Driver<SimNic, Timed<S>>, seconds: u64, lead: Nanos) -> Point {
    d.bring_up(&mut |_| {}).unwrap();
    let first = T0 + Nanos::from_ms(2) + Nanos(((d.nic.now().0 - T0.0) / PERIOD + 1) * PERIOD);
    let mut src = Stream { first, i: 0, n: seconds * 10_000 };
    let (mut max_dev, mut sent) = (0i64, 0u64);
    let started = Instant::now();
    d.run(&mut src, &mut |e| {
        if let Event::Outcome(o) = e {
            if let Ok(s) = o.result {
                sent += 1;
                let t = first.0 + (o.id.0 as i64) * PERIOD + PHASE;
                max_dev = max_dev.max((s.time.0 - t).abs());
            }
        }
    })
    .unwrap();
    let cpu_ns = started.elapsed().as_nanos();
    let station_ns = d.station.station_ns();
    Point { descriptors: d.station.counters().slots_posted, cpu_ns, station_ns, max_dev, sent, lead }
}

/// What a timed station spent.
trait Spent {
    fn station_ns(&self) -> u128;
}

impl<S> Spent for Timed<S> {
    fn station_ns(&self) -> u128 {
        self.ns.saturating_sub(u128::from(self.calls) * timer_overhead_cached())
    }
}

fn timer_overhead_cached() -> u128 {
    static OVERHEAD: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *OVERHEAD.get_or_init(timer_overhead)
}

fn slots(mbps: u64, slot: u32, seconds: u64) -> Point {
    let g = SlotGeometry::new(LinkRate::from_mbps(mbps).unwrap(), slot).unwrap();
    let mut sim = SimConfig::new(g, T0);
    sim.keep_fillers = false;
    // Every ring slot the class's: the frame goes in the slot that holds its txtime.
    let own = Ownership::new(64, &[ClassSpec { name: "rt".into(), slots: (0..64).collect() }]).unwrap();
    let batch = 32;
    let station = StationConfig {
        geometry: g,
        ownership: own,
        batch,
        policy: Policy::Strict,
        max_pending: 4096,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos::ZERO,
        base_time: T0,
        max_filler: 1518,
    };
    let poll = Nanos((g.period().floor_mul(u64::from(batch) / 4)) as i64);
    let lead = Nanos(g.period().ceil_mul(u64::from(batch)) as i64);
    let d = Driver::new(SimNic::new(sim), station, LoopConfig { poll_period: poll, max_duration: Nanos(i64::MAX) })
        .unwrap();
    drive(timed(d, poll), seconds, lead)
}

/// The byte clock of both measurements: one window over the whole 100 µs cycle, a 100 µs lead, ring 512.
fn byte_config(mbps: u64) -> ByteConfig {
    let rate = LinkRate::from_mbps(mbps).unwrap();
    let classes =
        [ClassWindows { name: "rt".into(), windows: vec![Window { offset: Nanos(0), length: Nanos(PERIOD) }] }];
    ByteConfig {
        rate,
        windows: Windows::new(T0, Nanos(PERIOD), &classes, rate).unwrap(),
        ring: 512,
        max_frame: 1518,
        lead: Nanos::from_us(100),
        max_pending: 4096,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos::ZERO,
        policy: Policy::Strict,
    }
}

fn bytes(mbps: u64, seconds: u64) -> Point {
    let g = SlotGeometry::new(LinkRate::from_mbps(mbps).unwrap(), 1518).unwrap();
    let mut sim = SimConfig::new(g, T0);
    sim.keep_fillers = false;
    let cfg = byte_config(mbps);
    let (lead, poll) = (cfg.lead, Nanos(cfg.lead.0 / 4));
    let d =
        Driver::bytes(SimNic::new(sim), cfg, LoopConfig { poll_period: poll, max_duration: Nanos(i64::MAX) }).unwrap();
    drive(timed(d, poll), seconds, lead)
}

/// The same driver with its station's calls timed.
fn timed<S: StationFace>(d: Driver<SimNic, S>, poll: Nanos) -> Driver<SimNic, Timed<S>> {
    let cfg = LoopConfig { poll_period: poll, max_duration: Nanos(i64::MAX) };
    let Driver { nic, station, .. } = d;
    Driver::with_station(nic, Timed { inner: station, ns: 0, calls: 0 }, cfg)
}

/// The byte clock without the simulated NIC (see the module doc): ns of loop CPU per descriptor posted, and
/// frames sent, over `seconds` of wire.
fn alone(mbps: u64, seconds: u64) -> (f64, u64) {
    use keepon_core::bytes::ByteStation;
    use keepon_core::station::Observation;
    let cfg = byte_config(mbps);
    let poll = Nanos(cfg.lead.0 / 4);
    let mut st: ByteStation<Vec<u8>> = ByteStation::new(cfg, T0).unwrap();
    let first = T0 + Nanos::from_ms(2);
    let src = Stream { first, i: 0, n: seconds * 10_000 };
    let (mut now, mut consumed, mut sent, mut i) = (T0, 0u64, 0u64, 0u64);
    let end = T0 + Nanos::from_ms(1000 * seconds as i64 + 5);
    let started = Instant::now();
    while now < end {
        while i < src.n && src.at(i) - Nanos::from_ms(1) <= now {
            let t = src.at(i);
            let f = Frame { id: FrameId(i), class: ClassId(0), txtime: Some(t), data: vec![0; 60] };
            i += 1;
            let _ = st.submit(f, now);
        }
        // The ideal NIC: every posted descriptor whose start has come is taken.
        let posted = st.ring().posted();
        while consumed < posted && st.slot_time(consumed) <= now {
            consumed += 1;
        }
        let p = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
        let _ = std::hint::black_box(p);
        sent += st.drain_outcomes().filter(|o| o.result.is_ok()).count() as u64;
        now += poll;
    }
    let ns = started.elapsed().as_nanos() as f64;
    (ns / st.counters().slots_posted.max(1) as f64, sent)
}

fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let bytes_only = std::env::args().nth(2).as_deref() == Some("bytes");
    if std::env::args().nth(2).as_deref() == Some("alone") {
        let only: Option<u64> = std::env::args().nth(3).and_then(|s| s.parse().ok());
        for mbps in [1000u64, 10_000].into_iter().filter(|m| only.is_none_or(|o| o == *m)) {
            let (ns, sent) = alone(mbps, seconds);
            println!("{mbps:>6} Mb/s byte clock alone: {ns:.1} ns of loop CPU per descriptor, {sent} sent");
        }
        return;
    }
    println!(
        "one 64 B frame every 100 µs, {seconds} simulated s per point; CPU: station + simulated NIC; station: its \
         own CPU per descriptor (timer overhead {} ns per call subtracted; goal for the byte clock ≤ 20 ns)",
        timer_overhead_cached()
    );
    println!(
        "{:>9} {:>16} {:>14} {:>12} {:>12} {:>14} {:>10} {:>10} {:>12}",
        "rate", "mode", "descr./link-s", "CPU ms/link-s", "×byte clock", "station ns/d.", "max |dev|", "lead", "sent"
    );
    for mbps in [1000u64, 10_000] {
        let (ns, sent) = alone(mbps, seconds);
        println!(
            "{:>6} Mb/s {:>16} station alone (ideal NIC, no timer): {ns:.1} ns of loop CPU per descriptor, {sent}/{} sent",
            mbps,
            "byte clock",
            seconds * 10_000
        );
        let b = bytes(mbps, seconds);
        let sizes: &[u32] = if bytes_only { &[] } else { &[64, 300, 1230] };
        let mut rows: Vec<(String, Point)> =
            sizes.iter().map(|&s| (format!("slots {s} B"), slots(mbps, s, seconds))).collect();
        rows.push(("byte clock".into(), b));
        let base = rows.last().map(|(_, p)| p.cpu_ns as f64).unwrap_or(1.0);
        for (mode, p) in &rows {
            println!(
                "{:>6} Mb/s {:>16} {:>14} {:>12.1} {:>12.1} {:>14.1} {:>7} ns {:>7} µs {:>6}/{}",
                mbps,
                mode,
                p.descriptors / seconds,
                p.cpu_ns as f64 / 1e6 / seconds as f64,
                p.cpu_ns as f64 / base,
                p.station_ns as f64 / p.descriptors.max(1) as f64,
                p.max_dev,
                p.lead.0 / 1000,
                p.sent,
                seconds * 10_000
            );
        }
    }
}
