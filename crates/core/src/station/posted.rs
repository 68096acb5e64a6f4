//! The slot station's record of posted slots: the shared [`Track`] (start bytes, and the schedule slot each slot
//! carried), with the tags of the latest steady run of filler slots kept as one range and written into the track
//! only when something else is posted or changes tags. The steady loop's work per slot is then a length and a
//! start; what [`Posted::tag`] answers is the same either way.

use super::grid::Carried;
use crate::wire::track::Track;

/// Posted slots `from..to` carried schedule slots `j0 + (k − from)`, each locked; `from == to`: none.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    from: u64,
    to: u64,
    j0: u64,
}

/// See the module doc.
#[derive(Clone, Debug)]
pub(super) struct Posted {
    track: Track<Option<Carried>>,
    run: Run,
}

impl Posted {
    /// A record that keeps at least `span` slots before the next to post ([`Track::new`]).
    pub(super) fn new(span: u64) -> Posted {
        Posted { track: Track::new(span, None), run: Run::default() }
    }

    /// The oldest slot tracked ([`Track::base`]).
    #[inline]
    pub(super) fn base(&self) -> u64 {
        self.track.base()
    }

    /// The next slot to post ([`Track::last`]).
    #[inline]
    pub(super) fn last(&self) -> u64 {
        self.track.last()
    }

    /// Where slot `k` starts, for `base ≤ k ≤ last` ([`Track::start`]).
    #[inline]
    pub(super) fn start(&self, k: u64) -> Option<u64> {
        self.track.start(k)
    }

    /// Where the next slot to post starts ([`Track::end`]).
    #[inline]
    pub(super) fn end(&self) -> u64 {
        self.track.end()
    }

    /// The schedule slot posted slot `k` carried, for `base ≤ k < last` ([`Track::tag`]).
    #[inline]
    pub(super) fn tag(&self, k: u64) -> Option<Carried> {
        let Run { from, to, j0 } = self.run;
        if (from..to).contains(&k) && k >= self.track.base() {
            return Some(Carried { slot: j0 + (k - from), locked: true });
        }
        self.track.tag(k).flatten()
    }

    /// Write the run's tags into the track (those still tracked) and forget it.
    fn flush(&mut self) {
        let Run { from, to, j0 } = core::mem::take(&mut self.run);
        for k in from.max(self.track.base())..to {
            self.track.set_tag(k, Some(Carried { slot: j0 + (k - from), locked: true }));
        }
    }

    /// Post the next slot ([`Track::push`]).
    #[inline]
    pub(super) fn push(&mut self, wire: u64, tag: Option<Carried>) {
        self.flush();
        self.track.push(wire, tag);
    }

    /// The track's arrays, to post many slots with their tags ([`Track::arrays_mut`]); then [`Posted::posted`].
    #[inline]
    pub(super) fn arrays_mut(&mut self) -> (&mut [u64], &mut [Option<Carried>]) {
        self.flush();
        self.track.arrays_mut()
    }

    /// The start array alone, to post a steady run of locked filler slots; then [`Posted::posted_run`].
    #[inline]
    pub(super) fn starts_mut(&mut self) -> &mut [u64] {
        self.track.arrays_mut().0
    }

    /// `n` slots were written through [`Posted::arrays_mut`] ([`Track::posted`]).
    #[inline]
    pub(super) fn posted(&mut self, n: u64) {
        self.track.posted(n);
    }

    /// `n` locked filler slots were written through [`Posted::starts_mut`], the first carrying schedule slot `j`.
    #[inline]
    pub(super) fn posted_run(&mut self, n: u64, j: u64) {
        let k = self.track.last();
        let run = self.run;
        if run.from == run.to || run.to != k || run.j0 + (k - run.from) != j {
            self.flush();
            self.run = Run { from: k, to: k, j0: j };
        }
        self.run.to += n;
        self.track.posted(n);
    }

    /// Forget slots before `k` ([`Track::forget_before`]).
    #[inline]
    pub(super) fn forget_before(&mut self, k: u64) {
        self.track.forget_before(k);
    }

    /// Apply `f` to the tag of every posted slot from `k` on ([`Track::update_tags_from`]).
    pub(super) fn update_tags_from(&mut self, k: u64, f: impl FnMut(&mut Option<Carried>)) {
        self.flush();
        self.track.update_tags_from(k, f);
    }
}
