//! The link's lifecycle, one for both timings: which state the link is in, and what each gap the backend reports
//! means.
//!
//! ```text
//!   Down ──first poll──▶ Provisional ──backend reports the start, or slots leave──▶ Anchored
//!                          │                                                                     │
//!                          └──────────────────────────── shutdown ─────────────────────────────▶ Draining
//! ```
//!
//! At the first poll the station anchors the wire at its estimate of when the link comes up and expects a gap at
//! the first slot (the backend's report of the real start). A gap the station expects — that one, or the restart
//! after an underrun it detected itself (an idle ring) — only refines the anchor; any other is a new underrun.

/// Where the link is (one byte: the poll loop asks every time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Before the first poll: nothing posted, no anchor.
    Down,
    /// Posting; the anchor is still the station's estimate of the link's start (the backend has not reported it,
    /// and no slot has left).
    Provisional,
    /// Posting, the anchor final.
    Anchored,
    /// Shut down: nothing more is posted, the NIC drains what is.
    Draining,
}

/// What a gap reported at a slot is ([`Lifecycle::gap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GapSeen {
    /// It is the link's start (its restart is snapped onto the schedule's byte grid).
    pub(crate) link_up: bool,
    /// The station expected it (the link's start, or the restart after an underrun it detected): not an underrun.
    pub(crate) expected: bool,
}

/// The lifecycle and the gaps it expects.
#[derive(Clone, Debug)]
pub(crate) struct Lifecycle {
    state: State,
    /// The slot at which the station expects the wire to (re)start: the link's first, or the one after an underrun
    /// the station detected itself.
    expected_gap: Option<u64>,
    /// The slot the link came up at, until the backend reports that start or a later gap shows it never will.
    link_up_gap: Option<u64>,
}

impl Lifecycle {
    pub(crate) fn new() -> Lifecycle {
        Lifecycle { state: State::Down, expected_gap: None, link_up_gap: None }
    }

    /// The state.
    #[cfg(test)]
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// Before the first poll.
    #[inline]
    pub(crate) fn is_down(&self) -> bool {
        self.state == State::Down
    }

    /// Shut down.
    #[inline]
    pub(crate) fn is_draining(&self) -> bool {
        self.state == State::Draining
    }

    /// Up (or draining) with the anchor final: the backend reported the link's start, or slots have left.
    pub(crate) fn anchored(&self) -> bool {
        matches!(self.state, State::Anchored | State::Draining)
    }

    /// The first poll: the link comes up at slot `at`, anchored provisionally.
    pub(crate) fn link_up(&mut self, at: u64) {
        self.state = State::Provisional;
        self.expected_gap = Some(at);
        self.link_up_gap = Some(at);
    }

    /// The backend reported a gap before slot `at`.
    pub(crate) fn gap(&mut self, at: u64) -> GapSeen {
        let link_up = self.link_up_gap == Some(at);
        if self.link_up_gap.is_some_and(|k| k <= at) {
            self.link_up_gap = None;
        }
        let expected = self.expected_gap == Some(at);
        if expected {
            self.expected_gap = None;
            self.anchor_final();
        }
        GapSeen { link_up, expected }
    }

    /// `consumed` slots have left: once any has, the anchor they set is the EPHC's.
    #[inline]
    pub(crate) fn consumed(&mut self, consumed: u64) {
        if consumed > 0 && self.state == State::Provisional {
            self.state = State::Anchored;
        }
    }

    /// The station found the ring drained and the wire idle: it expects the wire to restart at slot `at`.
    pub(crate) fn underrun_detected(&mut self, at: u64) {
        self.expected_gap = Some(at);
    }

    /// Shut down.
    pub(crate) fn drain(&mut self) {
        self.state = State::Draining;
    }

    fn anchor_final(&mut self) {
        if self.state == State::Provisional {
            self.state = State::Anchored;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The link comes up provisional; the backend's report of its start (at the slot it came up at) is expected,
    /// link-up, and makes the anchor final; a later unexpected gap is an underrun; the restart after an underrun the
    /// station detected is expected; a report of the start that never comes is dropped by a later gap.
    #[test]
    fn gaps_are_classified_by_what_the_station_expects() {
        let mut l = Lifecycle::new();
        assert!(l.is_down() && !l.anchored());
        l.link_up(0);
        assert_eq!(l.state(), State::Provisional);
        assert_eq!(l.gap(0), GapSeen { link_up: true, expected: true });
        assert!(l.anchored());
        assert_eq!(l.gap(40), GapSeen { link_up: false, expected: false });
        l.underrun_detected(90);
        assert_eq!(l.gap(90), GapSeen { link_up: false, expected: true });
        assert_eq!(l.gap(90), GapSeen { link_up: false, expected: false }, "expected once");

        let mut l = Lifecycle::new();
        l.link_up(5);
        assert_eq!(l.gap(7), GapSeen { link_up: false, expected: false });
        assert_eq!(l.gap(5), GapSeen { link_up: false, expected: true }, "the start's report, after a later gap");
        let mut l = Lifecycle::new();
        l.link_up(0);
        l.consumed(0);
        assert!(!l.anchored());
        l.consumed(3);
        assert!(l.anchored(), "slots left: the anchor is final");
        l.drain();
        assert!(l.is_draining() && l.anchored());
    }
}
