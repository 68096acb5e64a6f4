//! `keepon schedule apply FILE`: a new schedule for a running daemon, from the same files the planner writes.
//!
//! FILE is either
//! - **`ieee802-dot1q-sched` instance data** (RFC 7951 JSON, as `keepon-plan network` writes under `yang/` and as a
//!   NETCONF client would send): the port's `gate-parameter-table` — `admin-control-list` (gate states and time
//!   intervals), `admin-cycle-time`, `admin-base-time`. Gate `b` is the class named `tc<b>` (the planner's names);
//!   a slot whose gate states are exactly one such class's gate is that class's, any other slot is free (best
//!   effort). The list must change only on slot boundaries (slot `s` starts at `⌈s·δ⌉` ns of the cycle) and
//!   repeat every ring cycle;
//! - or **a keepon configuration** (TOML): its classes' slots and `[schedule] base_time`.
//!
//! A byte-clock daemon takes windows, not slots: a byte-clock configuration's windows are sent as they are
//! (`ScheduleWindows`), and with `--windows` a gate list's entries too, in ns over one cycle of the daemon's (the
//! slot daemon takes such windows where their edges are its slot boundaries).
//!
//! The daemon's `Info` gives what the conversion needs (slot period, ring, class names); its `Schedule` request does
//! the change ([`crate::api`]).
//!
//! **Hostile files.** FILE is read up to [`MAX_FILE_BYTES`] (a larger file, `/dev/zero`, is refused, not read to
//! the end); every number in it is checked (a base time keepon can represent, a cycle and intervals whose sums
//! fit, an error naming the element otherwise); and the work is bounded by the file and the ring, not by the
//! cycle's length: each entry costs O(1) plus the ring slots of the first ring cycle it covers, so a list of one
//! entry over a 10⁶ s cycle is checked as fast as one over a single ring cycle.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::api::{Client, Info, Scheduled};
use crate::config::{Config, MAX_BASE_TIME};

/// The largest schedule file `apply` reads: 4 MiB. The planner's gate lists are a few KiB (one entry per window
/// change per cycle: some 60 bytes each, so this is ~70 000 entries); a keepon configuration is smaller still.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// A schedule to apply: network time it takes effect from, and each class's ring slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Base time (TAI ns).
    pub base_time: i64,
    /// Classes by name and their ring slots.
    pub classes: Vec<(String, Vec<u32>)>,
}

/// Read FILE (`.json`: YANG instance data; otherwise a keepon configuration) against the daemon's `info`. `port`
/// picks the interface in a YANG document with several.
pub fn read_plan(path: &Path, info: &Info, port: Option<&str>) -> Result<Plan, String> {
    let plan = match read_doc(path)? {
        Doc::Yang(doc) => from_yang(&doc, info, port),
        Doc::Config(text) => from_config(&text, info),
    };
    plan.map_err(|e| format!("{}: {e}", path.display()))
}

/// A schedule file as read: YANG instance data, or a keepon configuration's text.
enum Doc {
    Yang(Value),
    Config(String),
}

/// FILE (`.json`, or text starting with `{`: YANG instance data; otherwise a keepon configuration), bounded.
fn read_doc(path: &Path) -> Result<Doc, String> {
    let text = read_bounded(path)?;
    if path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{') {
        let doc = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        Ok(Doc::Yang(doc))
    } else {
        Ok(Doc::Config(text))
    }
}

/// The text of `path`, at most [`MAX_FILE_BYTES`] of it: whatever it is (a pipe, a device), no more is read.
fn read_bounded(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "{shown} is larger than {} MiB: not a schedule (a gate list is a few KiB)",
            MAX_FILE_BYTES >> 20
        ));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("{shown}: not UTF-8 text (byte {} is not)", e.utf8_error().valid_up_to()))
}

/// The classes and base time of a keepon configuration.
fn from_config(text: &str, info: &Info) -> Result<Plan, String> {
    let cfg = Config::parse(text).map_err(|e| e.to_string())?;
    if cfg.ownership.ring() != info.ring {
        return Err(format!("ring.slots = {} but the daemon's ring has {} slots", cfg.ownership.ring(), info.ring));
    }
    let classes = (0..cfg.ownership.classes())
        .map(|i| {
            let c = keepon_core::isolation::ClassId(i as u8);
            (cfg.ownership.name(c).to_owned(), cfg.ownership.owned(c).to_vec())
        })
        .collect();
    Ok(Plan { base_time: cfg.base_time.0, classes })
}

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("{at}: no {key:?}"))
}

fn int(v: &Value, at: &str) -> Result<i128, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .ok_or_else(|| format!("{at}: {n} is not an integer")),
        // RFC 7951 writes 64-bit integers as strings.
        Value::String(s) => s.parse().map_err(|_| {
            let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                format!("{at}: {s} is out of range")
            } else {
                format!("{at}: {s:?} is not an integer")
            }
        }),
        other => Err(format!("{at}: {other} is not an integer")),
    }
}

/// `admin-base-time` (seconds and nanoseconds, PTP time) in TAI ns: a base time keepon takes, `0..MAX_BASE_TIME`.
fn base_time(base: &Value) -> Result<i64, String> {
    let seconds = int(field(base, "seconds", "admin-base-time")?, "admin-base-time/seconds")?;
    let nanos = int(field(base, "nanoseconds", "admin-base-time")?, "admin-base-time/nanoseconds")?;
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(format!("admin-base-time/nanoseconds {nanos} is not within 0..999999999"));
    }
    seconds
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(nanos))
        .filter(|ns| (0..i128::from(MAX_BASE_TIME)).contains(ns))
        .and_then(|ns| i64::try_from(ns).ok())
        .ok_or_else(|| {
            format!(
                "admin-base-time {seconds} s {nanos} ns is not a base time keepon takes (0..{MAX_BASE_TIME} ns TAI, \
                 before the year 2116)"
            )
        })
}

/// The list's slots: slot `s` of the list starts at `⌈s·δ⌉` ns of it, δ = `cn/(cd·n)` ns (the daemon's cycle
/// `cn/cd` ns over its `n` ring slots). Every product is checked.
struct ListSlots {
    cn: i128,
    /// `cd·n`.
    cdn: i128,
}

impl ListSlots {
    /// Where slot `s` starts (ns into the list).
    fn start(&self, s: i128) -> Result<i128, String> {
        s.checked_mul(self.cn).and_then(|x| x.checked_add(self.cdn - 1)).map(|x| x / self.cdn).ok_or_else(overflow)
    }

    /// The first slot starting at or after `t` ns (`t ≥ 0`): `⌈s·cn/cdn⌉ ≥ t ⇔ s ≥ ⌊(t−1)·cdn/cn⌋ + 1`.
    fn at(&self, t: i128) -> Result<i128, String> {
        if t == 0 {
            return Ok(0);
        }
        (t - 1).checked_mul(self.cdn).map(|x| x.div_euclid(self.cn) + 1).ok_or_else(overflow)
    }
}

fn overflow() -> String {
    "the list's times overflow what keepon computes with".to_string()
}

/// The class (index into `info.classes`) whose slot a gate state is: one gate open alone, that of a real-time
/// class `tc<gate>`; any other state is free (best effort).
fn owner_of(states: u8, entry: usize, info: &Info, rt: &[(usize, &String)]) -> Result<Option<usize>, String> {
    if states.count_ones() != 1 {
        return Ok(None);
    }
    let gate = states.trailing_zeros();
    let name = format!("tc{gate}");
    match rt.iter().find(|(_, n)| **n == name) {
        Some((c, _)) => Ok(Some(*c)),
        None if info.classes.contains(&name) => Ok(None),
        None => Err(format!(
            "gate-control-entry {entry} opens gate {gate} alone, and the daemon has no class tc{gate} (classes: {})",
            info.classes.join(", ")
        )),
    }
}

/// In ring slots `r0, r0+1, …` (`len` of them, modulo the ring), the first whose owner is not `o`. `next[r]` is
/// the first ring slot after `r` with another owner than `r`'s (the ring's length if none): O(1) per call.
fn first_differing(owner: &[Option<usize>], next: &[usize], r0: usize, len: i128, o: Option<usize>) -> Option<usize> {
    let n = owner.len();
    let len = usize::try_from(len.min(n as i128)).unwrap_or(n);
    let mut pieces = vec![(r0, (r0 + len).min(n))];
    if r0 + len > n {
        pieces.push((0, r0 + len - n));
    }
    pieces.into_iter().find_map(|(a, b)| if owner[a] != o { Some(a) } else { (next[a] < b).then_some(next[a]) })
}

/// The gate parameter table of the port `port` (or of the only scheduled port).
fn gate_table<'a>(doc: &'a Value, port: Option<&str>) -> Result<&'a Value, String> {
    const WHERE: &str = "ietf-interfaces:interfaces/interface/ieee802-dot1q-bridge:bridge-port/\
                         ieee802-dot1q-sched-bridge:gate-parameter-table";
    let interfaces = doc
        .get("ietf-interfaces:interfaces")
        .and_then(|i| i.get("interface"))
        .and_then(Value::as_array)
        .ok_or_else(|| format!("not ieee802-dot1q-sched instance data: no {WHERE}"))?;
    let tables: Vec<(&str, &Value)> = interfaces
        .iter()
        .filter_map(|i| {
            let t =
                i.get("ieee802-dot1q-bridge:bridge-port")?.get("ieee802-dot1q-sched-bridge:gate-parameter-table")?;
            Some((i.get("name").and_then(Value::as_str).unwrap_or("?"), t))
        })
        .collect();
    let names = || tables.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    match (port, tables.as_slice()) {
        (_, []) => Err(format!("not ieee802-dot1q-sched instance data: no {WHERE}")),
        (None, [(_, t)]) => Ok(t),
        (None, _) => Err(format!("several scheduled ports ({}): choose one with --port", names())),
        (Some(p), _) => tables
            .iter()
            .find(|(n, _)| *n == p)
            .map(|(_, t)| *t)
            .ok_or_else(|| format!("no scheduled port {p:?} (ports: {})", names())),
    }
}

/// A port's gate parameter table with its base time (TAI ns) and cycle (`num/den` s, as written).
fn list_head<'a>(doc: &'a Value, port: Option<&str>) -> Result<(&'a Value, i64, i128, i128), String> {
    let table = gate_table(doc, port)?;
    let base_time = base_time(field(table, "admin-base-time", "gate-parameter-table")?)?;
    let cycle = field(table, "admin-cycle-time", "gate-parameter-table")?;
    let num = int(field(cycle, "numerator", "admin-cycle-time")?, "admin-cycle-time/numerator")?;
    let den = int(field(cycle, "denominator", "admin-cycle-time")?, "admin-cycle-time/denominator")?;
    Ok((table, base_time, num, den))
}

/// Ring slots per class from a port's gate control list (see the module doc).
fn from_yang(doc: &Value, info: &Info, port: Option<&str>) -> Result<Plan, String> {
    let (table, base_time, num, den) = list_head(doc, port)?;
    if num <= 0 || den <= 0 {
        return Err(format!("admin-cycle-time {num}/{den} s is not positive"));
    }
    let (cn, cd, n) = (i128::from(info.cycle.0), i128::from(info.cycle.1), i128::from(info.ring));
    if cn == 0 || cd == 0 || !(1..=i128::from(keepon_core::isolation::MAX_RING_SLOTS)).contains(&n) {
        return Err(format!("the daemon reports a cycle of {cn}/{cd} ns over {n} ring slots"));
    }
    let slots = ListSlots { cn, cdn: cd.checked_mul(n).ok_or_else(overflow)? };
    // The list's cycle must be m whole ring cycles: num/den s = m · (cn/cd) ns, and fit i64 ns.
    let too_long = || format!("admin-cycle-time {num}/{den} s is longer than keepon takes ({} ns)", i64::MAX);
    let top = num.checked_mul(1_000_000_000).and_then(|x| x.checked_mul(cd)).ok_or_else(too_long)?;
    let bottom = den.checked_mul(cn).ok_or_else(too_long)?;
    if top % bottom != 0 || top / bottom == 0 {
        return Err(format!(
            "admin-cycle-time {num}/{den} s is not a whole number of the daemon's ring cycles ({} ns)",
            cn as f64 / cd as f64
        ));
    }
    let total = (top / bottom).checked_mul(n).ok_or_else(too_long)?;
    let cycle_ns = slots.start(total).ok().filter(|&c| c <= i128::from(i64::MAX)).ok_or_else(too_long)?;
    let entries =
        field(field(table, "admin-control-list", "gate-parameter-table")?, "gate-control-entry", "admin-control-list")?
            .as_array()
            .ok_or("admin-control-list/gate-control-entry is not a list")?;
    let rt: Vec<(usize, &String)> =
        info.classes.iter().enumerate().filter(|(i, _)| info.windows.get(*i).is_some_and(|w| !w.is_empty())).collect();
    // Each ring slot's owner in the list's first ring cycle; later cycles must repeat it.
    let ring = n as usize;
    let mut owner: Vec<Option<usize>> = vec![None; ring];
    let mut next: Vec<usize> = Vec::new();
    let mut t = 0i128;
    for (i, e) in entries.iter().enumerate() {
        let at = format!("gate-control-entry {i}");
        let states = int(field(e, "gate-states-value", &at)?, &at)?;
        let states = u8::try_from(states).map_err(|_| format!("{at}: gate-states-value {states} is not 0..255"))?;
        let len = int(field(e, "time-interval-value", &at)?, &at)?;
        if len <= 0 {
            return Err(format!("{at}: time-interval-value {len} is not positive"));
        }
        if len > cycle_ns - t {
            return Err(format!(
                "{at}: the entries up to it last more than the admin-cycle-time ({cycle_ns} ns), {t} ns before it"
            ));
        }
        // It holds slots [s0, s1): it starts on a slot boundary (checked at the entry before), and so must the next.
        let (s0, end) = (slots.at(t)?, t + len);
        let s1 = slots.at(end)?;
        if slots.start(s1)? != end {
            let (a, b) = (slots.start(s1 - 1)?, slots.start(s1)?);
            return Err(format!(
                "gate-control-entry {} starts at {end} ns, inside slot {} ({a}..{b} ns): entries must change on slot \
                 boundaries",
                i + 1,
                s1 - 1
            ));
        }
        t = end;
        let o = owner_of(states, i, info, &rt)?;
        // The first ring cycle: O(ring) over all entries.
        for s in s0..s1.min(n) {
            owner[s as usize] = o;
        }
        // Later cycles: the ring slots it holds must have that owner in the first one (O(1) with `next`).
        if s1 > n {
            if next.is_empty() {
                next = vec![ring; ring];
                for r in (0..ring.saturating_sub(1)).rev() {
                    next[r] = if owner[r + 1] != owner[r] { r + 1 } else { next[r + 1] };
                }
            }
            let from = s0.max(n);
            if let Some(r) = first_differing(&owner, &next, (from % n) as usize, s1 - from, o) {
                return Err(format!(
                    "ring slot {r} differs between ring cycles of the list ({at}): it must repeat every ring cycle"
                ));
            }
        }
    }
    if t != cycle_ns {
        return Err(format!("the entries last {t} ns, the admin-cycle-time {cycle_ns} ns"));
    }
    let classes = rt
        .iter()
        .map(|(c, name)| {
            let slots = (0..info.ring).filter(|r| owner[*r as usize] == Some(*c)).collect();
            ((*name).clone(), slots)
        })
        .collect();
    Ok(Plan { base_time, classes })
}

/// A schedule to apply as windows (the byte clock's form): network time it takes effect from, each class's
/// windows in the cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowPlan {
    /// Base time (TAI ns).
    pub base_time: i64,
    /// Classes by name and their windows, (offset, length) ns into the cycle.
    pub classes: Vec<(String, Vec<(u64, u64)>)>,
}

/// Read FILE as windows: a keepon configuration's classes (a byte-clock one's windows, a slot one's slot masks as
/// the windows `Info` would report), or a YANG gate list's entries as they are, in ns — one cycle of the
/// daemon's, each class's windows the entries that open its gate alone (see the module doc).
pub fn read_windows(path: &Path, info: &Info, port: Option<&str>) -> Result<WindowPlan, String> {
    let plan = match read_doc(path)? {
        Doc::Yang(doc) => windows_from_yang(&doc, info, port),
        Doc::Config(text) => windows_from_config(&text),
    };
    plan.map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether FILE is a keepon configuration of the byte clock (its schedule is windows).
fn is_byte_clock_config(path: &Path) -> bool {
    matches!(read_doc(path), Ok(Doc::Config(text))
        if Config::parse(&text).is_ok_and(|c| c.timing == crate::config::WireTiming::Bytes))
}

fn windows_from_config(text: &str) -> Result<WindowPlan, String> {
    let cfg = Config::parse(text).map_err(|e| e.to_string())?;
    let ns = |r: keepon_core::bytes::windows::Rat| u64::try_from(r.ceil()).unwrap_or(u64::MAX);
    let windows = match &cfg.windows {
        Some(w) => w.clone(),
        None => keepon_core::bytes::windows::Windows::from_slots(cfg.base_time, cfg.geometry, &cfg.ownership),
    };
    let classes = (0..windows.classes())
        .map(|c| {
            let c = keepon_core::isolation::ClassId(c as u8);
            let ws = windows.of_class(c).map(|(o, e)| (ns(o), ns(e) - ns(o))).collect();
            (windows.name(c).to_owned(), ws)
        })
        .collect();
    Ok(WindowPlan { base_time: cfg.base_time.0, classes })
}

/// Windows per real-time class from a port's gate control list: its cycle must be the daemon's, in whole ns.
fn windows_from_yang(doc: &Value, info: &Info, port: Option<&str>) -> Result<WindowPlan, String> {
    let (table, base_time, num, den) = list_head(doc, port)?;
    let (cn, cd) = (i128::from(info.cycle.0), i128::from(info.cycle.1));
    // num/den s = cn/cd ns  ⇔  num·10⁹·cd = cn·den (checked products).
    let same = num.checked_mul(1_000_000_000).and_then(|x| x.checked_mul(cd)) == cn.checked_mul(den);
    if num <= 0 || den <= 0 || !same || cd != 1 {
        return Err(format!(
            "admin-cycle-time {num}/{den} s is not the daemon's cycle ({} ns): windows are taken over one cycle",
            cn as f64 / cd.max(1) as f64
        ));
    }
    let entries =
        field(field(table, "admin-control-list", "gate-parameter-table")?, "gate-control-entry", "admin-control-list")?
            .as_array()
            .ok_or("admin-control-list/gate-control-entry is not a list")?;
    let rt: Vec<(usize, &String)> =
        info.classes.iter().enumerate().filter(|(i, _)| info.windows.get(*i).is_some_and(|w| !w.is_empty())).collect();
    let mut windows: Vec<Vec<(u64, u64)>> = vec![Vec::new(); rt.len()];
    let mut t = 0i128;
    for (i, e) in entries.iter().enumerate() {
        let at = format!("gate-control-entry {i}");
        let states = int(field(e, "gate-states-value", &at)?, &at)?;
        let states = u8::try_from(states).map_err(|_| format!("{at}: gate-states-value {states} is not 0..255"))?;
        let len = int(field(e, "time-interval-value", &at)?, &at)?;
        if len <= 0 || len > cn - t {
            return Err(format!("{at}: time-interval-value {len} is not positive or runs past the cycle ({cn} ns)"));
        }
        if let Some(c) = owner_of(states, i, info, &rt)? {
            let k = rt.iter().position(|(r, _)| *r == c).unwrap_or(0);
            // Consecutive entries of one class are one window.
            match windows[k].last_mut() {
                Some((o, l)) if i128::from(*o + *l) == t => *l += len as u64,
                _ => windows[k].push((t as u64, len as u64)),
            }
        }
        t += len;
    }
    if t != cn {
        return Err(format!("the entries last {t} ns, the admin-cycle-time {cn} ns"));
    }
    let classes = rt.iter().zip(windows).map(|((_, name), w)| ((*name).clone(), w)).collect();
    Ok(WindowPlan { base_time, classes })
}

/// Apply FILE to the daemon behind `socket`; `base_time` overrides the file's. As windows (`ScheduleWindows`) with
/// `windows` or for a byte-clock configuration, else as ring slots. A refusal is an error saying why.
pub fn apply(
    socket: &Path,
    file: &Path,
    port: Option<&str>,
    base_time: Option<i64>,
    windows: bool,
) -> Result<Scheduled, String> {
    // Connecting and each request with its whole reply within api::DEFAULT_TIMEOUT.
    let shown = socket.display();
    let mut c = Client::connect(socket).map_err(|e| format!("cannot connect to {shown}: {e}"))?;
    let info = c.info().map_err(|e| format!("{shown}: info: {e}"))?;
    if let Some(t) = base_time {
        if !(0..MAX_BASE_TIME).contains(&t) {
            return Err(format!("--base-time {t} is not a base time keepon takes (0..{MAX_BASE_TIME} ns TAI)"));
        }
    }
    let asked = if windows || is_byte_clock_config(file) {
        let plan = read_windows(file, &info, port)?;
        c.change_windows(base_time.unwrap_or(plan.base_time), plan.classes)
    } else {
        let plan = read_plan(file, &info, port)?;
        c.change_schedule(base_time.unwrap_or(plan.base_time), plan.classes)
    };
    asked
        .map_err(|e| format!("{shown}: schedule: {e}"))?
        .map_err(|why| format!("the daemon refused the schedule: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon of `keepon-plan network`'s station t1: 1 Gb/s, 230-byte slots (2 µs), 125 slots, classes tc7 and
    /// be.
    fn info() -> Info {
        Info {
            rate_bps: 1_000_000_000,
            slot_bytes: 230,
            ring: 125,
            batch: 8,
            now: 0,
            cycle_start: 0,
            base_time: 1_000_000_000,
            cycle: (250_000, 1),
            classes: vec!["tc7".into(), "be".into()],
            windows: vec![vec![(0, 2000)], vec![]],
            host: 0,
        }
    }

    fn doc(entries: &[(u32, u64)], cycle_den: u64) -> Value {
        let list: Vec<Value> = entries
            .iter()
            .enumerate()
            .map(|(i, (g, t))| {
                serde_json::json!({"index": i, "operation-name": "ieee802-dot1q-sched:set-gate-states",
                                   "time-interval-value": t, "gate-states-value": g})
            })
            .collect();
        serde_json::json!({"ietf-interfaces:interfaces": {"interface": [{"name": "to-sw1",
            "ieee802-dot1q-bridge:bridge-port": {"ieee802-dot1q-sched-bridge:gate-parameter-table": {
                "gate-enabled": true, "admin-control-list": {"gate-control-entry": list},
                "admin-cycle-time": {"numerator": 1, "denominator": cycle_den},
                "admin-base-time": {"seconds": "5", "nanoseconds": 250}}}}]}})
    }

    /// The planner's list for t1 (gate 7 for 2 µs, the others for the rest of the 250 µs cycle) is ring slot 0
    /// for tc7; moved by three slots, it is ring slot 3.
    #[test]
    fn a_gate_list_becomes_ring_slots() {
        let p = from_yang(&doc(&[(128, 2000), (127, 248_000)], 4000), &info(), None).unwrap();
        assert_eq!(p, Plan { base_time: 5_000_000_250, classes: vec![("tc7".into(), vec![0])] });
        let p = from_yang(&doc(&[(127, 6000), (128, 2000), (127, 242_000)], 4000), &info(), None).unwrap();
        assert_eq!(p.classes, vec![("tc7".to_string(), vec![3])]);
        // Two ring cycles in one list, the same in both.
        let p = from_yang(&doc(&[(128, 2000), (127, 248_000), (128, 2000), (127, 248_000)], 2000), &info(), None);
        assert_eq!(p.unwrap().classes, vec![("tc7".to_string(), vec![0])]);
    }

    /// Lists keepon cannot take say which entry or element is wrong.
    #[test]
    fn a_list_keepon_cannot_take_is_refused_naming_the_element() {
        let e = from_yang(&doc(&[(128, 2500), (127, 247_500)], 4000), &info(), None).unwrap_err();
        assert!(e.contains("gate-control-entry 1") && e.contains("slot boundaries"), "{e}");
        let e = from_yang(&doc(&[(128, 2000), (127, 248_000)], 3000), &info(), None).unwrap_err();
        assert!(e.contains("admin-cycle-time"), "{e}");
        let e = from_yang(&doc(&[(8, 2000), (127, 248_000)], 4000), &info(), None).unwrap_err();
        assert!(e.contains("gate 3") && e.contains("no class tc3"), "{e}");
        let e = from_yang(&doc(&[(128, 2000), (127, 248_000), (127, 2000), (128, 248_000)], 2000), &info(), None)
            .unwrap_err();
        assert!(e.contains("repeat every ring cycle"), "{e}");
        let other = serde_json::json!({"ietf-system:system": {"hostname": "x"}});
        let e = from_yang(&other, &info(), None).unwrap_err();
        assert!(e.contains("not ieee802-dot1q-sched instance data"), "{e}");
        let e = from_yang(&doc(&[(128, 2000), (127, 248_000)], 4000), &info(), Some("eth9")).unwrap_err();
        assert!(e.contains("no scheduled port \"eth9\"") && e.contains("to-sw1"), "{e}");
    }

    fn with_base(mut d: Value, seconds: Value, nanoseconds: Value) -> Value {
        let t = &mut d["ietf-interfaces:interfaces"]["interface"][0]["ieee802-dot1q-bridge:bridge-port"]
            ["ieee802-dot1q-sched-bridge:gate-parameter-table"];
        t["admin-base-time"] = serde_json::json!({"seconds": seconds, "nanoseconds": nanoseconds});
        d
    }

    fn with_cycle(mut d: Value, numerator: Value, denominator: Value) -> Value {
        let t = &mut d["ietf-interfaces:interfaces"]["interface"][0]["ieee802-dot1q-bridge:bridge-port"]
            ["ieee802-dot1q-sched-bridge:gate-parameter-table"];
        t["admin-cycle-time"] = serde_json::json!({"numerator": numerator, "denominator": denominator});
        d
    }

    /// Issue 29, point 9: base times beyond i128, beyond i64 ns and beyond what the station computes with are
    /// refused naming the element (they wrapped in release builds and panicked in debug ones).
    #[test]
    fn base_times_keepon_cannot_represent_are_refused() {
        let d = || doc(&[(128, 2000), (127, 248_000)], 4000);
        let refused = |seconds: Value, nanos: Value, says: &str| {
            let e = from_yang(&with_base(d(), seconds, nanos), &info(), None).unwrap_err();
            assert!(e.contains(says), "{e}");
        };
        // ⌈2¹²⁸/10⁹⌉ s: ×10⁹ wrapped to 231 788 544 ns, accepted as that base time before.
        refused(Value::from("340282366920938463463374607432"), Value::from(0), "admin-base-time");
        refused(Value::from("1".to_string() + &"0".repeat(40)), Value::from(0), "admin-base-time/seconds");
        refused(Value::from((i128::MAX / 1_000_000_000 + 1).to_string()), Value::from(0), "admin-base-time");
        refused(Value::from(u64::MAX.to_string()), Value::from(0), "not a base time keepon takes");
        refused(Value::from(u64::MAX), Value::from(0), "not a base time keepon takes");
        refused(Value::from((MAX_BASE_TIME / 1_000_000_000 + 1).to_string()), Value::from(0), "year 2116");
        refused(Value::from(-1), Value::from(0), "not a base time keepon takes");
        refused(Value::from(5), Value::from(1_000_000_000), "admin-base-time/nanoseconds");
        refused(Value::from(5), Value::from(-1), "admin-base-time/nanoseconds");
        refused(Value::from(5.5), Value::from(0), "admin-base-time/seconds: 5.5 is not an integer");
        let p = from_yang(&with_base(d(), Value::from("4611686017"), Value::from(0)), &info(), None).unwrap();
        assert_eq!(p.base_time, 4_611_686_017_000_000_000);
    }

    /// Numerators, denominators and intervals whose products or sums overflow: refused, naming the element.
    #[test]
    fn cycles_and_intervals_that_overflow_are_refused() {
        let d = || doc(&[(128, 2000), (127, 248_000)], 4000);
        for (num, den, says) in [
            (Value::from(i128::MAX.to_string()), Value::from(1), "longer than keepon takes"),
            (Value::from("1".to_string() + &"0".repeat(39)), Value::from(1), "admin-cycle-time/numerator"),
            (Value::from(u64::MAX), Value::from(1), "longer than keepon takes"),
            (Value::from(1), Value::from(i128::MAX.to_string()), "longer than keepon takes"),
            (Value::from(1_000_000_000_000u64), Value::from(1), "longer than keepon takes"),
        ] {
            let e = from_yang(&with_cycle(d(), num, den), &info(), None).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let big = doc(&[(128, u64::MAX), (127, u64::MAX), (127, u64::MAX)], 4000);
        let e = from_yang(&big, &info(), None).unwrap_err();
        assert!(e.contains("gate-control-entry 0") && e.contains("more than the admin-cycle-time"), "{e}");
        let e = from_yang(&doc(&[(128, 2000), (127, 247_999), (127, u64::MAX)], 4000), &info(), None).unwrap_err();
        assert!(e.contains("gate-control-entry 2"), "{e}");
        // A daemon that reports a cycle keepon cannot divide by.
        let odd = Info { cycle: (0, 0), ring: 0, ..info() };
        let e = from_yang(&d(), &odd, None).unwrap_err();
        assert!(e.contains("the daemon reports a cycle"), "{e}");
        let odd = Info { ring: u32::MAX, ..info() };
        let e = from_yang(&d(), &odd, None).unwrap_err();
        assert!(e.contains("the daemon reports a cycle"), "{e}");
        let odd = Info { cycle: (u64::MAX, u64::MAX - 1), ring: 4096, ..info() };
        assert!(from_yang(&d(), &odd, None).is_err());
    }

    /// A 10⁶ s list (4·10⁹ ring cycles, 5·10¹¹ slots) of one or three entries is checked in O(entries + ring)
    /// (it looped 10¹¹ times before).
    #[test]
    fn a_long_cycle_costs_what_its_entries_and_ring_cost() {
        let t = std::time::Instant::now();
        let long = |entries: &[(u32, u64)]| with_cycle(doc(entries, 1), Value::from(1_000_000), Value::from(1));
        let p = from_yang(&long(&[(127, 1_000_000_000_000_000)]), &info(), None).unwrap();
        assert_eq!(p.classes, vec![("tc7".to_string(), vec![])]);
        let p = from_yang(&long(&[(128, 1_000_000_000_000_000)]), &info(), None).unwrap();
        assert_eq!(p.classes, vec![("tc7".to_string(), (0..125).collect())]);
        // Ring slot 0 is tc7's in the first cycle, free in all the later ones.
        let e =
            from_yang(&long(&[(128, 2000), (127, 248_000), (127, 999_999_999_750_000)]), &info(), None).unwrap_err();
        assert!(e.contains("ring slot 0 differs") && e.contains("gate-control-entry 2"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
    }

    /// What `apply` reads is bounded: /dev/zero, a file over the limit, a file not UTF-8 are refused at once.
    #[test]
    fn files_larger_than_the_limit_are_not_read_to_the_end() {
        let e = read_plan(Path::new("/dev/zero"), &info(), None).unwrap_err();
        assert!(e.contains("/dev/zero is larger than 4 MiB"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_plan(&big, &info(), None).unwrap_err();
        assert!(e.contains("larger than 4 MiB"), "{e}");
        std::fs::write(&big, b"{\xff}").unwrap();
        let e = read_plan(&big, &info(), None).unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
        // A list at the limit's scale is read: 240 ring cycles of 125 entries (30 000 entries, 3 MB), tc7 in the
        // even ring slots.
        let entries: Vec<(u32, u64)> =
            (0..240 * 125).map(|s| (if s % 125 % 2 == 0 { 128 } else { 127 }, 2000)).collect();
        let list = with_cycle(doc(&entries, 1), Value::from(3), Value::from(50));
        let text = serde_json::to_string(&list).unwrap();
        assert!(text.len() > 2 << 20 && text.len() < MAX_FILE_BYTES as usize, "{} bytes", text.len());
        std::fs::write(&big, text).unwrap();
        let p = read_plan(&big, &info(), None).unwrap();
        assert_eq!(p.classes, vec![("tc7".to_string(), (0..125).step_by(2).collect())]);
    }

    /// The list's owners slot by slot, as `from_yang` did it before (one step per slot of the whole list): the
    /// reference the bounded algorithm is checked against, on lists small enough to walk.
    fn walked(entries: &[(u32, u64)], cycles: i128, info: &Info) -> Option<Vec<(String, Vec<u32>)>> {
        let (cn, cd, n) = (i128::from(info.cycle.0), i128::from(info.cycle.1), i128::from(info.ring));
        let start = |s: i128| (s * cn + cd * n - 1) / (cd * n);
        let mut bounds = Vec::new();
        let mut t = 0i128;
        for (g, len) in entries {
            bounds.push((t, *g));
            t += i128::from(*len);
        }
        if t != start(cycles * n) {
            return None;
        }
        let rt: Vec<(usize, &String)> =
            info.classes.iter().enumerate().filter(|(i, _)| !info.windows[*i].is_empty()).collect();
        let mut owner: Vec<Option<usize>> = vec![None; info.ring as usize];
        let mut i = 0;
        for s in 0..cycles * n {
            let (a, b) = (start(s), start(s + 1));
            while i + 1 < bounds.len() && bounds[i + 1].0 <= a {
                i += 1;
            }
            if i + 1 < bounds.len() && bounds[i + 1].0 < b {
                return None;
            }
            let o = owner_of(bounds[i].1 as u8, i, info, &rt).ok()?;
            let r = (s % n) as usize;
            if s >= n && owner[r] != o {
                return None;
            }
            owner[r] = o;
        }
        Some(
            rt.iter()
                .map(|(c, name)| ((*name).clone(), (0..info.ring).filter(|r| owner[*r as usize] == Some(*c)).collect()))
                .collect(),
        )
    }

    proptest::proptest! {
        /// On random lists over a ring of 5 slots of 2.5 ns (slot starts 0, 3, 5, 8, 10, …), over 1 to 4 ring
        /// cycles — a pattern of gate states over whole slots, cycled over the list (so it repeats every ring
        /// cycle or not), sometimes with one boundary moved off a slot start or the list cut short —: the bounded
        /// algorithm takes exactly the lists the slot-by-slot walk takes, with the same slots.
        #[test]
        fn the_bounded_check_agrees_with_the_slot_by_slot_walk(
            cycles in 1i128..5,
            pattern in proptest::collection::vec((proptest::sample::select(vec![1u32, 2, 3, 4, 6]), 1i128..4), 1..7),
            moved in proptest::option::weighted(0.2, 0usize..40),
            cut in proptest::bool::weighted(0.1),
        ) {
            let small = Info {
                ring: 5,
                cycle: (25, 2),
                classes: vec!["tc0".into(), "tc1".into(), "be".into()],
                windows: vec![vec![(0, 3)], vec![(3, 2)], vec![]],
                ..info()
            };
            let start = |s: i128| (s * 25 + 9) / 10;
            let mut entries: Vec<(u32, u64)> = Vec::new();
            let mut at = 0;
            for (g, k) in pattern.iter().cycle() {
                if at >= cycles * 5 {
                    break;
                }
                let next = (at + k).min(cycles * 5);
                entries.push((*g, (start(next) - start(at)) as u64));
                at = next;
            }
            if let Some(i) = moved.filter(|i| i + 1 < entries.len()) {
                entries[i].1 += 1;
                if entries[i + 1].1 > 1 {
                    entries[i + 1].1 -= 1;
                }
            }
            if cut && entries.len() > 1 {
                entries.pop();
            }
            // 1 s = 10⁹ ns: the list's cycle is cycles · 12.5 ns = cycles/(8·10⁷) s.
            let list = with_cycle(doc(&entries, 1), Value::from(cycles as u64), Value::from(80_000_000));
            let ours = from_yang(&list, &small, None).ok().map(|p| p.classes);
            proptest::prop_assert_eq!(ours, walked(&entries, cycles, &small));
        }
    }
}
