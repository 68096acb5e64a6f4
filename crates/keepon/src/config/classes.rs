//! `[[class]]` (or `ring.slot_masks`): the classes, the ring slots each owns and, on the byte clock, the windows
//! given as time.

use keepon_core::bytes::windows::{ClassWindows, Window, Windows};
use keepon_core::isolation::{parse_mask, ClassSpec, Ownership};
use keepon_core::time::{SlotGeometry, Tai};

use super::{err, ConfigError, RawConfig, WireTiming};

/// The classes of `raw` on a ring of `n` slots: their ownership of ring slots, and their windows where given as
/// time (the byte clock; `None`: the slot masks are the windows).
pub(super) fn classes(
    raw: &RawConfig,
    n: u32,
    timing: WireTiming,
    geometry: SlotGeometry,
) -> Result<(Ownership, Option<Windows>), ConfigError> {
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
    Ok((ownership, windows))
}
