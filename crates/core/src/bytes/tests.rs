use alloc::vec;
use alloc::vec::Vec;

use super::windows::{ClassWindows, Rat, Window, Windows};
use super::{ByteConfig, ByteConfigError, ByteStation};
use crate::ephc::ClockAdjust;
use crate::isolation::ClassId;
use crate::outcome::{Frame, FrameId, Outcome, Reason};
use crate::ring::SlotKind;
use crate::station::{ChangeError, Observation};
use crate::time::{LinkRate, Nanos, Tai};

const T0: Tai = Tai(1_700_000_000_000_000_000);

/// One descriptor as the NIC got it: where it starts (byte), its wire length, what it held.
#[derive(Clone, Debug)]
struct Sent {
    pos: u64,
    len: u32,
    kind: SlotKind,
    bytes: Vec<u8>,
}

/// An exact NIC: it starts descriptor after descriptor with no gap, from the first post on, and finishes each
/// as it starts.
struct Nic {
    rate: LinkRate,
    start: Option<Tai>,
    wire: Vec<Sent>,
}

impl Nic {
    /// Exact start of byte `pos`.
    fn time_of(&self, pos: u64) -> Rat {
        let b = self.rate.byte_time();
        let t0 = i128::from(self.start.unwrap().0);
        Rat { num: t0 * i128::from(b.den()) + i128::from(pos) * i128::from(b.num()), den: i128::from(b.den()) }
    }

    /// Descriptors started by `now`.
    fn consumed(&self, now: Tai) -> u64 {
        match self.start {
            None => 0,
            Some(_) => {
                self.wire.iter().take_while(|s| self.time_of(s.pos) <= Rat::ns(i128::from(now.0))).count() as u64
            }
        }
    }
}

fn config(mbps: u64, windows: Windows) -> ByteConfig {
    ByteConfig {
        rate: LinkRate::from_mbps(mbps).unwrap(),
        windows,
        ring: 256,
        max_frame: 1518,
        lead: Nanos::from_us(200),
        max_pending: 1024,
        max_advance: Nanos::from_ms(100),
        post_latency: Nanos::ZERO,
        policy: crate::insert::Policy::Strict,
    }
}

fn classes(rt: &[(i64, i64)]) -> Vec<ClassWindows> {
    vec![
        ClassWindows {
            name: "rt".into(),
            windows: rt.iter().map(|&(o, l)| Window { offset: Nanos(o), length: Nanos(l) }).collect(),
        },
        ClassWindows { name: "be".into(), windows: vec![] },
    ]
}

/// Run `frames` (submit time, frame) through a station on the exact NIC for `span`, polling every `poll`.
fn run(cfg: ByteConfig, frames: Vec<(Tai, Frame<Vec<u8>>)>, span: Nanos, poll: Nanos) -> (Nic, Vec<Outcome>) {
    run_with(cfg, frames, span, poll, |_, _| {})
}

/// [`run`], with `hook` called with the station and the time before every poll.
fn run_with(
    cfg: ByteConfig,
    mut frames: Vec<(Tai, Frame<Vec<u8>>)>,
    span: Nanos,
    poll: Nanos,
    mut hook: impl FnMut(&mut ByteStation<Vec<u8>>, Tai),
) -> (Nic, Vec<Outcome>) {
    let mut st = ByteStation::new(cfg.clone(), T0).unwrap();
    let mut nic = Nic { rate: cfg.rate, start: None, wire: Vec::new() };
    frames.sort_by_key(|(t, f)| (*t, f.id));
    let mut next = 0;
    let mut outcomes = Vec::new();
    let mut now = T0;
    while now < T0 + span {
        while next < frames.len() && frames[next].0 <= now {
            let _ = st.submit(frames[next].1.clone(), now);
            next += 1;
        }
        hook(&mut st, now);
        let consumed = nic.consumed(now);
        let poll_out = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
        assert!(poll_out.underruns.is_empty(), "underrun at {now:?}");
        for k in poll_out.post {
            let v = st.view(k);
            let pos = match nic.wire.last() {
                Some(s) => s.pos + u64::from(s.len) + 20,
                None => 0,
            };
            nic.start.get_or_insert(now);
            nic.wire.push(Sent { pos, len: v.bytes.len() as u32 + 4, kind: v.kind, bytes: v.bytes.to_vec() });
        }
        outcomes.extend(st.drain_outcomes());
        now += poll;
    }
    st.shutdown();
    let consumed = st.ring().posted();
    let _ = st.poll(Observation { consumed, now, gaps: &[] }).unwrap();
    outcomes.extend(st.drain_outcomes());
    (nic, outcomes)
}

fn frame(id: u64, class: u8, txtime: Option<Tai>, len: usize) -> Frame<Vec<u8>> {
    let mut data = vec![0u8; len];
    data[..8].copy_from_slice(&id.to_be_bytes());
    data[12] = 0x88;
    data[13] = 0xb5;
    Frame { id: FrameId(id), class: ClassId(class), txtime, data }
}

/// Where each sent frame started on the exact wire, by id.
fn starts(nic: &Nic) -> Vec<(FrameId, Rat, u32)> {
    nic.wire
        .iter()
        .filter_map(|s| match s.kind {
            SlotKind::Real { id, .. } => Some((id, nic.time_of(s.pos), s.len)),
            SlotKind::Filler => None,
        })
        .collect()
}

#[test]
fn real_time_frames_start_on_the_byte_nearest_their_txtime() {
    for mbps in [1000u64, 2500, 10_000, 25_000] {
        let rate = LinkRate::from_mbps(mbps).unwrap();
        let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 100_000)]), rate).unwrap();
        let cfg = config(mbps, windows);
        // Frames every 13.3 µs (sub-ns phases at 2.5 Gb/s and above), 60…1500 bytes, handed in 300 µs ahead.
        let mut seed = 12345u64;
        let frames: Vec<_> = (0..400u64)
            .map(|i| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let t = T0 + Nanos::from_us(500) + Nanos(i as i64 * 13_300 + (seed >> 60) as i64);
                let len = 60 + (seed >> 33) as usize % 1441;
                (t - Nanos::from_us(300), frame(i, 0, Some(t), len))
            })
            .collect();
        let txtimes: Vec<Tai> = frames.iter().map(|(_, f)| f.txtime.unwrap()).collect();
        let (nic, outcomes) = run(cfg, frames.clone(), Nanos::from_ms(7), Nanos::from_us(20));
        assert_eq!(outcomes.len(), 400);
        assert!(
            outcomes.iter().all(|o| o.result.is_ok()),
            "{mbps} Mb/s: {:?}",
            outcomes.iter().find(|o| o.result.is_err())
        );
        let byte = rate.byte_time();
        for (id, at, len) in starts(&nic) {
            let t = txtimes[id.0 as usize];
            // |start − t| ≤ half a byte, exactly: |2·(start − t)| ≤ byte.
            let dev2 = 2 * (at.num - i128::from(t.0) * at.den) * i128::from(byte.den());
            assert!(dev2.abs() <= i128::from(byte.num()) * at.den, "{mbps} Mb/s: {id:?} off by {dev2}/{}", at.den);
            // Unpadded: its own length (with FCS, at least 64), unless padded to close a gap no filler could.
            let own = (frames[id.0 as usize].1.data.len() as u32 + 4).max(64);
            assert!(len >= own && len < own + 84, "{id:?}: {len} B for a {own} B frame");
        }
        for s in &nic.wire {
            assert!((64..=1518).contains(&s.len), "descriptor of {} B", s.len);
            if s.kind == SlotKind::Filler {
                assert!(s.bytes.iter().all(|b| *b == 0));
            }
        }
        // The data that left is the frames'.
        for s in &nic.wire {
            if let SlotKind::Real { id, len, .. } = s.kind {
                assert_eq!(&s.bytes[..len as usize], frames[id.0 as usize].1.data.as_slice());
                assert!(s.bytes[len as usize..].iter().all(|b| *b == 0));
            }
        }
    }
}

#[test]
fn outcomes_report_the_deviation_from_the_txtime() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 100_000)]), rate).unwrap();
    // 3 ns past a byte boundary of the wire (which starts at T0, bytes of 8 ns): the nearest byte is 3 ns early.
    let t = T0 + Nanos::from_us(500) + Nanos(8 * 1000 + 3);
    let (nic, outcomes) =
        run(config(1000, windows), vec![(T0, frame(0, 0, Some(t), 100))], Nanos::from_ms(1), Nanos::from_us(20));
    let sent = outcomes[0].result.unwrap();
    assert_eq!(sent.scheduled, Some(t));
    assert_eq!(sent.time, Tai(t.0 - 3));
    assert_eq!(starts(&nic)[0].1, Rat::ns(i128::from(t.0 - 3)));
}

#[test]
fn a_gap_too_short_for_a_filler_pads_the_frame_before() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 100_000)]), rate).unwrap();
    let t1 = T0 + Nanos::from_us(500);
    // 100-byte frame: 124 wire bytes; the next starts 40 bytes after it ends.
    let t2 = t1 + Nanos(8 * (124 + 40));
    let frames = vec![(T0, frame(1, 0, Some(t1), 100)), (T0, frame(2, 0, Some(t2), 100))];
    let (nic, outcomes) = run(config(1000, windows), frames, Nanos::from_ms(1), Nanos::from_us(20));
    assert!(outcomes.iter().all(|o| o.result.is_ok()));
    let s = starts(&nic);
    assert_eq!(s[0], (FrameId(1), Rat::ns(i128::from(t1.0)), 104 + 40));
    assert_eq!(s[1], (FrameId(2), Rat::ns(i128::from(t2.0)), 104));
}

#[test]
fn best_effort_keeps_out_of_the_windows_and_real_time_in_them() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    // Cycle 50 µs: rt owns 10…20 µs.
    let windows = Windows::new(T0, Nanos::from_us(50), &classes(&[(10_000, 10_000)]), rate).unwrap();
    let mut frames = Vec::new();
    for i in 0..300u64 {
        frames.push((T0 + Nanos(i as i64 * 3_000), frame(1000 + i, 1, None, 1400)));
    }
    for c in 0..16i64 {
        let t = T0 + Nanos::from_us(250) + Nanos(c * 50_000 + 10_000 + (c % 5) * 1_000);
        frames.push((T0, frame(c as u64, 0, Some(t), 700)));
    }
    // Outside its windows, and longer than its longest window: refused.
    frames.push((T0, frame(100, 0, Some(T0 + Nanos::from_us(300)), 200)));
    let long = Windows::new(T0, Nanos::from_us(50), &classes(&[(10_000, 1_000)]), rate).unwrap();
    let (nic, outcomes) = run(config(1000, windows), frames, Nanos::from_ms(2), Nanos::from_us(20));
    // Every real-time frame in its window is sent; the one outside is refused; best effort still waiting at the
    // end is shut down.
    let refused: Vec<_> = outcomes.iter().filter(|o| matches!(o.result, Err(r) if r != Reason::Shutdown)).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0].id, refused[0].result), (FrameId(100), Err(Reason::NotOwned)));
    assert!(outcomes.iter().filter(|o| o.id.0 < 16).all(|o| o.result.is_ok()));
    let in_window = |at: Rat, len: u32| {
        let ns = at.floor() - i128::from(T0.0);
        let phase = ns.rem_euclid(50_000);
        let end = phase + i128::from(len + 20) * 8;
        (10_000..=20_000).contains(&phase) && end <= 20_000
    };
    let overlaps = |at: Rat, len: u32| {
        let ns = at.floor() - i128::from(T0.0);
        let (s, e) = (ns, ns + i128::from(len + 20) * 8);
        let c = s.div_euclid(50_000) * 50_000;
        [c, c + 50_000].iter().any(|c| s < c + 20_000 && e > c + 10_000)
    };
    let mut be = 0;
    for s in &nic.wire {
        if let SlotKind::Real { class, .. } = s.kind {
            let at = nic.time_of(s.pos);
            if class == ClassId(0) {
                assert!(in_window(at, s.len), "real-time frame at {at:?} outside its window");
            } else {
                be += 1;
                assert!(!overlaps(at, s.len), "best effort at {at:?} in a window");
            }
        }
    }
    // The free 40 µs of each 50 µs cycle hold three 11.4 µs best-effort frames: about two per cycle at least.
    assert!(be >= 2 * 40, "best effort got through: {be}");
    // A frame longer than any window of its class is oversize for it.
    let mut st = ByteStation::new(config(1000, long), T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    assert_eq!(st.submit(frame(7, 0, Some(T0 + Nanos::from_us(510)), 200), T0), Err(Reason::Oversize));
}

#[test]
fn bad_frames_get_their_reason() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 100_000)]), rate).unwrap();
    let mut st = ByteStation::new(config(1000, windows), T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    let t = T0 + Nanos::from_ms(1);
    assert_eq!(st.submit(frame(1, 5, Some(t), 100), T0), Err(Reason::UnknownClass));
    assert_eq!(st.submit(frame(2, 0, None, 100), T0), Err(Reason::MissingTxtime));
    assert_eq!(st.submit(frame(3, 1, Some(t), 100), T0), Err(Reason::UnexpectedTxtime));
    assert_eq!(st.submit(frame(4, 0, Some(t), 1515), T0), Err(Reason::Oversize));
    assert_eq!(
        st.submit(Frame { id: FrameId(5), class: ClassId(0), txtime: Some(t), data: vec![0; 10] }, T0),
        Err(Reason::Runt)
    );
    assert_eq!(st.submit(frame(6, 0, Some(T0 + Nanos::from_ms(200)), 100), T0), Err(Reason::TooFarAhead));
    // Already posted: the wire runs 200 µs ahead.
    assert_eq!(st.submit(frame(7, 0, Some(T0 + Nanos::from_us(100)), 100), T0), Err(Reason::Late));
    assert_eq!(st.submit(frame(8, 0, Some(t), 100), T0), Ok(()));
    // Overlapping frame 8's wire time (124 bytes = 992 ns), from either side.
    assert_eq!(st.submit(frame(9, 0, Some(t + Nanos(991)), 100), T0), Err(Reason::SlotTaken));
    assert_eq!(st.submit(frame(10, 0, Some(t - Nanos(991)), 100), T0), Err(Reason::SlotTaken));
    assert_eq!(st.submit(frame(11, 0, Some(t + Nanos(992)), 100), T0), Ok(()));
    let reasons: Vec<_> = st.drain_outcomes().map(|o| (o.id.0, o.result.err())).collect();
    assert_eq!(reasons.len(), 9, "one outcome per rejected frame: {reasons:?}");
    assert!(matches!(
        ByteStation::<Vec<u8>>::new(ByteConfig { max_frame: 100, ..config(1000, st.windows().clone()) }, T0),
        Err(ByteConfigError::MaxFrame(100))
    ));
}

#[test]
fn an_idle_link_posts_the_longest_fillers() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 100_000)]), rate).unwrap();
    let (nic, _) = run(config(1000, windows), vec![], Nanos::from_ms(10), Nanos::from_us(20));
    // 10 ms at 1 Gb/s is 1.25 MB: 1538 bytes a descriptor, about 813 of them (a slot station with 300-byte slots
    // posts 3 900).
    let n = nic.wire.len();
    assert!(nic.wire.iter().all(|s| s.len == 1518));
    assert!((800..=850).contains(&n), "{n} descriptors");
}

#[test]
fn the_relaxed_policy_sends_a_frame_after_those_that_hold_its_time() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    // The window 0…6 µs of a 100 µs cycle: room for a 500-byte frame (4.16 µs on the wire) and one 100-byte frame
    // (0.99 µs) after it, not two.
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 6_000)]), rate).unwrap();
    let t = T0 + Nanos::from_us(500);
    let frames = vec![
        (T0, frame(1, 0, Some(t), 496)),             // 520 wire bytes: 4 160 ns
        (T0, frame(2, 0, Some(t), 100)),             // the same time: after frame 1, at t + 4 160 ns
        (T0, frame(3, 0, Some(t + Nanos(10)), 100)), // after frame 2: t + 4 160 + 992 > the window's 5 µs
    ];
    let relaxed = ByteConfig { policy: crate::insert::Policy::Relaxed, ..config(1000, windows.clone()) };
    let (nic, outcomes) = run(relaxed, frames.clone(), Nanos::from_ms(1), Nanos::from_us(20));
    let by_id = |id: u64| outcomes.iter().find(|o| o.id == FrameId(id)).unwrap().result;
    let s2 = by_id(2).unwrap();
    assert_eq!((s2.time, s2.scheduled), (t + Nanos(4_160), Some(t)), "back to back after frame 1, its deviation shown");
    // Frame 3 does not fit after frame 2 in this window: it goes in the next one, a cycle (100 µs) on.
    let s3 = by_id(3).unwrap();
    assert_eq!((s3.time, s3.scheduled), (t + Nanos::from_us(100), Some(t + Nanos(10))));
    let s = starts(&nic);
    assert_eq!(s[1], (FrameId(2), Rat::ns(i128::from(t.0 + 4_160)), 104));
    // Strict: the frame whose time another holds is refused.
    let (_, outcomes) = run(config(1000, windows), frames, Nanos::from_ms(1), Nanos::from_us(20));
    assert_eq!(outcomes.iter().find(|o| o.id == FrameId(2)).unwrap().result, Err(Reason::SlotTaken));
}

/// Time is checked before the window, as ETF and the slot station do: a passed txtime is `late` wherever it
/// falls, a future one outside its class's windows `not-owned`.
#[test]
fn a_passed_txtime_is_late_before_it_is_out_of_window() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 10_000)]), rate).unwrap();
    let mut st = ByteStation::new(config(1000, windows), T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    // The wire is posted 200 µs ahead: 50 µs in is passed, and outside the window (0–10 µs of each cycle).
    assert_eq!(st.submit(frame(1, 0, Some(T0 + Nanos::from_us(50)), 100), T0), Err(Reason::Late));
    assert_eq!(st.submit(frame(2, 0, Some(T0 + Nanos::from_us(1_050)), 100), T0), Err(Reason::NotOwned));
    assert_eq!(st.submit(frame(3, 0, Some(T0 + Nanos::from_us(1_005)), 100), T0), Ok(()));
}

/// `first_place`: the first time at or after a given one where a frame of the class fits a window, and the time
/// it will leave — which its `Sent` outcome then reports, to the ns.
#[test]
fn a_place_found_ahead_is_where_the_frame_leaves() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(10_000, 5_000), (60_000, 20_000)]), rate).unwrap();
    let cfg = config(1000, windows);
    let mut st = ByteStation::<Vec<u8>>::new(cfg.clone(), T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    let rt = ClassId(0);
    let cycle = T0 + Nanos::from_ms(1);
    // Before a window: its opening. 200 B take 1.792 µs of wire (with FCS, preamble and gap).
    let p1 = st.first_place(rt, cycle + Nanos(3), 200).unwrap();
    assert_eq!(p1.txtime, cycle + Nanos(10_000));
    assert!(p1.tx >= p1.txtime && p1.tx - p1.txtime <= Nanos(8), "{p1:?}");
    assert!(p1.end - p1.tx >= Nanos(1_792) && p1.end - p1.tx <= Nanos(1_793), "{p1:?}");
    // Inside the first window but too late for the frame to end in it: the next window.
    let p2 = st.first_place(rt, cycle + Nanos(13_500), 200).unwrap();
    assert_eq!(p2.txtime, cycle + Nanos(60_000));
    // Right after a frame: at its end.
    let p3 = st.first_place(rt, p2.end, 1500).unwrap();
    assert_eq!(p3.txtime, p2.end);
    assert!((p3.tx - p3.txtime).0.abs() <= 4, "{p3:?}");
    // Longer than every window of the class, or best effort: nowhere.
    let short = Windows::new(T0, Nanos::from_us(100), &classes(&[(10_000, 1_000)]), rate).unwrap();
    let st2 = ByteStation::<Vec<u8>>::new(config(1000, short), T0).unwrap();
    assert_eq!(st2.first_place(rt, cycle, 200), None);
    assert_eq!(st.first_place(ClassId(1), cycle, 200), None);
    // Handed in with those txtimes, the frames leave exactly then.
    let frames = [(1, p1), (2, p2), (3, p3)]
        .iter()
        .map(|&(id, p)| (T0 + Nanos::from_us(300), frame(id, 0, Some(p.txtime), if id == 3 { 1500 } else { 200 })))
        .collect();
    let (_, outcomes) = run(cfg, frames, Nanos::from_ms(2), Nanos::from_us(20));
    for (id, p) in [(1, p1), (2, p2), (3, p3)] {
        let o = outcomes.iter().find(|o| o.id == FrameId(id)).unwrap();
        assert_eq!(o.result.map(|s| s.time), Ok(p.tx), "frame {id}");
    }
}

/// A 1 Gb/s byte clock whose one class has the whole cycle, up at `T0`, with frame 1 waiting for `T0` + 1 ms and
/// frame 2 for `T0` + 5 ms.
fn two_waiting() -> ByteStation<Vec<u8>> {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 100_000)]), rate).unwrap();
    let mut st = ByteStation::new(config(1000, windows), T0).unwrap();
    let first = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    assert!(!first.post.is_empty());
    assert_eq!(st.submit(frame(1, 0, Some(T0 + Nanos::from_ms(1)), 100), T0), Ok(()));
    assert_eq!(st.submit(frame(2, 0, Some(T0 + Nanos::from_ms(5)), 100), T0), Ok(()));
    st
}

/// A host stall longer than the lead drains the ring: the wire goes idle and restarts later. Frames due in the
/// time the wire lost are rejected `underrun` (waiting ones when their turn comes, new ones at admission), not
/// `late`; a frame due after it still goes.
#[test]
fn frames_due_while_the_link_was_idle_are_underruns() {
    let mut st = two_waiting();
    // 2 ms later the NIC has sent all it had (the 200 µs posted): idle since.
    let now = T0 + Nanos::from_ms(2);
    let posted = st.ring().posted();
    let p = st.poll(Observation { consumed: posted, now, gaps: &[] }).unwrap();
    assert_eq!(p.underruns.len(), 1, "the station saw the link idle");
    assert_eq!(st.submit(frame(3, 0, Some(T0 + Nanos::from_us(1_500)), 100), now), Err(Reason::Underrun));
    let mut reasons: Vec<_> = st.drain_outcomes().map(|o| (o.id.0, o.result.err())).collect();
    reasons.sort_unstable();
    assert_eq!(reasons, [(1, Some(Reason::Underrun)), (3, Some(Reason::Underrun))]);
    // A passed time the stall did not cover is still `late`.
    assert_eq!(st.submit(frame(4, 0, Some(T0 + Nanos::from_us(100)), 100), now), Err(Reason::Late));
    assert_eq!(st.in_flight(), 1, "frame 2 (due after the stall) waits for its byte");
}

/// A clock step forward skips time: a waiting frame due in the skipped time is rejected `clock-step` when its turn
/// comes (and a new one at admission), not `late`; a frame due after the step still goes.
#[test]
fn frames_due_in_time_a_clock_step_skipped_are_clock_steps() {
    let mut st = two_waiting();
    // PTP steps the clock 2 ms forward: the wire's next byte is now 2 ms later on network time.
    st.adjust_clock(ClockAdjust::Step(Nanos::from_ms(2))).unwrap();
    let posted = st.ring().posted();
    let _ = st.poll(Observation { consumed: posted / 2, now: T0 + Nanos::from_us(100), gaps: &[] }).unwrap();
    let reasons: Vec<_> = st.drain_outcomes().map(|o| (o.id.0, o.result.err())).collect();
    assert_eq!(reasons, [(1, Some(Reason::ClockStep))]);
    assert_eq!(
        st.submit(frame(3, 0, Some(T0 + Nanos::from_us(1_500)), 100), T0 + Nanos::from_us(100)),
        Err(Reason::ClockStep)
    );
    assert_eq!(st.in_flight(), 1, "frame 2 (due after the step) waits for its byte");
}

/// A live change of windows: frames due before the switch follow the old windows, frames due after it the new
/// ones, whenever they were submitted; a frame for an old window after the switch is `schedule-change`, one for a
/// new window before it `not-owned`; nothing is lost.
#[test]
fn a_change_of_windows_takes_effect_at_its_cycle_start() {
    let mbps = 1000;
    let rate = LinkRate::from_mbps(mbps).unwrap();
    let cycle = Nanos::from_us(100);
    let old = Windows::new(T0, cycle, &classes(&[(10_000, 20_000)]), rate).unwrap();
    let new = Windows::new(T0, cycle, &classes(&[(50_000, 20_000)]), rate).unwrap();
    // One frame at offset 20 µs (old window) and one at 60 µs (new window) of every cycle 5..30, handed in 900 µs
    // ahead; best effort between.
    let mut frames = Vec::new();
    for n in 5..30i64 {
        for (k, off) in [(0u64, 20_000i64), (1, 60_000)] {
            let t = T0 + Nanos(n * cycle.0 + off);
            frames.push((t - Nanos::from_us(900), frame(2 * n as u64 + k, 0, Some(t), 200)));
        }
        frames.push((T0 + Nanos(n * cycle.0), frame(1000 + n as u64, 1, None, 300)));
    }
    // Asked for at 1 ms (a few frames after the switch already waiting), for 1.55 ms: the switch is 1.6 ms.
    let mut change = None;
    let hook = |st: &mut ByteStation<Vec<u8>>, now: Tai| {
        if change.is_none() && now >= T0 + Nanos::from_ms(1) {
            change = Some(st.change_windows(T0 + Nanos::from_us(1550), new.clone()));
            assert_eq!(st.pending_change().map(|(t, _)| t), Some(T0 + Nanos::from_us(1600)));
        }
    };
    let (nic, outcomes) = run_with(config(mbps, old), frames, Nanos::from_ms(4), Nanos::from_us(20), hook);
    let change = change.expect("asked").expect("accepted");
    assert_eq!(change.time, T0 + Nanos::from_us(1600));
    let switch = T0 + Nanos::from_us(1600);
    let sent: Vec<_> = starts(&nic);
    let mut waiting_rejected = 0;
    for n in 5..30i64 {
        for (k, off) in [(0u64, 20_000i64), (1, 60_000)] {
            let id = FrameId(2 * n as u64 + k);
            let t = T0 + Nanos(n * cycle.0 + off);
            let o = outcomes.iter().filter(|o| o.id == id).collect::<Vec<_>>();
            assert_eq!(o.len(), 1, "frame {id:?}: {o:?}");
            let before = t < switch;
            // A frame for a new window handed in before the change was asked for was `not-owned` then.
            let known = t - Nanos::from_us(900) >= T0 + Nanos::from_ms(1);
            match (k, before) {
                (0, true) | (1, false) if k == 0 || known => {
                    assert!(o[0].result.is_ok(), "frame {id:?} at {t:?} (switch {switch:?}): {o:?}");
                    let (_, at, _) = sent.iter().find(|(i, _, _)| *i == id).expect("on the wire");
                    assert!((*at - Rat::ns(i128::from(t.0))).floor().abs() <= 8, "frame {id:?} at {at:?}, due {t:?}");
                }
                (0, false) => {
                    assert_eq!(o[0].result, Err(Reason::ScheduleChange), "frame {id:?} at {t:?}");
                    // Submitted before the change (due by 1.9 ms): rejected by the change itself.
                    if t < T0 + Nanos::from_us(1900) {
                        waiting_rejected += 1;
                    }
                }
                _ => assert_eq!(o[0].result, Err(Reason::NotOwned), "frame {id:?} at {t:?}"),
            }
        }
    }
    assert!(waiting_rejected > 0 && change.rejected > 0, "no waiting frame was decided again: {change:?}");
    // Best effort never in a window of either side.
    for s in &nic.wire {
        if let SlotKind::Real { class: ClassId(1), .. } = s.kind {
            let t = nic.time_of(s.pos);
            let end = t + Rat { num: i128::from(s.len + 20) * 8, den: 1 };
            let w = if t < Rat::ns(i128::from(switch.0)) { (10_000, 30_000) } else { (50_000, 70_000) };
            let off = (t - Rat::ns(i128::from(T0.0))).floor().rem_euclid(100_000);
            let end_off = off + (end - t).ceil();
            assert!(end_off <= w.0 || off >= w.1, "best effort at offset {off} into a window {w:?}");
        }
    }
    assert!(outcomes.iter().filter(|o| o.class == ClassId(1)).all(|o| o.result.is_ok()));
}

/// Changes the byte clock refuses, naming why: another cycle, other classes, a switch the wire has passed.
#[test]
fn a_change_the_byte_clock_cannot_take_is_refused() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let cycle = Nanos::from_us(100);
    let old = Windows::new(T0, cycle, &classes(&[(10_000, 20_000)]), rate).unwrap();
    let mut st: ByteStation<Vec<u8>> = ByteStation::new(config(1000, old), T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    let other = Windows::new(T0, Nanos::from_us(200), &classes(&[(10_000, 20_000)]), rate).unwrap();
    assert!(matches!(st.change_windows(T0 + Nanos::from_ms(5), other), Err(ChangeError::Cycle { .. })));
    let mut renamed = classes(&[(10_000, 20_000)]);
    renamed[0].name = "tc".into();
    let renamed = Windows::new(T0, cycle, &renamed, rate).unwrap();
    assert!(matches!(st.change_windows(T0 + Nanos::from_ms(5), renamed), Err(ChangeError::Classes(_))));
    let new = Windows::new(T0, cycle, &classes(&[(50_000, 20_000)]), rate).unwrap();
    match st.change_windows(T0, new.clone()) {
        Err(ChangeError::InThePast { earliest, .. }) => assert!(earliest > T0, "{earliest:?}"),
        other => panic!("a switch the wire has passed: {other:?}"),
    }
    assert!(st.pending_change().is_none(), "a refused change changes nothing");
    assert!(st.change_windows(T0 + Nanos::from_ms(5), new).is_ok());
}

/// Best-effort frames longer than every stretch the new windows leave free are rejected `schedule-change` when
/// they take effect (each would wait for ever, and every best-effort frame behind it); those sent before the
/// switch kept to the old free time.
#[test]
fn best_effort_the_new_windows_leave_no_room_for_is_rejected_at_the_switch() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let cycle = Nanos::from_us(40);
    // 28 µs of every 40 free, then 5: two 1400-byte frames (11.4 µs each) fit a stretch, then none.
    let old = Windows::new(T0, cycle, &classes(&[(0, 12_000)]), rate).unwrap();
    let new = Windows::new(T0, cycle, &classes(&[(0, 35_000)]), rate).unwrap();
    // Twenty of them at 120 µs: ten stretches' worth, more than there are before the switch at 400 µs.
    let frames: Vec<_> = (0..20u64).map(|i| (T0 + Nanos::from_us(120), frame(i, 1, None, 1400))).collect();
    let hook = |st: &mut ByteStation<Vec<u8>>, now: Tai| {
        if now == T0 + Nanos::from_us(100) {
            assert!(st.change_windows(T0 + Nanos::from_us(400), new.clone()).is_ok());
        }
    };
    let (nic, outcomes) = run_with(config(1000, old), frames, Nanos::from_ms(2), Nanos::from_us(20), hook);
    assert_eq!(outcomes.len(), 20, "{outcomes:?}");
    let late = outcomes.iter().filter(|o| o.result == Err(Reason::ScheduleChange)).count();
    let sent = outcomes.iter().filter(|o| o.result.is_ok()).count();
    assert!(late > 0 && sent > 0 && late + sent == 20, "{sent} sent, {late} schedule-change: {outcomes:?}");
    for s in &nic.wire {
        if let SlotKind::Real { .. } = s.kind {
            let t = nic.time_of(s.pos);
            let off = (t - Rat::ns(i128::from(T0.0))).floor();
            assert!(off < 400_000 && off.rem_euclid(40_000) >= 12_000, "best effort at {off} ns");
        }
    }
}

/// At a window's edges the byte nearest the txtime may put the frame outside its window: it then starts on the
/// byte after (at the opening) or before (at the close), inside the window — less than a byte from its txtime, and
/// its outcome says where (issue 29, point 12: the bound is a byte there, half a byte elsewhere).
#[test]
fn at_a_windows_edges_a_frame_stays_inside_within_a_byte() {
    let rate = LinkRate::from_mbps(1000).unwrap(); // bytes of 8 ns from T0
    let (open, close) = (10_003i64, 50_007i64);
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(open, close - open)]), rate).unwrap();
    let cycle = T0 + Nanos::from_us(500);
    // A 100-byte frame on the wire: 992 ns.
    let span = (100 + 4 + 20) * 8;
    // At the close: the frame ends exactly at it; the nearest byte (1 ns later) would run 1 ns past it.
    let late_edge = cycle + Nanos(close - span);
    // At the opening: the nearest byte (3 ns earlier) is before it.
    let open_edge = cycle + Nanos(open);
    let frames = vec![(T0, frame(0, 0, Some(late_edge), 100)), (T0, frame(1, 0, Some(open_edge), 100))];
    let (nic, outcomes) = run(config(1000, windows), frames, Nanos::from_ms(1), Nanos::from_us(20));
    let sent: Vec<_> = outcomes.iter().map(|o| o.result.unwrap()).collect();
    let by_id = |id: u64| outcomes.iter().position(|o| o.id.0 == id).unwrap();
    // Close: 7 ns early (the byte before), ending 1 ns before the close.
    assert_eq!(sent[by_id(0)].time, Tai(late_edge.0 - 7));
    // Opening: 5 ns late (the byte after the opening).
    assert_eq!(sent[by_id(1)].time, Tai(open_edge.0 + 5));
    for (id, at, len) in starts(&nic) {
        let start = at.num / at.den;
        let end = start + i128::from(len + 20) * 8;
        let (o, c) = (i128::from((cycle + Nanos(open)).0), i128::from((cycle + Nanos(close)).0));
        assert!(start >= o && end <= c, "{id:?} at {start}..{end} outside {o}..{c}");
    }
}

/// Best effort is FIFO per class and round-robin over classes, as on the slot station (issue 30: the two stations
/// disagreed — one FIFO here): a flood of one best-effort class does not hold back another's frame.
#[test]
fn best_effort_classes_take_turns() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let mut cls = classes(&[(0, 10_000)]);
    cls.push(ClassWindows { name: "be2".into(), windows: vec![] });
    let windows = Windows::new(T0, Nanos::from_us(100), &cls, rate).unwrap();
    // 40 frames of class 1, then one of class 2, all handed in at once.
    let mut frames: Vec<_> = (0..40u64).map(|i| (T0, frame(i, 1, None, 1000))).collect();
    frames.push((T0, frame(40, 2, None, 1000)));
    let (nic, outcomes) = run(config(1000, windows), frames, Nanos::from_ms(2), Nanos::from_us(20));
    assert!(outcomes.iter().all(|o| o.result.is_ok()), "{outcomes:?}");
    let order: Vec<u64> = starts(&nic).iter().map(|(id, _, _)| id.0).collect();
    assert_eq!(order.len(), 41);
    let at = order.iter().position(|&id| id == 40).unwrap();
    assert!(at <= 1, "class 2's frame went out {at}th, behind class 1's flood: {order:?}");
}

/// Host times inside a restart's gap (after an underrun the wire restarts at `now + post_latency`) read back from
/// the restart, on its clock: the EPHC is continuous and runs at the host's rate through the gap, as on the slot
/// station (`station::tests::host_times_inside_a_gap_read_back_from_the_restart`).
#[test]
fn host_times_inside_a_gap_read_back_from_the_restart() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 10_000)]), rate).unwrap();
    let cfg = ByteConfig { post_latency: Nanos::from_us(50), ..config(1000, windows) };
    let mut st: ByteStation<Vec<u8>> = ByteStation::new(cfg, T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    // 2 ms later everything posted has gone: an underrun, the wire restarting 50 µs on.
    let now = T0 + Nanos::from_ms(2);
    let posted = st.ring().posted();
    let p = st.poll(Observation { consumed: posted, now, gaps: &[] }).unwrap();
    assert_eq!(p.underruns.len(), 1);
    let base = st.ephc_at(now);
    for us in (0..=60).step_by(5) {
        let t = now + Nanos::from_us(us);
        assert_eq!(st.ephc_at(t), base + Nanos::from_us(us), "{us} µs into the gap");
    }
}

/// The same inside a gap the backend saw: host times between where the wire stopped and its reported restart read
/// back from the restart (`station::tests::host_times_inside_a_reported_gap_read_back_from_the_restart`).
#[test]
fn host_times_inside_a_reported_gap_read_back_from_the_restart() {
    let rate = LinkRate::from_mbps(1000).unwrap();
    let windows = Windows::new(T0, Nanos::from_us(100), &classes(&[(0, 10_000)]), rate).unwrap();
    let mut st: ByteStation<Vec<u8>> = ByteStation::new(config(1000, windows), T0).unwrap();
    let _ = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    // The backend saw descriptor 3 start 70 µs later than the host's view had it.
    let expected = st.host.time_of(st.track.start(3).unwrap());
    let restart = expected + Nanos::from_us(70);
    let gaps = [crate::station::Gap { at: 3, restart }];
    let _ = st.poll(Observation { consumed: 3, now: T0 + Nanos::from_us(100), gaps: &gaps }).unwrap();
    let at_restart = st.ephc_at(restart);
    for us in (0..=60).step_by(5) {
        let t = restart - Nanos::from_us(us);
        assert_eq!(st.ephc_at(t), at_restart - Nanos::from_us(us), "{us} µs before the restart");
    }
}

/// The link comes up off the schedule's byte grid (the schedule's base 37 ns past a byte boundary of the first poll,
/// bytes of 80 ns at 100 Mb/s): the byte clock snaps its EPHC onto the schedule's grid, as the slot station does
/// (`station::tests::a_late_report_of_the_link_up_keeps_the_byte_grid_on_the_schedule`), so a frame due on that
/// grid starts exactly at its txtime — not 37 ns early, on the nearest byte of a grid anchored at the first poll.
/// The backend's later report of the real start is snapped too.
#[test]
fn the_link_up_is_snapped_onto_the_schedules_byte_grid() {
    let rate = LinkRate::from_mbps(100).unwrap();
    let base = T0 + Nanos(37);
    let windows = Windows::new(base, Nanos::from_us(100), &classes(&[(0, 50_000)]), rate).unwrap();
    let frames: Vec<_> = (0..20u64)
        .map(|i| {
            let t = base + Nanos::from_us(1000 + 100 * i as i64 + 4);
            (T0, frame(i, 0, Some(t), 100))
        })
        .collect();
    let (_, outcomes) = run(config(100, windows.clone()), frames, Nanos::from_ms(4), Nanos::from_us(20));
    assert_eq!(outcomes.len(), 20);
    for o in &outcomes {
        let sent = o.result.unwrap_or_else(|e| panic!("{:?}: {e:?}", o.id));
        assert_eq!(Some(sent.time), sent.scheduled, "{:?} off its txtime", o.id);
    }
    // A backend that reports where the link really came up (3 ns after the estimate): snapped too.
    let mut st = ByteStation::new(config(100, windows), T0).unwrap();
    let p = st.poll(Observation { consumed: 0, now: T0, gaps: &[] }).unwrap();
    assert!(p.post.end > 0);
    let on_grid = |st: &ByteStation<Vec<u8>>| (st.ephc().time_of(0).0 - base.0).rem_euclid(80);
    assert_eq!(on_grid(&st), 0);
    let gap = crate::station::Gap { at: 0, restart: T0 + Nanos(3) };
    let _ = st.poll(Observation { consumed: 1, now: T0 + Nanos(2_000), gaps: &[gap] }).unwrap();
    assert_eq!(on_grid(&st), 0, "EPHC of byte 0: {:?}", st.ephc().time_of(0));
    assert_eq!(st.ephc().time_of(0), base, "the first grid byte at or after the reported start");
}
