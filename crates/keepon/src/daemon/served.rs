//! What the daemon needs of a station beyond the face both timings share ([`StationFace`]): a live schedule change as a
//! client asks for it (ring slots or windows, by class name, checked against the asking user), and the alignment
//! line of the status report. The slot station and the byte clock both serve.

use keepon_core::bytes::windows::{Rat, Window, Windows};
use keepon_core::bytes::ByteStation;
use keepon_core::face::StationFace;
use keepon_core::isolation::ClassId;
use keepon_core::station::Station;
use keepon_core::time::{Nanos, Tai};

use crate::api::Scheduled;

use super::schedule::Change;
use super::{schedule, sync};

/// Each class's windows in the cycle, (offset, length) in whole ns, by class index (as `Info` reports them).
pub type ClassWindows = Vec<Vec<(u64, u64)>>;

/// A station the daemon can serve.
pub trait Served: StationFace {
    /// Apply a live schedule change for `uid` from `base_time` on.
    fn change_schedule(&mut self, uid: u32, base_time: i64, change: &Change) -> Result<Scheduled, String>;
    /// How far the wire kept to the schedule, for the status line.
    fn grid_line(&self) -> String;
}

impl Served for Station<Vec<u8>> {
    fn change_schedule(&mut self, uid: u32, base_time: i64, change: &Change) -> Result<Scheduled, String> {
        match change {
            Change::Slots(classes) => schedule::apply(self, uid, base_time, classes),
            Change::Windows(windows) => {
                schedule::permitted(uid)?;
                let slots = schedule::slots_of(windows, self.config().geometry.period(), self.ownership().ring())?;
                schedule::apply(self, uid, base_time, &slots)
            }
        }
    }
    fn grid_line(&self) -> String {
        sync::grid_line(self)
    }
}

/// Each class's windows as `Info` reports them: (offset, length) in whole ns, each edge rounded up (a slot mask's
/// run of slots `i..i + m` is `⌈i·δ⌉` to `⌈(i + m)·δ⌉`).
pub fn class_windows(w: &Windows) -> ClassWindows {
    (0..w.classes())
        .map(|c| w.of_class(ClassId(c as u8)).map(|(o, e)| (ceil_ns(o), ceil_ns(e) - ceil_ns(o))).collect())
        .collect()
}

fn ceil_ns(t: Rat) -> u64 {
    u64::try_from(t.ceil()).unwrap_or(u64::MAX)
}

/// The schedule's cycle as `Info` reports it: `num/den` ns.
pub fn cycle_of(c: Rat) -> (u64, u64) {
    (u64::try_from(c.num).unwrap_or(u64::MAX), u64::try_from(c.den).unwrap_or(1))
}

pub const BYTES_NO_SLOTS: &str = "the byte clock (link.timing = \"bytes\") keeps no ring slots: give the change as \
     windows (ScheduleWindows; `keepon schedule apply` sends a byte-clock config's windows, or a gate list's with \
     --windows)";

impl Served for ByteStation<Vec<u8>> {
    fn change_schedule(&mut self, uid: u32, base_time: i64, change: &Change) -> Result<Scheduled, String> {
        schedule::permitted(uid)?;
        let Change::Windows(named) = change else { return Err(BYTES_NO_SLOTS.into()) };
        let running = ByteStation::windows(self);
        let cycle = running.cycle();
        let cycle = Nanos(i64::try_from(cycle.floor()).ok().filter(|c| Rat::ns(i128::from(*c)) == cycle).ok_or(
            "the running cycle is not whole ns: its windows come from a slot mask; restart with byte-clock windows",
        )?);
        // Every class keeps its windows unless named.
        let mut classes: Vec<keepon_core::bytes::windows::ClassWindows> = (0..running.classes())
            .map(|c| {
                let c = ClassId(c as u8);
                let windows = running
                    .of_class(c)
                    .map(|(o, e)| Window { offset: Nanos(o.floor() as i64), length: Nanos((e - o).floor() as i64) })
                    .collect();
                keepon_core::bytes::windows::ClassWindows { name: running.name(c).to_owned(), windows }
            })
            .collect();
        for (name, ws) in named {
            let Some(class) = classes.iter_mut().find(|c| &c.name == name) else {
                let known: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
                return Err(format!("no class {name:?} in this daemon (classes: {})", known.join(", ")));
            };
            class.windows = ws
                .iter()
                .map(|&(o, l)| {
                    let ns = |x: u64| {
                        i64::try_from(x).map_err(|_| format!("class {name:?}: window ({o}, {l}) ns is out of range"))
                    };
                    Ok(Window { offset: Nanos(ns(o)?), length: Nanos(ns(l)?) })
                })
                .collect::<Result<_, String>>()?;
        }
        let rate = self.config().rate;
        let windows = Windows::new(running.base_time(), cycle, &classes, rate).map_err(|e| e.to_string())?;
        let change = self.change_windows(Tai(base_time), windows).map_err(|e| e.to_string())?;
        Ok(Scheduled { time: change.time.0, rejected: change.rejected })
    }
    /// Sent real-time frames' |wire start − txtime| (the byte clock keeps no grid: each frame is its own).
    fn grid_line(&self) -> String {
        match sync::quantiles(ByteStation::alignment(self)) {
            Some((p50, p99, max)) => format!(
                "byte clock |frame − txtime| p50 {p50} ns, p99 {p99} ns, max {max} ns over {} frames",
                ByteStation::alignment(self).slots
            ),
            None => "byte clock (no real-time frame sent yet)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use keepon_core::bytes::windows::Windows;
    use keepon_core::isolation::{ClassSpec, Ownership};
    use keepon_core::time::{LinkRate, SlotGeometry, Tai};

    fn reported(gbps: u64, slot: u32, ring: u32, owned: &[u32]) -> Vec<(u64, u64)> {
        let geometry = SlotGeometry::new(LinkRate::from_bps(gbps * 1_000_000_000).unwrap(), slot).unwrap();
        let own = Ownership::new(ring, &[ClassSpec { name: "tc-0".into(), slots: owned.to_vec() }]).unwrap();
        super::class_windows(&Windows::from_slots(Tai(0), geometry, &own)).remove(0)
    }

    /// A slot mask's windows as `Info` reports them: runs of owned ring slots, at whole ns rounded up from `i·δ` —
    /// exact for whole-ns slots, and at 10 Gb/s with 64-byte slots (δ = 67.2 ns) the boundaries 0, 67.2, 134.4, …
    /// become 0, 68, 135, ….
    #[test]
    fn a_slot_masks_windows_are_runs_of_owned_slots_rounded_up() {
        // 1 Gb/s, 1 230-byte slots: δ = 10 µs.
        assert_eq!(reported(1, 1230, 10, &[5, 0, 1, 2, 9]), vec![(0, 30_000), (50_000, 10_000), (90_000, 10_000)]);
        assert_eq!(reported(1, 1230, 10, &[]), vec![]);
        assert_eq!(reported(10, 64, 8, &[1, 2]), vec![(68, 134)]);
    }
}
