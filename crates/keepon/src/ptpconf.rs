//! `[ptp]`: synchronising the link's EPHC to the network's PTP time (see `docs/config.md`).
//!
//! Read by `keepon daemon`. Every value is checked here, and an error names its key. What is not supported is
//! an error, never a silent fallback: a key that does not apply (`log_pdelay_req_interval` with E2E,
//! `log_delay_req_interval` with P2P, `one_step` on a slave) is refused, and so is `one_step = true` on a
//! host-paced link ([`PtpConfig::check_link`]): one-step Sync writes the TX time into the Sync before it leaves,
//! and there the TX time is known only after the host released the frame. keepon refuses rather than falling
//! back to two-step, so a configuration means the same on every link.

use serde::Deserialize;

use keepon_core::isolation::ClassId;
use keepon_core::time::Nanos;
use keepon_nic::Timing;
use keepon_ptp::engine::DelayMechanism;
use keepon_ptp::gptp::{self, Profile};
use keepon_ptp::port::OneStepNeedsSlotTime;
use keepon_ptp::servo::floor::FloorConfig;
use keepon_ptp::servo::ServoKind;
use keepon_ptp::wire::Transport;

use crate::config::{Config, ConfigError, Dur};

/// Largest TX/RX latency constant accepted (1 ms: a MAC/PHY or kernel latency is microseconds).
pub const MAX_LATENCY: Nanos = Nanos::from_ms(1);

/// Largest sync threshold accepted (1 s).
pub const MAX_THRESHOLD: Nanos = Nanos::from_ms(1_000);
/// The longest delay-floor window (`ptp.delay_floor_window`): ten minutes.
pub const MAX_FLOOR_WINDOW: Nanos = Nanos::from_ms(600_000);

/// The longest frame PTP sends, with FCS: an Announce (64 bytes) over UDPv4 (42 bytes of headers).
pub(crate) const PTP_LONGEST_FRAME: u32 = 64 + 42 + 4;

/// `[ptp]` as written.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct PtpSection {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    domain: Option<i64>,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    ipv4: Option<String>,
    #[serde(default)]
    delay_mechanism: Option<String>,
    class: String,
    #[serde(default)]
    log_sync_interval: Option<i64>,
    #[serde(default)]
    log_announce_interval: Option<i64>,
    #[serde(default)]
    log_delay_req_interval: Option<i64>,
    #[serde(default)]
    log_pdelay_req_interval: Option<i64>,
    #[serde(default)]
    one_step: Option<toml::Value>,
    #[serde(default)]
    priority1: Option<i64>,
    #[serde(default)]
    servo: Option<String>,
    #[serde(default)]
    sync_threshold: Option<Dur>,
    #[serde(default)]
    delay_floor_window: Option<Dur>,
    #[serde(default)]
    tx_latency: Option<Dur>,
    #[serde(default)]
    rx_latency: Option<Dur>,
    #[serde(default)]
    measurement_log: Option<toml::Value>,
    #[serde(default)]
    dual_clock: Option<toml::Value>,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    neighbor_prop_delay_thresh: Option<Dur>,
}

/// Which PTP role the station may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Always master (never slave).
    Master,
    /// Always slave (never master).
    Slave,
    /// Whatever the BMCA decides.
    Auto,
}

/// The validated `[ptp]` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtpConfig {
    /// Role.
    pub role: Role,
    /// PTP domain.
    pub domain: u8,
    /// L2 or UDPv4 (with the station's address).
    pub transport: Transport,
    /// The class whose slots carry PTP messages (a real-time class that owns slots).
    pub class: ClassId,
    /// log₂ of the Sync interval (s), −7..=4.
    pub log_sync: i8,
    /// log₂ of the Announce interval (s), −3..=4.
    pub log_announce: i8,
    /// E2E (log₂ of the Delay_Req interval in s, −7..=6, as slave) or P2P (log₂ of the Pdelay_Req interval,
    /// −7..=6, in every state).
    pub delay: DelayMechanism,
    /// As master, send one-step Sync (the TX time in the Sync, no Follow_Up); only on links whose slot time is
    /// the TX time ([`PtpConfig::check_link`]).
    pub one_step: bool,
    /// BMCA priority 1 (lower wins).
    pub priority1: u8,
    /// The servo.
    pub servo: ServoKind,
    /// Scheduled submits wait (are refused `not-synchronised`) while the servo's |offset| is at or above this.
    pub sync_threshold: Nanos,
    /// The delay-floor filter's window: each servo input is taken from the floor (a low quantile) of this long's
    /// delays (0: off, every measurement as it is). See [`keepon_ptp::servo::floor`].
    pub delay_floor: FloorConfig,
    /// Added to a slot's EPHC time to get an event message's TX timestamp (MAC/PHY constant).
    pub tx_latency: Nanos,
    /// Subtracted from RX timestamps (the calibrated RX latency).
    pub rx_latency: Nanos,
    /// A CSV file (created, or truncated) getting one row per measurement the servo gets: the raw differences,
    /// what the filters handed on, the servo's state (`ptp.measurement_log`; a relative path is the daemon's
    /// working directory's).
    pub measurement_log: Option<std::path::PathBuf>,
    /// The dual clock (paper §4.2, `keepon_ptp::dualrx`): a slave counts its master's slots into an RX slot
    /// clock, which gives its Syncs' `t2`, and steers the EPHC to it (`ptp.dual_clock`). The slot period it
    /// counts in (the master's is the same: a network's stations share the slot size), whole ns.
    pub dual_clock: Option<keepon_core::time::SlotPeriod>,
    /// The PTP profile (`ptp.profile`): the 1588 default, gPTP (IEEE 802.1AS) or its automotive variant.
    pub profile: Profile,
    /// An 802.1AS port is asCapable while its neighbour delay is at most this (`ptp.neighbor_prop_delay_thresh`).
    pub neighbor_prop_delay_thresh: Nanos,
}

/// The longest `ptp.neighbor_prop_delay_thresh` accepted (10 ms: a link's delay is ns to µs).
pub const MAX_NEIGHBOR_THRESH: Nanos = Nanos::from_ms(10);

/// `ptp.profile` and what an 802.1AS profile requires of the other keys (L2, P2P, two-step; the automotive
/// profile's static role), with its default intervals and the neighbour-delay threshold.
fn profile_of(s: &PtpSection) -> Result<(Profile, Nanos), ConfigError> {
    let profile = match s.profile.as_deref().unwrap_or("default") {
        "default" => Profile::Default,
        "gptp" => Profile::Gptp,
        "automotive" => Profile::Automotive,
        p => return Err(ConfigError(format!("ptp.profile = \"{p}\": use \"default\", \"gptp\" or \"automotive\""))),
    };
    let thresh = s.neighbor_prop_delay_thresh.map(|d| d.0);
    if !profile.is_802_1as() {
        if thresh.is_some() {
            return Err(ConfigError(
                "ptp.neighbor_prop_delay_thresh is only for profile = \"gptp\" or \"automotive\" (asCapable)".into(),
            ));
        }
        return Ok((profile, gptp::DEFAULT_THRESHOLD));
    }
    let name = profile.name();
    if let Some(d) = s.delay_mechanism.as_deref().filter(|d| *d != "p2p") {
        return Err(ConfigError(format!(
            "ptp.delay_mechanism = \"{d}\": profile = \"{name}\" (IEEE 802.1AS) measures every link peer to peer: use \
             \"p2p\" or leave it out"
        )));
    }
    if let Some(t) = s.transport.as_deref().filter(|t| *t != "l2") {
        return Err(ConfigError(format!(
            "ptp.transport = \"{t}\": profile = \"{name}\" (IEEE 802.1AS) runs over Ethernet only: use \"l2\" or \
             leave it out"
        )));
    }
    if s.one_step == Some(toml::Value::Boolean(true)) {
        return Err(ConfigError(format!(
            "ptp.one_step = true: profile = \"{name}\" sends two-step Sync (its Follow_Up carries the Follow_Up \
             information TLV)"
        )));
    }
    if profile == Profile::Automotive && !matches!(s.role.as_deref(), Some("master" | "slave")) {
        return Err(ConfigError(
            "ptp.role: profile = \"automotive\" has static roles and no BMCA: set role = \"master\" or \"slave\""
                .into(),
        ));
    }
    let thresh = thresh.unwrap_or(gptp::DEFAULT_THRESHOLD);
    if thresh.0 < 0 || thresh > MAX_NEIGHBOR_THRESH {
        return Err(ConfigError(format!(
            "ptp.neighbor_prop_delay_thresh = {} ns: must be within 0..={} ns",
            thresh.0, MAX_NEIGHBOR_THRESH.0
        )));
    }
    Ok((profile, thresh))
}

fn int_in(key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64) -> Result<i64, ConfigError> {
    let v = v.unwrap_or(default);
    if !(lo..=hi).contains(&v) {
        return Err(ConfigError(format!("ptp.{key} = {v}: must be within {lo}..={hi}")));
    }
    Ok(v)
}

fn latency(key: &str, v: Option<Dur>) -> Result<Nanos, ConfigError> {
    let v = v.map_or(Nanos(0), |d| d.0);
    if v.0 < 0 || v > MAX_LATENCY {
        return Err(ConfigError(format!("ptp.{key} = {} ns: must be within 0..={} ns", v.0, MAX_LATENCY.0)));
    }
    Ok(v)
}

fn parse_ipv4(text: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut a = [0u8; 4];
    for (o, p) in a.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 3 || !p.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    Some(a)
}

impl PtpConfig {
    /// The `[ptp]` section of `cfg`, validated; `None` without one (the EPHC then runs free on the link's
    /// own clock).
    pub fn from_config(cfg: &Config) -> Result<Option<PtpConfig>, ConfigError> {
        let Some(table) = cfg.raw.ptp.clone() else { return Ok(None) };
        let bytes = cfg.timing == crate::config::WireTiming::Bytes;
        // (The byte clock sizes every filler as it needs: it keeps the schedule whatever the slot size.)
        if !bytes {
            schedule_keepable(cfg)?;
        }
        let s: PtpSection =
            table.try_into().map_err(|e: toml::de::Error| ConfigError(format!("[ptp]: {}", e.message())))?;
        let (profile, neighbor_prop_delay_thresh) = profile_of(&s)?;
        let (log_sync, log_announce, log_delay) = profile.default_intervals();
        let role = role_of(&s)?;
        let domain = int_in("domain", s.domain, 0, 0, 255)? as u8;
        let transport = transport_of(&s)?;
        let delay = delay_of(&s, profile.is_802_1as(), log_delay.into())?;
        let one_step = flag("one_step", s.one_step.as_ref())?;
        if one_step && role == Role::Slave {
            return Err(ConfigError(
                "ptp.one_step = true: a slave sends no Sync (one-step is for role = \"master\" or \"auto\")".into(),
            ));
        }
        let class = class_of(cfg, &s.class, bytes)?;
        let dual_clock = flag("dual_clock", s.dual_clock.as_ref())?;
        if dual_clock {
            dual_clock_possible(cfg, role, bytes)?;
        }
        let servo = servo_of(s.servo.as_deref(), dual_clock)?;
        let sync_threshold = s.sync_threshold.map_or(Nanos(1_000), |d| d.0);
        if sync_threshold.0 <= 0 || sync_threshold > MAX_THRESHOLD {
            return Err(ConfigError(format!(
                "ptp.sync_threshold = {} ns: must be within 1..={} ns",
                sync_threshold.0, MAX_THRESHOLD.0
            )));
        }
        let window = s.delay_floor_window.map_or(FloorConfig::default().window, |d| d.0);
        if window.0 < 0 || window > MAX_FLOOR_WINDOW {
            return Err(ConfigError(format!(
                "ptp.delay_floor_window = {} ns: must be within 0..={} ns (0 turns the filter off)",
                window.0, MAX_FLOOR_WINDOW.0
            )));
        }
        let p = PtpConfig {
            role,
            domain,
            transport,
            class,
            log_sync: int_in("log_sync_interval", s.log_sync_interval, log_sync.into(), -7, 4)? as i8,
            log_announce: int_in("log_announce_interval", s.log_announce_interval, log_announce.into(), -3, 4)? as i8,
            delay,
            one_step,
            priority1: int_in("priority1", s.priority1, 128, 0, 255)? as u8,
            servo,
            sync_threshold,
            delay_floor: FloorConfig { window, ..FloorConfig::default() },
            tx_latency: latency("tx_latency", s.tx_latency)?,
            rx_latency: latency("rx_latency", s.rx_latency)?,
            measurement_log: match s.measurement_log {
                None => None,
                Some(toml::Value::String(p)) if !p.trim().is_empty() => Some(std::path::PathBuf::from(p)),
                Some(v) => return Err(ConfigError(format!("ptp.measurement_log = {v}: name a file"))),
            },
            dual_clock: dual_clock.then(|| cfg.geometry.period()),
            profile,
            neighbor_prop_delay_thresh,
        };
        crate::ptproom::check(cfg, &p, &s.class)?;
        Ok(Some(p))
    }
}

/// `ptp.role`.
fn role_of(s: &PtpSection) -> Result<Role, ConfigError> {
    Ok(match s.role.as_deref().unwrap_or("auto") {
        "master" => Role::Master,
        "slave" => Role::Slave,
        "auto" => Role::Auto,
        r => return Err(ConfigError(format!("ptp.role = \"{r}\": use \"master\", \"slave\" or \"auto\""))),
    })
}

/// `ptp.transport` (and `ptp.ipv4` for UDP).
fn transport_of(s: &PtpSection) -> Result<Transport, ConfigError> {
    Ok(match (s.transport.as_deref().unwrap_or("l2"), &s.ipv4) {
        ("l2", None) => Transport::L2,
        ("l2", Some(_)) => return Err(ConfigError("ptp.ipv4 is only for transport = \"udpv4\"".into())),
        ("udpv4", Some(a)) => Transport::UdpV4 {
            src: parse_ipv4(a)
                .ok_or_else(|| ConfigError(format!("ptp.ipv4 = \"{a}\" is not an IPv4 address like 10.0.0.1")))?,
        },
        ("udpv4", None) => {
            return Err(ConfigError("ptp.ipv4: transport = \"udpv4\" needs the station's IPv4 address".into()))
        }
        (t, _) => return Err(ConfigError(format!("ptp.transport = \"{t}\": use \"l2\" or \"udpv4\""))),
    })
}

/// `ptp.delay_mechanism` and its interval (P2P by default under an 802.1AS profile, else E2E; `log_delay` the
/// profile's default interval).
fn delay_of(s: &PtpSection, is_802_1as: bool, log_delay: i64) -> Result<DelayMechanism, ConfigError> {
    Ok(
        match (
            s.delay_mechanism.as_deref().unwrap_or(if is_802_1as { "p2p" } else { "e2e" }),
            s.log_delay_req_interval,
            s.log_pdelay_req_interval,
        ) {
            ("e2e", v, None) => {
                DelayMechanism::E2E { log_interval: int_in("log_delay_req_interval", v, log_delay, -7, 6)? as i8 }
            }
            ("p2p", None, v) => {
                DelayMechanism::P2P { log_interval: int_in("log_pdelay_req_interval", v, log_delay, -7, 6)? as i8 }
            }
            ("e2e", _, Some(_)) => {
                return Err(ConfigError(
                    "ptp.log_pdelay_req_interval is only for delay_mechanism = \"p2p\" (E2E sends \
                 ptp.log_delay_req_interval's Delay_Req)"
                        .into(),
                ))
            }
            ("p2p", Some(_), _) => {
                return Err(ConfigError(
                    "ptp.log_delay_req_interval is only for delay_mechanism = \"e2e\" (P2P sends \
                 ptp.log_pdelay_req_interval's Pdelay_Req)"
                        .into(),
                ))
            }
            (d, _, _) => return Err(ConfigError(format!("ptp.delay_mechanism = \"{d}\": use \"e2e\" or \"p2p\""))),
        },
    )
}

/// A boolean key of `[ptp]` (absent: false).
fn flag(key: &str, v: Option<&toml::Value>) -> Result<bool, ConfigError> {
    match v {
        None => Ok(false),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(v) => Err(ConfigError(format!("ptp.{key} = {v}: use true or false"))),
    }
}

/// `ptp.class`: a class that owns slots (on the byte clock, with a window that holds PTP's longest frame).
fn class_of(cfg: &Config, name: &str, bytes: bool) -> Result<ClassId, ConfigError> {
    let class = cfg
        .ownership
        .class_named(name)
        .ok_or_else(|| ConfigError(format!("ptp.class = \"{}\": no such class", name)))?;
    if cfg.is_best_effort(class) {
        return Err(ConfigError(format!(
            "ptp.class = \"{}\" owns no slots{}: PTP event messages need owned slots for exact TX times",
            name,
            if bytes { " and has no windows" } else { "" }
        )));
    }
    if bytes {
        let windows = crate::run::byte_config(cfg).windows;
        let span = crate::ptproom::longest_frame(cfg);
        if windows.longest(class) < span {
            return Err(ConfigError(format!(
                "ptp.class = \"{}\": its longest window is shorter than PTP's longest frame ({PTP_LONGEST_FRAME} B, \
                 {} ns on the wire): give the class a longer window",
                name,
                span.ceil()
            )));
        }
    }
    Ok(class)
}

/// `ptp.servo` (the dual clock's PTP only sets the RX clock's phase: a servo that steps at each measurement).
fn servo_of(servo: Option<&str>, dual_clock: bool) -> Result<ServoKind, ConfigError> {
    Ok(match servo.unwrap_or(if dual_clock { "moving-average" } else { "kalman" }) {
        "kalman" | "pi" if dual_clock => {
            return Err(ConfigError(
                "ptp.servo: with ptp.dual_clock = true PTP sets the RX slot clock's phase (the clock's rate is \
                 the master's, counted), which takes the \"moving-average\" servo"
                    .into(),
            ))
        }
        "kalman" => ServoKind::Kalman,
        "pi" => ServoKind::Pi,
        "moving-average" => ServoKind::MovingAverage,
        v => return Err(ConfigError(format!("ptp.servo = \"{v}\": use \"kalman\", \"pi\" or \"moving-average\""))),
    })
}

/// The dual clock counts the master's slots: refuse where there are none to count or no master to follow.
fn dual_clock_possible(cfg: &Config, role: Role, bytes: bool) -> Result<(), ConfigError> {
    if bytes {
        return Err(ConfigError(
            "ptp.dual_clock = true: the byte clock's frames are not slots, so the master's stream cannot be \
             counted into a slot clock; use link.timing = \"slots\""
                .into(),
        ));
    }
    if role == Role::Master {
        return Err(ConfigError(
            "ptp.dual_clock = true: the dual clock is a slave's (it counts its master's slots); use role = \
             \"slave\" or \"auto\""
                .into(),
        ));
    }
    let delta = cfg.geometry.period();
    if !delta.num().is_multiple_of(delta.den()) {
        return Err(ConfigError(format!(
            "ptp.dual_clock = true: the slot period δ = {}/{} ns is not a whole number of ns, which the RX slot \
             clock counts in; choose ring.slot_bytes so that it is (at 10 Gb/s: slot_bytes + 20 a multiple of 5)",
            delta.num(),
            delta.den()
        )));
    }
    Ok(())
}

/// The oscillator error a synchronised station must absorb (NIC oscillators are specified to ±100 ppm).
pub const MAX_OSCILLATOR_PPM: u64 = 100;

/// A synchronised station keeps its wire on the schedule by lengthening and shortening fillers: a fast
/// oscillator needs room above the slot size (up to `link.max_frame`), a slow one room below it (down to 64
/// bytes, or a skip where there is none). Refuse a configuration whose slots leave no room to lengthen by what
/// ±100 ppm drifts per slot: its class windows would slide against network time.
fn schedule_keepable(cfg: &Config) -> Result<(), ConfigError> {
    let slot = u64::from(cfg.geometry.slot_bytes());
    let need = ((slot + 20) * MAX_OSCILLATOR_PPM).div_ceil(1_000_000);
    let room = u64::from(cfg.max_frame) - slot;
    if room < need {
        return Err(ConfigError(format!(
            "ring.slot_bytes = {slot} leaves fillers no room to lengthen (link.max_frame = {} B): with [ptp] the \
             wire must absorb the NIC oscillator's ±{MAX_OSCILLATOR_PPM} ppm ({need} B per slot), so the schedule \
             could not be kept on network time; use slots of at most {} B or a larger link.max_frame (jumbo)",
            cfg.max_frame,
            u64::from(cfg.max_frame) - need
        )));
    }
    Ok(())
}

impl PtpConfig {
    /// Refuse what this configuration cannot do on a link of `timing`: one-step Sync on a host-paced link (see
    /// the module docs).
    pub fn check_link(&self, timing: Timing) -> Result<(), ConfigError> {
        if self.one_step && timing == Timing::HostPaced {
            return Err(ConfigError(format!("ptp.one_step = true on this host-paced link: {OneStepNeedsSlotTime}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[link]
rate = "1Gbps"
[ring]
slot_bytes = 1230
slots = 32
batch = 8
[[class]]
name = "ptp"
slots = [0, 16]
[[class]]
name = "be"
"#;

    fn parse(ptp: &str) -> Result<Option<PtpConfig>, ConfigError> {
        let cfg = Config::parse(&format!("{BASE}{ptp}")).map_err(|e| ConfigError(format!("config: {e}")))?;
        PtpConfig::from_config(&cfg)
    }

    fn error(ptp: &str) -> String {
        parse(ptp).expect_err(ptp).0
    }

    #[test]
    fn defaults_and_a_full_section() {
        assert_eq!(parse("").unwrap(), None);
        let p = parse("[ptp]\nclass = \"ptp\"\n").unwrap().unwrap();
        assert_eq!((p.role, p.domain, p.transport, p.servo), (Role::Auto, 0, Transport::L2, ServoKind::Kalman));
        assert_eq!((p.sync_threshold, p.tx_latency, p.rx_latency), (Nanos(1_000), Nanos(0), Nanos(0)));
        assert_eq!((p.delay, p.one_step), (DelayMechanism::E2E { log_interval: 0 }, false));
        assert_eq!(p.delay_floor, FloorConfig::default());
        let off = parse("[ptp]\nclass = \"ptp\"\ndelay_floor_window = 0\n").unwrap().unwrap();
        assert_eq!((off.delay_floor.window, &off.measurement_log), (Nanos(0), &None));
        let log = parse("[ptp]\nclass = \"ptp\"\nmeasurement_log = \"m.csv\"\n").unwrap().unwrap();
        assert_eq!(log.measurement_log, Some(std::path::PathBuf::from("m.csv")));
        let p = parse(
            "[ptp]\nclass = \"ptp\"\nrole = \"slave\"\ndomain = 24\ntransport = \"udpv4\"\nipv4 = \"10.0.0.2\"\n\
             delay_mechanism = \"e2e\"\nlog_sync_interval = -3\nlog_announce_interval = 0\n\
             log_delay_req_interval = -2\npriority1 = 200\nservo = \"pi\"\nsync_threshold = \"250ns\"\n\
             tx_latency = \"1us\"\nrx_latency = \"12us\"\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.role, Role::Slave);
        assert_eq!(p.domain, 24);
        assert_eq!(p.transport, Transport::UdpV4 { src: [10, 0, 0, 2] });
        assert_eq!(
            (p.log_sync, p.log_announce, p.delay, p.priority1),
            (-3, 0, DelayMechanism::E2E { log_interval: -2 }, 200)
        );
        assert_eq!((p.servo, p.sync_threshold), (ServoKind::Pi, Nanos(250)));
        assert_eq!((p.tx_latency, p.rx_latency), (Nanos(1_000), Nanos(12_000)));
        assert_eq!(p.class, ClassId(0));
        let p = parse(
            "[ptp]\nclass = \"ptp\"\nrole = \"master\"\ndelay_mechanism = \"p2p\"\nlog_pdelay_req_interval = -3\n\
             one_step = true\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!((p.delay, p.one_step), (DelayMechanism::P2P { log_interval: -3 }, true));
        let p = parse("[ptp]\nclass = \"ptp\"\ndelay_mechanism = \"p2p\"\n").unwrap().unwrap();
        assert_eq!((p.delay, p.one_step), (DelayMechanism::P2P { log_interval: 0 }, false));
    }

    /// gPTP: P2P over L2 by default at the 802.1AS intervals (Sync 2^-3 s, Announce and Pdelay_Req 1 s), the
    /// 800 ns threshold unless configured; the default profile keeps its own defaults.
    #[test]
    fn profiles_and_their_defaults() {
        let p = parse("[ptp]\nclass = \"ptp\"\nprofile = \"gptp\"\n").unwrap().unwrap();
        assert_eq!(
            (p.profile, p.transport, p.delay),
            (Profile::Gptp, Transport::L2, DelayMechanism::P2P { log_interval: 0 })
        );
        assert_eq!((p.log_sync, p.log_announce, p.neighbor_prop_delay_thresh), (-3, 0, Nanos(800)));
        let p = parse(
            "[ptp]\nclass = \"ptp\"\nprofile = \"automotive\"\nrole = \"slave\"\ndelay_mechanism = \"p2p\"\n\
             transport = \"l2\"\nlog_sync_interval = -4\nneighbor_prop_delay_thresh = \"2us\"\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (p.profile, p.role, p.log_sync, p.neighbor_prop_delay_thresh),
            (Profile::Automotive, Role::Slave, -4, Nanos(2_000))
        );
        let d = parse("[ptp]\nclass = \"ptp\"\n").unwrap().unwrap();
        assert_eq!((d.profile, d.log_sync, d.log_announce), (Profile::Default, 0, 1));
    }

    /// One-step Sync needs the TX time before the frame leaves: refused on host-paced links, with the reason.
    #[test]
    fn one_step_is_refused_on_host_paced_links() {
        let one = parse("[ptp]\nclass = \"ptp\"\none_step = true\n").unwrap().unwrap();
        let two = parse("[ptp]\nclass = \"ptp\"\n").unwrap().unwrap();
        for t in [Timing::Simulated, Timing::LineRate, Timing::HostPaced] {
            assert!(two.check_link(t).is_ok(), "{t:?}");
        }
        assert!(one.check_link(Timing::Simulated).is_ok() && one.check_link(Timing::LineRate).is_ok());
        let e = one.check_link(Timing::HostPaced).unwrap_err().0;
        assert!(e.starts_with("ptp.one_step = true on this host-paced link") && e.contains("one_step = false"), "{e}");
    }

    /// The dual clock counts slots in whole ns, on the slot clock, as a slave with the stepping servo.
    #[test]
    fn the_dual_clock_is_a_slaves_on_slots_of_whole_ns() {
        let p = parse("[ptp]\nclass = \"ptp\"\ndual_clock = true\n").unwrap().unwrap();
        assert_eq!(p.dual_clock, Some(keepon_core::time::SlotPeriod::new(10_000, 1)));
        assert_eq!(p.servo, ServoKind::MovingAverage);
        assert_eq!(parse("[ptp]\nclass = \"ptp\"\n").unwrap().unwrap().dual_clock, None);
        let at = |rate: &str, slot: u32, timing: &str| {
            let text = BASE
                .replace("rate = \"1Gbps\"", &format!("rate = \"{rate}\"\ntiming = \"{timing}\""))
                .replace("slot_bytes = 1230", &format!("slot_bytes = {slot}"));
            let cfg = Config::parse(&format!("{text}[ptp]\nclass = \"ptp\"\ndual_clock = true\n")).unwrap();
            PtpConfig::from_config(&cfg).map(|p| p.and_then(|p| p.dual_clock))
        };
        // (1230 + 20) B at 10 Gb/s: 1000 ns; (1231 + 20) B: 1000.8 ns.
        assert_eq!(at("10Gbps", 1230, "slots").unwrap(), Some(keepon_core::time::SlotPeriod::new(1_000, 1)));
        let e = at("10Gbps", 1231, "slots").unwrap_err().0;
        assert!(e.contains("not a whole number of ns"), "{e}");
        let e = at("1Gbps", 1230, "bytes").unwrap_err().0;
        assert!(e.contains("byte clock"), "{e}");
    }

    #[test]
    fn every_bad_value_is_an_error_naming_its_key() {
        let c = "[ptp]\nclass = \"ptp\"\n";
        let cases = [
            (format!("{c}role = \"boss\""), "ptp.role"),
            (format!("{c}domain = 256"), "ptp.domain"),
            (format!("{c}domain = -1"), "ptp.domain"),
            (format!("{c}transport = \"udpv6\""), "ptp.transport"),
            (format!("{c}transport = \"udpv4\""), "ptp.ipv4"),
            (format!("{c}transport = \"udpv4\"\nipv4 = \"10.0.0.256\""), "ptp.ipv4"),
            (format!("{c}ipv4 = \"10.0.0.1\""), "ptp.ipv4"),
            (format!("{c}delay_mechanism = \"x\""), "ptp.delay_mechanism"),
            (format!("{c}delay_mechanism = \"p2p\"\nlog_pdelay_req_interval = 7"), "ptp.log_pdelay_req_interval"),
            (format!("{c}delay_mechanism = \"p2p\"\nlog_delay_req_interval = 0"), "ptp.log_delay_req_interval is only"),
            (format!("{c}log_pdelay_req_interval = 0"), "ptp.log_pdelay_req_interval is only"),
            (
                format!("{c}delay_mechanism = \"e2e\"\nlog_pdelay_req_interval = 0"),
                "ptp.log_pdelay_req_interval is only",
            ),
            (format!("{c}one_step = 1"), "ptp.one_step = 1: use true or false"),
            (format!("{c}one_step = true\nrole = \"slave\""), "ptp.one_step"),
            (format!("{c}log_sync_interval = 5"), "ptp.log_sync_interval"),
            (format!("{c}log_announce_interval = -4"), "ptp.log_announce_interval"),
            (format!("{c}log_delay_req_interval = 7"), "ptp.log_delay_req_interval"),
            (format!("{c}priority1 = 300"), "ptp.priority1"),
            (format!("{c}servo = \"pid\""), "ptp.servo"),
            (format!("{c}sync_threshold = 0"), "ptp.sync_threshold"),
            (format!("{c}sync_threshold = \"2s\""), "ptp.sync_threshold"),
            (format!("{c}tx_latency = \"2ms\""), "ptp.tx_latency"),
            (format!("{c}rx_latency = -1"), "ptp.rx_latency"),
            (format!("{c}delay_floor_window = -1"), "ptp.delay_floor_window"),
            (format!("{c}delay_floor_window = \"601s\""), "ptp.delay_floor_window"),
            (format!("{c}measurement_log = \" \""), "ptp.measurement_log"),
            (format!("{c}measurement_log = 3"), "measurement_log"),
            ("[ptp]\nclass = \"nope\"".into(), "ptp.class"),
            ("[ptp]\nclass = \"be\"".into(), "owns no slots"),
            ("[ptp]\nrole = \"slave\"".into(), "class"),
            (format!("{c}colour = \"red\""), "colour"),
            (format!("{c}dual_clock = 1"), "ptp.dual_clock = 1: use true or false"),
            (format!("{c}dual_clock = true\nrole = \"master\""), "ptp.dual_clock = true: the dual clock is a slave's"),
            (format!("{c}dual_clock = true\nservo = \"kalman\""), "moving-average"),
            (format!("{c}profile = \"802.1as\""), "ptp.profile"),
            (format!("{c}profile = \"gptp\"\ndelay_mechanism = \"e2e\""), "ptp.delay_mechanism = \"e2e\": profile"),
            (
                format!("{c}profile = \"automotive\"\nrole = \"slave\"\ndelay_mechanism = \"e2e\""),
                "ptp.delay_mechanism",
            ),
            (
                format!("{c}profile = \"gptp\"\ntransport = \"udpv4\"\nipv4 = \"10.0.0.1\""),
                "ptp.transport = \"udpv4\": profile",
            ),
            (format!("{c}profile = \"gptp\"\none_step = true"), "ptp.one_step = true: profile"),
            (format!("{c}profile = \"automotive\""), "ptp.role: profile = \"automotive\""),
            (format!("{c}profile = \"automotive\"\nrole = \"auto\""), "ptp.role"),
            (format!("{c}neighbor_prop_delay_thresh = \"1us\""), "ptp.neighbor_prop_delay_thresh is only"),
            (format!("{c}profile = \"gptp\"\nneighbor_prop_delay_thresh = \"11ms\""), "ptp.neighbor_prop_delay_thresh"),
            (format!("{c}profile = \"gptp\"\nneighbor_prop_delay_thresh = -1"), "ptp.neighbor_prop_delay_thresh"),
        ];
        for (text, key) in cases {
            let e = error(&text);
            assert!(e.contains(key), "{text:?}: {e:?} does not name {key}");
        }
    }
}
