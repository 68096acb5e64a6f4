//! The schedule both timings keep: a base time, a cycle, and each class's windows in it (a slot mask is windows of
//! whole slots: [`windows::Windows::from_slots`]), and the live change of IEEE 802.1Qbv's admin → oper lists.
//!
//! The slot station holds its windows as an ownership map of ring slots ([`crate::isolation::Ownership`]), the byte
//! clock as [`windows::Windows`]; a change of either is checked here the same way (same cycle, same classes in the
//! same roles, a time the wire has not passed) and answered with the same [`ScheduleChange`] or [`ChangeError`].

pub mod windows;

use core::fmt;

use crate::isolation::{ClassId, Ownership};
use crate::time::Tai;
use windows::Windows;

/// An accepted change ([`crate::station::Station::change_schedule`], [`crate::bytes::ByteStation::change_windows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleChange {
    /// The first schedule slot under the new map (the slot station; 0 on the byte clock).
    pub slot: u64,
    /// Its start: the network time the change takes effect (the requested time, rounded up to a slot start).
    pub time: Tai,
    /// Frames already submitted that the change left without a slot, rejected [`Reason::ScheduleChange`].
    pub rejected: u64,
}

/// Why a schedule change was refused. Nothing changes when it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeError {
    /// The new map's ring (cycle) differs from the running one's.
    Ring {
        /// Ring slots of the running map.
        running: u32,
        /// Ring slots of the new map.
        new: u32,
    },
    /// The new windows' cycle differs from the running one's (byte clock), whole ns rounded up.
    Cycle {
        /// The running cycle.
        running: i128,
        /// The new cycle.
        new: i128,
    },
    /// The classes differ: names, order, or which are best effort.
    Classes(alloc::string::String),
    /// The change time's slot is already posted to the NIC, or has passed (Qbv's `config-change-error`).
    InThePast {
        /// Requested time.
        at: Tai,
        /// The earliest time a change can take effect now.
        earliest: Tai,
    },
}

impl fmt::Display for ChangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangeError::Ring { running, new } => write!(
                f,
                "the new schedule has {new} ring slots and the running one {running}: a change of cycle time takes a \
                 restart"
            ),
            ChangeError::Cycle { running, new } => write!(
                f,
                "the new windows' cycle is {new} ns and the running one {running} ns: a change of cycle time takes a \
                 restart"
            ),
            ChangeError::Classes(why) => write!(f, "the new schedule's classes differ from the running ones: {why}"),
            ChangeError::InThePast { at, earliest } => write!(
                f,
                "base time {} ns has passed or its slot is already with the NIC: the earliest a change can take \
                 effect now is {} ns",
                at.0, earliest.0
            ),
        }
    }
}

/// The classes of a schedule: how many, their names and which are best effort.
pub trait Classes {
    /// How many classes.
    fn count(&self) -> usize;
    /// Class `c`'s name.
    fn class_name(&self, c: ClassId) -> &str;
    /// Class `c` is best effort (no window, no slot).
    fn best_effort(&self, c: ClassId) -> bool;
}

/// Both kinds of schedule answer under the same names.
macro_rules! classes_by_name {
    ($($t:ty),*) => {$(
        impl Classes for $t {
            fn count(&self) -> usize {
                self.classes()
            }
            fn class_name(&self, c: ClassId) -> &str {
                self.name(c)
            }
            fn best_effort(&self, c: ClassId) -> bool {
                self.is_best_effort(c)
            }
        }
    )*};
}

classes_by_name!(Ownership, Windows);

/// A change keeps the classes: the same number, names and order, and each real-time or best effort as it was (a
/// real-time class keeps at least one slot or window). Otherwise [`ChangeError::Classes`], naming the first that
/// differs.
pub fn same_classes(running: &impl Classes, new: &impl Classes) -> Result<(), ChangeError> {
    if new.count() != running.count() {
        return Err(ChangeError::Classes(alloc::format!("{} classes instead of {}", new.count(), running.count())));
    }
    for i in 0..running.count() {
        let c = ClassId(i as u8);
        if new.class_name(c) != running.class_name(c) {
            return Err(ChangeError::Classes(alloc::format!(
                "class {i} is {:?}, running {:?}",
                new.class_name(c),
                running.class_name(c)
            )));
        }
        if new.best_effort(c) != running.best_effort(c) {
            return Err(ChangeError::Classes(alloc::format!(
                "class {:?} would change between real time and best effort (a real-time class keeps at least one \
                 slot or window)",
                running.class_name(c)
            )));
        }
    }
    Ok(())
}

/// A list and the first time it governs: a slot station's first schedule slot, the byte clock's switch time.
#[derive(Clone, Debug)]
pub(crate) struct Switch<At, L> {
    pub(crate) at: At,
    pub(crate) list: L,
}

/// Qbv's admin list beside the oper one (which the station keeps in its configuration): the change waiting for its
/// time, and the last that took effect (with the list it replaced, to name the frames it displaced).
#[derive(Clone, Debug)]
pub(crate) struct Admin<At, L> {
    pub(crate) pending: Option<Switch<At, L>>,
    pub(crate) previous: Option<Switch<At, L>>,
}

impl<At: Copy + PartialOrd, L> Admin<At, L> {
    pub(crate) fn new() -> Self {
        Admin { pending: None, previous: None }
    }

    /// `list` governs from `at` on (a change still pending is replaced).
    pub(crate) fn set(&mut self, at: At, list: L) {
        self.pending = Some(Switch { at, list });
    }

    /// The list that governs `t`: the pending one from its time on, else `oper`.
    #[inline]
    pub(crate) fn governing<'a>(&'a self, oper: &'a L, t: At) -> &'a L {
        match &self.pending {
            Some(p) if t >= p.at => &p.list,
            _ => oper,
        }
    }

    /// Once `due` says the pending change's time is reached, its list becomes `oper` (the old one is kept as the
    /// previous). True if it did.
    pub(crate) fn promote(&mut self, oper: &mut L, due: impl FnOnce(At) -> bool) -> bool {
        if !self.pending.as_ref().is_some_and(|p| due(p.at)) {
            return false;
        }
        let Some(p) = self.pending.take() else { return false };
        let old = core::mem::replace(oper, p.list);
        self.previous = Some(Switch { at: p.at, list: old });
        true
    }

    /// The last change, pending or done, as (the list before it, the list after it, its time); `None` before any.
    pub(crate) fn last_change<'a>(&'a self, oper: &'a L) -> Option<(&'a L, &'a L, At)> {
        match (&self.pending, &self.previous) {
            (Some(p), _) => Some((oper, &p.list, p.at)),
            (None, Some(p)) => Some((&p.list, oper, p.at)),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::windows::{ClassWindows, Window, Windows};
    use super::*;
    use crate::isolation::ClassSpec;
    use crate::time::{LinkRate, Nanos, SlotGeometry};

    /// `(name, slots)` per class; no slots: best effort.
    type Spec<'a> = &'a [(&'a str, &'a [u32])];

    fn slots(classes: Spec<'_>) -> Ownership {
        let specs: alloc::vec::Vec<ClassSpec> =
            classes.iter().map(|(n, s)| ClassSpec { name: (*n).into(), slots: s.to_vec() }).collect();
        Ownership::new(8, &specs).unwrap()
    }

    /// The same classes as windows: the slot mask's, and as windows given in ns.
    fn both(classes: Spec<'_>) -> (Ownership, Windows, Windows) {
        let own = slots(classes);
        let geometry = SlotGeometry::new(LinkRate::from_mbps(1000).unwrap(), 1230).unwrap();
        let from_slots = Windows::from_slots(Tai(0), geometry, &own);
        let cw: alloc::vec::Vec<ClassWindows> = classes
            .iter()
            .map(|(n, s)| ClassWindows {
                name: (*n).into(),
                windows: s
                    .iter()
                    .map(|&i| Window { offset: Nanos(i64::from(i) * 10_000), length: Nanos(10_000) })
                    .collect(),
            })
            .collect();
        let given = Windows::new(Tai(0), Nanos(80_000), &cw, LinkRate::from_mbps(1000).unwrap()).unwrap();
        (own, from_slots, given)
    }

    /// One check of a change's classes for both timings: the same refusals, word for word, whether the schedule is
    /// a slot map, the windows of one, or windows given in ns.
    #[test]
    fn a_change_keeps_the_classes_on_both_timings() {
        let running = both(&[("tc-0", &[0]), ("tc-1", &[1]), ("be", &[])]);
        let cases: [(Spec<'_>, Option<&str>); 4] = [
            (&[("tc-0", &[2]), ("tc-1", &[3, 4]), ("be", &[])], None),
            (&[("tc-0", &[2]), ("be", &[])], Some("2 classes instead of 3")),
            (&[("tc-0", &[2]), ("tc-9", &[3]), ("be", &[])], Some("class 1 is \"tc-9\", running \"tc-1\"")),
            (&[("tc-0", &[2]), ("tc-1", &[]), ("be", &[4])], Some("class \"tc-1\" would change between real time")),
        ];
        for (new, want) in cases {
            let new = both(new);
            let results = [
                same_classes(&running.0, &new.0),
                same_classes(&running.1, &new.1),
                same_classes(&running.2, &new.2),
                same_classes(&running.1, &new.2),
            ];
            for r in results {
                match (want, r) {
                    (None, Ok(())) => {}
                    (Some(w), Err(e)) => assert!(alloc::format!("{e}").contains(w), "{e} lacks {w}"),
                    (w, r) => panic!("want {w:?}, got {r:?}"),
                }
            }
        }
    }
}
