//! `[daemon]`: the socket, its permissions, the credential rules, and the limits that bound what clients can
//! make the daemon hold (see the module docs of [`crate::daemon`] for what each limit guarantees).

use std::path::PathBuf;

use serde::Deserialize;

use crate::api::MAX_MESSAGE;
use crate::config::{Config, ConfigError};

/// `[daemon]` as written.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct DaemonSection {
    socket: PathBuf,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    max_in_flight: Option<i64>,
    #[serde(default)]
    max_in_flight_per_uid: Option<i64>,
    #[serde(default)]
    max_connections: Option<i64>,
    #[serde(default)]
    max_connections_per_uid: Option<i64>,
    #[serde(default)]
    read_buffer: Option<i64>,
    #[serde(default)]
    reply_backlog: Option<i64>,
    #[serde(default)]
    max_queued: Option<i64>,
    #[serde(default)]
    requests_per_poll: Option<i64>,
    #[serde(default)]
    reserved_connections: Option<i64>,
    #[serde(default)]
    max_connections_unlisted: Option<i64>,
    #[serde(default)]
    metrics_file: Option<PathBuf>,
    #[serde(default)]
    idle_pause: Option<bool>,
    #[serde(default)]
    allow: Vec<AllowRule>,
}

/// One `[[daemon.allow]]` rule.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AllowRule {
    /// Matching uid (any if absent).
    #[serde(default)]
    pub uid: Option<u32>,
    /// Matching gid (any if absent).
    #[serde(default)]
    pub gid: Option<u32>,
    /// Class names the matching clients may use.
    pub classes: Vec<String>,
}

/// What clients can make the daemon hold. Every limit is at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Frames without an outcome per connection (`max_in_flight`, default 4096).
    pub max_in_flight: usize,
    /// Frames without an outcome per uid, over all its connections (`max_in_flight_per_uid`, default 16384).
    pub max_in_flight_per_uid: usize,
    /// Open connections in all (`max_connections`, default 256).
    pub max_connections: usize,
    /// Open connections per uid (`max_connections_per_uid`, default 32).
    pub max_connections_per_uid: usize,
    /// Bytes of unparsed requests held per connection (`read_buffer`, default 64 KiB; at least one largest
    /// message, [`MAX_MESSAGE`] + 4).
    pub read_buffer: usize,
    /// Bytes of unsent replies per connection beyond which its requests are not read (`reply_backlog`,
    /// default 64 KiB).
    pub reply_backlog: usize,
    /// Frames per class waiting in the daemon for room in the station (`max_queued`, default 4096).
    pub max_queued: usize,
    /// Requests parsed per poll, all together, from connections whose peer may use only best-effort
    /// classes (`requests_per_poll`, default 64); connections that may use a real-time class are served
    /// first and are not counted.
    pub requests_per_poll: usize,
    /// Of `max_connections`, how many only peers that may use a real-time class can take
    /// (`reserved_connections`, default 32, 0 for none; less than `max_connections`): best-effort-only and
    /// unlisted peers, however many they are, leave these free.
    pub reserved_connections: usize,
    /// Open connections in all from peers that may use no class at all — no allow rule matches them; they can
    /// only ask `Info` and `Time` (`max_connections_unlisted`, default 8; 0 refuses them).
    pub max_connections_unlisted: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_in_flight: 4096,
            max_in_flight_per_uid: 16_384,
            max_connections: 256,
            max_connections_per_uid: 32,
            read_buffer: 64 << 10,
            reply_backlog: 64 << 10,
            max_queued: 4096,
            requests_per_poll: 64,
            reserved_connections: 32,
            max_connections_unlisted: 8,
        }
    }
}

/// The keys of [`Limits`] and the least value each takes.
const LIMIT_KEYS: [(&str, usize); 10] = [
    ("max_in_flight", 1),
    ("max_in_flight_per_uid", 1),
    ("max_connections", 1),
    ("max_connections_per_uid", 1),
    ("read_buffer", MAX_MESSAGE + 4),
    ("reply_backlog", 1),
    ("max_queued", 1),
    ("requests_per_poll", 1),
    ("reserved_connections", 0),
    ("max_connections_unlisted", 0),
];

/// Largest value any limit may take (a guard against typos such as an extra digit group).
const LIMIT_MAX: i64 = 1 << 30;

fn limit(key: &str, v: Option<i64>, default: usize, min: usize) -> Result<usize, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    match usize::try_from(v) {
        Ok(n) if n >= min && v <= LIMIT_MAX => Ok(n),
        _ => Err(ConfigError(format!("daemon.{key} = {v}: must be a whole number from {min} to {LIMIT_MAX}"))),
    }
}

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Socket path.
    pub socket: PathBuf,
    /// Socket file permissions (default 0o666: anyone may connect; what they may send is decided by the
    /// allow rules on their credentials).
    pub mode: u32,
    /// Frames without an outcome allowed per client (the same as `limits.max_in_flight`).
    pub max_in_flight: usize,
    /// Every bound on what clients can make the daemon hold.
    pub limits: Limits,
    /// Credential rules.
    pub allow: Vec<AllowRule>,
    /// Write the metrics (Prometheus text format) here every second (`metrics_file`; default none), e.g. for
    /// node_exporter's textfile collector.
    pub metrics_file: Option<PathBuf>,
    /// What the host granted the poll loop (`Info::host`: [`crate::realtime::Applied::flags`]), set by whoever
    /// applied `[realtime]` before serving; 0 when nothing was asked.
    pub host: u32,
    /// Sleep beyond `run.poll_period` as far as the posted lead allows, woken by clients (`idle_pause`, default
    /// false; see the daemon's `pause` module for what it costs in precision).
    pub idle_pause: bool,
    /// A line to print once the socket is bound (the start banner: printed only when serving really starts, so
    /// an error claiming the socket is never preceded by it).
    pub banner: Option<String>,
    /// Write the wire here as a pcap, each slot at its EPHC time — network time once synchronised (`keepon run
    /// --pcap` with `[ptp]`; not a `[daemon]` key).
    pub pcap: Option<PathBuf>,
}

impl DaemonConfig {
    /// Read `[daemon]` from a validated configuration; class names in rules must exist, limits must be
    /// positive (each error names its key).
    pub fn from_config(cfg: &Config) -> Result<DaemonConfig, ConfigError> {
        let table = cfg.raw.daemon.clone().ok_or_else(|| ConfigError("no [daemon] section (daemon.socket)".into()))?;
        for (key, min) in LIMIT_KEYS {
            if let Some(v) = table.get(key).filter(|v| !v.is_integer()) {
                return Err(ConfigError(format!(
                    "daemon.{key} = {v}: must be a whole number from {min} to {LIMIT_MAX}"
                )));
            }
        }
        let d: DaemonSection =
            table.try_into().map_err(|e: toml::de::Error| ConfigError(format!("[daemon]: {}", e.message())))?;
        for (i, r) in d.allow.iter().enumerate() {
            for c in &r.classes {
                if cfg.ownership.class_named(c).is_none() {
                    return Err(ConfigError(format!("daemon.allow[{i}].classes: no class named `{c}`")));
                }
            }
        }
        let mode = match &d.mode {
            None => 0o666,
            Some(m) => u32::from_str_radix(m.trim_start_matches("0o"), 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| ConfigError(format!("daemon.mode = \"{m}\" is not an octal mode like \"0660\"")))?,
        };
        let def = Limits::default();
        let limits = Limits {
            max_in_flight: limit("max_in_flight", d.max_in_flight, def.max_in_flight, 1)?,
            max_in_flight_per_uid: limit(
                "max_in_flight_per_uid",
                d.max_in_flight_per_uid,
                def.max_in_flight_per_uid,
                1,
            )?,
            max_connections: limit("max_connections", d.max_connections, def.max_connections, 1)?,
            max_connections_per_uid: limit(
                "max_connections_per_uid",
                d.max_connections_per_uid,
                def.max_connections_per_uid,
                1,
            )?,
            read_buffer: limit("read_buffer", d.read_buffer, def.read_buffer, MAX_MESSAGE + 4)?,
            reply_backlog: limit("reply_backlog", d.reply_backlog, def.reply_backlog, 1)?,
            max_queued: limit("max_queued", d.max_queued, def.max_queued, 1)?,
            requests_per_poll: limit("requests_per_poll", d.requests_per_poll, def.requests_per_poll, 1)?,
            reserved_connections: limit("reserved_connections", d.reserved_connections, def.reserved_connections, 0)?,
            max_connections_unlisted: limit(
                "max_connections_unlisted",
                d.max_connections_unlisted,
                def.max_connections_unlisted,
                0,
            )?,
        };
        if limits.reserved_connections >= limits.max_connections {
            let (r, m) = (limits.reserved_connections, limits.max_connections);
            // Only the default may exceed a small max_connections: then the reserve shrinks to leave one shared.
            if d.reserved_connections.is_some() {
                return Err(ConfigError(format!(
                    "daemon.reserved_connections = {r}: must be less than daemon.max_connections ({m}), so that \
                     best-effort users can connect at all"
                )));
            }
        }
        let limits =
            Limits { reserved_connections: limits.reserved_connections.min(limits.max_connections - 1), ..limits };
        if d.socket.as_os_str().is_empty() {
            return Err(ConfigError("daemon.socket is empty".into()));
        }
        if d.metrics_file.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return Err(ConfigError("daemon.metrics_file is empty".into()));
        }
        Ok(DaemonConfig {
            socket: d.socket,
            mode,
            max_in_flight: limits.max_in_flight,
            limits,
            allow: d.allow,
            host: 0,
            banner: None,
            metrics_file: d.metrics_file,
            idle_pause: d.idle_pause.unwrap_or(false),
            pcap: None,
        })
    }

    /// The configuration of a station serving only this process (`keepon run` on network time): the socket
    /// at `socket` with mode 0600 and no allow rules (only this user and root), the limits of `[daemon]` if
    /// the configuration has one (its socket, mode and rules are not used).
    pub fn private(cfg: &Config, socket: PathBuf) -> Result<DaemonConfig, ConfigError> {
        let mut d = match cfg.raw.daemon {
            Some(_) => DaemonConfig::from_config(cfg)?,
            None => {
                let limits = Limits::default();
                DaemonConfig {
                    socket: PathBuf::new(),
                    mode: 0,
                    max_in_flight: limits.max_in_flight,
                    limits,
                    allow: Vec::new(),
                    host: 0,
                    banner: None,
                    metrics_file: None,
                    idle_pause: false,
                    pcap: None,
                }
            }
        };
        d.socket = socket;
        d.mode = 0o600;
        d.allow.clear();
        Ok(d)
    }

    /// Which classes a peer with these credentials may use.
    pub fn allowed(&self, cfg: &Config, uid: u32, gid: u32) -> Vec<bool> {
        let n = cfg.ownership.classes();
        if self.allow.is_empty() {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            return vec![uid == 0 || uid == me; n];
        }
        let mut ok = vec![false; n];
        for r in &self.allow {
            if r.uid.is_none_or(|u| u == uid) && r.gid.is_none_or(|g| g == gid) {
                for c in &r.classes {
                    if let Some(id) = cfg.ownership.class_named(c) {
                        ok[usize::from(id.0)] = true;
                    }
                }
            }
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<DaemonConfig, ConfigError> {
        let text = format!(
            "[link]\nrate = \"1Gbps\"\n[ring]\nslot_bytes = 1230\nslots = 32\nbatch = 8\nslot_masks = \"0x01,0\"\n\
             [daemon]\nsocket = \"/tmp/k.sock\"\n{extra}\n"
        );
        DaemonConfig::from_config(&Config::parse(&text).unwrap())
    }

    #[test]
    fn limits_default_and_validate() {
        assert_eq!(parse("").unwrap().limits, Limits::default());
        let l = parse("max_in_flight = 7\nreply_backlog = 100").unwrap();
        assert_eq!((l.max_in_flight, l.limits.max_in_flight, l.limits.reply_backlog), (7, 7, 100));
        for bad in [
            "max_in_flight = 0",
            "max_connections = -1",
            "max_queued = 2000000000",
            "read_buffer = 1024",
            "reserved_connections = -1",
            "max_connections = 10\nreserved_connections = 10",
            "max_connections_unlisted = 1.5",
        ] {
            let key = bad.lines().last().unwrap().split(' ').next().unwrap();
            let e = parse(bad).unwrap_err().0;
            assert!(e.contains(&format!("daemon.{key}")), "{bad}: {e}");
        }
        assert!(parse("max_in_flight = \"many\"").unwrap_err().0.contains("max_in_flight"));
        // A small max_connections shrinks the default reserve, leaving one connection to share.
        let l = parse("max_connections = 4").unwrap().limits;
        assert_eq!((l.max_connections, l.reserved_connections), (4, 3));
        assert_eq!(parse("max_connections_unlisted = 0").unwrap().limits.max_connections_unlisted, 0);
    }
}
