//! The daemon's metrics in the Prometheus text exposition format (version 0.0.4): what `keepon status` shows (the
//! `Stats` request) and what the metrics file holds (`daemon.metrics_file`, for node_exporter's textfile
//! collector). One rendering serves both, so they cannot disagree.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `keepon_info` | gauge (1) | `backend`, `timing` (`slots`, `bytes`), `rate_bps`, `slot_bytes`, `ring` |
//! | `keepon_uptime_seconds` | gauge | |
//! | `keepon_sync_state` | gauge (1 for the state it is in) | `state`: `free-running`, `synchronised`, `not-synchronised` |
//! | `keepon_ptp_offset_ns`, `keepon_ptp_path_delay_ns` | gauge (absent when unknown) | |
//! | `keepon_ptp_profile` | gauge (1) | `profile`: `default`, `gptp`, `automotive` (with `[ptp]`) |
//! | `keepon_ptp_grandmaster` | gauge (1) | `identity`: the grandmaster's clock identity as the BMCA last chose it |
//! | `keepon_ptp_foreign_sdo_dropped_total` | counter: messages of another transportSpecific dropped | |
//! | `keepon_ptp_as_capable`, `keepon_ptp_neighbor_delay_ns`, `keepon_ptp_neighbor_rate_ratio` | gauge (802.1AS profiles; the last two absent when unknown) | |
//! | `keepon_ptp_profile_dropped_total` | counter (802.1AS profiles) | `reason`: `no-follow-up-info`, `not-as-capable`, `held-not-as-capable` (not sent) |
//! | `keepon_clock_rate_ppt` | gauge | |
//! | `keepon_grid_alignment_ns` | gauge | `quantile`: `0.5`, `0.99`, `1` |
//! | `keepon_frames_sent_total` | counter | `class` |
//! | `keepon_frames_rejected_total` | counter (non-zero reasons only) | `class` (empty: no such class), `reason` |
//! | `keepon_class_queued` | gauge: frames handed in without an outcome | `class` |
//! | `keepon_underruns_total` | counter | |
//! | `keepon_connections` | gauge: open | |
//! | `keepon_connections_accepted_total`, `keepon_connections_refused_total`, `keepon_connections_dropped_total`, `keepon_requests_malformed_total` | counter | |
//! | `keepon_host` | gauge (0/1) | `what`: `fifo`, `memory_locked`, `pinned`, `refused` |
//! | `keepon_poll_wakeups_per_second` | gauge: wake-ups of the poll loop in the last second | |
//! | `keepon_loop_busy_longest_seconds` | gauge: the poll loop's longest iteration since start, and its phases | `phase`: `all`, `clients`, `ptp`, `requests`, `station` |
//! | `keepon_loop_lead_seconds` | gauge: the posted lead (`batch·δ`) the iterations are held to | |
//! | `keepon_loop_over_lead_total` | counter: iterations busy longer than the lead (each may let the link run dry) | |

use std::collections::BTreeMap;
use std::fmt::Write as _;

use keepon_core::outcome::Reason;

use keepon_ptp::gptp::policy::ProfileStatus;

use crate::api::{SyncState, TimeInfo, HOST_FIFO, HOST_MEMORY_LOCKED, HOST_PINNED, HOST_REFUSED};

use super::DaemonStats;

/// Outcomes of one class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassCounters {
    /// Frames sent.
    pub sent: u64,
    /// Frames rejected, by [`Reason::index`].
    pub rejected: [u64; Reason::COUNT],
}

impl Default for ClassCounters {
    fn default() -> Self {
        ClassCounters { sent: 0, rejected: [0; Reason::COUNT] }
    }
}

/// Each class's windows in the cycle, (offset, length) ns, by class index.
pub type Windows = Vec<Vec<(u64, u64)>>;

/// Everything one rendering reads.
pub struct View<'a> {
    /// The backend's description.
    pub backend: &'a str,
    /// The wire's timing: `slots` or `bytes` (the byte clock).
    pub timing: &'a str,
    /// Line rate, b/s.
    pub rate_bps: u64,
    /// Slot size, bytes.
    pub slot_bytes: u32,
    /// Ring slots.
    pub ring: u32,
    /// Seconds since serving began.
    pub uptime_s: f64,
    /// Synchronisation, clock and grid alignment.
    pub time: &'a TimeInfo,
    /// What the host granted ([`crate::api::Info::host`]).
    pub host: u32,
    /// Class names, by index.
    pub names: &'a [String],
    /// The daemon's counters.
    pub stats: &'a DaemonStats,
    /// Per class: frames handed in without an outcome (in the daemon's queue or in the station).
    pub queued: Vec<usize>,
    /// Open client connections.
    pub open_connections: usize,
    /// A schedule change accepted and not yet in force: when it takes effect (TAI ns), and each class's windows
    /// under it (Qbv's admin list), by class index.
    pub schedule_pending: Option<(i64, Windows)>,
    /// Schedule changes accepted since start.
    pub schedule_changes: u64,
    /// Wake-ups of the poll loop in the last second.
    pub wakeups_per_s: u64,
    /// Where the poll loop's time goes.
    pub loop_time: &'a super::looptime::LoopTime,
    /// With `[ptp]`: the profile's view and the grandmaster.
    pub ptp_profile: Option<ProfileView>,
}

/// The PTP profile's view for the metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileView {
    /// asCapable, the neighbour, what the profile dropped.
    pub status: ProfileStatus,
    /// The grandmaster's clock identity as the BMCA last chose it.
    pub grandmaster: [u8; 8],
}

/// The PTP profile's metrics.
fn render_profile(s: &mut String, p: &ProfileView) {
    let st = &p.status;
    head(s, "keepon_ptp_profile", "gauge", "The PTP profile the port runs.");
    let _ = writeln!(s, "keepon_ptp_profile{{profile=\"{}\"}} 1", st.profile.name());
    head(s, "keepon_ptp_grandmaster", "gauge", "The grandmaster's clock identity, as the BMCA last chose it.");
    let gm: String = p.grandmaster.iter().map(|b| format!("{b:02x}")).collect();
    let _ = writeln!(s, "keepon_ptp_grandmaster{{identity=\"{gm}\"}} 1");
    head(s, "keepon_ptp_foreign_sdo_dropped_total", "counter", "PTP messages of another transportSpecific, dropped.");
    let _ = writeln!(s, "keepon_ptp_foreign_sdo_dropped_total {}", st.counts.foreign_sdo);
    if !st.profile.is_802_1as() {
        return;
    }
    head(s, "keepon_ptp_as_capable", "gauge", "1 while the port is asCapable (IEEE 802.1AS).");
    let _ = writeln!(s, "keepon_ptp_as_capable {}", u8::from(st.neighbor.as_capable));
    if let Some(d) = st.neighbor.delay {
        head(s, "keepon_ptp_neighbor_delay_ns", "gauge", "The neighbour propagation delay (median of the last 8), ns.");
        let _ = writeln!(s, "keepon_ptp_neighbor_delay_ns {}", d.0);
    }
    if let Some(r) = st.neighbor.rate_ratio {
        head(s, "keepon_ptp_neighbor_rate_ratio", "gauge", "The neighbour's frequency over this port's clock.");
        let _ = writeln!(s, "keepon_ptp_neighbor_rate_ratio {r:.12}");
    }
    head(s, "keepon_ptp_profile_dropped_total", "counter", "Messages the 802.1AS profile dropped or held back.");
    let c = st.counts;
    for (reason, n) in [
        ("no-follow-up-info", c.no_follow_up_info),
        ("not-as-capable", c.dropped_not_capable),
        ("held-not-as-capable", c.held_not_capable),
    ] {
        let _ = writeln!(s, "keepon_ptp_profile_dropped_total{{reason=\"{reason}\"}} {n}");
    }
}

/// A label value, escaped as the format asks (backslash, double quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn head(s: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The metrics, rendered.
pub fn render(v: &View) -> String {
    let mut s = String::new();
    render_clock(&mut s, v);
    render_schedule(&mut s, v);
    render_frames(&mut s, v);
    render_counters(&mut s, v);
    render_loop(&mut s, v);
    s
}

/// The station and its clock: backend and link, uptime, synchronisation, the PTP port, rate and alignment.
fn render_clock(s: &mut String, v: &View) {
    head(s, "keepon_info", "gauge", "The station: backend and link.");
    let _ = writeln!(
        s,
        "keepon_info{{backend=\"{}\",timing=\"{}\",rate_bps=\"{}\",slot_bytes=\"{}\",ring=\"{}\"}} 1",
        label(v.backend),
        v.timing,
        v.rate_bps,
        v.slot_bytes,
        v.ring
    );
    head(s, "keepon_uptime_seconds", "gauge", "Seconds since the daemon started serving.");
    let _ = writeln!(s, "keepon_uptime_seconds {:.3}", v.uptime_s);
    head(s, "keepon_sync_state", "gauge", "1 for the synchronisation state the station is in.");
    for (state, name) in [
        (SyncState::FreeRunning, "free-running"),
        (SyncState::Synchronised, "synchronised"),
        (SyncState::NotSynchronised, "not-synchronised"),
    ] {
        let _ = writeln!(s, "keepon_sync_state{{state=\"{name}\"}} {}", u8::from(v.time.sync == state));
    }
    if let Some(o) = v.time.offset {
        head(s, "keepon_ptp_offset_ns", "gauge", "The PTP servo's last offset from the master, ns.");
        let _ = writeln!(s, "keepon_ptp_offset_ns {o}");
    }
    if let Some(d) = v.time.path_delay {
        head(s, "keepon_ptp_path_delay_ns", "gauge", "The PTP mean path delay, ns.");
        let _ = writeln!(s, "keepon_ptp_path_delay_ns {d}");
    }
    if let Some(p) = &v.ptp_profile {
        render_profile(s, p);
    }
    head(s, "keepon_clock_rate_ppt", "gauge", "The EPHC's rate correction, parts per trillion.");
    let _ = writeln!(s, "keepon_clock_rate_ppt {}", v.time.freq_ppt);
    if let Some((p50, p99, max)) = v.time.alignment {
        head(s, "keepon_grid_alignment_ns", "gauge", "|slot start - schedule| on the EPHC, ns.");
        for (q, x) in [("0.5", p50), ("0.99", p99), ("1", max)] {
            let _ = writeln!(s, "keepon_grid_alignment_ns{{quantile=\"{q}\"}} {x}");
        }
    }
}

/// Schedule changes, and the pending one with its windows.
fn render_schedule(s: &mut String, v: &View) {
    head(s, "keepon_schedule_changes_total", "counter", "Schedule changes accepted (keepon schedule apply).");
    let _ = writeln!(s, "keepon_schedule_changes_total {}", v.schedule_changes);
    if let Some((t, windows)) = &v.schedule_pending {
        head(s, "keepon_schedule_pending_ns", "gauge", "When the pending schedule change takes effect, TAI ns.");
        let _ = writeln!(s, "keepon_schedule_pending_ns {t}");
        head(
            s,
            "keepon_schedule_pending_window_ns",
            "gauge",
            "The pending schedule's windows (admin list): length by class and offset in the cycle, ns.",
        );
        for (name, w) in v.names.iter().zip(windows) {
            for (offset, length) in w {
                let _ = writeln!(
                    s,
                    "keepon_schedule_pending_window_ns{{class=\"{}\",offset=\"{offset}\"}} {length}",
                    label(name)
                );
            }
        }
    }
}

/// Frames sent, rejected and waiting, by class.
fn render_frames(s: &mut String, v: &View) {
    head(s, "keepon_frames_sent_total", "counter", "Frames sent, by class.");
    for (name, c) in v.names.iter().zip(&v.stats.classes) {
        let _ = writeln!(s, "keepon_frames_sent_total{{class=\"{}\"}} {}", label(name), c.sent);
    }
    head(s, "keepon_frames_rejected_total", "counter", "Frames rejected, by class and reason.");
    let classes = v.names.iter().map(String::as_str).chain(std::iter::once(""));
    for (name, c) in classes.zip(v.stats.classes.iter().chain(std::iter::once(&v.stats.unknown_class))) {
        for r in Reason::ALL {
            let n = c.rejected[r.index()];
            if n > 0 {
                let _ = writeln!(
                    s,
                    "keepon_frames_rejected_total{{class=\"{}\",reason=\"{}\"}} {n}",
                    label(name),
                    r.as_str()
                );
            }
        }
    }
    head(s, "keepon_class_queued", "gauge", "Frames handed in without an outcome yet, by class.");
    for (name, q) in v.names.iter().zip(&v.queued) {
        let _ = writeln!(s, "keepon_class_queued{{class=\"{}\"}} {q}", label(name));
    }
}

/// Underruns and the connections' counters.
fn render_counters(s: &mut String, v: &View) {
    let st = v.stats;
    for (name, kind, help, x) in [
        ("keepon_underruns_total", "counter", "Times the link went idle (the host fell behind).", st.underruns),
        ("keepon_connections", "gauge", "Open client connections.", v.open_connections as u64),
        ("keepon_connections_accepted_total", "counter", "Client connections accepted.", st.connections),
        ("keepon_connections_refused_total", "counter", "Connections refused over a limit.", st.refused),
        (
            "keepon_connections_dropped_total",
            "counter",
            "Connections closed for broken framing or a failed write.",
            st.dropped,
        ),
        ("keepon_requests_malformed_total", "counter", "Malformed requests answered with an error.", st.malformed),
    ] {
        head(s, name, kind, help);
        let _ = writeln!(s, "{name} {x}");
    }
}

/// The poll loop (wake-ups, its longest iteration, the lead) and what the host granted it.
fn render_loop(s: &mut String, v: &View) {
    head(s, "keepon_poll_wakeups_per_second", "gauge", "Wake-ups of the poll loop in the last second.");
    let _ = writeln!(s, "keepon_poll_wakeups_per_second {}", v.wakeups_per_s);
    let lt = v.loop_time;
    let secs = |t: keepon_core::time::Nanos| t.0 as f64 / 1e9;
    head(
        s,
        "keepon_loop_busy_longest_seconds",
        "gauge",
        "The poll loop's longest iteration since start (waking to sleeping), and where its time went.",
    );
    let _ = writeln!(s, "keepon_loop_busy_longest_seconds{{phase=\"all\"}} {}", secs(lt.longest.total));
    for (name, t) in super::looptime::PHASES.iter().zip(lt.longest.phases) {
        let _ = writeln!(s, "keepon_loop_busy_longest_seconds{{phase=\"{name}\"}} {}", secs(t));
    }
    head(s, "keepon_loop_lead_seconds", "gauge", "The posted lead (batch times the slot time).");
    let _ = writeln!(s, "keepon_loop_lead_seconds {}", secs(lt.lead()));
    head(
        s,
        "keepon_loop_over_lead_total",
        "counter",
        "Poll-loop iterations busy longer than the posted lead: each may let the link run dry.",
    );
    let _ = writeln!(s, "keepon_loop_over_lead_total {}", lt.over_lead);
    head(s, "keepon_host", "gauge", "What the host granted the poll loop ([realtime]).");
    for (what, bit) in
        [("fifo", HOST_FIFO), ("memory_locked", HOST_MEMORY_LOCKED), ("pinned", HOST_PINNED), ("refused", HOST_REFUSED)]
    {
        let _ = writeln!(s, "keepon_host{{what=\"{what}\"}} {}", u8::from(v.host & bit != 0));
    }
}

/// The metrics cut to what one reply message holds (whole lines, and a comment saying so); the metrics file
/// has them all.
pub fn fit(text: &str) -> String {
    let room = crate::api::MAX_REPLY - 2;
    if text.len() <= room {
        return text.to_owned();
    }
    const CUT: &str = "# cut to one message: daemon.metrics_file has every metric\n";
    // Cut after a newline (one byte, never inside a UTF-8 sequence), so the cut is on a character boundary.
    let end = text.as_bytes()[..room - CUT.len()].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    format!("{}{CUT}", &text[..end])
}

/// One sample of the text format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels, by name.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// Parse the text format (as [`render`] writes it; comments skipped). Errors name the line.
pub fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("metrics line {}: {why}: `{line}`", i + 1);
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| bad("no value"))?;
        let value: f64 = value.parse().map_err(|_| bad("the value is not a number"))?;
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').ok_or_else(|| bad("labels not closed"))?;
                (name, parse_labels(body).map_err(|e| bad(&e))?)
            }
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            return Err(bad("not a metric name"));
        }
        out.push(Sample { name: name.to_owned(), labels, value });
    }
    Ok(out)
}

fn parse_labels(body: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").ok_or("a label without =\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("a label value ends in a backslash".into()),
                },
                Some((j, '"')) => break j,
                Some((_, c)) => value.push(c),
                None => return Err("a label value not closed".into()),
            }
        };
        labels.insert(key.trim_start_matches(',').to_owned(), value);
        rest = &after[end + 1..];
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{PortRole, ServoCode};

    #[test]
    fn renders_what_it_parses() {
        let mut stats = DaemonStats { underruns: 3, connections: 5, ..DaemonStats::default() };
        stats.classes = vec![ClassCounters::default(); 2];
        stats.classes[0].sent = 7;
        stats.classes[1].rejected[Reason::Forbidden.index()] = 2;
        stats.unknown_class.rejected[Reason::UnknownClass.index()] = 1;
        let time = TimeInfo {
            sync: SyncState::Synchronised,
            port: PortRole::Slave,
            servo: ServoCode::Locked,
            ephc_now: 0,
            host_now: 0,
            offset: Some(-12),
            freq_ppt: 50_000_000,
            path_delay: None,
            alignment: Some((1, 8, 9)),
        };
        let names = vec!["ctrl".to_string(), "odd \"name\"".to_string()];
        // One iteration of 1.2 ms against an 800 µs lead, 1 ms of it in the station phase.
        let mut lt = super::super::looptime::LoopTime::new(keepon_core::time::Nanos::from_us(800));
        lt.begin(0);
        lt.mark(super::super::looptime::Phase::Ptp, 200_000);
        lt.mark(super::super::looptime::Phase::Station, 1_200_000);
        lt.end(1_200_000);
        let v = View {
            backend: "sim",
            timing: "slots",
            rate_bps: 1_000_000_000,
            slot_bytes: 1230,
            ring: 32,
            uptime_s: 1.5,
            time: &time,
            host: HOST_FIFO,
            names: &names,
            stats: &stats,
            queued: vec![4, 0],
            open_connections: 2,
            schedule_pending: Some((1_795_763_689_548_800_123, vec![vec![(500_000, 100_000)], vec![]])),
            schedule_changes: 1,
            wakeups_per_s: 25_000,
            loop_time: &lt,
            ptp_profile: None,
        };
        let text = render(&v);
        let samples = parse(&text).unwrap();
        let get = |name: &str, labels: &[(&str, &str)]| {
            samples
                .iter()
                .find(|s| {
                    s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
                })
                .map(|s| s.value)
        };
        assert_eq!(get("keepon_frames_sent_total", &[("class", "ctrl")]), Some(7.0));
        assert_eq!(
            get("keepon_frames_rejected_total", &[("class", "odd \"name\""), ("reason", "forbidden")]),
            Some(2.0)
        );
        assert_eq!(get("keepon_frames_rejected_total", &[("class", ""), ("reason", "unknown-class")]), Some(1.0));
        assert_eq!(get("keepon_sync_state", &[("state", "synchronised")]), Some(1.0));
        assert_eq!(get("keepon_ptp_offset_ns", &[]), Some(-12.0));
        assert_eq!(get("keepon_ptp_path_delay_ns", &[]), None);
        assert_eq!(get("keepon_grid_alignment_ns", &[("quantile", "0.99")]), Some(8.0));
        assert_eq!(get("keepon_class_queued", &[("class", "ctrl")]), Some(4.0));
        assert_eq!(get("keepon_underruns_total", &[]), Some(3.0));
        assert_eq!(get("keepon_schedule_changes_total", &[]), Some(1.0));
        assert_eq!(get("keepon_schedule_pending_window_ns", &[("class", "ctrl"), ("offset", "500000")]), Some(1e5));
        assert!(text.contains("\nkeepon_schedule_pending_ns 1795763689548800123\n"), "exact in the text:\n{text}");
        assert_eq!(get("keepon_host", &[("what", "fifo")]), Some(1.0));
        assert_eq!(get("keepon_host", &[("what", "refused")]), Some(0.0));
        assert_eq!(get("keepon_poll_wakeups_per_second", &[]), Some(25_000.0));
        assert_eq!(get("keepon_loop_busy_longest_seconds", &[("phase", "all")]), Some(0.0012));
        assert_eq!(get("keepon_loop_busy_longest_seconds", &[("phase", "station")]), Some(0.001));
        assert_eq!(get("keepon_loop_busy_longest_seconds", &[("phase", "ptp")]), Some(0.0002));
        assert_eq!(get("keepon_loop_busy_longest_seconds", &[("phase", "clients")]), Some(0.0));
        assert_eq!(get("keepon_loop_lead_seconds", &[]), Some(0.0008));
        assert_eq!(get("keepon_loop_over_lead_total", &[]), Some(1.0));
        // Every sample has a # TYPE line before it.
        for s in &samples {
            assert!(text.contains(&format!("# TYPE {} ", s.name)), "{}", s.name);
        }
        assert_eq!(get("keepon_ptp_as_capable", &[]), None, "no [ptp] profile given");
        // An 802.1AS port: asCapable, its neighbour, the grandmaster, what it dropped.
        let mut nb = keepon_ptp::gptp::neighbor::Neighbor::new(keepon_core::time::Nanos(800), false);
        for n in 0..3u16 {
            let t1 = keepon_core::time::Tai(i64::from(n) * 1_000_000_000);
            nb.on_request_sent(n, t1);
            nb.on_response(n, t1 + keepon_core::time::Nanos(600), t1 + keepon_core::time::Nanos(11_200));
            nb.on_response_follow_up(n, t1 + keepon_core::time::Nanos(10_600));
        }
        let mut status = ProfileStatus {
            profile: keepon_ptp::gptp::Profile::Gptp,
            neighbor: nb.status(),
            follow_up_info: None,
            counts: Default::default(),
        };
        status.counts.foreign_sdo = 4;
        status.counts.held_not_capable = 9;
        let v = View { ptp_profile: Some(ProfileView { status, grandmaster: [0xAB; 8] }), ..v };
        let text = render(&v);
        let samples = parse(&text).unwrap();
        let get = |name: &str, labels: &[(&str, &str)]| {
            samples
                .iter()
                .find(|s| {
                    s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
                })
                .map(|s| s.value)
        };
        assert_eq!(get("keepon_ptp_profile", &[("profile", "gptp")]), Some(1.0));
        assert_eq!(get("keepon_ptp_as_capable", &[]), Some(1.0));
        assert_eq!(get("keepon_ptp_neighbor_delay_ns", &[]), Some(600.0));
        assert_eq!(get("keepon_ptp_neighbor_rate_ratio", &[]), Some(1.0));
        assert_eq!(get("keepon_ptp_grandmaster", &[("identity", "abababababababab")]), Some(1.0));
        assert_eq!(get("keepon_ptp_foreign_sdo_dropped_total", &[]), Some(4.0));
        assert_eq!(get("keepon_ptp_profile_dropped_total", &[("reason", "held-not-as-capable")]), Some(9.0));
        assert!(parse("keepon_x{a=\"b} 1").unwrap_err().contains("line 1"));
        assert!(parse("keepon_x one").unwrap_err().contains("not a number"));
    }

    /// Issue 29 point 3: metrics beyond one message, with class names that are not ASCII, are cut on a line
    /// boundary (the old cut sliced inside a character and killed the daemon).
    #[test]
    fn a_cut_never_splits_a_character() {
        for pad in 0..4 {
            let line = format!("keepon_frames_sent_total{{class=\"{}é\"}} 1\n", "x".repeat(pad));
            let text = line.repeat(2 * crate::api::MAX_REPLY / line.len());
            let cut = fit(&text);
            assert!(cut.len() <= crate::api::MAX_REPLY - 2, "{}", cut.len());
            assert!(cut.ends_with("daemon.metrics_file has every metric\n"));
            assert!(parse(&cut).unwrap().len() > 100);
        }
    }
}
