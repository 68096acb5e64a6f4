//! The file as written: one struct per TOML section (`deny_unknown_fields`: an unknown key is an error), before any
//! check across keys ([`super::Config::parse`]).

use serde::Deserialize;

use super::{Dur, Rate};

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
