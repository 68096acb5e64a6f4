//! Live schedule change through the daemon (`Schedule` requests, `keepon schedule apply`): who may, how a request
//! becomes the station's new ownership map, and the windows `Info` reports once it is in force.

use keepon_core::isolation::{ClassId, ClassSpec, Ownership};
use keepon_core::station::Station;
use keepon_core::time::{SlotPeriod, Tai};

use crate::api::Scheduled;

/// How far ahead of the station's clock a change's base time may be (a base time beyond it — `i64::MAX`, say —
/// would hold a pending change for ever).
pub const MAX_AHEAD: keepon_core::time::Nanos = keepon_core::time::Nanos::from_ms(24 * 3600 * 1000);

/// A `Schedule` request waiting for the poll loop (the station is not in reach while requests are read).
pub struct Request {
    /// Connection that asked.
    pub cid: u64,
    /// Its peer's uid.
    pub uid: u32,
    /// Base time (TAI ns).
    pub base_time: i64,
    /// The classes' new schedule.
    pub change: Change,
}

/// A change as a client gives it: ring slots (`Schedule`) or windows (`ScheduleWindows`) of the classes named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Classes and their ring slots.
    Slots(Vec<(String, Vec<u32>)>),
    /// Classes and their windows in the cycle, (offset, length) ns.
    Windows(Vec<(String, Vec<(u64, u64)>)>),
}

/// The ring slots windows stand for under slot period `δ` (`num/den` ns) on a ring of `ring`: each window must run
/// from one slot boundary `⌈i·δ⌉` to another (as `Info` reports a slot mask's windows); one that does not is refused,
/// named.
pub fn slots_of(
    windows: &[(String, Vec<(u64, u64)>)],
    delta: SlotPeriod,
    ring: u32,
) -> Result<Vec<(String, Vec<u32>)>, String> {
    let at = |i: u64| (u128::from(i) * u128::from(delta.num())).div_ceil(u128::from(delta.den()));
    // The slot boundary at `t` ns, if one is there: the least i with ⌈i·δ⌉ ≥ t, checked.
    let slot_at = |t: u64| -> Option<u64> {
        let i = (u128::from(t) * u128::from(delta.den()) / u128::from(delta.num())) as u64;
        (i.saturating_sub(1)..=i + 1).find(|&i| at(i) == u128::from(t))
    };
    windows
        .iter()
        .map(|(name, ws)| {
            let mut slots = Vec::new();
            for &(offset, length) in ws {
                let end = offset
                    .checked_add(length)
                    .ok_or_else(|| format!("class {name:?}: window ({offset}, {length}) ns overflows"))?;
                match (slot_at(offset), slot_at(end)) {
                    (Some(a), Some(b)) if a < b && b <= u64::from(ring) => slots.extend(a as u32..b as u32),
                    _ => {
                        return Err(format!(
                        "class {name:?}: window ({offset}, {length}) ns is not a run of whole slots of {} ns on this \
                             ring of {ring} (its edges must be slot boundaries ⌈i·δ⌉, as Info reports them)",
                        delta.num() as f64 / delta.den() as f64
                    ))
                    }
                }
            }
            Ok((name.clone(), slots))
        })
        .collect()
}

/// Only root and the daemon's own user may change the schedule: it decides every class's windows.
pub fn may_change(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// Refuse a uid that may not change the schedule ([`may_change`]), saying who may.
pub fn permitted(uid: u32) -> Result<(), String> {
    if may_change(uid) {
        Ok(())
    } else {
        Err(format!("uid {uid} may not change the schedule (root and the daemon's own user may)"))
    }
}

/// Apply a `Schedule` request from `uid`: every class named gets the ring slots given, the others keep theirs.
pub fn apply(
    station: &mut Station<Vec<u8>>,
    uid: u32,
    base_time: i64,
    classes: &[(String, Vec<u32>)],
) -> Result<Scheduled, String> {
    permitted(uid)?;
    let oper = station.ownership();
    let mut specs: Vec<ClassSpec> = (0..oper.classes())
        .map(|i| {
            let c = ClassId(i as u8);
            ClassSpec { name: oper.name(c).to_owned(), slots: oper.owned(c).to_vec() }
        })
        .collect();
    for (name, slots) in classes {
        let Some(spec) = specs.iter_mut().find(|s| &s.name == name) else {
            let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            return Err(format!("no class {name:?} in this daemon (classes: {})", known.join(", ")));
        };
        spec.slots.clone_from(slots);
    }
    let own = Ownership::new(oper.ring(), &specs).map_err(|e| e.to_string())?;
    let change = station.change_schedule(Tai(base_time), own).map_err(|e| e.to_string())?;
    Ok(Scheduled { time: change.time.0, rejected: change.rejected })
}
