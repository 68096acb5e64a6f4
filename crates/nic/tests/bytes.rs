//! The byte clock on the simulated NIC (property tests over random windows, frames, sizes, txtimes and rates, an
//! oscillator off by up to ±100 ppm under the simulator's oracle servo, and host stalls): every real-time frame
//! starts within half a byte time of its txtime on the EPHC (never earlier; later only after an underrun), inside
//! its class's windows; best effort never enters a window; fillers are 64 bytes to the longest frame; every frame
//! gets exactly one outcome.

mod support;

use std::collections::HashMap;

use proptest::prelude::*;

use keepon_core::bytes::windows::{ClassWindows, Window, Windows};
use keepon_core::bytes::ByteConfig;
use keepon_core::ephc::ClockAdjust;
use keepon_core::isolation::ClassId;
use keepon_core::outcome::{Frame, FrameId, Reason};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::driver::{Driver, Event, LoopConfig, NoFrames, Source};
use keepon_nic::sim::{HostModel, Oracle, Oscillator, SimConfig, SimNic};
use keepon_nic::source::Listed;
use keepon_nic::Nic;

#[derive(Debug, Clone)]
struct Case {
    mbps: u64,
    cycle_us: i64,
    /// Cuts of the cycle (per mille) and who owns each piece: class index, or 255 = nobody.
    cuts: Vec<u16>,
    owners: Vec<u8>,
    /// Real-time frames: (piece, cycle number, where in the piece (per mille of its free room), length).
    rt: Vec<(u8, u8, u16, u16)>,
    /// Best-effort frames: (submit offset µs, length).
    be: Vec<(u16, u16)>,
    /// The NIC's oscillator error (ppm); the simulator's oracle servo steers the EPHC onto network time.
    ppm: f64,
    /// Host preemptions per million polls (0: none), each 300 µs: longer than the lead, so the wire underruns.
    spike_ppm: u32,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![1000u64, 2500, 10_000, 25_000]),
        20i64..200,
        prop::collection::vec(1u16..1000, 1..8),
        prop::collection::vec(prop_oneof![2 => 0u8..3, 1 => Just(255u8)], 9),
        prop::collection::vec((0u8..9, 0u8..40, 0u16..1000, 60u16..1400), 0..150),
        prop::collection::vec((0u16..3000, 60u16..1500), 0..150),
        (prop_oneof![2 => Just(0.0f64), 3 => -100.0f64..100.0], prop_oneof![3 => Just(0u32), 1 => 1u32..20_000]),
    )
        .prop_map(|(mbps, cycle_us, cuts, owners, rt, be, (ppm, spike_ppm))| Case {
            mbps,
            cycle_us,
            cuts,
            owners,
            rt,
            be,
            ppm,
            spike_ppm,
        })
}

const T0: Tai = Tai(1_700_000_000_000_000_000);

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let rate = LinkRate::from_mbps(c.mbps).unwrap();
    let byte = rate.byte_time();
    let cycle = c.cycle_us * 1_000;
    // The pieces of the cycle; those owned and long enough for a minimum frame become windows.
    let mut cuts: Vec<i64> = c.cuts.iter().map(|m| cycle * i64::from(*m) / 1000).collect();
    cuts.push(0);
    cuts.push(cycle);
    cuts.sort();
    cuts.dedup();
    let min = byte.ceil_mul(84) as i64;
    let mut classes: Vec<ClassWindows> =
        (0..3).map(|i| ClassWindows { name: format!("tc{i}"), windows: vec![] }).collect();
    let mut pieces = Vec::new();
    for (i, w) in cuts.windows(2).enumerate() {
        let (o, l) = (w[0], w[1] - w[0]);
        let owner = c.owners[i % c.owners.len()];
        if owner != 255 && l >= min {
            classes[usize::from(owner)].windows.push(Window { offset: Nanos(o), length: Nanos(l) });
            pieces.push((ClassId(owner), o, l));
        }
    }
    classes.push(ClassWindows { name: "be".into(), windows: vec![] });
    let be_class = ClassId(3);
    let windows = Windows::new(T0, Nanos(cycle), &classes, rate).unwrap();

    let mut sim = SimConfig::new(SlotGeometry::new(rate, 1518).unwrap(), T0);
    sim.keep_fillers = true;
    sim.oscillator = Oscillator { ppm: c.ppm, wander: 0.0 };
    sim.host = HostModel { spike_ppm: c.spike_ppm, spike: Nanos::from_us(300), ..HostModel::default() };
    let cfg = ByteConfig {
        rate,
        windows: windows.clone(),
        ring: 512,
        max_frame: 1518,
        lead: Nanos::from_us(100),
        max_pending: 4096,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos::ZERO,
        policy: keepon_core::insert::Policy::Strict,
    };
    let loop_cfg = LoopConfig { poll_period: Nanos::from_us(10), max_duration: Nanos::from_ms(2_000) };
    let mut d = Driver::bytes(SimNic::new(sim), cfg, loop_cfg).unwrap();
    // The servo knows the oscillator's frequency from the start (a slave already locked), then steers on.
    d.station.adjust_clock(ClockAdjust::Rate(Oracle::frequency_ppt(&d.nic))).unwrap();
    d.bring_up(&mut |_| {}).unwrap();
    let start = d.nic.now();

    // Frames: real-time inside a random piece of a random later cycle; best effort at random times.
    let first_cycle = (start.0 - T0.0 + 1_000_000) / cycle + 1;
    let mut frames = Vec::new();
    let mut id = 0u64;
    for &(piece, n, at, len) in &c.rt {
        let Some(&(class, off, wlen)) = pieces.get(usize::from(piece) % pieces.len().max(1)) else { break };
        // At least a byte (rounded up to ns) clear of either end of the window: the nearest byte then fits.
        let wire = byte.ceil_mul(u64::from(len) + 4 + 20) as i64;
        let margin = byte.ceil_mul(1) as i64;
        if wire + 2 * margin > wlen {
            continue;
        }
        let room = wlen - wire - 2 * margin;
        let t = T0 + Nanos((first_cycle + i64::from(n)) * cycle + off + margin + room * i64::from(at) / 1000);
        let mut data = vec![0u8; usize::from(len)];
        data[..8].copy_from_slice(&id.to_be_bytes());
        frames.push((t - Nanos::from_us(800), Frame { id: FrameId(id), class, txtime: Some(t), data }));
        id += 1;
    }
    for &(at, len) in &c.be {
        let mut data = vec![0u8; usize::from(len)];
        data[..8].copy_from_slice(&id.to_be_bytes());
        let t = start + Nanos(i64::from(at) * 1_000);
        frames.push((t, Frame { id: FrameId(id), class: be_class, txtime: None, data }));
        id += 1;
    }
    frames.sort_by_key(|(t, f)| (*t, f.id));
    let submitted: HashMap<FrameId, Frame<Vec<u8>>> = frames.iter().map(|(_, f)| (f.id, f.clone())).collect();
    let mut source = Listed::new(frames);

    let mut outcomes = HashMap::new();
    let mut wire = Vec::new();
    let mut underruns = 0;
    let mut oracle = Oracle::new(Nanos::from_ms(1));
    let mut sink = |e: Event, oracle: &mut Oracle| match e {
        Event::Outcome(o) => assert!(outcomes.insert(o.id, o).is_none(), "two outcomes for {:?}", o.id),
        Event::Wire(w) => {
            oracle.observe(&w);
            wire.push(w)
        }
        Event::Underrun(_) => underruns += 1,
    };
    // The station loop, with the oracle steering between polls, until every frame has its outcome.
    let deadline = start + Nanos::from_ms(2_000);
    let mut nothing = NoFrames;
    loop {
        let drained = source.next_due().is_none() && d.station.in_flight() == 0;
        prop_assert!(d.nic.now() < deadline, "the run did not finish");
        if drained {
            d.station.shutdown(); // nothing more to send: stop posting, let the NIC finish
        }
        let src: &mut dyn Source = if drained { &mut nothing } else { &mut source };
        d.step(src, &mut |e| sink(e, &mut oracle)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if drained && d.nic.unfinished() == 0 {
            break;
        }
        oracle.steer(&d.nic, &mut d.station);
        d.nic.wait(Nanos::from_us(10));
    }
    if c.spike_ppm == 0 {
        prop_assert_eq!(underruns, 0);
    }
    prop_assert_eq!(outcomes.len(), submitted.len());

    // Wire times are exact on the simulator; a descriptor's wire span is its bytes, FCS, preamble and gap.
    let half = byte.ceil_mul(1).div_ceil(2) as i64;
    let span = |len: usize| byte.ceil_mul(len as u64 + 4 + 20) as i64;
    let in_windows = |class: ClassId, s: i64, e: i64| windows.admitting(class, rat(s), rat(e)).is_some();
    let mut sent_rt = Vec::new();
    let mut max_eps = 0i64;
    for w in &wire {
        let bytes = w.bytes.as_ref().unwrap();
        // On the EPHC (network time as the servo keeps it); the true wire start differs by the EPHC's error.
        let (start, len) = (w.ephc.unwrap().0, bytes.len());
        max_eps = max_eps.max((start - w.start.unwrap().0).abs());
        prop_assert!((60..=1514).contains(&len), "descriptor of {} B", len + 4);
        match w.frame {
            None => prop_assert!(bytes.iter().all(|b| *b == 0)),
            Some(id) => {
                let f = &submitted[&id];
                prop_assert_eq!(&bytes[..f.data.len()], f.data.as_slice());
                match f.txtime {
                    Some(t) => {
                        // Within half a byte of its txtime (floored ns: one more below); never earlier, also
                        // across clock adjustments and underruns; later only when the link underran (frames
                        // posted before a gap leave after it).
                        let dev = start - t.0;
                        let late = if underruns > 0 { i64::MAX } else { half };
                        prop_assert!(-half - 1 <= dev && dev <= late, "{:?} {} ns off its txtime", id, dev);
                        if dev <= half {
                            prop_assert!(
                                in_windows(f.class, start, start + span(f.data.len())),
                                "{:?} outside its window",
                                id
                            );
                        }
                        sent_rt.push((t.0, t.0 + span(f.data.len())));
                    }
                    // Best effort stays out of every window — on a link that did not underrun: a gap delays the
                    // descriptors already posted, and a best-effort frame among them may be pushed into one (the
                    // NIC has it; in slot mode alike).
                    None if underruns == 0 => {
                        let e = start + span(len);
                        prop_assert!(
                            windows.first_reserved(rat(start + 1), rat(e - 1)).is_none(),
                            "best effort {:?} in a window",
                            id
                        );
                    }
                    None => {}
                }
            }
        }
    }
    // The servo keeps the EPHC within 100 ns and two bytes of the true wire while the host does not stall.
    if c.spike_ppm == 0 {
        prop_assert!(max_eps <= 100 + 2 * byte.ceil_mul(1) as i64, "EPHC error {} ns", max_eps);
    }
    // Real-time frames are sent, or refused because another held their time (or, when the link underran, their
    // time passed while it was idle). The frames that held a time: every real-time frame admitted (sent, or lost
    // to an underrun after it was admitted).
    let held: Vec<(FrameId, i64, i64)> = outcomes
        .iter()
        .filter(|(_, o)| !matches!(o.result, Err(Reason::SlotTaken)))
        .filter_map(|(id, _)| submitted[id].txtime.map(|t| (*id, t.0, t.0 + span(submitted[id].data.len()))))
        .collect();
    let _ = &sent_rt;
    for (id, o) in &outcomes {
        let f = &submitted[id];
        match (o.result, f.txtime) {
            (Ok(s), Some(t)) => prop_assert_eq!(s.scheduled, Some(t)),
            (Ok(_), None) => {}
            (Err(Reason::SlotTaken), Some(t)) => {
                let e = t.0 + span(f.data.len());
                prop_assert!(
                    held.iter().any(|&(i2, s2, e2)| i2 != *id && s2 < e && t.0 < e2),
                    "{:?} refused slot-taken, nothing there",
                    id
                );
            }
            (Err(Reason::Shutdown), None) => {}
            (Err(Reason::Late | Reason::NotOwned | Reason::Underrun), Some(_)) if underruns > 0 => {}
            (Err(Reason::NoCapacity), None) => {
                let free = windows.longest_free().map(|r| r.floor() as i64);
                // (With a byte to spare either side: a byte starts where the clock puts it.)
                prop_assert!(
                    free.is_some_and(|free| span(f.data.len() + 2) > free),
                    "{:?} no-capacity, {:?} ns free",
                    id,
                    free
                );
            }
            (r, _) => prop_assert!(false, "{:?}: {:?}", id, r),
        }
    }
    Ok(())
}

fn rat(ns: i64) -> keepon_core::bytes::windows::Rat {
    keepon_core::bytes::windows::Rat::ns(i128::from(ns))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: support::cases(48), ..ProptestConfig::default() })]
    #[test]
    fn byte_clock_invariants_hold_on_the_simulated_nic(c in case()) {
        run_case(&c)?;
    }
}
