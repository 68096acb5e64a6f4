//! The wire by the host clock, one for both timings: when the host saw (or expects) byte position `p` go out, at
//! the nominal byte time. Re-anchored at link-up, underruns and reported gaps, never adjusted by synchronisation,
//! it turns host times (`now`, restart estimates) into byte positions, and so into EPHC time.
//!
//! ```text
//!   host time ──────────────┬─────── gap (idle) ───────┬──────────────▶
//!   byte:          … p−2  p−1                          p (restart, the anchor)  p+1 …
//!   a host time in the gap, or before it: read back from the anchor (negative time past p)
//! ```

use crate::ephc::Ephc;
use crate::station::sat_i64;
use crate::time::{SlotPeriod, Tai};

/// The host's view of the wire (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct HostView {
    line: Ephc,
    /// The last re-anchored byte: host times up to its restart are read from it.
    anchor: u64,
}

impl HostView {
    /// Byte 0 expected at host time `t0`, bytes of `byte` ns.
    pub(crate) fn new(byte: SlotPeriod, t0: Tai) -> HostView {
        HostView { line: Ephc::new(byte, 0, t0), anchor: 0 }
    }

    /// When byte `p` goes (went) out by the host clock.
    #[inline]
    pub(crate) fn time_of(&self, p: u64) -> Tai {
        self.line.time_of(p)
    }

    /// Byte `p` starts (started) at host time `t`: the view is re-anchored there. Returns how far `p` moved, ns
    /// (positive: later than the view had it).
    pub(crate) fn anchor(&mut self, t: Tai, p: u64) -> i64 {
        let moved = sat_i64(i128::from(t.0) - i128::from(self.line.time_of(p).0));
        self.line.set_time(t, p);
        self.anchor = self.anchor.max(p);
        moved
    }

    /// The byte position the wire is at (or restarts at) at host time `host`, and how far past its start `host` is
    /// (negative before a restart): within a gap the wire is idle, and host times there are read back from the
    /// restart.
    #[inline]
    pub(crate) fn position(&self, host: Tai) -> (u64, i128) {
        let p = self.line.slot_of(host).unwrap_or(0);
        let p = if p < self.anchor && host <= self.line.time_of(self.anchor) { self.anchor } else { p };
        (p, i128::from(host.0) - i128::from(self.line.time_of(p).0))
    }
}

/// The EPHC time of the last host time asked for, kept for the next question at the same host time: a driver submits
/// a poll's frames with that poll's `now`, and reading the clock there takes four exact conversions (≈ 420
/// instructions, half of a real-time frame's admission). Each station forgets it wherever its clock or host view
/// moves; debug builds check every answer it gives against a fresh reading.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NowMemo(Option<(Tai, Tai)>);

impl NowMemo {
    /// The EPHC time kept for `host`, if that is the host time last asked for.
    #[inline]
    pub(crate) fn get(&self, host: Tai) -> Option<Tai> {
        self.0.filter(|(h, _)| *h == host).map(|(_, e)| e)
    }

    /// Keep `ephc` as the EPHC time of `host`.
    #[inline]
    pub(crate) fn keep(&mut self, host: Tai, ephc: Tai) {
        self.0 = Some((host, ephc));
    }

    /// The clock or the host view moved: nothing kept holds.
    #[inline]
    pub(crate) fn forget(&mut self) {
        self.0 = None;
    }
}

/// The time `clock` gives a host time at `(p, into)` ([`HostView::position`]): byte `p`'s, and `into` ns of the
/// host clock scaled by the clock's rate. Saturates at the ends of the i64 range (untrusted times never wrap).
#[inline]
pub(crate) fn read(clock: &Ephc, (p, into): (u64, i128)) -> Tai {
    Tai(sat_i64(i128::from(clock.time_of(p).0) + clock.scaled(p, into)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ephc::ClockAdjust;

    /// 8-ns bytes from host time 1 000. The wire goes idle after byte 100 and restarts there at host 5 000: host
    /// times in the gap and before it read back from the restart (negative into), after it forward as before; an
    /// EPHC running 10 ppm fast scales the time read back by its rate, both ways, and is continuous at the restart.
    #[test]
    fn host_times_in_a_gap_read_back_from_the_restart() {
        let byte = SlotPeriod::new(8, 1);
        let mut h = HostView::new(byte, Tai(1_000));
        assert_eq!(h.position(Tai(1_804)), (100, 4));
        assert_eq!(h.anchor(Tai(5_000), 100), 5_000 - 1_800, "moved later by the gap");
        assert_eq!(h.position(Tai(5_004)), (100, 4));
        assert_eq!(h.position(Tai(4_000)), (100, -1_000), "in the gap");
        assert_eq!(h.position(Tai(1_500)), (100, -3_500), "before the gap");
        assert_eq!(h.position(Tai(5_016)), (102, 0));
        let mut clock = Ephc::new(byte, 0, Tai(1_000));
        clock.apply(ClockAdjust::Rate(10_000_000), 100).unwrap();
        let restart = read(&clock, h.position(Tai(5_000))).0;
        // 10 ppm of the 500 ms read back (in the gap, or after the restart): 5 000 ns.
        h.anchor(Tai(1_000_000_000), 100);
        let at = |t: i64| read(&clock, h.position(Tai(t))).0;
        let restart2 = at(1_000_000_000);
        assert!((restart2 - at(500_000_000) - 500_005_000).abs() <= 1, "{}", restart2 - at(500_000_000));
        assert!((at(1_500_000_000) - restart2 - 500_005_000).abs() <= 1);
        assert_eq!(restart, restart2, "the restart byte keeps its EPHC time");
        assert!((999_999_990..1_000_000_010).all(|t| at(t) <= at(t + 1)), "monotonic at the restart");
    }
}
