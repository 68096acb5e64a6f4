//! What the daemon needs of a station beyond what the station loop does ([`Engine`]) and PTP does
//! ([`PtpStation`]): the schedule `Info` reports, the clock's rate and alignment for `Time`, and live schedule
//! change. The slot station and the byte clock both serve.

use keepon_core::bytes::windows::Rat;
use keepon_core::bytes::ByteStation;
use keepon_core::station::Station;
use keepon_core::time::Tai;
use keepon_nic::engine::Engine;
use keepon_ptp::station::PtpStation;

use crate::api::Scheduled;

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
    /// Change the schedule at a client's request (uid `uid`): the classes named get these ring slots.
    fn change_schedule(
        &mut self,
        uid: u32,
        base_time: i64,
        classes: &[(String, Vec<u32>)],
    ) -> Result<Scheduled, String>;
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
    fn change_schedule(
        &mut self,
        uid: u32,
        base_time: i64,
        classes: &[(String, Vec<u32>)],
    ) -> Result<Scheduled, String> {
        schedule::apply(self, uid, base_time, classes)
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

/// Whole ns, rounded up (as slot windows are reported: `⌈i·δ⌉`).
fn ceil_ns(t: Rat) -> u64 {
    u64::try_from(t.ceil()).unwrap_or(u64::MAX)
}

/// Why the byte clock refuses a schedule change.
pub const BYTES_NO_CHANGE: &str = "the byte clock (link.timing = \"bytes\") does not change its windows live yet: \
     restart the daemon with the new windows";

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
        let w = ByteStation::windows(self);
        (0..w.classes())
            .map(|c| {
                let c = keepon_core::isolation::ClassId(c as u8);
                w.of_class(c).map(|(o, e)| (ceil_ns(o), ceil_ns(e) - ceil_ns(o))).collect()
            })
            .collect()
    }
    fn pending_windows(&self) -> Option<(Tai, ClassWindows)> {
        None
    }
    fn change_schedule(&mut self, uid: u32, _: i64, _: &[(String, Vec<u32>)]) -> Result<Scheduled, String> {
        schedule::permitted(uid)?;
        Err(BYTES_NO_CHANGE.into())
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
