//! `keepon status`: a running daemon's state in one look — link and backend, what the host granted, sync state
//! and offset, the schedule and how well the wire keeps to it, per-class counters (sent, rejected by reason,
//! queued), underruns and clients — or, with `--json`, the same for scripts. It asks the daemon `Info`, `Time` and
//! `Stats` over its socket, as any client would.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::api::{Client, Info, SyncState, TimeInfo, HOST_FIFO, HOST_MEMORY_LOCKED, HOST_PINNED, HOST_REFUSED};
use crate::daemon::looptime::{Busy, PHASES};
use crate::daemon::metrics::{self, Sample};
use keepon_core::time::Nanos;

/// What the daemon said.
pub struct Status {
    /// Its `Info`.
    pub info: Info,
    /// Its `Time`.
    pub time: TimeInfo,
    /// Its metrics.
    pub samples: Vec<Sample>,
    /// The metrics as the daemon wrote them.
    pub text: String,
}

/// Ask the daemon at `socket`.
pub fn query(socket: &Path) -> Result<Status, String> {
    let shown = socket.display();
    // Each step within DEFAULT_TIMEOUT: connecting (a full backlog), and each request with its whole reply.
    let mut c = Client::connect(socket).map_err(|e| format!("cannot connect to the daemon at {shown}: {e}"))?;
    let info = c.info().map_err(|e| format!("{shown}: info: {e}"))?;
    let time = c.time().map_err(|e| format!("{shown}: time: {e}"))?;
    let text = c.stats().map_err(|e| format!("{shown}: stats: {e}"))?;
    let samples = metrics::parse(&text)?;
    Ok(Status { info, time, samples, text })
}

impl Status {
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
            .map(|s| s.value)
    }

    /// An unlabelled sample read as an exact integer (a TAI time in ns does not fit a float's 53 bits).
    fn integer(&self, name: &str) -> Option<i64> {
        self.text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// The pending change's windows by class (offset, length in ns), in class order.
    fn pending_windows(&self) -> Vec<(String, Vec<(u64, u64)>)> {
        self.info
            .classes
            .iter()
            .map(|c| {
                let mut w: Vec<(u64, u64)> = self
                    .samples
                    .iter()
                    .filter(|s| s.name == "keepon_schedule_pending_window_ns" && s.labels.get("class") == Some(c))
                    .filter_map(|s| Some((s.labels.get("offset")?.parse().ok()?, s.value as u64)))
                    .collect();
                w.sort_unstable();
                (c.clone(), w)
            })
            .filter(|(_, w)| !w.is_empty())
            .collect()
    }

    fn count(&self, name: &str) -> u64 {
        self.value(name, &[]).unwrap_or(0.0) as u64
    }

    /// Per class: (sent, queued, rejected by reason).
    fn classes(&self) -> Vec<(String, u64, u64, BTreeMap<String, u64>)> {
        let mut names = self.info.classes.clone();
        // Frames of no such class are counted under the empty class label. A sample without the labels this
        // expects (another daemon's, a hostile one's) is left out, not a panic.
        let unknown = self
            .samples
            .iter()
            .any(|s| s.name == "keepon_frames_rejected_total" && s.labels.get("class").is_some_and(String::is_empty));
        if unknown {
            names.push(String::new());
        }
        names
            .into_iter()
            .map(|n| {
                let sent = self.value("keepon_frames_sent_total", &[("class", &n)]).unwrap_or(0.0) as u64;
                let queued = self.value("keepon_class_queued", &[("class", &n)]).unwrap_or(0.0) as u64;
                let rejected = self
                    .samples
                    .iter()
                    .filter(|s| s.name == "keepon_frames_rejected_total" && s.labels.get("class") == Some(&n))
                    .filter_map(|s| Some((s.labels.get("reason")?.clone(), s.value as u64)))
                    .collect();
                (n, sent, queued, rejected)
            })
            .collect()
    }

    fn sync_name(&self) -> &'static str {
        match self.time.sync {
            SyncState::FreeRunning => "free-running (no [ptp])",
            SyncState::Synchronised => "synchronised",
            SyncState::NotSynchronised => "not synchronised",
        }
    }

    fn host_words(&self) -> Vec<&'static str> {
        let h = self.info.host;
        let mut w = vec![if h & HOST_FIFO != 0 { "poll loop SCHED_FIFO" } else { "poll loop not real-time" }];
        w.push(if h & HOST_MEMORY_LOCKED != 0 { "memory locked" } else { "memory not locked" });
        if h & HOST_PINNED != 0 {
            w.push("pinned to a CPU");
        }
        if h & HOST_REFUSED != 0 {
            w.push("WARNING: the host refused part of [realtime] (see the daemon's log)");
        }
        w
    }

    /// The value of label `label` of the first sample named `name`.
    /// The poll loop's longest iteration since start and its phases (`keepon_loop_busy_longest_seconds`).
    fn longest_iteration(&self) -> Option<Busy> {
        let ns = |phase: &str| {
            let v = self.value("keepon_loop_busy_longest_seconds", &[("phase", phase)])?;
            Some(Nanos((v * 1e9).round() as i64))
        };
        let mut b = Busy { total: ns("all")?, phases: [Nanos(0); 4] };
        for (t, name) in b.phases.iter_mut().zip(PHASES) {
            *t = ns(name).unwrap_or(Nanos(0));
        }
        Some(b)
    }

    fn label(&self, name: &str, label: &str) -> Option<String> {
        self.samples.iter().find(|s| s.name == name).and_then(|s| s.labels.get(label).cloned())
    }

    /// For people.
    pub fn render(&self, socket: &Path) -> String {
        let i = &self.info;
        let backend = self
            .samples
            .iter()
            .find(|s| s.name == "keepon_info")
            .and_then(|s| s.labels.get("backend").cloned())
            .unwrap_or_default();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "keepon daemon at {} (up {:.0} s)",
            socket.display(),
            self.value("keepon_uptime_seconds", &[]).unwrap_or(0.0)
        );
        let _ = writeln!(s, "  link: {backend}");
        let unit = match self.label("keepon_info", "timing").as_deref() {
            Some("bytes") => format!("byte clock (frames up to {} B), ring {} descriptors", i.slot_bytes, i.ring),
            _ => format!("{} B slots, ring {}", i.slot_bytes, i.ring),
        };
        let _ = writeln!(s, "        {} Mb/s, {unit}, batch {}", i.rate_bps / 1_000_000, i.batch);
        if let Some(w) = self.value("keepon_poll_wakeups_per_second", &[]) {
            let mut line = format!("  poll loop: {w:.0} wake-ups/s");
            if let Some(b) = self.longest_iteration() {
                let _ = write!(line, ", longest iteration {}", b.describe());
            }
            if let (Some(n), Some(lead)) =
                (self.value("keepon_loop_over_lead_total", &[]), self.value("keepon_loop_lead_seconds", &[]))
            {
                let lead = crate::daemon::looptime::span(Nanos((lead * 1e9).round() as i64));
                let _ = write!(line, ", {n:.0} longer than the {lead} lead");
            }
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(s, "  host: {}", self.host_words().join(", "));
        let t = &self.time;
        let mut sync = format!("  sync: {}", self.sync_name());
        if let Some(o) = t.offset {
            let _ = write!(sync, ", offset {o} ns");
        }
        if let Some(d) = t.path_delay {
            let _ = write!(sync, ", path delay {d} ns");
        }
        let _ = writeln!(s, "{sync}, clock rate {:+.3} ppm", t.freq_ppt as f64 / 1e6);
        if let Some(p) = self.label("keepon_ptp_profile", "profile") {
            let mut line = format!("  ptp: profile {p}");
            if let Some(c) = self.value("keepon_ptp_as_capable", &[]) {
                let _ = write!(line, ", asCapable {}", c == 1.0);
            }
            if let Some(d) = self.value("keepon_ptp_neighbor_delay_ns", &[]) {
                let _ = write!(line, ", neighbour delay {d:.0} ns");
            }
            if let Some(r) = self.value("keepon_ptp_neighbor_rate_ratio", &[]) {
                let _ = write!(line, ", neighbour rate ratio {r:.9}");
            }
            if let Some(gm) = self.label("keepon_ptp_grandmaster", "identity") {
                let _ = write!(line, ", grandmaster {gm}");
            }
            match self.value("keepon_ptp_foreign_sdo_dropped_total", &[]) {
                Some(n) if n > 0.0 => {
                    let _ = write!(line, ", {n:.0} messages of another transportSpecific dropped");
                }
                _ => {}
            }
            let _ = writeln!(s, "{line}");
        }
        let _ = write!(s, "  schedule: base time {} ns, cycle {} ns", i.base_time, i.cycle.0 as f64 / i.cycle.1 as f64);
        match t.alignment {
            Some((p50, p99, max)) => {
                let _ = writeln!(s, "; slot start − schedule p50 {p50} ns, p99 {p99} ns, max {max} ns");
            }
            None => s.push('\n'),
        }
        if let Some(at) = self.integer("keepon_schedule_pending_ns") {
            let admin: Vec<String> = self
                .pending_windows()
                .iter()
                .map(|(class, w)| {
                    let w: Vec<String> = w.iter().map(|(o, l)| format!("{o}+{l}")).collect();
                    format!("{class} {}", w.join(" "))
                })
                .collect();
            let _ =
                writeln!(s, "  schedule change pending: takes effect at {at} ns; windows (ns) {}", admin.join(", "));
        }
        let _ = writeln!(s, "  classes:");
        for (name, sent, queued, rejected) in self.classes() {
            let shown = if name.is_empty() { "(no such class)".to_string() } else { name };
            let mut line = format!("    {shown:<16} sent {sent}, queued {queued}");
            if !rejected.is_empty() {
                let r: Vec<String> = rejected.iter().map(|(why, n)| format!("{why} {n}")).collect();
                let _ = write!(line, ", rejected {}", r.join(", "));
            }
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(
            s,
            "  underruns {} · connections {} open ({} accepted, {} refused, {} dropped) · {} malformed requests",
            self.count("keepon_underruns_total"),
            self.count("keepon_connections"),
            self.count("keepon_connections_accepted_total"),
            self.count("keepon_connections_refused_total"),
            self.count("keepon_connections_dropped_total"),
            self.count("keepon_requests_malformed_total"),
        );
        s
    }

    /// For scripts.
    pub fn json(&self, socket: &Path) -> Value {
        let i = &self.info;
        let t = &self.time;
        let classes: Vec<Value> = self
            .classes()
            .into_iter()
            .map(|(name, sent, queued, rejected)| json!({"name": name, "sent": sent, "queued": queued, "rejected": rejected}))
            .collect();
        json!({
            "socket": socket.display().to_string(),
            "uptime_s": self.value("keepon_uptime_seconds", &[]),
            "link": {
                "rate_bps": i.rate_bps, "slot_bytes": i.slot_bytes, "ring": i.ring, "batch": i.batch,
                "backend": self.samples.iter().find(|s| s.name == "keepon_info").and_then(|s| s.labels.get("backend")),
                "timing": self.label("keepon_info", "timing"),
            },
            "poll_wakeups_per_s": self.value("keepon_poll_wakeups_per_second", &[]),
            "loop_busy_longest_s": self.value("keepon_loop_busy_longest_seconds", &[("phase", "all")]),
            "loop_over_lead": self.value("keepon_loop_over_lead_total", &[]),
            "host": {
                "fifo": i.host & HOST_FIFO != 0, "memory_locked": i.host & HOST_MEMORY_LOCKED != 0,
                "pinned": i.host & HOST_PINNED != 0, "refused": i.host & HOST_REFUSED != 0,
            },
            "sync": {
                "state": match t.sync {
                    SyncState::FreeRunning => "free-running",
                    SyncState::Synchronised => "synchronised",
                    SyncState::NotSynchronised => "not-synchronised",
                },
                "offset_ns": t.offset, "path_delay_ns": t.path_delay, "freq_ppt": t.freq_ppt,
                "ptp": self.label("keepon_ptp_profile", "profile").map(|p| json!({
                    "profile": p,
                    "as_capable": self.value("keepon_ptp_as_capable", &[]).map(|c| c == 1.0),
                    "neighbor_delay_ns": self.value("keepon_ptp_neighbor_delay_ns", &[]),
                    "neighbor_rate_ratio": self.value("keepon_ptp_neighbor_rate_ratio", &[]),
                    "grandmaster": self.label("keepon_ptp_grandmaster", "identity"),
                    "foreign_sdo_dropped": self.value("keepon_ptp_foreign_sdo_dropped_total", &[]),
                })),
            },
            "schedule": {
                "base_time_ns": i.base_time, "cycle_num": i.cycle.0, "cycle_den": i.cycle.1,
                "alignment_ns": t.alignment.map(|(p50, p99, max)| json!({"p50": p50, "p99": p99, "max": max})),
                "changes": self.count("keepon_schedule_changes_total"),
                "pending_ns": self.integer("keepon_schedule_pending_ns"),
                // Qbv's oper and admin lists: each class's windows (offset, length ns) now and under the change.
                "oper_windows": self.info.classes.iter().zip(&self.info.windows)
                    .map(|(c, w)| (c.clone(), json!(w))).collect::<serde_json::Map<_, _>>(),
                "admin_windows": self.integer("keepon_schedule_pending_ns").map(|_| {
                    self.pending_windows().into_iter().map(|(c, w)| (c, json!(w))).collect::<serde_json::Map<_, _>>()
                }),
            },
            "classes": classes,
            "underruns": self.count("keepon_underruns_total"),
            "connections": {
                "open": self.count("keepon_connections"),
                "accepted": self.count("keepon_connections_accepted_total"),
                "refused": self.count("keepon_connections_refused_total"),
                "dropped": self.count("keepon_connections_dropped_total"),
            },
            "malformed_requests": self.count("keepon_requests_malformed_total"),
        })
    }
}
