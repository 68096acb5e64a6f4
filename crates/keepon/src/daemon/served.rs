//! What the daemon needs of a station beyond what the station loop does ([`Engine`]) and PTP does
//! ([`PtpStation`]): the schedule `Info` reports, the clock's rate and alignment for `Time`, and live schedule
//! change. The slot station and the byte clock both serve.

use keepon_core::bytes::windows::{Rat, Window, Windows};
use keepon_core::bytes::ByteStation;
use keepon_core::isolation::ClassId;
use keepon_core::station::Station;
use keepon_core::time::Nanos;
use keepon_core::time::Tai;
use keepon_nic::engine::Engine;
use keepon_ptp::station::PtpStation;

use crate::api::Scheduled;

use super::schedule::Change;
use super::{schedule, sync};

/// Each class's windows in the cycle, (offset, length) in whole ns, by class index (as `Info` reports them).
pub type ClassWindows = Vec<Vec<(u64, u64)>>;

/// A station the daemon can serve.
pub trait Served: Engine + PtpStation {
    /// The cycle time, `num / den` ns exactly.
    fn cycle(&self) -> (u64, u64);
    /// The base time: a cycle starts there.
    fn base_time(&self) -> Tai;
    /// The first cycle start at or after `t` (whole ns, rounded up), `None` beyond the clock's range.
    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai>;
    /// The windows in force.
    fn windows(&self) -> ClassWindows;
    /// A schedule change not yet in force: when it takes effect and its windows.
    fn pending_windows(&self) -> Option<(Tai, ClassWindows)>;
    /// Change the schedule at a client's request (uid `uid`): the classes named get these ring slots or windows.
    fn change_schedule(&mut self, uid: u32, base_time: i64, change: &Change) -> Result<Scheduled, String>;
    /// The EPHC's rate correction, ppt.
    fn rate_ppt(&self) -> i64;
    /// How far the wire kept to the schedule (median, p99, max of |slot start − schedule time|, ns).
    fn alignment(&self) -> Option<(i64, i64, i64)>;
    /// The same for the status line, in words.
    fn grid_line(&self) -> String;
}

impl Served for Station<Vec<u8>> {
    fn cycle(&self) -> (u64, u64) {
        let c = self.cycle_time();
        (c.num(), c.den())
    }
    fn base_time(&self) -> Tai {
        Station::base_time(self)
    }
    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai> {
        Station::cycle_start_at_or_after(self, t)
    }
    fn windows(&self) -> ClassWindows {
        schedule::windows(self.ownership(), self.config().geometry.period())
    }
    fn pending_windows(&self) -> Option<(Tai, ClassWindows)> {
        let delta = self.config().geometry.period();
        self.pending_change().map(|(t, own)| (t, schedule::windows(own, delta)))
    }
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
    fn rate_ppt(&self) -> i64 {
        self.ephc().rate_ppt()
    }
    fn alignment(&self) -> Option<(i64, i64, i64)> {
        sync::alignment_of(self)
    }
    fn grid_line(&self) -> String {
        sync::grid_line(self)
    }
}

/// Each class's windows in whole ns (as `Info` reports them).
fn class_windows(w: &Windows) -> ClassWindows {
    (0..w.classes())
        .map(|c| w.of_class(ClassId(c as u8)).map(|(o, e)| (ceil_ns(o), ceil_ns(e) - ceil_ns(o))).collect())
        .collect()
}

/// Whole ns, rounded up (as slot windows are reported: `⌈i·δ⌉`).
fn ceil_ns(t: Rat) -> u64 {
    u64::try_from(t.ceil()).unwrap_or(u64::MAX)
}

/// Why the byte clock refuses a change given as ring slots.
pub const BYTES_NO_SLOTS: &str = "the byte clock (link.timing = \"bytes\") keeps no ring slots: give the change as \
     windows (ScheduleWindows; `keepon schedule apply` sends a byte-clock config's windows, or a gate list's with \
     --windows)";

impl Served for ByteStation<Vec<u8>> {
    fn cycle(&self) -> (u64, u64) {
        let c = ByteStation::windows(self).cycle();
        (u64::try_from(c.num).unwrap_or(u64::MAX), u64::try_from(c.den).unwrap_or(1))
    }
    fn base_time(&self) -> Tai {
        ByteStation::windows(self).base_time()
    }
    fn cycle_start_at_or_after(&self, t: Tai) -> Option<Tai> {
        i64::try_from(ByteStation::windows(self).cycle_start_at_or_after(t).ceil()).ok().map(Tai)
    }
    fn windows(&self) -> ClassWindows {
        class_windows(ByteStation::windows(self))
    }
    fn pending_windows(&self) -> Option<(Tai, ClassWindows)> {
        self.pending_change().map(|(t, w)| (t, class_windows(w)))
    }
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
    fn rate_ppt(&self) -> i64 {
        self.ephc().rate_ppt()
    }
    /// (Each real-time frame's own deviation is in its outcome: the byte clock keeps no grid.)
    fn alignment(&self) -> Option<(i64, i64, i64)> {
        None
    }
    fn grid_line(&self) -> String {
        "byte clock (each frame's deviation is in its outcome)".into()
    }
}
