use super::*;
use proptest::prelude::*;

fn vector(history: u32) -> Recovery {
    Recovery::new(RecoveryConfig::new(Algorithm::Vector { history }, Nanos::from_ms(100)).unwrap())
}

fn run(r: &mut Recovery, seqs: &[u16]) -> Vec<Verdict> {
    seqs.iter().map(|&s| r.recover(Tai(1_000), Some(s))).collect()
}

use Verdict::{Duplicate as D, Pass as P, PassOutOfOrder as O, Rogue as R};

#[test]
fn settings_are_checked() {
    let reset = Nanos::from_ms(1);
    assert_eq!(RecoveryConfig::new(Algorithm::Vector { history: 1 }, reset), Err(FrerError::History(1)));
    assert_eq!(
        RecoveryConfig::new(Algorithm::Vector { history: MAX_HISTORY + 1 }, reset),
        Err(FrerError::History(MAX_HISTORY + 1))
    );
    assert_eq!(RecoveryConfig::new(Algorithm::Match, Nanos(0)), Err(FrerError::ResetTimeout(0)));
    let d = RecoveryConfig::default();
    assert_eq!((d.algorithm(), d.reset()), (Algorithm::Vector { history: 2 }, Nanos::from_ms(1_000)));
}

/// Two copies of each frame: the first passes, the second is discarded; a gap in one path is filled by the other.
#[test]
fn vector_passes_the_first_copy_only() {
    let mut r = vector(4);
    assert_eq!(run(&mut r, &[10, 10, 11, 12, 11, 12]), [P, D, P, P, D, D]);
    // 13 lost on path A, carried by B behind A's 14.
    assert_eq!(run(&mut r, &[14, 13, 14, 13]), [O, O, D, D]);
    let c = r.counters();
    assert_eq!((c.passed, c.discarded, c.out_of_order, c.lost, c.rogue), (5, 5, 2, 0, 0));
}

/// Far from the window in either direction is rogue (discarded, the history unchanged); a number never seen
/// that slides out of the window is lost — but not the ones before the frame that ended take-any.
#[test]
fn vector_counts_rogue_and_lost() {
    let mut r = vector(4);
    assert_eq!(run(&mut r, &[100, 104, 96, 97, 101, 103]), [P, R, R, O, P, O]);
    // Window now 100..=103 with 102 unseen; sliding to 107 pushes out 100..=103 (102 lost), 104..=106 unseen.
    assert_eq!(run(&mut r, &[106]), [O]);
    assert_eq!(r.counters().lost, 1);
    assert_eq!(run(&mut r, &[102, 104, 107]), [R, O, P]);
    // Sliding past 105 and 106: 105 leaves unseen.
    assert_eq!(run(&mut r, &[108, 109]), [P, P]);
    let c = r.counters();
    assert_eq!((c.passed, c.rogue, c.lost, c.out_of_order), (9, 3, 2, 4));
}

/// Sequence numbers wrap at 2¹⁶; Δ is taken in 16-bit signed arithmetic.
#[test]
fn vector_wraps() {
    let mut r = vector(8);
    assert_eq!(run(&mut r, &[65_534, 65_535, 0, 65_535, 1, 0, 2]), [P, P, P, D, P, D, P]);
    assert_eq!(run(&mut r, &[32_770]), [R]);
    assert_eq!(r.counters().out_of_order, 0);
}

/// The reset timer: after `reset` without a frame passed, any number is taken again (counted once per
/// silence); duplicates and rogues do not restart it.
#[test]
fn reset_timeout_takes_any() {
    let mut r = vector(4);
    assert_eq!(r.recover(Tai(0), Some(5)), P);
    assert_eq!(r.recover(Tai(50_000_000), Some(5)), D);
    assert_eq!(r.recover(Tai(99_999_999), Some(500)), R);
    r.poll(Tai(100_000_000));
    assert!(r.takes_any());
    r.poll(Tai(900_000_000));
    assert_eq!(r.recover(Tai(900_000_001), Some(5)), P, "a copy after the reset is passed again");
    assert_eq!(r.recover(Tai(900_000_002), Some(500)), R);
    assert_eq!(r.counters().resets, 1);
}

/// Match recovery: only the last number passed is a duplicate.
#[test]
fn match_discards_only_a_repeat_of_the_last() {
    let mut r = Recovery::new(RecoveryConfig::new(Algorithm::Match, Nanos::from_ms(10)).unwrap());
    assert_eq!(run(&mut r, &[7, 7, 8, 8, 10, 9, 9, 65_535]), [P, D, P, D, O, O, D, O]);
    assert_eq!(r.recover(Tai(1_000), Some(0)), P);
    assert_eq!(r.recover(Tai(1_000), None), Verdict::Tagless);
    let c = r.counters();
    assert_eq!((c.passed, c.discarded, c.out_of_order, c.lost, c.rogue, c.tagless), (6, 3, 3, 0, 0, 1));
    assert_eq!(r.recover(Tai(20_000_000), Some(0)), P, "after the reset timeout");
    assert_eq!(r.counters().resets, 1);
}

/// The reference the proptests compare with: the vector algorithm restated on unwrapped sequence numbers with a
/// set of numbers passed instead of a window of bits.
struct Reference {
    history: u64,
    passed: std::collections::BTreeSet<u64>,
    first: Option<u64>,
    top: u64,
}

impl Reference {
    fn judge(&mut self, s: u64) -> Verdict {
        let Some(_) = self.first else {
            self.first = Some(s);
            self.top = s;
            self.passed.insert(s);
            return P;
        };
        if s.abs_diff(self.top) >= self.history {
            return R;
        }
        if !self.passed.insert(s) {
            return D;
        }
        let next = s == self.top + 1;
        self.top = self.top.max(s);
        if next {
            P
        } else {
            O
        }
    }

    /// Numbers from the first passed on that left the window (more than `history − 1` below the top) unseen.
    fn lost(&self) -> u64 {
        let Some(first) = self.first else { return 0 };
        (first..=self.top.saturating_sub(self.history)).filter(|s| !self.passed.contains(s)).count() as u64
    }
}

/// Two copies of sequence numbers `base, base + 1, …` (16-bit: they wrap), each copy lost or not on its path,
/// path B behind path A by `skew` frames, each arrival jittered within a frame time.
fn arrivals(base: u16, lost: &[(bool, bool)], skew: u64, jitter: &[(u8, u8)]) -> Vec<u64> {
    let mut t: Vec<(u64, u64)> = Vec::new();
    for (i, ((lose_a, lose_b), (ja, jb))) in lost.iter().zip(jitter).enumerate() {
        let i = i as u64;
        let s = u64::from(base) + i;
        if !lose_a {
            t.push((i * 16 + u64::from(*ja % 16), s));
        }
        if !lose_b {
            t.push(((i + skew) * 16 + u64::from(*jb % 16), s));
        }
    }
    t.sort();
    t.into_iter().map(|(_, s)| s).collect()
}

proptest! {
    /// Any interleaving of two copies with losses on each path, path B up to `history − 2` frames behind: every
    /// sequence number that at least one path carried is passed exactly once, and the counters add up. (The
    /// window must hold the skew plus one: path A may run a frame ahead of the top while B's copy of the frame
    /// A lost is still on its way, so a skew of `history − 1` can make A's next frame rogue.)
    #[test]
    fn two_lossy_copies_deliver_every_number_once(
        base: u16,
        history in 2u32..64,
        skew_pick: u32,
        lost in prop::collection::vec((any::<bool>(), any::<bool>()), 1..300),
        jitter in prop::collection::vec((any::<u8>(), any::<u8>()), 300),
    ) {
        let skew = u64::from(skew_pick % (history - 1));
        // At least one copy of each: where both were lost, B's arrives.
        let lost: Vec<(bool, bool)> = lost.into_iter().map(|(a, b)| (a, b && !a)).collect();
        let mut r = vector(history);
        let mut count = std::collections::BTreeMap::<u16, u32>::new();
        let seen = arrivals(base, &lost, skew, &jitter);
        for &s in &seen {
            if r.recover(Tai(1), Some(s as u16)).passes() {
                *count.entry(s as u16).or_default() += 1;
            }
        }
        prop_assert_eq!(count.len(), lost.len());
        prop_assert!(count.values().all(|&n| n == 1));
        let c = r.counters();
        prop_assert_eq!(c.passed, lost.len() as u64);
        prop_assert_eq!(c.passed + c.discarded + c.rogue, seen.len() as u64);
        prop_assert_eq!(c.lost, 0);
    }

    /// Any arrival order at all (copies, losses, reordering, strays): the verdicts and counters are the
    /// reference's, and no number is passed twice.
    #[test]
    fn vector_matches_the_reference(
        base in 0u64..200_000,
        history in 2u32..40,
        offsets in prop::collection::vec(0u64..120, 1..400),
    ) {
        let mut r = vector(history);
        let mut reference = Reference {
            history: u64::from(history),
            passed: Default::default(),
            first: None,
            top: 0,
        };
        let (mut passed, mut oo, mut dup, mut rogue) = (0u64, 0u64, 0u64, 0u64);
        for (i, o) in offsets.iter().enumerate() {
            // A walk that mostly advances and sometimes jumps back or ahead.
            let s = base + i as u64 / 2 + o / 3;
            let want = reference.judge(s);
            prop_assert_eq!(r.recover(Tai(1), Some(s as u16)), want, "frame {} seq {}", i, s);
            passed += u64::from(want.passes());
            oo += u64::from(want == O);
            dup += u64::from(want == D);
            rogue += u64::from(want == R);
        }
        let c = r.counters();
        prop_assert_eq!((c.passed, c.out_of_order, c.discarded, c.rogue), (passed, oo, dup, rogue));
        prop_assert_eq!(c.lost, reference.lost());
        prop_assert_eq!(passed, reference.passed.len() as u64);
    }
}
