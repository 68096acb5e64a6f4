//! A network plan directory written by `keepon-plan network`, read and checked for a replay.
//!
//! What is read (the documented form, `python/README.md` "Output directory"):
//! - `plan.json`: the base time, the guard, the topology as planned (`network`: stations, switches with their
//!   forwarding delay, links with their ports, rate and propagation delay) and every stream (talker, listeners,
//!   traffic class, period, bytes on the wire, departure, routes, latency per listener, bounds);
//! - `stations/NAME.toml`: every talker's keepon runtime config — the keys the replay needs to build the real
//!   station (`[link] rate`, `[ring]`, `[schedule] base_time`, `[[class]]` masks, `[[flow]]` period, offset,
//!   frame size, lead), in the forms `keepon-plan` writes them (integers with a unit: `250us`, `1Gbps`);
//! - `switches/NAME.json`: every scheduled egress port's gate control list (cycle, entries of gate states and
//!   intervals, from the base time).
//!
//! `keepon-eval` cannot use the `keepon` crate's config reader (that crate depends on this one), so the station
//! file is read here with the same meaning; the station itself is then checked by `keepon-core` when it is built.
//!
//! Times are integer **picoseconds** relative to the plan's base time (`*_ps`), as in the planner: one byte lasts
//! 0.8 ns at 10 Gb/s. Every error names the file and the element (stream, station, switch, port, link) it is about.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use keepon_core::insert::Policy;
use keepon_core::isolation::{parse_mask, ClassSpec};

/// Why a plan directory cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// A file or the directory is missing or unreadable.
    Unreadable {
        /// The path.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A file is readable but wrong; `element` names what it is about.
    Invalid {
        /// The file.
        path: PathBuf,
        /// The element (`stream 's1'`, `station 't1'`, `switch 'sw1' port 'swp3'`).
        element: String,
        /// Why.
        why: String,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Unreadable { path, why } => write!(f, "{}: {why}", path.display()),
            PlanError::Invalid { path, element, why } => write!(f, "{}: {element}: {why}", path.display()),
        }
    }
}

impl std::error::Error for PlanError {}

/// A full-duplex link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// `a`'s interface name.
    pub a_port: String,
    /// `b`'s interface name.
    pub b_port: String,
    /// Bit rate, bit/s.
    pub rate_bps: u64,
    /// Propagation delay, ps.
    pub delay_ps: i64,
}

impl Link {
    /// One byte on the wire, ps.
    pub fn byte_ps(&self) -> i64 {
        (8_000_000_000_000 / self.rate_bps) as i64
    }
    /// A frame of `l2_bytes` (incl. FCS) with preamble, SFD and gap, ps.
    pub fn wire_ps(&self, l2_bytes: u32) -> i64 {
        (i64::from(l2_bytes) + 20) * self.byte_ps()
    }
    /// The interface of `node` on this link.
    pub fn port_of(&self, node: &str) -> &str {
        if node == self.a {
            &self.a_port
        } else {
            &self.b_port
        }
    }
}

/// One egress port's gate control list (802.1Qbv), repeating every `cycle_ps` from the base time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gcl {
    /// Cycle, ps.
    pub cycle_ps: i64,
    /// `(start, end, gate states)` within the cycle, ps; bit `i` of the states = traffic class `i` open.
    pub entries: Vec<(i64, i64, u8)>,
}

impl Gcl {
    fn entry_at(&self, t: i64) -> (i64, i64, u8) {
        let c = t.div_euclid(self.cycle_ps);
        let r = t.rem_euclid(self.cycle_ps);
        let i = self.entries.partition_point(|e| e.0 <= r).saturating_sub(1);
        let (s, e, g) = self.entries[i];
        (c * self.cycle_ps + s, c * self.cycle_ps + e, g)
    }

    /// Whether the gate of `tc` is open throughout `[t, t + len)`.
    pub fn open_through(&self, tc: u8, t: i64, len: i64) -> bool {
        let mut at = t;
        while at < t + len {
            let (_, end, g) = self.entry_at(at);
            if g >> tc & 1 == 0 {
                return false;
            }
            at = end;
        }
        true
    }

    /// The earliest start `≥ t` at which the gate of `tc` stays open for `len` (802.1Qbv length-aware selection),
    /// or `None` if no window of the list is long enough.
    pub fn next_fit(&self, tc: u8, t: i64, len: i64) -> Option<i64> {
        let mut at = t;
        let mut open_since: Option<i64> = None;
        // Two cycles and a frame cover every window that starts after `t` or holds it.
        while at < t + 2 * self.cycle_ps + len {
            let (_, end, g) = self.entry_at(at);
            if g >> tc & 1 == 1 {
                let start = *open_since.get_or_insert(at);
                if end - start >= len {
                    return Some(start);
                }
            } else {
                open_since = None;
            }
            at = end;
        }
        None
    }
}

/// A switch: its forwarding delay and its scheduled egress ports, by the neighbour they lead to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Last bit received to ready at the egress port, ps.
    pub forwarding_delay_ps: i64,
    /// `neighbour → (port name, gate list)`.
    pub gates: BTreeMap<String, (String, Gcl)>,
}

/// One flow of a talker's runtime config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Name (the stream's).
    pub name: String,
    /// Class name.
    pub class: String,
    /// Period, ns.
    pub period_ns: i64,
    /// Offset from a ring-cycle start, ns.
    pub offset_ns: i64,
    /// L2 frame bytes incl. FCS (padded to the slot on the wire).
    pub frame_bytes: u32,
    /// Submitted this long before its txtime, ns.
    pub lead_ns: i64,
}

/// A talker's runtime config, as far as the replay needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Station {
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// Slot size (L2 incl. FCS).
    pub slot_bytes: u32,
    /// Ring slots.
    pub slots: u32,
    /// Descriptors posted ahead.
    pub batch: u32,
    /// Insertion policy.
    pub policy: Policy,
    /// `[schedule] base_time`, TAI ns.
    pub base_time_ns: i64,
    /// Classes with their ring slots.
    pub classes: Vec<ClassSpec>,
    /// On the byte clock (`link.timing = "bytes"`): the cycle (ns) and each class's windows, `(offset, length)` ns,
    /// in the order of `classes`; `None` on slots.
    pub byte_windows: Option<ByteWindows>,
    /// Flows.
    pub flows: Vec<Flow>,
}

/// A byte-clock talker's schedule: the cycle (ns) and each class's windows, `(offset, length)` ns.
pub type ByteWindows = (i64, Vec<Vec<(i64, i64)>>);

/// One stream of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Name.
    pub name: String,
    /// Talker station.
    pub talker: String,
    /// Listener stations.
    pub listeners: Vec<String>,
    /// Traffic class (its gate).
    pub traffic_class: u8,
    /// Period, ns.
    pub period_ns: i64,
    /// Bytes on the wire (L2 incl. FCS: the talker's slot size).
    pub wire_bytes: u32,
    /// Departure of instance 0 from the base time, ps.
    pub departure_ps: i64,
    /// The tree's directed links, parents before children.
    pub hops: Vec<(String, String)>,
    /// Per hop, the planned start of its transmission after the departure (ps) and whether the frame is planned
    /// to wait in the queue before it (the plan's `start_ps − departure_ps`, `wait_ps > 0`); `None` for a plan
    /// that gives no hop times (no-wait arithmetic then).
    pub hop_plan: Vec<Option<(i64, bool)>>,
    /// Planned latency per listener (first bit sent to last bit received), ps.
    pub latency_ps: BTreeMap<String, i64>,
    /// Bound on the latency, ns.
    pub max_latency_ns: i64,
    /// Bound on the spread of the latencies, ns.
    pub max_jitter_ns: i64,
}

/// A plan directory, read and cross-checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Where it was read from.
    pub dir: PathBuf,
    /// The network's base time, TAI ns: every ring cycle and gate cycle starts there.
    pub base_time_ns: i64,
    /// The planned margin on both sides of every switch egress window, ps.
    pub guard_ps: i64,
    /// Every end station's name.
    pub stations: Vec<String>,
    /// Switches by name.
    pub switches: BTreeMap<String, Switch>,
    /// Links.
    pub links: Vec<Link>,
    /// Streams in plan order.
    pub streams: Vec<Stream>,
    /// Talkers' runtime configs by station name.
    pub talkers: BTreeMap<String, Station>,
}

impl Plan {
    /// The link between `u` and `v`.
    pub fn link(&self, u: &str, v: &str) -> Option<&Link> {
        self.links.iter().find(|l| (l.a == u && l.b == v) || (l.a == v && l.b == u))
    }
}

// ---- the files, as serde reads them ----

#[derive(Deserialize)]
struct PlanFile {
    base_time_ns: i64,
    #[serde(default)]
    guard_ps: i64,
    network: Option<NetworkFile>,
    streams: Vec<StreamFile>,
}

#[derive(Deserialize)]
struct NetworkFile {
    stations: Vec<String>,
    switches: Vec<SwitchFile>,
    links: Vec<LinkFile>,
}

#[derive(Deserialize)]
struct SwitchFile {
    name: String,
    forwarding_delay_ps: i64,
}

#[derive(Deserialize)]
struct LinkFile {
    a: String,
    b: String,
    a_port: String,
    b_port: String,
    rate_bps: u64,
    delay_ps: i64,
}

#[derive(Deserialize)]
struct StreamFile {
    name: String,
    talker: String,
    listeners: Vec<String>,
    traffic_class: u8,
    period_ns: i64,
    wire_bytes: u32,
    departure_ps: i64,
    routes: Vec<Vec<String>>,
    hops: Vec<HopFile>,
    latency_ps: BTreeMap<String, i64>,
    max_latency_ns: i64,
    max_jitter_ns: i64,
}

#[derive(Deserialize)]
struct HopFile {
    link: String,
    #[serde(default)]
    start_ps: Option<i64>,
    #[serde(default)]
    wait_ps: Option<i64>,
}

#[derive(Deserialize)]
struct GclFile {
    switch: String,
    base_time_ns: i64,
    ports: Vec<PortFile>,
}

#[derive(Deserialize)]
struct PortFile {
    port: String,
    towards: String,
    cycle_ns: i64,
    entries: Vec<EntryFile>,
}

#[derive(Deserialize)]
struct EntryFile {
    gate_states: u8,
    interval_ns: i64,
}

#[derive(Deserialize)]
struct StationFile {
    link: StationLink,
    ring: StationRing,
    #[serde(default)]
    schedule: Option<StationSchedule>,
    #[serde(default, rename = "class")]
    classes: Vec<StationClass>,
    #[serde(default, rename = "flow")]
    flows: Vec<StationFlow>,
}

#[derive(Deserialize)]
struct StationLink {
    rate: toml::Value,
    #[serde(default)]
    timing: Option<String>,
}

#[derive(Deserialize)]
struct StationRing {
    slot_bytes: u32,
    slots: u32,
    batch: u32,
    #[serde(default)]
    policy: Option<String>,
}

#[derive(Deserialize)]
struct StationSchedule {
    #[serde(default)]
    base_time: i64,
    #[serde(default)]
    cycle_time: Option<toml::Value>,
}

#[derive(Deserialize)]
struct StationClass {
    name: String,
    #[serde(default)]
    mask: Option<String>,
    /// The byte clock's windows: `[offset, length]` pairs of durations.
    #[serde(default)]
    windows: Option<Vec<Vec<toml::Value>>>,
}

#[derive(Deserialize)]
struct StationFlow {
    name: String,
    class: String,
    period: toml::Value,
    offset: Option<toml::Value>,
    frame_bytes: u32,
    #[serde(default)]
    lead: Option<toml::Value>,
}

/// A duration as `keepon-plan` writes it: integer ns, or an integer with `ns`, `us`, `ms` or `s`.
pub fn duration_ns(v: &toml::Value) -> Result<i64, String> {
    match v {
        toml::Value::Integer(n) => Ok(*n),
        toml::Value::String(s) => {
            let split = s.find(|c: char| !c.is_ascii_digit() && c != '_').unwrap_or(s.len());
            let digits: String = s[..split].chars().filter(|c| *c != '_').collect();
            let scale = match &s[split..] {
                "" | "ns" => 1,
                "us" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                u => return Err(format!("`{s}`: unknown unit `{u}`")),
            };
            digits
                .parse::<i64>()
                .ok()
                .and_then(|n| n.checked_mul(scale))
                .ok_or_else(|| format!("`{s}` is not a whole duration"))
        }
        other => Err(format!("expected a duration, got {other}")),
    }
}

/// A rate as `keepon-plan` writes it: integer bit/s, or an integer with `Gbps`, `Mbps` or `bps`.
pub fn rate_bps(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::Integer(n) if *n > 0 => Ok(*n as u64),
        toml::Value::String(s) => {
            let (num, scale) = if let Some(n) = s.strip_suffix("Gbps") {
                (n, 1_000_000_000)
            } else if let Some(n) = s.strip_suffix("Mbps") {
                (n, 1_000_000)
            } else {
                (s.strip_suffix("bps").unwrap_or(s), 1)
            };
            num.parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(scale))
                .filter(|r| *r > 0)
                .ok_or_else(|| format!("`{s}` is not a rate like 1Gbps"))
        }
        other => Err(format!("expected a rate, got {other}")),
    }
}

fn read(path: &Path) -> Result<String, PlanError> {
    fs::read_to_string(path).map_err(|e| PlanError::Unreadable { path: path.into(), why: e.to_string() })
}

fn invalid(path: &Path, element: impl Into<String>, why: impl Into<String>) -> PlanError {
    PlanError::Invalid { path: path.into(), element: element.into(), why: why.into() }
}

/// Read a talker's runtime config.
pub fn read_station(path: &Path, name: &str) -> Result<Station, PlanError> {
    let what = format!("station '{name}'");
    let f: StationFile = toml::from_str(&read(path)?).map_err(|e| invalid(path, &what, e.message().to_string()))?;
    let rate = rate_bps(&f.link.rate).map_err(|e| invalid(path, &what, format!("link.rate: {e}")))?;
    let policy = match f.ring.policy.as_deref() {
        None => Policy::Strict,
        Some(p) => Policy::parse(p).ok_or_else(|| invalid(path, &what, format!("ring.policy: unknown `{p}`")))?,
    };
    let bytes = match f.link.timing.as_deref() {
        None | Some("slots") => false,
        Some("bytes") => true,
        Some(t) => return Err(invalid(path, &what, format!("link.timing: `{t}` is neither slots nor bytes"))),
    };
    let byte_windows = if bytes {
        let cycle = f
            .schedule
            .as_ref()
            .and_then(|s| s.cycle_time.as_ref())
            .ok_or_else(|| invalid(path, &what, "the byte clock needs schedule.cycle_time"))?;
        let cycle = duration_ns(cycle).map_err(|e| invalid(path, &what, format!("schedule.cycle_time: {e}")))?;
        let mut per_class = Vec::new();
        for c in &f.classes {
            let el = format!("{what} class '{}'", c.name);
            let mut w = Vec::new();
            for pair in c.windows.iter().flatten() {
                let [o, l] = pair.as_slice() else {
                    return Err(invalid(path, &el, "a window is [offset, length]"));
                };
                let o = duration_ns(o).map_err(|e| invalid(path, &el, format!("window offset: {e}")))?;
                let l = duration_ns(l).map_err(|e| invalid(path, &el, format!("window length: {e}")))?;
                w.push((o, l));
            }
            per_class.push(w);
        }
        Some((cycle, per_class))
    } else {
        None
    };
    let mut classes = Vec::new();
    for c in &f.classes {
        let slots = match &c.mask {
            Some(m) => parse_mask(&c.name, m, f.ring.slots)
                .map_err(|e| invalid(path, format!("{what} class '{}'", c.name), e.to_string()))?,
            None => Vec::new(),
        };
        classes.push(ClassSpec { name: c.name.clone(), slots });
    }
    let mut flows = Vec::new();
    for fl in &f.flows {
        let el = format!("{what} flow '{}'", fl.name);
        if !classes.iter().any(|c| c.name == fl.class) {
            return Err(invalid(path, el, format!("class '{}' is not a [[class]] of the station", fl.class)));
        }
        let offset = fl
            .offset
            .as_ref()
            .ok_or_else(|| invalid(path, &el, "no offset: the replay needs strictly periodic flows"))?;
        flows.push(Flow {
            name: fl.name.clone(),
            class: fl.class.clone(),
            period_ns: duration_ns(&fl.period).map_err(|e| invalid(path, &el, format!("period: {e}")))?,
            offset_ns: duration_ns(offset).map_err(|e| invalid(path, &el, format!("offset: {e}")))?,
            frame_bytes: fl.frame_bytes,
            lead_ns: match &fl.lead {
                Some(l) => duration_ns(l).map_err(|e| invalid(path, &el, format!("lead: {e}")))?,
                None => 1_000_000,
            },
        });
    }
    Ok(Station {
        rate_bps: rate,
        slot_bytes: f.ring.slot_bytes,
        slots: f.ring.slots,
        batch: f.ring.batch,
        policy,
        base_time_ns: f.schedule.map_or(0, |s| s.base_time),
        classes,
        byte_windows,
        flows,
    })
}

fn read_gcls(path: &Path, name: &str, base_time_ns: i64) -> Result<BTreeMap<String, (String, Gcl)>, PlanError> {
    let what = format!("switch '{name}'");
    let f: GclFile = serde_json::from_str(&read(path)?).map_err(|e| invalid(path, &what, e.to_string()))?;
    if f.switch != name {
        return Err(invalid(path, &what, format!("the file is about switch '{}'", f.switch)));
    }
    if f.base_time_ns != base_time_ns {
        return Err(invalid(path, &what, format!("base time {} ≠ the plan's {base_time_ns}", f.base_time_ns)));
    }
    let mut out = BTreeMap::new();
    for p in f.ports {
        let el = format!("{what} port '{}'", p.port);
        let mut t = 0i64;
        let mut entries = Vec::new();
        for e in &p.entries {
            if e.interval_ns <= 0 {
                return Err(invalid(path, &el, format!("an entry of {} ns (must be positive)", e.interval_ns)));
            }
            entries.push((t * 1000, (t + e.interval_ns) * 1000, e.gate_states));
            t += e.interval_ns;
        }
        if t != p.cycle_ns || t <= 0 {
            return Err(invalid(path, &el, format!("entries sum to {t} ns, the cycle is {} ns", p.cycle_ns)));
        }
        out.insert(p.towards, (p.port, Gcl { cycle_ps: p.cycle_ns * 1000, entries }));
    }
    Ok(out)
}

/// Read the plan directory `dir` and check that it is one network: every stream's talker, listeners and route
/// nodes exist, every hop is a link, every talker has its runtime config with the stream's flow at the planned
/// departure, and every switch has its gate lists.
pub fn read_plan(dir: &Path) -> Result<Plan, PlanError> {
    if !dir.is_dir() {
        return Err(PlanError::Unreadable { path: dir.into(), why: "no such plan directory".into() });
    }
    let plan_path = dir.join("plan.json");
    let f: PlanFile =
        serde_json::from_str(&read(&plan_path)?).map_err(|e| invalid(&plan_path, "plan", e.to_string()))?;
    let net = f.network.ok_or_else(|| {
        invalid(&plan_path, "plan", "no `network` (written by keepon-plan network since the replay: plan again)")
    })?;
    let links: Vec<Link> = net
        .links
        .into_iter()
        .map(|l| Link {
            a: l.a,
            b: l.b,
            a_port: l.a_port,
            b_port: l.b_port,
            rate_bps: l.rate_bps,
            delay_ps: l.delay_ps,
        })
        .collect();
    for l in &links {
        if l.rate_bps == 0 || 8_000_000_000_000 % l.rate_bps != 0 || l.delay_ps < 0 {
            return Err(invalid(&plan_path, format!("link {}–{}", l.a, l.b), "rate or delay out of range"));
        }
    }
    let mut switches = BTreeMap::new();
    for sw in &net.switches {
        let path = dir.join("switches").join(format!("{}.json", sw.name));
        let gates = read_gcls(&path, &sw.name, f.base_time_ns)?;
        for (towards, (port, _)) in &gates {
            if !links.iter().any(|l| (l.a == sw.name && &l.b == towards) || (l.b == sw.name && &l.a == towards)) {
                return Err(invalid(
                    &path,
                    format!("switch '{}' port '{port}'", sw.name),
                    format!("leads to '{towards}', which is not a neighbour of the switch"),
                ));
            }
        }
        switches.insert(sw.name.clone(), Switch { forwarding_delay_ps: sw.forwarding_delay_ps, gates });
    }
    let mut plan = Plan {
        dir: dir.into(),
        base_time_ns: f.base_time_ns,
        guard_ps: f.guard_ps,
        stations: net.stations,
        switches,
        links,
        streams: Vec::new(),
        talkers: BTreeMap::new(),
    };
    for s in f.streams {
        let el = format!("stream '{}'", s.name);
        let station = |n: &str| plan.stations.iter().any(|x| x == n);
        if !station(&s.talker) {
            return Err(invalid(&plan_path, &el, format!("talker '{}' is not a station of the plan", s.talker)));
        }
        for l in &s.listeners {
            if !station(l) {
                return Err(invalid(&plan_path, &el, format!("listener '{l}' is not a station of the plan")));
            }
        }
        let mut hops = Vec::new();
        let mut hop_plan = Vec::new();
        for h in &s.hops {
            hop_plan.push(h.start_ps.map(|t| (t - s.departure_ps, h.wait_ps.unwrap_or(0) > 0)));
            let (u, v) = h
                .link
                .split_once("->")
                .ok_or_else(|| invalid(&plan_path, &el, format!("hop `{}` is not `u->v`", h.link)))?;
            for n in [u, v] {
                if !station(n) && !plan.switches.contains_key(n) {
                    return Err(invalid(&plan_path, &el, format!("hop {u}→{v} names unknown node '{n}'")));
                }
            }
            if plan.link(u, v).is_none() {
                return Err(invalid(&plan_path, &el, format!("hop {u}→{v} is not a link of the plan")));
            }
            hops.push((u.to_string(), v.to_string()));
        }
        for r in &s.routes {
            if r.first() != Some(&s.talker) || r.windows(2).any(|w| !hops.contains(&(w[0].clone(), w[1].clone()))) {
                return Err(invalid(&plan_path, &el, format!("route {} is not along its hops", r.join(" → "))));
            }
        }
        if s.period_ns <= 0 || !(0..s.period_ns * 1000).contains(&s.departure_ps) || s.traffic_class > 7 {
            return Err(invalid(&plan_path, &el, "period, departure or traffic class out of range"));
        }
        if !plan.talkers.contains_key(&s.talker) {
            let path = dir.join("stations").join(format!("{}.toml", s.talker));
            plan.talkers.insert(s.talker.clone(), read_station(&path, &s.talker)?);
        }
        let st = &plan.talkers[&s.talker];
        let path = dir.join("stations").join(format!("{}.toml", s.talker));
        let flow = st.flows.iter().find(|fl| fl.name == s.name).ok_or_else(|| {
            invalid(&path, format!("station '{}'", s.talker), format!("no [[flow]] for stream '{}'", s.name))
        })?;
        let period_ps = s.period_ns * 1000;
        if flow.period_ns != s.period_ns || (flow.offset_ns * 1000 - s.departure_ps).rem_euclid(period_ps) != 0 {
            return Err(invalid(
                &path,
                format!("station '{}' flow '{}'", s.talker, s.name),
                format!(
                    "period {} ns, offset {} ns: not the plan's departure {} ps every {} ns",
                    flow.period_ns, flow.offset_ns, s.departure_ps, s.period_ns
                ),
            ));
        }
        if st.base_time_ns != plan.base_time_ns {
            return Err(invalid(&path, format!("station '{}'", s.talker), "[schedule] base_time is not the plan's"));
        }
        plan.streams.push(Stream {
            name: s.name,
            talker: s.talker,
            listeners: s.listeners,
            traffic_class: s.traffic_class,
            period_ns: s.period_ns,
            wire_bytes: s.wire_bytes,
            departure_ps: s.departure_ps,
            hops,
            hop_plan,
            latency_ps: s.latency_ps,
            max_latency_ns: s.max_latency_ns,
            max_jitter_ns: s.max_jitter_ns,
        });
    }
    if plan.streams.is_empty() {
        return Err(invalid(&plan_path, "plan", "no streams"));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_rates_and_gates() {
        assert_eq!(duration_ns(&toml::Value::String("250us".into())), Ok(250_000));
        assert_eq!(duration_ns(&toml::Value::String("0ns".into())), Ok(0));
        assert_eq!(duration_ns(&toml::Value::Integer(7)), Ok(7));
        assert!(duration_ns(&toml::Value::String("2.5us".into())).is_err());
        assert_eq!(rate_bps(&toml::Value::String("10Gbps".into())), Ok(10_000_000_000));
        // Class 7 open [1000, 3000) ps of a 10 000 ps cycle, class 0 elsewhere.
        let g = Gcl { cycle_ps: 10_000, entries: vec![(0, 1_000, 1), (1_000, 3_000, 0x80), (3_000, 10_000, 1)] };
        assert!(g.open_through(7, 11_000, 2_000));
        assert!(!g.open_through(7, 11_001, 2_000));
        assert!(g.open_through(0, 3_000, 8_000), "across the cycle's wrap");
        assert_eq!(g.next_fit(7, 11_500, 1_000), Some(11_500));
        assert_eq!(g.next_fit(7, 12_500, 1_000), Some(21_000));
        assert_eq!(g.next_fit(7, 0, 3_000), None);
    }
}
