//! The runtime configuration (TOML), documented in `docs/config.md`.
//!
//! Parsing is strict: unknown keys are errors (serde `deny_unknown_fields`), every value has a unit-aware
//! parser, and the cross-field checks name the keys involved.

mod classes;
mod flows;
mod sections;
mod sim;
mod units;

use std::path::Path;

use keepon_core::bytes::windows::Windows;
use keepon_core::insert::Policy;
use keepon_core::isolation::{ClassId, Ownership};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai};
use keepon_nic::emulation::EmulatedError;
use keepon_nic::sim::SimConfig;

pub use flows::Flow;
pub use sections::*;
use units::{err, in_range, parse_mac};
pub use units::{parse_duration, parse_rate, ConfigError, Dur, Rate};

/// Longest span a configuration may describe (2^61 ns ≈ 73 years): each duration, and for every flow the epoch
/// delay plus its last instance's time, is at most this. With slot 0 at most [`MAX_T0`], every time a run computes
/// (slot 0 + epoch delay + a ring cycle + offset + `count` periods, or now + the run bound) stays below `2^63` ns.
pub const MAX_SPAN: Nanos = Nanos(1 << 61);

/// Latest slot 0 of a simulated run (`sim.t0`, TAI ns): 2^62 ns, the year 2116.
pub const MAX_T0: i64 = 1 << 62;

/// Longest poll period or simulated host delay (10 s): beyond it a poll loop cannot keep any link busy, and
/// the simulator's per-iteration arithmetic is bounded by it.
pub const MAX_HOST_DELAY: Nanos = Nanos::from_ms(10_000);

/// Backend names (`run.backend`, `--backend`).
pub const BACKENDS: [&str; 5] = ["sim", "afpacket", "afpacket-ring", "afxdp", "etf"];

/// Most frames one class may have waiting (`run.max_pending`).
pub const MAX_PENDING: usize = 1 << 24;

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Link rate and slot size.
    pub geometry: SlotGeometry,
    /// Ring ownership.
    pub ownership: Ownership,
    /// Batch.
    pub batch: u32,
    /// Policy.
    pub policy: Policy,
    /// Flows.
    pub flows: Vec<Flow>,
    /// Epoch delay after slot 0 (rounded up to a ring cycle at run time).
    pub start: Nanos,
    /// Network time (TAI) at which a cycle starts (`schedule.base_time`).
    pub base_time: Tai,
    /// Longest frame the link sends (`link.max_frame`).
    pub max_frame: u32,
    /// Backend name.
    pub backend: String,
    /// Poll period.
    pub poll_period: Nanos,
    /// Furthest ahead accepted.
    pub max_advance: Nanos,
    /// Most frames waiting per class.
    pub max_pending: usize,
    /// Run bound.
    pub max_duration: Nanos,
    /// Deviation from the schedule slot beyond which a sent frame is flagged `off_schedule`.
    pub tolerance: Nanos,
    /// Simulator settings.
    pub sim: SimConfig,
    /// How frames are timed on the wire (`link.timing`).
    pub timing: WireTiming,
    /// Class windows given as time (`[[class]] windows`, byte clock only); `None`: the slot masks are the
    /// windows.
    pub windows: Option<Windows>,
    /// Test only: the emulated oscillator error of a host-paced link (`link.emulated_offset`,
    /// `link.emulated_ppm`, `link.emulated_step` after `link.emulated_step_after`).
    pub emulation: Option<EmulatedError>,
    /// The raw file, for sections other commands read.
    pub raw: RawConfig,
}

/// How frames are timed on the wire (`link.timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireTiming {
    /// Slots: a frame leaves at the start of the ring slot holding its txtime, padded to the slot size.
    Slots,
    /// The byte clock: a real-time frame leaves on the byte nearest its txtime, unpadded, inside its class's
    /// windows (the slot masks, as time).
    Bytes,
}

/// Largest base time accepted (2⁶² ns, the year 2116): every cycle start the station computes stays far from
/// the `i64` range.
pub const MAX_BASE_TIME: i64 = 1 << 62;

/// `[schedule]`: the base time, checked; a given cycle time must be the ring's cycle, `ring.slots` whole slots.
/// With class windows (`windowed`) the cycle is theirs, any positive whole ns (checked with them).
fn schedule_base(s: &ScheduleSection, geometry: SlotGeometry, slots: u32, windowed: bool) -> Result<Tai, ConfigError> {
    let base = s.base_time.unwrap_or(0);
    if !(0..MAX_BASE_TIME).contains(&base) {
        return err(format!("schedule.base_time = {base} must be within 0..{MAX_BASE_TIME} (TAI ns)"));
    }
    if let (Some(c), false) = (s.cycle_time, windowed) {
        let p = geometry.period();
        let c = c.0 .0;
        // c = m·δ for a whole m ⇔ c·den divisible by num.
        let scaled = i128::from(c) * i128::from(p.den());
        if c <= 0 || scaled % i128::from(p.num()) != 0 {
            return err(format!(
                "schedule.cycle_time = {c} ns is not a whole number of slots (δ = {p} at {} and {} B slots)",
                geometry.rate(),
                geometry.slot_bytes()
            ));
        }
        let m = scaled / i128::from(p.num());
        if m != i128::from(slots) {
            return err(format!(
                "schedule.cycle_time = {c} ns is {m} slots, but the ring's cycle is ring.slots = {slots} slots \
                 ({} ns): give the ring's cycle or leave the key out",
                p.floor_mul(u64::from(slots))
            ));
        }
    }
    Ok(Tai(base))
}

impl Config {
    /// batch·δ in whole ns (floored): how far ahead of the NIC the station keeps posted slots — how long the host
    /// may stall before the link underruns.
    pub fn lead(&self) -> u128 {
        self.geometry.period().floor_mul(u64::from(self.batch))
    }

    /// A class with no time of its own (no ring slots, or with class windows no window): best effort.
    pub fn is_best_effort(&self, c: ClassId) -> bool {
        match &self.windows {
            Some(w) => w.is_best_effort(c),
            None => self.ownership.is_best_effort(c),
        }
    }

    /// Read and validate a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// Parse and validate TOML text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError(e.to_string().trim_end().to_string()))?;
        Self::validate(raw)
    }

    fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
        if let Some(v) = raw.version {
            if v != 1 {
                return err(format!("version = {v}: only version 1 exists"));
            }
        }
        let rate = LinkRate::from_bps(raw.link.rate.0).map_err(|e| ConfigError(format!("link.rate: {e}")))?;
        let geometry =
            SlotGeometry::new(rate, raw.ring.slot_bytes).map_err(|e| ConfigError(format!("ring.slot_bytes: {e}")))?;
        let n = raw.ring.slots;
        if !(2..=keepon_core::isolation::MAX_RING_SLOTS).contains(&n) {
            return err(format!("ring.slots = {n} is outside 2..=4096"));
        }
        if raw.ring.batch == 0 || raw.ring.batch >= n {
            return err(format!("ring.batch = {} must be at least 1 and less than ring.slots = {n}", raw.ring.batch));
        }
        let policy = match raw.ring.policy.as_deref() {
            None => Policy::Strict,
            Some(p) => Policy::parse(p)
                .ok_or_else(|| ConfigError(format!("ring.policy = \"{p}\": use \"strict\" or \"relaxed\"")))?,
        };
        let timing = match raw.link.timing.as_deref() {
            None | Some("slots") => WireTiming::Slots,
            Some("bytes") => WireTiming::Bytes,
            Some(other) => return err(format!("link.timing = \"{other}\": use \"slots\" or \"bytes\"")),
        };
        let (ownership, windows) = classes::classes(&raw, n, timing, geometry)?;
        let flows = flows::flows(&raw, &ownership, windows.as_ref(), timing, geometry)?;
        let sim = sim::sim(&raw, geometry)?;
        let max_frame = sim.max_frame;
        let base_time = schedule_base(&raw.schedule, geometry, n, windows.is_some())?;
        let s = &raw.sim;
        let d = |v: Option<Dur>, default: Nanos| v.map_or(default, |d| d.0);
        let key = if raw.run.poll_period.is_some() { "run.poll_period" } else { "sim.poll_period" };
        let poll_period =
            in_range(key, raw.run.poll_period.or(s.poll_period).map_or(Nanos(0), |d| d.0), MAX_HOST_DELAY)?;
        let start = in_range("run.start", d(raw.run.start, Nanos::from_ms(1)), MAX_SPAN)?;
        let max_advance = in_range("run.max_advance", d(raw.run.max_advance, Nanos::from_ms(1_000)), MAX_SPAN)?;
        if max_advance.0 == 0 {
            return err("run.max_advance must be positive: with 0 no scheduled frame could ever be accepted");
        }
        let max_duration = in_range("run.max_duration", d(raw.run.max_duration, Nanos::from_ms(600_000)), MAX_SPAN)?;
        let half_slot = Nanos((geometry.period().floor_mul(1) / 2) as i64);
        let tolerance = in_range("run.tolerance", d(raw.run.tolerance, half_slot), MAX_SPAN)?;
        let max_pending = raw.run.max_pending.unwrap_or(65_536);
        if !(1..=MAX_PENDING).contains(&max_pending) {
            return err(format!("run.max_pending = {max_pending} must be within 1..={MAX_PENDING} (frames per class)"));
        }
        let backend = raw.run.backend.clone().unwrap_or_else(|| "sim".into());
        if !BACKENDS.contains(&backend.as_str()) {
            return err(format!("run.backend = \"{backend}\": use one of {}", BACKENDS.join(", ")));
        }
        let emulation = emulation(&raw)?;
        Ok(Config {
            timing,
            windows,
            emulation,
            geometry,
            ownership,
            batch: raw.ring.batch,
            policy,
            flows,
            start,
            base_time,
            max_frame,
            backend,
            poll_period,
            max_advance,
            max_pending,
            max_duration,
            tolerance,
            sim,
            raw,
        })
    }
}

/// `link.emulated_*` (tests only: the link's clock runs off the host's): offset, rate error and one step.
fn emulation(raw: &RawConfig) -> Result<Option<EmulatedError>, ConfigError> {
    let step = match (raw.link.emulated_step, raw.link.emulated_step_after) {
        (None, None) => None,
        (Some(by), Some(after)) => {
            if by.0 .0.unsigned_abs() > 1_000_000_000 {
                return err(format!("link.emulated_step = {} ns must be within ±1 s", by.0 .0));
            }
            Some((in_range("link.emulated_step_after", after.0, MAX_SPAN)?, by.0))
        }
        _ => return err("link.emulated_step and link.emulated_step_after go together"),
    };
    let emulation = match (raw.link.emulated_offset, raw.link.emulated_ppm, step) {
        (None, None, None) => None,
        (offset, ppm, step) => {
            let offset = offset.map_or(Nanos(0), |d| d.0);
            if offset.0.unsigned_abs() > 1_000_000_000_000 {
                return err(format!("link.emulated_offset = {} ns must be within ±1000 s", offset.0));
            }
            let ppm = ppm.unwrap_or(0.0);
            if !ppm.is_finite() || ppm.abs() > 1000.0 {
                return err(format!("link.emulated_ppm = {ppm} must be within ±1000"));
            }
            Some(EmulatedError { offset, ppb: (ppm * 1000.0).round() as i64, step })
        }
    };
    Ok(emulation)
}

#[cfg(test)]
mod tests;
