//! The host's TAI clock, and a simulated NIC kept in step with it (for the daemon and talker without a real
//! interface).

use keepon_core::ring::SlotView;
use keepon_core::time::{Nanos, Tai};
use keepon_nic::sim::SimNic;
use keepon_nic::{Nic, NicError, NicObservation, Timing, WireEvent};

/// `CLOCK_TAI` now. keepon's EPHC runs on TAI, like `SO_TXTIME`/ETF; if the kernel's TAI offset is unset (0),
/// this equals `CLOCK_REALTIME`.
pub fn host_tai() -> Tai {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_TAI exists on every Linux since 3.10.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_TAI, &mut ts) };
    if rc != 0 {
        return Tai(0);
    }
    Tai(ts.tv_sec * 1_000_000_000 + ts.tv_nsec)
}

/// The simulated NIC, with its virtual host clock held to the wall clock: `wait` sleeps until the wall clock
/// reaches the virtual time, and a host that fell behind jumps forward. Slot timing stays simulated (exact);
/// only the pace is real, so applications can submit frames by `CLOCK_TAI`.
pub struct WallClockSim {
    inner: SimNic,
}

impl WallClockSim {
    /// Wrap a simulator whose `t0` is a little ahead of `host_tai()`.
    pub fn new(inner: SimNic) -> WallClockSim {
        WallClockSim { inner }
    }
}

impl Nic for WallClockSim {
    fn describe(&self) -> String {
        format!("{} (paced by the wall clock)", self.inner.describe())
    }
    fn timing(&self) -> Timing {
        self.inner.timing()
    }
    fn observe(&mut self) -> Result<NicObservation, NicError> {
        self.inner.observe()
    }
    fn post<'a>(&mut self, slots: &mut dyn Iterator<Item = SlotView<'a>>) -> Result<(), NicError> {
        self.inner.post(slots)
    }
    fn drain_wire(&mut self, out: &mut Vec<WireEvent>) {
        self.inner.drain_wire(out)
    }
    fn wait(&mut self, period: Nanos) {
        self.inner.wait(period);
        let wall = host_tai();
        let ahead = self.inner.now() - wall;
        if ahead.0 > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(ahead.0 as u64));
        } else {
            self.inner.advance_to(wall);
        }
    }
    fn now(&self) -> Tai {
        self.inner.now()
    }
    fn post_latency(&self) -> Nanos {
        self.inner.post_latency()
    }
    fn unfinished(&self) -> u64 {
        self.inner.unfinished()
    }
}
