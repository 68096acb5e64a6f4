//! The sequence recovery function of IEEE 802.1CB: pass the first copy of each sequence number of a stream,
//! discard the others, and count what happened.
//!
//! Two algorithms, as the standard defines them (written here from its description, not from another
//! implementation):
//!
//! - **Vector recovery** keeps `RecovSeqNum`, the highest sequence number passed, and a history of the last
//!   `history` sequence numbers up to it (one bit each: seen or not). For a frame with sequence number `s`, let
//!   `Δ = s − RecovSeqNum` in 16-bit signed arithmetic:
//!
//!   ```text
//!   |Δ| ≥ history          rogue: discarded, counted `rogue` (too far from the window to judge)
//!   −history < Δ ≤ 0       in the window: seen → discarded (`discarded`); not seen → passed, marked,
//!                           counted `out_of_order`
//!   0 < Δ < history        ahead: the window slides by Δ (each sequence number that leaves it unseen is
//!                           counted `lost`), `s` is marked and becomes RecovSeqNum; passed, and counted
//!                           `out_of_order` if Δ ≠ 1
//!   ```
//!
//! - **Match recovery** keeps only the last sequence number passed: the same number again is discarded, any
//!   other is passed (counted `out_of_order` unless it is the next one).
//!
//! Both start in the **take-any** state: the first frame is passed whatever its number and starts the history.
//! Every frame passed restarts the **reset timer**; when `reset` passes without one (checked at the next frame
//! or [`Recovery::poll`], time passed in), the recovery goes back to take-any and counts a `resets` — once per
//! silence, not again while it already takes any. Frames without an R-TAG are passed and counted `tagless`.
//!
//! One deviation, on purpose: the standard counts as `lost` every unseen bit that slides out of the history,
//! including the bits for sequence numbers *before* the frame that ended take-any, which nobody sent to this
//! recovery (an erratum the IEEE 802.1 maintenance list records against the vector algorithm). Here only sequence
//! numbers from that frame on are counted lost.

use alloc::vec;
use alloc::vec::Vec;

use super::FrerError;
use crate::time::{Nanos, Tai};

/// Shortest history (the standard's minimum, and its default).
pub const MIN_HISTORY: u32 = 2;
/// Longest history: half the sequence space, beyond which `Δ` is ambiguous.
pub const MAX_HISTORY: u32 = 1 << 15;
/// Default history length (`frerSeqRcvyHistoryLength`'s default).
pub const DEFAULT_HISTORY: u32 = 2;
/// Default reset timeout (`frerSeqRcvyResetMSec`): one second, what TSN bridges commonly default to.
pub const DEFAULT_RESET: Nanos = Nanos::from_ms(1_000);

/// Which recovery algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The vector recovery algorithm with a history of this many sequence numbers.
    Vector {
        /// History length, `MIN_HISTORY..=MAX_HISTORY`.
        history: u32,
    },
    /// The match recovery algorithm.
    Match,
}

/// A stream's recovery settings, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryConfig {
    algorithm: Algorithm,
    reset: Nanos,
}

impl RecoveryConfig {
    /// Check the settings: a history within `MIN_HISTORY..=MAX_HISTORY`, a positive reset timeout.
    pub fn new(algorithm: Algorithm, reset: Nanos) -> Result<RecoveryConfig, FrerError> {
        if let Algorithm::Vector { history } = algorithm {
            if !(MIN_HISTORY..=MAX_HISTORY).contains(&history) {
                return Err(FrerError::History(history));
            }
        }
        if reset.0 <= 0 {
            return Err(FrerError::ResetTimeout(reset.0));
        }
        Ok(RecoveryConfig { algorithm, reset })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The reset timeout.
    pub fn reset(&self) -> Nanos {
        self.reset
    }
}

impl Default for RecoveryConfig {
    /// Vector recovery, the default history and reset timeout.
    fn default() -> RecoveryConfig {
        RecoveryConfig { algorithm: Algorithm::Vector { history: DEFAULT_HISTORY }, reset: DEFAULT_RESET }
    }
}

/// What became of one frame.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Passed: the first copy of its sequence number, the next one expected.
    Pass,
    /// Passed: the first copy of its sequence number, but not the next one expected.
    PassOutOfOrder,
    /// Passed: it has no sequence number (no R-TAG).
    Tagless,
    /// Discarded: a copy of a sequence number already passed.
    Duplicate,
    /// Discarded: its sequence number is too far from the history to judge.
    Rogue,
}

impl Verdict {
    /// True if the frame is passed on.
    pub fn passes(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::PassOutOfOrder | Verdict::Tagless)
    }

    /// The verdict's name in records: `passed`, `discarded` (a duplicate) or `rogue`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass | Verdict::PassOutOfOrder | Verdict::Tagless => "passed",
            Verdict::Duplicate => "discarded",
            Verdict::Rogue => "rogue",
        }
    }
}

/// The standard's per-stream counters (`frerCpsSeqRcvy…`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames with a sequence number passed (`PassedPackets`).
    pub passed: u64,
    /// Copies discarded as duplicates (`DiscardedPackets`).
    pub discarded: u64,
    /// Frames passed out of order (`OutOfOrderPackets`).
    pub out_of_order: u64,
    /// Sequence numbers never seen before they left the history (`LostPackets`; vector recovery only).
    pub lost: u64,
    /// Frames discarded as too far from the history (`RoguePackets`; vector recovery only).
    pub rogue: u64,
    /// Timeouts that sent the recovery back to take-any (`Resets`).
    pub resets: u64,
    /// Frames without a sequence number, passed (`TaglessPackets`).
    pub tagless: u64,
}

/// The vector algorithm's history: a bit per sequence number `RecovSeqNum − d`, `d` in `0..len`, in a ring of
/// bits whose slot `head` holds `d = 0`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct History {
    bits: Vec<u64>,
    len: u32,
    head: u32,
    /// How many of the newest positions (`d < known`) hold sequence numbers at or after the one that ended
    /// take-any: only those are counted lost when they leave unseen.
    known: u32,
}

impl History {
    /// A history of `len` with only `d = 0` seen.
    fn new(len: u32) -> History {
        let mut h = History { bits: vec![0; len.div_ceil(64) as usize], len, head: 0, known: 1 };
        h.set(0);
        h
    }

    /// Ring slot of position `d` (`d < len`).
    fn slot(&self, d: u32) -> u32 {
        debug_assert!(d < self.len);
        (self.head + self.len - d) % self.len
    }

    fn get(&self, d: u32) -> bool {
        let i = self.slot(d);
        self.bits[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    fn set(&mut self, d: u32) {
        let i = self.slot(d);
        self.bits[(i / 64) as usize] |= 1 << (i % 64);
    }

    /// Slide the window `by` sequence numbers ahead (`0 < by < len`): the oldest `by` positions leave, each
    /// counted lost if unseen and known; the new newest positions start unseen. Returns the count lost.
    fn slide(&mut self, by: u32) -> u64 {
        debug_assert!(0 < by && by < self.len);
        let mut lost = 0;
        for _ in 0..by {
            // The oldest position, d = len − 1, is the slot after head; it becomes the new d = 0.
            self.head = (self.head + 1) % self.len;
            let (w, b) = ((self.head / 64) as usize, self.head % 64);
            let seen = self.bits[w] >> b & 1 == 1;
            lost += u64::from(!seen && self.known == self.len);
            self.bits[w] &= !(1 << b);
            self.known = (self.known + 1).min(self.len);
        }
        lost
    }
}

/// Where a stream's recovery is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// After a reset: the next frame is passed whatever its number.
    TakeAny,
    /// Vector recovery: the highest number passed and the history up to it.
    Vector { recov: u16, history: History },
    /// Match recovery: the last number passed.
    Match { recov: u16 },
}

/// One stream's sequence recovery function.
#[derive(Clone, Debug)]
pub struct Recovery {
    config: RecoveryConfig,
    state: State,
    /// When a frame was last passed (the reset timer's start).
    last_pass: Tai,
    counters: Counters,
}

impl Recovery {
    /// A recovery in take-any.
    pub fn new(config: RecoveryConfig) -> Recovery {
        Recovery { config, state: State::TakeAny, last_pass: Tai(0), counters: Counters::default() }
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The settings.
    pub fn config(&self) -> RecoveryConfig {
        self.config
    }

    /// True in the take-any state.
    pub fn takes_any(&self) -> bool {
        self.state == State::TakeAny
    }

    /// Run the reset timer to `now`: if `reset` passed since the last frame passed, go back to take-any (counted
    /// in `resets`).
    pub fn poll(&mut self, now: Tai) {
        if self.state != State::TakeAny && now.0.saturating_sub(self.last_pass.0) >= self.config.reset.0 {
            self.state = State::TakeAny;
            self.counters.resets += 1;
        }
    }

    /// Judge a frame that arrived at `now` with sequence number `seq` (`None`: no R-TAG).
    pub fn recover(&mut self, now: Tai, seq: Option<u16>) -> Verdict {
        self.poll(now);
        let Some(s) = seq else {
            self.counters.tagless += 1;
            return Verdict::Tagless;
        };
        let c = &mut self.counters;
        let verdict = match &mut self.state {
            State::TakeAny => {
                self.state = match self.config.algorithm {
                    Algorithm::Vector { history } => State::Vector { recov: s, history: History::new(history) },
                    Algorithm::Match => State::Match { recov: s },
                };
                Verdict::Pass
            }
            State::Match { recov } => match s.wrapping_sub(*recov) {
                0 => Verdict::Duplicate,
                step => {
                    *recov = s;
                    if step == 1 {
                        Verdict::Pass
                    } else {
                        Verdict::PassOutOfOrder
                    }
                }
            },
            State::Vector { recov, history } => {
                let delta = i32::from(s.wrapping_sub(*recov) as i16);
                let len = history.len as i32;
                if delta >= len || delta <= -len {
                    Verdict::Rogue
                } else if delta <= 0 {
                    let d = delta.unsigned_abs();
                    if history.get(d) {
                        Verdict::Duplicate
                    } else {
                        history.set(d);
                        Verdict::PassOutOfOrder
                    }
                } else {
                    c.lost += history.slide(delta as u32);
                    history.set(0);
                    *recov = s;
                    if delta == 1 {
                        Verdict::Pass
                    } else {
                        Verdict::PassOutOfOrder
                    }
                }
            }
        };
        match verdict {
            Verdict::Pass | Verdict::PassOutOfOrder => {
                c.passed += 1;
                c.out_of_order += u64::from(verdict == Verdict::PassOutOfOrder);
                self.last_pass = now;
            }
            Verdict::Duplicate => c.discarded += 1,
            Verdict::Rogue => c.rogue += 1,
            Verdict::Tagless => {}
        }
        verdict
    }
}

#[cfg(test)]
mod tests;
