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
//! The daemon's `Info` gives what the conversion needs (slot period, ring, class names); its `Schedule` request does
//! the change ([`crate::api`]).

use std::path::Path;

use serde_json::Value;

use crate::api::{Client, Info, Scheduled};
use crate::config::Config;

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
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let is_json = path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    let plan = if is_json {
        let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        from_yang(&doc, info, port)
    } else {
        from_config(&text, info)
    };
    plan.map_err(|e| format!("{}: {e}", path.display()))
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
        Value::Number(n) => n.as_i64().map(i128::from).ok_or_else(|| format!("{at}: {n} is not an integer")),
        // RFC 7951 writes 64-bit integers as strings.
        Value::String(s) => s.parse().map_err(|_| format!("{at}: {s:?} is not an integer")),
        other => Err(format!("{at}: {other} is not an integer")),
    }
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

/// Ring slots per class from a port's gate control list (see the module doc).
fn from_yang(doc: &Value, info: &Info, port: Option<&str>) -> Result<Plan, String> {
    let table = gate_table(doc, port)?;
    let base = field(table, "admin-base-time", "gate-parameter-table")?;
    let base_time = int(field(base, "seconds", "admin-base-time")?, "admin-base-time/seconds")? * 1_000_000_000
        + int(field(base, "nanoseconds", "admin-base-time")?, "admin-base-time/nanoseconds")?;
    let base_time = i64::try_from(base_time).map_err(|_| format!("admin-base-time {base_time} ns is out of range"))?;
    let cycle = field(table, "admin-cycle-time", "gate-parameter-table")?;
    let (num, den) = (
        int(field(cycle, "numerator", "admin-cycle-time")?, "admin-cycle-time/numerator")?,
        int(field(cycle, "denominator", "admin-cycle-time")?, "admin-cycle-time/denominator")?,
    );
    if num <= 0 || den <= 0 {
        return Err(format!("admin-cycle-time {num}/{den} s is not positive"));
    }
    // The list's cycle must be m whole ring cycles: num/den s = m · (cycle_num/cycle_den) ns.
    let (cn, cd) = (i128::from(info.cycle.0), i128::from(info.cycle.1));
    let (top, bottom) = (num * 1_000_000_000 * cd, den * cn);
    if top % bottom != 0 || top / bottom == 0 {
        return Err(format!(
            "admin-cycle-time {num}/{den} s is not a whole number of the daemon's ring cycles ({} ns)",
            cn as f64 / cd as f64
        ));
    }
    let cycles = top / bottom;
    let n = i128::from(info.ring);
    // Slot s of the list starts at ⌈s·δ⌉ ns, δ = cn/(cd·n).
    let start = |s: i128| (s * cn + cd * n - 1) / (cd * n);
    let entries =
        field(field(table, "admin-control-list", "gate-parameter-table")?, "gate-control-entry", "admin-control-list")?
            .as_array()
            .ok_or("admin-control-list/gate-control-entry is not a list")?;
    // Gate states in force at each entry's start.
    let mut bounds: Vec<(i128, u8)> = Vec::with_capacity(entries.len());
    let mut t = 0i128;
    for (i, e) in entries.iter().enumerate() {
        let at = format!("gate-control-entry {i}");
        let states = int(field(e, "gate-states-value", &at)?, &at)?;
        let states = u8::try_from(states).map_err(|_| format!("{at}: gate-states-value {states} is not 0..255"))?;
        let len = int(field(e, "time-interval-value", &at)?, &at)?;
        if len <= 0 {
            return Err(format!("{at}: time-interval-value {len} is not positive"));
        }
        bounds.push((t, states));
        t += len;
    }
    if t != start(cycles * n) {
        return Err(format!("the entries last {t} ns, the admin-cycle-time {} ns", start(cycles * n)));
    }
    let rt: Vec<(usize, &String)> =
        info.classes.iter().enumerate().filter(|(i, _)| info.windows.get(*i).is_some_and(|w| !w.is_empty())).collect();
    let mut owner_of_slot: Vec<Option<usize>> = vec![None; info.ring as usize];
    let mut i = 0;
    for s in 0..cycles * n {
        let (a, b) = (start(s), start(s + 1));
        while i + 1 < bounds.len() && bounds[i + 1].0 <= a {
            i += 1;
        }
        if i + 1 < bounds.len() && bounds[i + 1].0 < b {
            return Err(format!(
                "gate-control-entry {} starts at {} ns, inside slot {s} ({a}..{b} ns): entries must change on slot \
                 boundaries",
                i + 1,
                bounds[i + 1].0
            ));
        }
        let states = bounds[i].1;
        let owner = if states.count_ones() == 1 {
            let gate = states.trailing_zeros();
            match rt.iter().find(|(_, name)| **name == format!("tc{gate}")) {
                Some((c, _)) => Some(*c),
                None if info.classes.iter().any(|c| *c == format!("tc{gate}")) => None,
                None => {
                    return Err(format!(
                    "gate-control-entry {i} opens gate {gate} alone, and the daemon has no class tc{gate} (classes: \
                         {})",
                    info.classes.join(", ")
                ))
                }
            }
        } else {
            None
        };
        let r = (s % n) as usize;
        if s >= n && owner_of_slot[r] != owner {
            return Err(format!(
                "ring slot {r} differs between ring cycles of the list: it must repeat every ring cycle"
            ));
        }
        owner_of_slot[r] = owner;
    }
    let classes = rt
        .iter()
        .map(|(c, name)| {
            let slots = (0..info.ring).filter(|r| owner_of_slot[*r as usize] == Some(*c)).collect();
            ((*name).clone(), slots)
        })
        .collect();
    Ok(Plan { base_time, classes })
}

/// Apply FILE to the daemon behind `socket`; `base_time` overrides the file's. A refusal is an error saying why.
pub fn apply(socket: &Path, file: &Path, port: Option<&str>, base_time: Option<i64>) -> Result<Scheduled, String> {
    let mut c = Client::connect(socket).map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
    let info = c.info().map_err(|e| format!("info: {e}"))?;
    let mut plan = read_plan(file, &info, port)?;
    if let Some(t) = base_time {
        plan.base_time = t;
    }
    c.change_schedule(plan.base_time, plan.classes)
        .map_err(|e| format!("schedule: {e}"))?
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
}
