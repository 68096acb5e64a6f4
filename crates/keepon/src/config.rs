//! The runtime configuration (TOML), documented in `docs/config.md`.
//!
//! Parsing is strict: unknown keys are errors (serde `deny_unknown_fields`), every value has a unit-aware
//! parser, and the cross-field checks name the keys involved.

use std::fmt;
use std::path::Path;

use keepon_core::bytes::windows::{ClassWindows, Window, Windows};
use serde::de::{self, Deserializer};
use serde::Deserialize;

use keepon_core::insert::Policy;
use keepon_core::isolation::{parse_mask, ClassId, ClassSpec, Ownership};
use keepon_core::time::{LinkRate, Nanos, SlotGeometry, Tai, MIN_FRAME_BYTES};
use keepon_nic::emulation::EmulatedError;
use keepon_nic::sim::{HostModel, SimConfig};
use keepon_nic::source::{FlowSpec, Pattern};

/// A configuration error, naming the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

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

/// Check that a duration is within `0..=max`, naming the key.
fn in_range(key: &str, v: Nanos, max: Nanos) -> Result<Nanos, ConfigError> {
    if v.0 < 0 || v > max {
        return err(format!("{key} = {} ns must be within 0..={} ns", v.0, max.0));
    }
    Ok(v)
}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

/// Parse a duration: integer ns, or a string with unit `ns`, `us`/`µs`, `ms`, `s`; decimals must come to whole
/// nanoseconds.
pub fn parse_duration(text: &str) -> Result<Nanos, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_alphabetic() || c == 'µ').unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let scale: i64 = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (use ns, us, ms or s)")),
    };
    parse_scaled(num, scale).map(Nanos).ok_or_else(|| format!("`{text}` is not a whole number of nanoseconds"))
}

/// `num` (decimal, optional sign and `_`) times `scale`, if it is a whole number.
fn parse_scaled(num: &str, scale: i64) -> Option<i64> {
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let (neg, digits) = match num.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, num.as_str()),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    if !whole.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut v: i128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    v *= i128::from(scale);
    let mut place = i128::from(scale);
    for d in frac.chars() {
        let d = i128::from(d.to_digit(10)?);
        if place % 10 != 0 {
            if d != 0 {
                return None;
            }
            continue;
        }
        place /= 10;
        v += d * place;
    }
    let v = i64::try_from(v).ok()?;
    Some(if neg { -v } else { v })
}

/// Parse a rate: integer b/s or a string like `1Gbps`, `2.5Gbps`, `100Mbps`, `10Kbps`, `1000000bps`.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (num, scale) = if let Some(n) = lower.strip_suffix("gbps").or_else(|| lower.strip_suffix("gb/s")) {
        (n, 1_000_000_000)
    } else if let Some(n) = lower.strip_suffix("mbps").or_else(|| lower.strip_suffix("mb/s")) {
        (n, 1_000_000)
    } else if let Some(n) = lower.strip_suffix("kbps").or_else(|| lower.strip_suffix("kb/s")) {
        (n, 1_000)
    } else if let Some(n) = lower.strip_suffix("bps").or_else(|| lower.strip_suffix("b/s")) {
        (n, 1)
    } else {
        (lower.as_str(), 1)
    };
    parse_scaled(num.trim(), scale)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| format!("`{text}` is not a rate like 1Gbps, 2.5Gbps or 100Mbps"))
}

/// A duration value in the file (integer ns or string with unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dur(pub Nanos);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration: an integer number of nanoseconds, or a string with a unit like \"10us\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                Ok(Dur(Nanos(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                i64::try_from(v).map(|v| Dur(Nanos(v))).map_err(|_| E::custom(format!("{v} ns is out of range")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{v} is not a whole number of nanoseconds: write an integer (ns) or a string with a unit, \
                     like \"1.5us\""
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A rate value in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate(pub u64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a rate: an integer number of b/s, or a string like \"1Gbps\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                u64::try_from(v).map(Rate).map_err(|_| E::custom(format!("{v} b/s: a rate must be positive")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Ok(Rate(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
                Err(E::custom(format!(
                    "{v} is not a whole number of b/s: write an integer or a string like \"2.5Gbps\""
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                parse_rate(v).map(Rate).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `[link]`
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    /// Line rate.
    pub rate: Rate,
    /// Longest frame the link sends (L2 bytes with FCS): fillers may be lengthened up to it to keep the wire on
    /// the schedule (default 1518; jumbo links up to 9018).
    #[serde(default)]
    pub max_frame: Option<u32>,
    /// `"slots"` (default: every frame in the ring slot of its txtime, padded to the slot) or `"bytes"` (the
    /// byte clock: every real-time frame starts on the byte nearest its txtime, unpadded; the slot masks are
    /// its classes' time windows).
    #[serde(default)]
    pub timing: Option<String>,
    /// Test only: emulated phase error of a host-paced link's clock.
    #[serde(default)]
    pub emulated_offset: Option<Dur>,
    /// Test only: emulated frequency error of a host-paced link's clock, ppm.
    #[serde(default)]
    pub emulated_ppm: Option<f64>,
    /// Test only: a phase step of the host-paced link's clock (with `emulated_step_after`).
    #[serde(default)]
    pub emulated_step: Option<Dur>,
    /// Test only: when the step happens, after the backend opens.
    #[serde(default)]
    pub emulated_step_after: Option<Dur>,
}

/// `[ring]`
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RingSection {
    /// Slot size (L2 incl. FCS).
    pub slot_bytes: u32,
    /// Ring size N.
    pub slots: u32,
    /// Batch.
    pub batch: u32,
    /// `strict` or `relaxed`.
    #[serde(default)]
    pub policy: Option<String>,
    /// Prototype shorthand: comma-separated hex masks.
    #[serde(default)]
    pub slot_masks: Option<String>,
}

/// `[[class]]`
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ClassSection {
    /// Name.
    pub name: String,
    /// Hex mask.
    #[serde(default)]
    pub mask: Option<String>,
    /// Slot list.
    #[serde(default)]
    pub slots: Option<Vec<u32>>,
    /// Time windows in the cycle, `[offset, length]` each (`link.timing = "bytes"`, with `schedule.cycle_time`):
    /// an 802.1Qbv gate list's open intervals for this class, instead of ring slots.
    #[serde(default)]
    pub windows: Option<Vec<(Dur, Dur)>>,
}

/// `[[flow]]`
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct FlowSection {
    /// Name.
    pub name: String,
    /// Class name.
    pub class: String,
    /// Period.
    pub period: Dur,
    /// Offset of instance 0 from the epoch.
    #[serde(default)]
    pub offset: Option<Dur>,
    /// L2 frame length incl. FCS.
    pub frame_bytes: u32,
    /// Instances.
    pub count: u64,
    /// Submission lead.
    #[serde(default)]
    pub lead: Option<Dur>,
    /// Planner per-instance offsets.
    #[serde(default)]
    pub instance_offsets: Option<Vec<Dur>>,
    /// Repetition of `instance_offsets`.
    #[serde(default)]
    pub repeat: Option<Dur>,
    /// Carry an IEEE 802.1CB R-TAG numbered on network time (FRER).
    #[serde(default)]
    pub rtag: Option<bool>,
}

/// `[run]`
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Epoch delay after slot 0.
    #[serde(default)]
    pub start: Option<Dur>,
    /// Backend name.
    #[serde(default)]
    pub backend: Option<String>,
    /// Poll period override (defaults to `sim.poll_period`).
    #[serde(default)]
    pub poll_period: Option<Dur>,
    /// Furthest txtime ahead accepted.
    #[serde(default)]
    pub max_advance: Option<Dur>,
    /// Most frames waiting.
    #[serde(default)]
    pub max_pending: Option<usize>,
    /// Bound on the run (host time).
    #[serde(default)]
    pub max_duration: Option<Dur>,
    /// A frame further than this from its schedule slot is flagged `off_schedule` (default: half a slot).
    #[serde(default)]
    pub tolerance: Option<Dur>,
    /// Destination MAC of test frames.
    #[serde(default)]
    pub dst: Option<String>,
    /// Source MAC of test frames.
    #[serde(default)]
    pub src: Option<String>,
}

/// `[schedule]`: the schedule on network time (IEEE 802.1Qbv `AdminBaseTime`, `AdminCycleTime`).
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    /// TAI ns at which a cycle starts (default 0: stations with the same plan share their windows).
    #[serde(default)]
    pub base_time: Option<i64>,
    /// The cycle, if given: must be `ring.slots` whole slots.
    #[serde(default)]
    pub cycle_time: Option<Dur>,
}

/// `[sim]`
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct SimSection {
    /// Seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// TAI of slot 0.
    #[serde(default)]
    pub t0: Option<i64>,
    /// Requested sleep between polls.
    #[serde(default)]
    pub poll_period: Option<Dur>,
    /// Fixed iteration cost.
    #[serde(default)]
    pub poll_overhead: Option<Dur>,
    /// Per-slot cost.
    #[serde(default)]
    pub poll_per_slot: Option<Dur>,
    /// Fixed oversleep.
    #[serde(default)]
    pub wake_latency: Option<Dur>,
    /// Proportional oversleep.
    #[serde(default)]
    pub wake_slack: Option<f64>,
    /// Uniform host jitter.
    #[serde(default)]
    pub jitter: Option<Dur>,
    /// Preemption probability per iteration, parts per million.
    #[serde(default)]
    pub spike_ppm: Option<u32>,
    /// Preemption length.
    #[serde(default)]
    pub spike: Option<Dur>,
    /// Post latency.
    #[serde(default)]
    pub post_latency: Option<Dur>,
    /// Post latency jitter.
    #[serde(default)]
    pub post_jitter: Option<Dur>,
    /// Receiver timestamp resolution.
    #[serde(default)]
    pub rx_quantum: Option<Dur>,
    /// Receiver latency.
    #[serde(default)]
    pub rx_delay: Option<Dur>,
    /// Descriptors the NIC fetches ahead of the wire.
    #[serde(default)]
    pub fetch_ahead: Option<u32>,
    /// The NIC oscillator's frequency error, ppm (positive: fast).
    #[serde(default)]
    pub ppm: Option<f64>,
    /// Random-walk wander of the oscillator, ppm per √s.
    #[serde(default)]
    pub wander: Option<f64>,
}

/// The file as written.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Format version.
    #[serde(default)]
    pub version: Option<u32>,
    /// `[link]`
    pub link: LinkSection,
    /// `[ring]`
    pub ring: RingSection,
    /// `[[class]]`
    #[serde(default, rename = "class")]
    pub classes: Vec<ClassSection>,
    /// `[[flow]]`
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowSection>,
    /// `[run]`
    #[serde(default)]
    pub run: RunSection,
    /// `[schedule]`
    #[serde(default)]
    pub schedule: ScheduleSection,
    /// `[sim]`
    #[serde(default)]
    pub sim: SimSection,
    /// `[daemon]`, read by `keepon daemon` (kept as a table here so `run` accepts daemon configs).
    #[serde(default)]
    pub daemon: Option<toml::Table>,
    /// `[ptp]`, read by `keepon daemon` ([`crate::ptpconf`]).
    #[serde(default)]
    pub ptp: Option<toml::Table>,
    /// `[realtime]`, read by `keepon daemon` ([`crate::realtime`]).
    #[serde(default)]
    pub realtime: Option<toml::Table>,
}

/// A flow as the runtime uses it.
#[derive(Clone, Debug)]
pub struct Flow {
    /// Name.
    pub name: String,
    /// Class name.
    pub class_name: String,
    /// Runtime spec.
    pub spec: FlowSpec,
    /// Nominal period (for reports).
    pub period: Nanos,
}

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

fn parse_mac(key: &str, text: &str) -> Result<[u8; 6], ConfigError> {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return err(format!("{key} = \"{text}\" is not a MAC address like 02:00:00:00:00:01"));
    }
    for (m, p) in mac.iter_mut().zip(&parts) {
        *m = u8::from_str_radix(p, 16)
            .map_err(|_| ConfigError(format!("{key} = \"{text}\" is not a MAC address like 02:00:00:00:00:01")))?;
    }
    Ok(mac)
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
        let mut specs = Vec::new();
        // Classes given as time windows (`[[class]] windows`), by class index.
        let mut timed: Vec<ClassWindows> = Vec::new();
        match (&raw.ring.slot_masks, raw.classes.is_empty()) {
            (Some(_), false) => return err("ring.slot_masks and [[class]] tables both define classes; use one"),
            (Some(masks), true) => {
                for (i, m) in masks.split(',').enumerate() {
                    let name = format!("tc-{i}");
                    let slots = parse_mask(&name, m, n).map_err(|e| ConfigError(format!("ring.slot_masks: {e}")))?;
                    specs.push(ClassSpec { name, slots });
                }
            }
            (None, true) => return err("no classes: add [[class]] tables or ring.slot_masks"),
            (None, false) => {
                for (i, c) in raw.classes.iter().enumerate() {
                    let key = format!("class[{i}] (`{}`)", c.name);
                    let windows = match &c.windows {
                        None => Vec::new(),
                        Some(_) if timing != WireTiming::Bytes => {
                            return err(format!("{key}.windows needs link.timing = \"bytes\" (slots own ring slots)"))
                        }
                        Some(_) if c.mask.is_some() || c.slots.is_some() => {
                            return err(format!("{key}: give windows, or mask or slots, not both"))
                        }
                        Some(w) => w.iter().map(|(o, l)| Window { offset: o.0, length: l.0 }).collect(),
                    };
                    if c.name.is_empty() || c.name.len() > 255 {
                        return err(format!(
                            "{key}: a class name is 1 to 255 bytes (the protocol carries it in one length byte); \
                             this one is {}",
                            c.name.len()
                        ));
                    }
                    timed.push(ClassWindows { name: c.name.clone(), windows });
                    let all: usize = timed.iter().map(|t| t.windows.len()).sum();
                    if all > crate::api::MAX_WINDOWS {
                        return err(format!(
                            "{key}.windows: {all} windows in all classes so far; at most {} (what one Info reply \
                             carries, as many as ring slots)",
                            crate::api::MAX_WINDOWS
                        ));
                    }
                    let slots = match (&c.mask, &c.slots) {
                        (Some(_), Some(_)) => return err(format!("{key}: give mask or slots, not both")),
                        (Some(m), None) => {
                            parse_mask(&c.name, m, n).map_err(|e| ConfigError(format!("{key}.mask: {e}")))?
                        }
                        (None, Some(s)) => {
                            let mut seen = std::collections::BTreeSet::new();
                            if let Some(d) = s.iter().find(|x| !seen.insert(**x)) {
                                return err(format!("{key}.slots lists ring slot {d} twice"));
                            }
                            s.clone()
                        }
                        (None, None) => Vec::new(),
                    };
                    specs.push(ClassSpec { name: c.name.clone(), slots });
                }
            }
        }
        let ownership = Ownership::new(n, &specs).map_err(|e| ConfigError(format!("classes: {e}")))?;
        // The byte clock sends frames up to the link's longest; slots hold them up to the slot size.
        let frame_limit = match timing {
            WireTiming::Slots => geometry.slot_bytes(),
            WireTiming::Bytes => {
                raw.link.max_frame.unwrap_or(keepon_core::time::MAX_STD_FRAME_BYTES).max(geometry.slot_bytes())
            }
        };
        let windows = if timed.iter().any(|c| !c.windows.is_empty()) {
            let Some(cycle) = raw.schedule.cycle_time else {
                return err("schedule.cycle_time is required with class windows: the cycle they repeat in");
            };
            let base = Tai(raw.schedule.base_time.unwrap_or(0));
            let w = Windows::new(base, cycle.0, &timed, geometry.rate())
                .map_err(|e| ConfigError(format!("class windows: {e}")))?;
            Some(w)
        } else {
            None
        };

        let dst = match &raw.run.dst {
            Some(t) => parse_mac("run.dst", t)?,
            None => [0x02, 0x6b, 0x70, 0x00, 0x00, 0x02],
        };
        let src = match &raw.run.src {
            Some(t) => parse_mac("run.src", t)?,
            None => [0x02, 0x6b, 0x70, 0x00, 0x00, 0x01],
        };
        let mut flows = Vec::new();
        for (i, f) in raw.flows.iter().enumerate() {
            let key = format!("flow[{i}] (`{}`)", f.name);
            if raw.flows[..i].iter().any(|o| o.name == f.name) {
                return err(format!("{key}: flow name used twice"));
            }
            let class = ownership
                .class_named(&f.class)
                .ok_or_else(|| ConfigError(format!("{key}.class = \"{}\": no such class", f.class)))?;
            if f.period.0 .0 <= 0 || f.period.0 > MAX_SPAN {
                return err(format!("{key}.period = {} ns must be within 1..={} ns", f.period.0 .0, MAX_SPAN.0));
            }
            if f.frame_bytes < MIN_FRAME_BYTES || f.frame_bytes > frame_limit {
                return err(format!(
                    "{key}.frame_bytes = {} must be within {MIN_FRAME_BYTES}..={frame_limit} ({})",
                    f.frame_bytes,
                    match timing {
                        WireTiming::Slots => "ring.slot_bytes",
                        WireTiming::Bytes => "link.max_frame on the byte clock",
                    }
                ));
            }
            let offset = in_range(&format!("{key}.offset"), f.offset.map_or(Nanos(0), |d| d.0), MAX_SPAN)?;
            let best_effort = match &windows {
                Some(w) => w.is_best_effort(class),
                None => ownership.is_best_effort(class),
            };
            let pattern = match (&f.instance_offsets, f.repeat) {
                (Some(_), _) if best_effort => {
                    return err(format!("{key}.instance_offsets: class `{}` is best effort", f.class))
                }
                (Some(list), Some(rep)) => {
                    if list.is_empty() {
                        return err(format!("{key}.instance_offsets is empty"));
                    }
                    if rep.0 .0 <= 0 || rep.0 > MAX_SPAN || list.iter().any(|d| d.0 .0 < 0 || d.0 >= rep.0) {
                        return err(format!("{key}: every instance_offsets entry must be within 0..repeat"));
                    }
                    Pattern::Listed { offsets: list.iter().map(|d| d.0).collect(), repeat: rep.0 }
                }
                (Some(_), None) => return err(format!("{key}.instance_offsets needs {key}.repeat")),
                (None, Some(_)) => return err(format!("{key}.repeat is only meaningful with instance_offsets")),
                (None, None) if best_effort => Pattern::BestEffort { offset, period: f.period.0 },
                (None, None) => Pattern::Periodic { offset, period: f.period.0 },
            };
            if f.rtag == Some(true) && best_effort {
                return err(format!(
                    "{key}.rtag: class `{}` is best effort: its frames have no txtime, so the copies two stations \
                     send cannot be numbered on network time; tag a real-time flow",
                    f.class
                ));
            }
            let lead = in_range(&format!("{key}.lead"), f.lead.map_or(Nanos::from_us(150), |d| d.0), MAX_SPAN)?;
            // The whole schedule must be representable: the last instance's time after the epoch.
            let last = match &pattern {
                Pattern::Periodic { offset, period } | Pattern::BestEffort { offset, period } => {
                    i128::from(offset.0) + i128::from(period.0) * i128::from(f.count.saturating_sub(1))
                }
                Pattern::Listed { offsets, repeat } => {
                    let m = offsets.len() as u64;
                    let top = offsets.iter().map(|o| o.0).max().unwrap_or(0);
                    i128::from(top) + i128::from(repeat.0) * i128::from(f.count.saturating_sub(1) / m)
                }
            };
            let start = raw.run.start.map_or(0, |d| i128::from(d.0 .0));
            if start + last > i128::from(MAX_SPAN.0) {
                return err(format!(
                    "{key}: its last instance ({} periods after offset {} ns) lies {} ns after slot 0 (with run.start), \
                     beyond the {} ns a run can represent; lower count or period",
                    f.count.saturating_sub(1),
                    offset.0,
                    start + last,
                    MAX_SPAN.0
                ));
            }
            flows.push(Flow {
                name: f.name.clone(),
                class_name: f.class.clone(),
                period: f.period.0,
                spec: FlowSpec {
                    flow: u16::try_from(i).map_err(|_| ConfigError("more than 65535 flows".into()))?,
                    class,
                    pattern,
                    frame_bytes: f.frame_bytes,
                    count: f.count,
                    lead,
                    dst,
                    src,
                    rtag: f.rtag.unwrap_or(false),
                },
            });
        }

        let s = &raw.sim;
        let d = |v: Option<Dur>, default: Nanos| v.map_or(default, |d| d.0);
        let slack = s.wake_slack.unwrap_or(0.0);
        if !(0.0..=10.0).contains(&slack) {
            return err(format!("sim.wake_slack = {slack} must be within 0..=10"));
        }
        let t0 = Tai(s.t0.unwrap_or(1_700_000_000_000_000_000));
        if !(0..=MAX_T0).contains(&t0.0) {
            return err(format!("sim.t0 = {} must be within 0..={MAX_T0} (TAI ns)", t0.0));
        }
        let mut sim = SimConfig::new(geometry, t0);
        sim.seed = s.seed.unwrap_or(1);
        sim.host = HostModel {
            poll_overhead: d(s.poll_overhead, Nanos(500)),
            per_slot: d(s.poll_per_slot, Nanos(5)),
            wake_latency: d(s.wake_latency, Nanos(0)),
            wake_cost: Nanos(0),
            wake_slack_ppm: (slack * 1e6).round() as u32,
            jitter: d(s.jitter, Nanos(0)),
            spike_ppm: s.spike_ppm.unwrap_or(0),
            spike: d(s.spike, Nanos(0)),
        };
        sim.post_latency = d(s.post_latency, Nanos(1_000));
        sim.post_jitter = d(s.post_jitter, Nanos(0));
        sim.rx_quantum = d(s.rx_quantum, Nanos(8));
        sim.rx_delay = d(s.rx_delay, Nanos(0));
        sim.fetch_ahead = s.fetch_ahead.unwrap_or(1);
        if sim.fetch_ahead > 64 {
            return err("sim.fetch_ahead must be at most 64");
        }
        let ppm = s.ppm.unwrap_or(0.0);
        if !ppm.is_finite() || ppm.abs() > 1000.0 {
            return err(format!("sim.ppm = {ppm} must be within ±1000"));
        }
        let wander = s.wander.unwrap_or(0.0);
        if !wander.is_finite() || !(0.0..=100.0).contains(&wander) {
            return err(format!("sim.wander = {wander} must be within 0..=100 (ppm/√s)"));
        }
        sim.oscillator = keepon_nic::sim::Oscillator { ppm, wander };
        let max_frame = raw.link.max_frame.unwrap_or(keepon_core::time::MAX_STD_FRAME_BYTES.max(geometry.slot_bytes()));
        if !(geometry.slot_bytes()..=keepon_core::time::MAX_SLOT_BYTES).contains(&max_frame) {
            return err(format!(
                "link.max_frame = {max_frame} must be within ring.slot_bytes ({})..={}",
                geometry.slot_bytes(),
                keepon_core::time::MAX_SLOT_BYTES
            ));
        }
        sim.max_frame = max_frame;
        let base_time = schedule_base(&raw.schedule, geometry, n, windows.is_some())?;
        for (k, v) in [
            ("sim.poll_overhead", sim.host.poll_overhead),
            ("sim.poll_per_slot", sim.host.per_slot),
            ("sim.wake_latency", sim.host.wake_latency),
            ("sim.jitter", sim.host.jitter),
            ("sim.spike", sim.host.spike),
            ("sim.post_latency", sim.post_latency),
            ("sim.post_jitter", sim.post_jitter),
            ("sim.rx_delay", sim.rx_delay),
        ] {
            in_range(k, v, MAX_HOST_DELAY)?;
        }
        if sim.rx_quantum.0 <= 0 || sim.rx_quantum > MAX_HOST_DELAY {
            return err(format!("sim.rx_quantum = {} ns must be within 1..={} ns", sim.rx_quantum.0, MAX_HOST_DELAY.0));
        }
        if sim.host.spike_ppm > 1_000_000 {
            return err("sim.spike_ppm must be at most 1000000");
        }

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

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE2: &str = r#"
        [link]
        rate = "1Gbps"
        [ring]
        slot_bytes = 1230
        slots = 32
        batch = 8
        slot_masks = "0x01,0x20002,0"
        [[flow]]
        name = "a"
        class = "tc-0"
        period = "320us"
        frame_bytes = 100
        count = 10
    "#;

    #[test]
    fn durations_and_rates_parse_exactly() {
        assert_eq!(parse_duration("320us"), Ok(Nanos(320_000)));
        assert_eq!(parse_duration("1.5us"), Ok(Nanos(1_500)));
        assert_eq!(parse_duration("10 ms"), Ok(Nanos(10_000_000)));
        assert_eq!(parse_duration("250"), Ok(Nanos(250)));
        assert_eq!(parse_duration("2µs"), Ok(Nanos(2_000)));
        assert!(parse_duration("1.5ns").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert_eq!(parse_rate("2.5Gbps"), Ok(2_500_000_000));
        assert_eq!(parse_rate("100Mbps"), Ok(100_000_000));
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn example2_validates() {
        let c = Config::parse(EXAMPLE2).unwrap();
        assert_eq!(c.ownership.owned(keepon_core::isolation::ClassId(1)), &[1, 17]);
        assert!(c.ownership.is_best_effort(keepon_core::isolation::ClassId(2)));
        assert_eq!(c.flows[0].spec.lead, Nanos::from_us(150));
    }

    const WINDOWED: &str = r#"
        [link]
        rate = "1Gbps"
        timing = "bytes"
        [ring]
        slot_bytes = 1230
        slots = 32
        batch = 8
        [schedule]
        cycle_time = "250us"
        [[class]]
        name = "ctrl"
        windows = [["0us", "5us"], ["125us", "5us"]]
        [[class]]
        name = "be"
        [[flow]]
        name = "a"
        class = "ctrl"
        period = "125us"
        frame_bytes = 1518
        count = 10
    "#;

    /// `[[class]] windows`: the byte clock's classes as time, with their cycle; every bad list refused naming
    /// what is wrong.
    #[test]
    fn class_windows_validate_and_bad_ones_are_refused() {
        let c = Config::parse(WINDOWED).unwrap();
        let w = c.windows.as_ref().unwrap();
        assert!(
            !w.is_best_effort(keepon_core::isolation::ClassId(0))
                && w.is_best_effort(keepon_core::isolation::ClassId(1))
        );
        assert!(!c.flows[0].spec.is_best_effort(), "a windowed class is real-time");
        let bad = |from: &str, to: &str| Config::parse(&WINDOWED.replace(from, to)).unwrap_err().0;
        let e = bad("[\"125us\", \"5us\"]", "[\"3us\", \"5us\"]");
        assert!(e.contains("class windows") && e.contains("overlaps"), "{e}");
        let e = bad("[\"125us\", \"5us\"]", "[\"248us\", \"5us\"]");
        assert!(e.contains("exceeds the cycle of 250000 ns"), "{e}");
        let e = bad("[\"125us\", \"5us\"]", "[\"125us\", \"600ns\"]");
        assert!(e.contains("shorter than a minimum frame") && e.contains("672 ns"), "{e}");
        let e = bad("timing = \"bytes\"", "");
        assert!(e.contains("class[0] (`ctrl`).windows needs link.timing = \"bytes\""), "{e}");
        let e = bad("cycle_time = \"250us\"", "");
        assert!(e.contains("schedule.cycle_time is required"), "{e}");
        let e = bad("name = \"ctrl\"", "name = \"ctrl\"\nslots = [1]");
        assert!(e.contains("give windows, or mask or slots"), "{e}");
        let e = bad("frame_bytes = 1518", "frame_bytes = 1519");
        assert!(e.contains("frame_bytes = 1519") && e.contains("link.max_frame"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let e = Config::parse(&EXAMPLE2.replace("batch = 8", "batch = 32")).unwrap_err();
        assert!(e.0.contains("ring.batch = 32"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("count = 10", "count = 10\nperiode = 3")).unwrap_err();
        assert!(e.0.contains("periode"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("0x01,0x20002", "0x03,0x20002")).unwrap_err();
        assert!(e.0.contains("both own ring slot 1"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("\"320us\"", "\"320 fortnights\"")).unwrap_err();
        assert!(e.0.contains("unknown unit"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("class = \"tc-0\"", "class = \"tc-9\"")).unwrap_err();
        assert!(e.0.contains("flow[0] (`a`).class"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("frame_bytes = 100", "frame_bytes = 2000")).unwrap_err();
        assert!(e.0.contains("frame_bytes = 2000"), "{e}");
        // `rtag` (802.1CB FRER) on a real-time flow; refused on a best-effort one, naming the key.
        let be = "[[flow]]\nname = \"bulk\"\nclass = \"tc-2\"\nperiod = \"1ms\"\nframe_bytes = 100\ncount = 1\n";
        let c = Config::parse(&format!("{}{be}", EXAMPLE2.replace("count = 10", "count = 10\nrtag = true"))).unwrap();
        assert!(c.flows[0].spec.rtag && !c.flows[1].spec.rtag);
        let e = Config::parse(&format!("{EXAMPLE2}{be}rtag = true\n")).unwrap_err();
        assert!(e.0.contains("flow[1] (`bulk`).rtag") && e.0.contains("best effort"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("count = 10", "count = 10\nrtag = 1")).unwrap_err();
        assert!(e.0.contains("rtag"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("rate = \"1Gbps\"", "rate = \"1.5Kbps\"")).unwrap_err();
        assert!(e.0.contains("link.rate"), "{e}");
        assert!(Config::parse("this is not toml").is_err());
        for b in BACKENDS {
            let c = Config::parse(&format!("{EXAMPLE2}\n[run]\nbackend = \"{b}\"")).unwrap();
            assert_eq!(c.backend, b, "every --backend name is a valid run.backend");
        }
        let e = Config::parse(&format!("{EXAMPLE2}\n[run]\nbackend = \"dpdk\"")).unwrap_err();
        assert!(e.0.contains("run.backend") && e.0.contains("afpacket-ring"), "{e}");
        // The emulated oscillator error (tests only): ppm to ppb, bounds name the key.
        let emu =
            |extra: &str| Config::parse(&EXAMPLE2.replace("rate = \"1Gbps\"", &format!("rate = \"1Gbps\"\n{extra}")));
        assert_eq!(Config::parse(EXAMPLE2).unwrap().emulation, None);
        let c = emu("emulated_offset = \"-1s\"\nemulated_ppm = 50.0").unwrap();
        let e = |offset, ppb, step| Some(EmulatedError { offset: Nanos(offset), ppb, step });
        assert_eq!(c.emulation, e(-1_000_000_000, 50_000, None));
        assert_eq!(emu("emulated_ppm = -0.25").unwrap().emulation, e(0, -250, None));
        let s = emu("emulated_step = \"10us\"\nemulated_step_after = \"40s\"").unwrap();
        assert_eq!(s.emulation, e(0, 0, Some((Nanos::from_ms(40_000), Nanos::from_us(10)))));
        assert!(emu("emulated_step = \"10us\"").unwrap_err().0.contains("go together"));
        assert!(emu("emulated_step = \"2s\"\nemulated_step_after = \"1s\"").unwrap_err().0.contains("±1 s"));
        assert!(emu("emulated_ppm = 2000.0").unwrap_err().0.contains("link.emulated_ppm"));
        assert!(emu("emulated_offset = \"2000s\"").unwrap_err().0.contains("link.emulated_offset"));
    }

    /// `[schedule]` and `link.max_frame`: defaults, and bad values refused before the link comes up, naming the key;
    /// with `[ptp]`, a slot that leaves fillers no room to absorb ±100 ppm is refused too.
    #[test]
    fn the_schedule_is_checked_naming_the_key() {
        let c = Config::parse(EXAMPLE2).unwrap();
        assert_eq!((c.base_time, c.max_frame), (Tai(0), 1518));
        let with = |s: &str| Config::parse(&format!("{EXAMPLE2}\n[schedule]\n{s}"));
        assert_eq!(with("base_time = 1_700_000_000_000_000_000").unwrap().base_time.0, 1_700_000_000_000_000_000);
        assert!(with("cycle_time = \"320us\"").is_ok());
        let e = with("base_time = -1").unwrap_err();
        assert!(e.0.contains("schedule.base_time = -1"), "{e}");
        let e = with("base_time = 4611686018427387904").unwrap_err();
        assert!(e.0.contains("schedule.base_time"), "{e}");
        let e = with("cycle_time = \"321us\"").unwrap_err();
        assert!(e.0.contains("schedule.cycle_time") && e.0.contains("not a whole number of slots"), "{e}");
        let e = with("cycle_time = \"640us\"").unwrap_err();
        assert!(e.0.contains("schedule.cycle_time") && e.0.contains("64 slots"), "{e}");
        let e = with("cycle = 3").unwrap_err();
        assert!(e.0.contains("cycle"), "{e}");
        let e = Config::parse(&EXAMPLE2.replace("rate = \"1Gbps\"", "rate = \"1Gbps\"\nmax_frame = 100")).unwrap_err();
        assert!(e.0.contains("link.max_frame = 100"), "{e}");
        // With [ptp]: 1518-byte slots on a 1518-byte link cannot absorb a fast oscillator; 1517-byte ones can.
        let ptp = |slot: u32, max: &str| {
            let t = EXAMPLE2.replace("slot_bytes = 1230", &format!("slot_bytes = {slot}"));
            let t = t.replace("rate = \"1Gbps\"", &format!("rate = \"1Gbps\"\n{max}"));
            let c = Config::parse(&format!("{t}\n[ptp]\nclass = \"tc-0\"\n")).unwrap();
            crate::ptpconf::PtpConfig::from_config(&c).map(|_| ())
        };
        let e = ptp(1518, "").unwrap_err();
        assert!(e.0.contains("ring.slot_bytes = 1518") && e.0.contains("link.max_frame"), "{e}");
        assert!(ptp(1517, "").is_ok());
        assert!(ptp(1518, "max_frame = 9018").is_ok());
    }

    /// Values that would overflow, hang or be meaningless later are refused up front, naming the key.
    #[test]
    fn values_beyond_what_a_run_can_represent_are_refused() {
        let max = i64::MAX;
        let cases: Vec<(String, &str)> = vec![
            (EXAMPLE2.replace("count = 10", &format!("count = 10\noffset = {max}")), "offset"),
            (EXAMPLE2.replace("\"320us\"", &max.to_string()), "period"),
            (EXAMPLE2.replace("count = 10", "count = 100000000000000"), "last instance"),
            (EXAMPLE2.replace("count = 10", &format!("count = 10\nlead = {max}")), "lead"),
            (EXAMPLE2.replace("count = 10", "count = 10\nlead = -5"), "lead"),
            (format!("{EXAMPLE2}\n[run]\nstart = {max}"), "run.start"),
            (format!("{EXAMPLE2}\n[run]\nstart = -1"), "run.start"),
            (format!("{EXAMPLE2}\n[run]\npoll_period = {max}"), "run.poll_period"),
            (format!("{EXAMPLE2}\n[sim]\npoll_period = \"1000s\""), "sim.poll_period"),
            (format!("{EXAMPLE2}\n[sim]\nt0 = {}", i64::MIN), "sim.t0"),
            (format!("{EXAMPLE2}\n[sim]\nt0 = {max}"), "sim.t0"),
            (format!("{EXAMPLE2}\n[sim]\nt0 = -1"), "sim.t0"),
            (format!("{EXAMPLE2}\n[sim]\njitter = {max}"), "sim.jitter"),
            (format!("{EXAMPLE2}\n[run]\nmax_pending = 0"), "run.max_pending"),
            (format!("{EXAMPLE2}\n[run]\nmax_advance = 0"), "run.max_advance"),
            (format!("{EXAMPLE2}\n[run]\nmax_advance = -3"), "run.max_advance"),
            (format!("{EXAMPLE2}\n[run]\nmax_duration = {max}"), "run.max_duration"),
            (EXAMPLE2.replace("\"320us\"", "320.5"), "whole number of nanoseconds"),
            (EXAMPLE2.replace("rate = \"1Gbps\"", "rate = 1.5e9"), "whole number of b/s"),
            (
                EXAMPLE2
                    .replace("slot_masks = \"0x01,0x20002,0\"", "")
                    .replace("[[flow]]", "[[class]]\nname = \"tc-0\"\nslots = [0, 3, 0]\n[[flow]]"),
                "lists ring slot 0 twice",
            ),
        ];
        for (text, key) in cases {
            match Config::parse(&text) {
                Ok(_) => panic!("accepted; expected an error naming {key}:\n{text}"),
                Err(e) => assert!(e.0.contains(key), "error does not name {key}: {e}"),
            }
        }
    }
}
