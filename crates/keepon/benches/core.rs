//! Benchmark of the sans-IO core alone (no I/O, no NIC): how fast the pacing loop turns slots over, and what
//! one scheduled insertion costs.
//!
//! Run: `cargo bench -p keepon --bench core` (or `make bench`); `… --bench core -- profile pacing 31 [PPT]` (or
//! `profile insertion [fresh]`) runs one part alone, silently, for a profiler.
//!
//! - **Pacing loop**: 64-byte slots at 100 Gb/s, batch 32, a 1024-slot ring, fillers only. Each iteration is
//!   one full poll (observe → reclaim → place → post) plus reading every posted slot's descriptor, as a NIC
//!   backend would. The "NIC" consumes `m` slots between polls (`m < batch`, so the ring never drains).
//!   Goal (issue 30): the disciplined loop ≥ 300 M slots/s at 31 slots per poll and ≥ 200 M at 16 (2× and 1.3×
//!   the 148.8 M/s 100 GbE minimum-frame rate), within 1.3× of the nominal loop.
//! - **Insertion**: `Station::submit` of a 64-byte real-time frame whose slot is in the insertion window
//!   (target computation from the txtime, the three checks, copy into the slot). Each call is timed with
//!   `Instant`; the median cost of an empty `Instant` pair is subtracted (reported). Goal (issue 30): p99 ≤ 75 ns.
//!   Frames are submitted with the `now` of the last poll, as a driver hands in a poll's frames (the station keeps
//!   its EPHC reading of that `now`); a second figure gives each submission a `now` of its own (no kept reading).
//!
//! Each figure is printed beside the ones recorded for earlier versions of the loop ([`RECORDED`]), so that a
//! regression shows; those were measured on other runs (and machines), so compare ratios measured in one run
//! (`docs/measured.md` has the command that runs the old binaries beside this one).

use std::hint::black_box;
use std::time::Instant;

use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::outcome::{Frame, FrameId};
use keepon_core::station::{Observation, Station, StationConfig};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};

/// Figures recorded for earlier versions (M slots/s at 16 and 31 slots per poll, disciplined / nominal;
/// insertion p99 ns), with the commit and where they were measured.
const RECORDED: &[Recorded] = &[
    Recorded {
        what: "before the schedule on network time (91285b1 = 277e514^), issue 30",
        pacing: [(16, 310.0, None), (31, 406.0, None)],
        p99: 71,
    },
    Recorded {
        what: "schedule on network time, per-slot exact arithmetic (61a90c5), issue 30",
        pacing: [(16, 18.0, Some(28.0)), (31, 19.0, Some(30.0))],
        p99: 90,
    },
    Recorded {
        what: "fine path: a length and a start per slot (2241bcf), this 2-core VM beside 91285b1 at 241-270 / 329-345",
        pacing: [(16, 185.0, Some(88.0)), (31, 254.0, Some(102.0))],
        p99: 126,
    },
    Recorded {
        what: "runs of one length (3f2a621), this 2-core VM beside 91285b1 at 202-262 / 304-337, noisy",
        pacing: [(16, 200.0, Some(86.0)), (31, 260.0, Some(101.0))],
        p99: 146,
    },
    Recorded {
        what: "a submission's EPHC reading kept, ring slots by mask (44b3dc5), this 2-core VM beside 04c8d70 at 271-279 / 121-199, p99 142 / 102",
        pacing: [(16, 198.0, Some(86.0)), (31, 288.0, Some(100.0))],
        p99: 59,
    },
];

/// One recorded version: (slots per poll, disciplined M slots/s, nominal M slots/s) and insertion p99 (ns).
struct Recorded {
    what: &'static str,
    pacing: [(u64, f64, Option<f64>); 2],
    p99: u64,
}

/// The recorded figures for `m` slots per poll, one line.
fn recorded_pacing(m: u64) -> String {
    let mut parts = Vec::new();
    for r in RECORDED {
        for (n, disciplined, nominal) in r.pacing {
            if n == m {
                let nominal = nominal.map_or(String::new(), |x| format!(", {x:.0} M nominal"));
                parts.push(format!("{disciplined:.0} M{nominal} [{}]", r.what));
            }
        }
    }
    parts.join("; ")
}

fn config(ring: u32, owned: bool) -> StationConfig {
    let geometry = SlotGeometry::new(LinkRate::from_mbps(100_000).unwrap(), 64).unwrap();
    let slots = if owned { (0..ring).collect() } else { vec![] };
    StationConfig {
        geometry,
        ownership: Ownership::new(ring, &[ClassSpec { name: "rt".into(), slots }]).unwrap(),
        batch: 32,
        policy: Policy::Strict,
        max_pending: 1 << 20,
        max_advance: Nanos::from_ms(1000),
        post_latency: Nanos(0),
        base_time: Tai(0),
        max_filler: keepon_core::time::MAX_SLOT_BYTES,
    }
}

/// Slots per second of the pacing loop with `m` slots consumed per poll; `discipline`: each slot's length chosen
/// to keep the wire on the schedule (the default), or every slot at the nominal size.
/// `ppt`: the EPHC's rate that many parts per trillion off nominal, as a PTP servo sets it (a fast clock makes the
/// disciplined 64-byte slots want to be shorter than a minimum frame: the wire falls behind by bytes and a filler
/// now and then spans two schedule slots).
fn pacing(m: u64, polls: u64, discipline: bool, ppt: i64) -> f64 {
    let mut st: Station<&'static [u8]> = Station::new(config(1024, false), Tai(0)).unwrap();
    st.set_discipline(discipline);
    if ppt != 0 {
        st.adjust_clock(keepon_core::ephc::ClockAdjust::Rate(ppt)).unwrap();
    }
    let mut consumed = 0u64;
    let gaps = [];
    // Prime: the first poll posts `batch` slots.
    let p = st.poll(Observation { consumed: 0, now: Tai(0), gaps: &gaps }).unwrap();
    let mut kinds = 0u64;
    let start = Instant::now();
    for _ in 0..polls {
        consumed += m;
        let p2 = st.poll(Observation { consumed, now: Tai(0), gaps: &gaps }).unwrap();
        for k in p2.post.clone() {
            if st.view(k).kind == keepon_core::ring::SlotKind::Filler {
                kinds += 1;
            }
        }
        black_box(&p2);
    }
    let dt = start.elapsed().as_secs_f64();
    let _ = black_box((p, kinds));
    assert_eq!(st.counters().underruns, 0, "the pacing benchmark must not underrun");
    (polls * m) as f64 / dt
}

fn percentile(sorted: &[u64], permille: usize) -> u64 {
    sorted[((permille * sorted.len()).div_ceil(1000)).max(1) - 1]
}

/// Insertion cost samples (ns, raw) and the timer overhead; with `fresh_now`, every submission at a host time of
/// its own (1 ns after the last).
fn insertion(n: usize, fresh_now: bool) -> (Vec<u64>, u64) {
    static DATA: [u8; 60] = [0u8; 60];
    let mut timer: Vec<u64> = (0..10_001)
        .map(|_| {
            let a = Instant::now();
            let b = Instant::now();
            (b - a).as_nanos() as u64
        })
        .collect();
    timer.sort_unstable();
    let overhead = timer[timer.len() / 2];

    let mut st: Station<&'static [u8]> = Station::new(config(1024, true), Tai(0)).unwrap();
    let gaps = [];
    let mut consumed = 0u64;
    let _ = st.poll(Observation { consumed: 0, now: Tai(0), gaps: &gaps }).unwrap();
    let mut samples = Vec::with_capacity(n);
    let mut id = 0u64;
    while samples.len() < n {
        // Fill the window: slots [posted, consumed + N).
        let window = st.ring().window();
        for k in window {
            if !st.ring().is_free(k) {
                continue;
            }
            let t = st.slot_time(k);
            let f = Frame { id: FrameId(id), class: ClassId(0), txtime: Some(t), data: &DATA[..] };
            id += 1;
            let now = if fresh_now { Tai(id as i64) } else { Tai(0) };
            let a = Instant::now();
            let r = st.submit(f, now);
            let b = Instant::now();
            black_box(r).expect("insertion must succeed");
            samples.push((b - a).as_nanos() as u64);
        }
        // Let the NIC take most of the ring (31 slots per poll, as a saturated link would), reclaim, and
        // drain the outcomes.
        for _ in 0..31 {
            consumed += 31;
            let _ = st.poll(Observation { consumed, now: Tai(0), gaps: &gaps }).unwrap();
        }
        st.drain_outcomes().for_each(drop);
    }
    (samples, overhead)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    // `profile pacing M` / `profile insertion`: one part alone, for a profiler (perf, callgrind); prints nothing.
    if let [p, what, rest @ ..] = args.as_slice() {
        if p == "profile" {
            match (what.as_str(), rest.first().and_then(|m| m.parse::<u64>().ok())) {
                ("pacing", Some(m)) => {
                    let ppt = rest.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
                    black_box(pacing(m, 1_000_000 / m.max(1), true, ppt));
                }
                ("insertion", _) => drop(black_box(insertion(200_000, rest.first().is_some_and(|a| a == "fresh")))),
                _ => eprintln!("usage: core profile pacing M [PPT] | core profile insertion [fresh]"),
            }
            return;
        }
    }
    println!("keepon-core benchmark (sans-IO core, no I/O); this machine: {} cores", num_cpus());
    println!("\npacing loop: 64 B slots @ 100 Gb/s, batch 32, ring 1024, fillers only");
    println!("  (disciplined: every slot sized to its schedule time; nominal: every slot 64 B; measured alternately)");
    for m in [1u64, 16, 31] {
        let (mut best, mut nominal, mut fast, mut slow) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        let polls = 2_000_000 / m.max(1) * 4;
        for _ in 0..5 {
            best = best.max(pacing(m, polls, true, 0));
            nominal = nominal.max(pacing(m, polls, false, 0));
            fast = fast.max(pacing(m, polls, true, 1_000_000));
            slow = slow.max(pacing(m, polls, true, -1_000_000));
        }
        println!(
            "  {m:>2} slots consumed per poll: {:>8.1} M slots/s disciplined ({:.2}× the 148.8 M/s 100 GbE \
             minimum-frame rate), {:>8.1} M slots/s nominal; disciplined/nominal {:.2} ({:.1} vs {:.1} ns per slot)",
            best / 1e6,
            best / 148.8e6,
            nominal / 1e6,
            best / nominal,
            1e9 / best,
            1e9 / nominal
        );
        println!(
            "      disciplined with the EPHC 1 ppm fast / slow (as PTP sets it): {:.1} / {:.1} M slots/s",
            fast / 1e6,
            slow / 1e6
        );
        let goal = match m {
            16 => " goal ≥ 200 M disciplined;",
            31 => " goal ≥ 300 M disciplined;",
            _ => "",
        };
        let recorded = recorded_pacing(m);
        if !goal.is_empty() || !recorded.is_empty() {
            println!("      {goal} recorded: {recorded}");
        }
    }
    let (mut s, overhead) = insertion(1_000_000, false);
    s.sort_unstable();
    let (mut fresh, _) = insertion(1_000_000, true);
    fresh.sort_unstable();
    let corr = |v: u64| v.saturating_sub(overhead);
    let start = Instant::now();
    let (s2, _) = insertion(200_000, false);
    let rate = s2.len() as f64 / start.elapsed().as_secs_f64();
    println!("\ninsertion: 64 B real-time frame into its slot (submit → target → checks → copy), ring 1024");
    println!("  timer overhead (median Instant pair): {overhead} ns, subtracted below");
    println!(
        "  per insertion: p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns (raw p99 {} ns); n = {}",
        corr(percentile(&s, 500)),
        corr(percentile(&s, 990)),
        corr(percentile(&s, 999)),
        corr(*s.last().unwrap_or(&0)),
        percentile(&s, 990),
        s.len()
    );
    println!(
        "  each at a host time of its own (no kept EPHC reading): p50 {} ns, p99 {} ns",
        corr(percentile(&fresh, 500)),
        corr(percentile(&fresh, 990))
    );
    println!("  throughput including window refills and reclaim: {:.1} M insertions/s", rate / 1e6);
    let recorded: Vec<String> = RECORDED.iter().map(|r| format!("p99 {} ns [{}]", r.p99, r.what)).collect();
    println!("   goal p99 ≤ 75 ns; recorded: {}", recorded.join("; "));
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
