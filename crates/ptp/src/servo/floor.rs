//! The delay-floor filter: each servo input taken from the floor (a low quantile) of recent measurements.
//!
//! A software timestamp is never early, only late: a path's one-way delay is a floor (the kernel's shortest
//! path from one stamp to the other) plus a queueing and scheduling delay that varies from a microsecond to
//! milliseconds and whose *median* wanders by microseconds over tens of seconds (where the receive softirq
//! runs, what else the cores do). Measured on this project's veth test topology, the floors of both
//! directions stay within a few hundred nanoseconds for minutes while the medians move by 5 µs. An offset
//! taken from each direction's floor is therefore far better than one from each sample, or from a mean
//! (the "lucky packet" idea, and what the KeepON paper's §4 suggests as a minimum/percentile prefilter on
//! Sync RX).
//!
//! The raw differences of one stream are not comparable across time as they are: the servo steers the clock
//! between them, and the oscillator drifts. Each difference is therefore first taken back to the
//! free-running oscillator by subtracting the phase the servo had added by then (the [`PhaseLog`] records
//! every adjustment, exactly). There, a stream is the oscillator's offset from the master — a straight line
//! over seconds — plus delays that are never below the floor. Least-delayed packets are rare (about one in a
//! hundred within 300 ns of the floor, on veth), and the single least one of a window is luck: it comes and
//! goes by a microsecond. So the floor is a low quantile ([`FloorConfig::quantile_permille`], 2 %) over
//! hundreds of values, which holds within about 100 ns where the least value wandered by 300–500 ns (measured
//! on this project's veth topology by replaying logged timestamps against the true offset). The line's slope
//! comes from the low quantiles of the oldest and of the newest third of up to [`SLOPE_WINDOWS`] windows, and
//! the floor now is the low quantile of the last window carried along that slope. No estimate of the servo's is
//! used: the filter is right while the servo still learns the frequency. Then:
//!
//! - `t2 − t1` of a Sync = offset + forward delay: the floor is among the lowest values;
//! - `t3 − t4` of a Delay_Req = offset − reverse delay: among the highest;
//! - a peer delay (offset-free, and measured on two clocks of nearly the same rate): among the smallest.
//!
//! The filter acts only while the servo is locked (before that the windows are emptied), and only once a
//! stream spans [`MIN_SPAN`] (until then its samples pass as they are). Delays that grow for a while (load)
//! leave the floor where it is. An offset that jumps (a master's phase step) shows in one direction's stream as
//! delays far shorter than its floor; then the filter starts afresh ([`JUMP_TOLERANCE`]).

use std::collections::VecDeque;

use keepon_core::time::{Nanos, Tai};

use super::Sample;

/// Settings of the delay-floor filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloorConfig {
    /// How far back a stream's floor is looked for (`Nanos(0)`: the filter is off, every sample passes as is).
    pub window: Nanos,
    /// The floor is this quantile of a window's delays, not its least one: the single least-delayed packet of a
    /// window is luck (it comes and goes by a microsecond on veth), a low quantile over hundreds is steady.
    /// In thousandths (20: the 2 % quantile; 0: the least value).
    pub quantile_permille: u16,
    /// At most this many values per stream.
    pub max_values: usize,
}

impl Default for FloorConfig {
    fn default() -> Self {
        FloorConfig { window: Nanos::from_ms(32_000), quantile_permille: 20, max_values: 4_096 }
    }
}

/// Every adjustment of the clock, so that the phase the servo had added by any recent time is known.
///
/// Phase is kept in units of 10⁻¹² ns (a frequency in parts per trillion times nanoseconds), exact.
#[derive(Clone, Debug, Default)]
pub struct PhaseLog {
    /// (time, steered phase at that time, frequency from then on in ppt), in time order.
    entries: VecDeque<(Tai, i128, i64)>,
    /// Entries older than this are forgotten (the longest any window looks back).
    keep: Nanos,
}

const PICO: i128 = 1_000_000_000_000;

/// The drift is judged over up to this many windows (the oscillator's drift is steady over a minute; its line
/// needs low points far apart).
pub const SLOPE_WINDOWS: i64 = 4;

/// A stream's samples pass as they are until it spans this long; from then on, until it spans a window, the
/// floor is looked for over its whole span.
pub const MIN_SPAN: Nanos = Nanos::from_ms(4_000);

/// A value this far below its stream's floor is no lucky packet (those are within about a microsecond of the
/// floor on veth): when half of a stream's last eight are, the offset itself moved (a master's phase jump shows
/// in one direction's stream as delays shorter than any seen) and the filter starts afresh. Delays that grow
/// (load) never trigger it: the floor is their low quantile and stays.
pub const JUMP_TOLERANCE: Nanos = Nanos::from_us(3);

/// Rounds of refining the drift's slope from the least-squares line's.
const SLOPE_ROUNDS: usize = 4;

impl PhaseLog {
    /// A log remembering at least `keep` of history; `ppt` is the frequency in force now.
    pub fn new(keep: Nanos, ppt: i64) -> PhaseLog {
        PhaseLog { entries: VecDeque::from([(Tai(0), 0, ppt)]), keep }
    }

    /// The phase the clock had been steered by at `t` (steps and frequency), in 10⁻¹² ns.
    fn phase(&self, t: Tai) -> i128 {
        // The last entry at or before `t`; before the first one, the first (extrapolated backwards).
        let (t0, phase, ppt) = self.entries[self.entries.partition_point(|e| e.0 <= t).saturating_sub(1)];
        phase + i128::from(ppt) * (i128::from(t.0) - i128::from(t0.0))
    }

    fn push(&mut self, t: Tai, step: i128, ppt: i64) {
        // Clock readings never go back; should one, it is recorded at the last entry's time.
        let t = self.entries.back().map_or(t, |e| Tai(e.0 .0.max(t.0)));
        self.entries.push_back((t, self.phase(t) + step, ppt));
        let horizon = Tai(t.0.saturating_sub(self.keep.0));
        while self.entries.len() > 1 && self.entries[1].0 <= horizon {
            self.entries.pop_front();
        }
    }

    /// The clock's frequency was set to `ppt` at `t`.
    pub fn set_freq(&mut self, t: Tai, ppt: i64) {
        self.push(t, 0, ppt);
    }

    /// The clock was stepped by `by` at `t`.
    pub fn step(&mut self, t: Tai, by: Nanos) {
        let ppt = self.entries.back().map_or(0, |e| e.2);
        self.push(t, i128::from(by.0) * PICO, ppt);
    }
}

/// Which way a stream's delay enters its raw difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Floor {
    /// offset + delay (`t2 − t1`): the least delay is the smallest value.
    Lowest,
    /// offset − delay (`t3 − t4`): the least delay is the largest value.
    Highest,
}

/// One stream's recent values: (time, raw difference less the steered phase then, in 10⁻¹² ns).
#[derive(Clone, Debug, Default)]
struct Stream {
    recent: VecDeque<(Tai, i128)>,
    /// The last eight values, a bit each: set when the value lay more than [`JUMP_TOLERANCE`] below the floor.
    below_floor: u8,
    /// The floor found with the newest value remembered, and the drift (drifting streams only).
    line: Option<Line>,
}

/// A drifting stream's floor at one time, in its sign-adjusted free-running frame.
#[derive(Clone, Copy, Debug)]
struct Line {
    at: Tai,
    /// ns (sign-adjusted, as the stream's values less the servo's phase).
    floor: f64,
    /// ns per ns.
    slope: f64,
}

impl Stream {
    /// Remember `x` (measured at `at`) and return the stream's floor at `at` (`drifts`: the values lie on the
    /// oscillator's drifting line; otherwise they are offset-free and the floor is a low quantile of the window).
    fn take(&mut self, at: Tai, x: Nanos, floor: Floor, drifts: bool, cfg: &FloorConfig, log: &PhaseLog) -> Nanos {
        let span_max = if drifts { cfg.window.0.saturating_mul(SLOPE_WINDOWS) } else { cfg.window.0 };
        let horizon = Tai(at.0.saturating_sub(span_max));
        while self.recent.front().is_some_and(|v| v.0 < horizon) || self.recent.len() >= cfg.max_values.max(1) {
            self.recent.pop_front();
        }
        let free = i128::from(x.0) * PICO - if drifts { log.phase(at) } else { 0 };
        // Sign-adjusted so that the floor is the lowest.
        let sign = match floor {
            Floor::Lowest => 1.0,
            Floor::Highest => -1.0,
        };
        // A value far below the floor the stream had so far (carried to now along its drift) is set aside, not
        // remembered: if the offset jumped, taking such values in would bend the drift line towards them and
        // hide the jump. The floor so far is handed on for it.
        let under = self.line.map(|l| l.floor + l.slope * (at.0 - l.at.0) as f64 - sign * free as f64 / PICO as f64);
        let suspect = under.is_some_and(|u| u > JUMP_TOLERANCE.0 as f64);
        self.below_floor = (self.below_floor << 1) | u8::from(suspect);
        if let (true, Some(u)) = (suspect, under) {
            return Nanos(x.0.saturating_add((sign * u).round() as i64));
        }
        self.recent.push_back((at, free));
        // Relative to the newest value, in ns (f64 keeps sub-ns precision over a window).
        let points: Vec<(f64, f64)> =
            self.recent.iter().map(|&(t, v)| ((t.0 - at.0) as f64, sign * (v - free) as f64 / PICO as f64)).collect();
        let oldest = points.first().map_or(0.0, |p| p.0);
        let q = f64::from(cfg.quantile_permille) / 1000.0;
        let slope = if drifts {
            // The drift: the line through the low quantiles of the oldest and of the newest third of the span,
            // judged along the line itself — found from the least-squares line by a few rounds. Until the span
            // is long enough, the sample passes as is.
            if -oldest < MIN_SPAN.0 as f64 {
                return x;
            }
            let third = -oldest / 3.0;
            let (old, new): (Vec<_>, Vec<_>) = (
                points.iter().filter(|p| p.0 <= oldest + third).collect(),
                points.iter().filter(|p| p.0 >= -third).collect(),
            );
            let mut slope = least_squares_slope(points.iter().copied());
            for _ in 0..SLOPE_ROUNDS {
                let quantile = |v: &[&(f64, f64)]| low_quantile_point(v.iter().map(|p| (p.0, p.1 - slope * p.0)), q);
                match (quantile(&old), quantile(&new)) {
                    (Some(a), Some(b)) if b.0 > a.0 => slope += (b.1 - a.1) / (b.0 - a.0),
                    _ => return x,
                }
            }
            slope
        } else {
            0.0
        };
        // The floor now: the low quantile of the last window, carried along the drift to now.
        let window = if drifts { (cfg.window.0 as f64).min(-oldest) } else { cfg.window.0 as f64 };
        let below = low_quantile(points.iter().filter(|p| p.0 >= -window).map(|&(t, y)| y - slope * t), q);
        if drifts {
            self.line = Some(Line { at, floor: sign * free as f64 / PICO as f64 + below, slope });
        }
        Nanos(x.0.saturating_add((sign * below).round() as i64))
    }

    /// Half of its last eight values lay far below its floor: no delay is that short, the offset moved.
    fn jumped(&self) -> bool {
        self.below_floor.count_ones() >= 4
    }
}

/// The `q` quantile (0 = the least) of `values` (at least the newest value is always among them).
fn low_quantile(values: impl Iterator<Item = f64>, q: f64) -> f64 {
    low_quantile_point(values.map(|v| (0.0, v)), q).map_or(0.0, |p| p.1)
}

/// The point whose value is the `q` quantile of `points`' values.
fn low_quantile_point(points: impl Iterator<Item = (f64, f64)>, q: f64) -> Option<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = points.collect();
    let k = (v.len().checked_sub(1)? as f64 * q.clamp(0.0, 1.0)).floor() as usize;
    Some(*v.select_nth_unstable_by(k, |a, b| a.1.total_cmp(&b.1)).1)
}

/// The slope of the least-squares line through `points`.
fn least_squares_slope(points: impl Iterator<Item = (f64, f64)> + Clone) -> f64 {
    let n = points.clone().count().max(1) as f64;
    let (mx, my) = points.clone().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (sxy, sxx) =
        points.fold((0.0, 0.0), |(sxy, sxx), p| (sxy + (p.0 - mx) * (p.1 - my), sxx + (p.0 - mx) * (p.0 - mx)));
    if sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    }
}

/// The delay-floor filter over the three streams of raw differences.
#[derive(Clone, Debug, Default)]
pub struct FloorFilter {
    cfg: FloorConfig,
    sync: Stream,
    delay: Stream,
    peer: Stream,
    jumps: u64,
}

impl FloorFilter {
    /// A filter with `cfg`.
    pub fn new(cfg: FloorConfig) -> FloorFilter {
        FloorFilter { cfg, ..FloorFilter::default() }
    }

    /// Its settings.
    pub fn config(&self) -> FloorConfig {
        self.cfg
    }

    /// `s` with each difference replaced by its stream's floor (`locked`: the servo is locked; otherwise the
    /// streams are emptied and `s` passes as is). `log` holds the clock's adjustments.
    pub fn filter(&mut self, s: Sample, locked: bool, log: &PhaseLog) -> Sample {
        if !locked || self.cfg.window.0 <= 0 {
            *self = FloorFilter::new(self.cfg);
            return s;
        }
        let cfg = self.cfg;
        let out = Sample {
            at: s.at,
            sync_raw: s.sync_raw.map(|x| self.sync.take(s.at, x, Floor::Lowest, true, &cfg, log)),
            delay_raw: s.delay_raw.map(|x| self.delay.take(s.at, x, Floor::Highest, true, &cfg, log)),
            peer_delay: s.peer_delay.map(|x| self.peer.take(s.at, x, Floor::Lowest, false, &cfg, log)),
        };
        if [&self.sync, &self.delay, &self.peer].iter().any(|st| st.jumped()) {
            // The master's time (or the path) changed: the floors found before are stale, start afresh.
            *self = FloorFilter { jumps: self.jumps + 1, ..FloorFilter::new(cfg) };
            return s;
        }
        out
    }

    /// How often the filter started afresh because the offset jumped.
    pub fn jumps(&self) -> u64 {
        self.jumps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1_000_000_000;
    /// 16 Syncs a second.
    const TICK: i64 = SEC / 16;

    fn sync(at: i64, raw: i64) -> Sample {
        Sample { at: Tai(at), sync_raw: Some(Nanos(raw)), delay_raw: None, peer_delay: None }
    }

    /// A delay: mostly 2–14 µs late on a floor of 1.8 µs, exactly on it once in 10 (more often than the 2 %
    /// quantile the filter takes), 1 µs below it once in 200 (a lucky packet the quantile ignores).
    fn delay_of(i: i64) -> i64 {
        if i % 200 == 111 {
            800
        } else if i % 10 == 7 {
            1_800
        } else {
            1_800 + 200 + (i * 7_919) % 12_000
        }
    }

    /// A slave whose oscillator runs `beta_ppt` off the master while a "servo" steers it by `steer(i)` (a
    /// frequency from sample `i` on, and a step at `i` if any): the filter's floor, and the true
    /// `offset + floor` it should be, for each sample.
    fn run(beta_ppt: i64, n: i64, steer: impl Fn(i64) -> (i64, Option<i64>), reverse: bool) -> Vec<(i64, i64)> {
        let mut f = FloorFilter::new(FloorConfig::default());
        let mut log = PhaseLog::new(Nanos::from_ms(40_000), 0);
        let base = 1_000 * SEC;
        let mut out = Vec::new();
        for i in 0..n {
            let at = base + i * TICK;
            let (ppt, step) = steer(i);
            log.set_freq(Tai(at), ppt);
            if let Some(by) = step {
                log.step(Tai(at), Nanos(by));
            }
            // offset = oscillator's own (θ) + what the servo added.
            let theta = 3_000 * PICO + i128::from(beta_ppt) * i128::from(i * TICK);
            let offset = (theta + log.phase(Tai(at))).div_euclid(PICO) as i64;
            let (raw, want, got) = if reverse {
                let raw = offset - delay_of(i);
                let s = Sample { at: Tai(at), sync_raw: None, delay_raw: Some(Nanos(raw)), peer_delay: None };
                (raw, offset - 1_800, f.filter(s, true, &log).delay_raw.unwrap().0)
            } else {
                let raw = offset + delay_of(i);
                (raw, offset + 1_800, f.filter(sync(at, raw), true, &log).sync_raw.unwrap().0)
            };
            let _ = raw;
            out.push((got, want));
        }
        out
    }

    /// Once each third of a stream's span holds enough values on the floor (one in 10: from 150 samples on), every
    /// value handed on is offset + the floor, within `tol`.
    fn assert_floor(out: &[(i64, i64)], tol: i64) {
        let from = 150;
        for (i, &(got, want)) in out.iter().enumerate().skip(from) {
            assert!((got - want).abs() <= tol, "sample {i}: {got} for {want}");
        }
    }

    #[test]
    fn a_locked_servo_gets_offset_plus_the_floor_in_both_directions() {
        // The oscillator 50 ppm fast, the servo holding −50 ppm.
        for reverse in [false, true] {
            let out = run(50_000_000, 600, |_| (-50_000_000, None), reverse);
            assert_floor(&out, 2);
        }
    }

    /// The servo still learning the frequency (and stepping once): the free-running frame does not care.
    #[test]
    fn a_servo_still_learning_the_frequency_does_not_move_the_floor() {
        let steer = |i: i64| (-48_000_000 - (i % 160) * 20_000 + (i / 40) * 3_000, (i == 300).then_some(-4_000));
        for reverse in [false, true] {
            assert_floor(&run(50_000_000, 600, steer, reverse), 2);
        }
    }

    /// Until a stream spans a window, its samples pass as they are.
    #[test]
    fn samples_pass_until_a_window_is_seen() {
        let out = run(50_000_000, 40, |_| (-50_000_000, None), false);
        for (i, &(got, want)) in out.iter().enumerate() {
            assert_eq!(got, want - 1_800 + delay_of(i as i64), "sample {i}");
        }
    }

    /// Unlocked, or off: every sample passes unchanged and nothing is remembered.
    #[test]
    fn unlocked_samples_pass_and_empty_the_window() {
        let log = PhaseLog::new(Nanos::from_ms(40_000), 0);
        for window in [FloorConfig::default().window, Nanos(0)] {
            let mut f = FloorFilter::new(FloorConfig { window, max_values: 256, ..FloorConfig::default() });
            for i in 0..300 {
                f.filter(sync(i * TICK, delay_of(i)), true, &log);
            }
            let on = window.0 > 0;
            let late = delay_of(300);
            let want = if on { 1_800 } else { late };
            assert_eq!(f.filter(sync(300 * TICK, late), true, &log).sync_raw, Some(Nanos(want)), "{window:?}");
            assert_eq!(f.filter(sync(301 * TICK, late), false, &log).sync_raw, Some(Nanos(late)));
            assert_eq!(f.filter(sync(302 * TICK, late), true, &log).sync_raw, Some(Nanos(late)), "forgotten");
        }
    }

    /// A phase jump of the offset (either sign): the filter starts afresh, once, within 12 samples (values far
    /// below the floor are set aside, so they cannot bend the drift line and hide the jump), and then hands on the new offset
    /// plus the floor in both directions. Delays that grow by 8 µs for 10 s (load) do not make it start afresh,
    /// nor move the floor.
    #[test]
    fn a_phase_jump_restarts_the_filter_and_growing_delays_do_not() {
        for jump in [10_000, -10_000] {
            let mut f = FloorFilter::new(FloorConfig::default());
            let log = PhaseLog::new(Nanos::from_ms(200_000), 0);
            for i in 0..2_000 {
                let at = Tai(1_000 * SEC + i * TICK);
                let offset = 3_000 + if i >= 1_200 { jump } else { 0 };
                let load = if (600..760).contains(&i) { 8_000 } else { 0 };
                let raw = Sample {
                    at,
                    sync_raw: Some(Nanos(offset + delay_of(i) + load)),
                    delay_raw: Some(Nanos(offset - delay_of(i + 5) - load)),
                    peer_delay: None,
                };
                let got = f.filter(raw, true, &log);
                if i == 1_212 {
                    assert_eq!(f.jumps(), 1, "jump {jump}: not seen within 12 samples");
                }
                if (300..1_200).contains(&i) || i >= 1_900 {
                    let (fwd, rev) = (got.sync_raw.unwrap().0, got.delay_raw.unwrap().0);
                    let off = ((fwd - offset - 1_800).abs(), (rev - offset + 1_800).abs());
                    assert!(off.0 <= 5 && off.1 <= 5, "jump {jump}, sample {i}: {fwd}, {rev} for offset {offset}");
                }
            }
            assert_eq!(f.jumps(), 1, "jump {jump}");
        }
    }

    /// Peer delays are offset-free: the least of the last window.
    #[test]
    fn peer_delays_take_the_least_of_the_window() {
        let log = PhaseLog::new(Nanos::from_ms(40_000), -50_000_000);
        let mut f =
            FloorFilter::new(FloorConfig { window: Nanos::from_ms(1_000), max_values: 256, ..FloorConfig::default() });
        let peer =
            |at: i64, d: i64| Sample { at: Tai(at), sync_raw: None, delay_raw: None, peer_delay: Some(Nanos(d)) };
        assert_eq!(f.filter(peer(0, 5_000), true, &log).peer_delay, Some(Nanos(5_000)));
        assert_eq!(f.filter(peer(SEC / 4, 2_000), true, &log).peer_delay, Some(Nanos(2_000)));
        assert_eq!(f.filter(peer(SEC, 7_000), true, &log).peer_delay, Some(Nanos(2_000)));
        assert_eq!(f.filter(peer(SEC + SEC / 2, 7_000), true, &log).peer_delay, Some(Nanos(7_000)));
    }
}
