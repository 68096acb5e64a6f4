//! Room for synchronisation in the schedule (`[ptp] class`): PTP's messages go out in its class's owned slots or
//! windows only, so a class that carries fewer frames a second than PTP sends at its configured intervals would
//! starve synchronisation — a ptp4l peer behind it reports missing messages and (gPTP) drops asCapable. The
//! configuration is refused instead, naming the class and both rates.
//!
//! ```text
//!   needs (frames/s, r(x) = 2^−x):
//!     as master (role master, or auto)   Sync r(log_sync) + Follow_Up r(log_sync) (two-step)
//!                                        + Announce r(log_announce) (not automotive) + Delay_Resp r(log_delay_req) (E2E)
//!     as slave  (role slave, or auto)    Delay_Req r(log_delay_req) (E2E)
//!     role auto: the larger of the two (a port is one or the other at a time)
//!     P2P, any role                      Pdelay_Req + the peer's answered (Pdelay_Resp, Pdelay_Resp_Follow_Up):
//!                                        3·r(log_pdelay_req) (the peer assumed at the same interval)
//!   has (frames/s): slots — owned ring slots per ring cycle (N·δ);
//!                   bytes — Σ over the class's windows of ⌊window / (longest PTP frame on the wire)⌋ per cycle
//! ```
//!
//! The Delay_Resp and Pdelay answers assume one peer (the first hop: a bridge or a keepon station); a master with
//! several E2E slaves on one link answers each.

use keepon_core::bytes::windows::Rat;
use keepon_core::time::WIRE_OVERHEAD_BYTES;
use keepon_ptp::engine::DelayMechanism;
use keepon_ptp::gptp::Profile;

use crate::config::{Config, ConfigError, WireTiming};
use crate::ptpconf::{PtpConfig, Role};

/// Frames a second of `2^−log` a second.
fn rate(log: i8) -> f64 {
    (-f64::from(log)).exp2()
}

/// PTP's frames a second at `p`'s intervals (see the module doc), and what they are, for the message.
pub fn needs(p: &PtpConfig) -> (f64, String) {
    let (mut master, mut slave, mut what_m, mut what_s) = (0.0, 0.0, Vec::new(), Vec::new());
    let sync = rate(p.log_sync);
    master += sync;
    what_m.push(format!("Sync {sync}/s"));
    if !p.one_step {
        master += sync;
        what_m.push(format!("Follow_Up {sync}/s"));
    }
    if p.profile != Profile::Automotive {
        let a = rate(p.log_announce);
        master += a;
        what_m.push(format!("Announce {a}/s"));
    }
    let mut common = 0.0;
    let mut what_c = Vec::new();
    match p.delay {
        DelayMechanism::E2E { log_interval } => {
            let d = rate(log_interval);
            master += d;
            what_m.push(format!("Delay_Resp {d}/s"));
            slave += d;
            what_s.push(format!("Delay_Req {d}/s"));
        }
        DelayMechanism::P2P { log_interval } => {
            let d = rate(log_interval);
            common += 3.0 * d;
            what_c.push(format!("Pdelay_Req and the peer's Pdelay_Resp + Pdelay_Resp_Follow_Up {}/s", 3.0 * d));
        }
    }
    let (role, what) = match p.role {
        Role::Master => (master, what_m),
        Role::Slave => (slave, what_s),
        Role::Auto if master >= slave => (master, what_m),
        Role::Auto => (slave, what_s),
    };
    let all: Vec<String> = what.into_iter().chain(what_c).collect();
    (role + common, all.join(", "))
}

/// Frames a second class `p.class` can carry in `cfg`'s schedule (see the module doc).
pub fn has(cfg: &Config, p: &PtpConfig) -> f64 {
    match cfg.timing {
        WireTiming::Slots => {
            let owned = cfg.ownership.owned(p.class).len() as f64;
            let cycle_ns = cfg.geometry.period().floor_mul(u64::from(cfg.ownership.ring())) as f64;
            owned * 1e9 / cycle_ns
        }
        WireTiming::Bytes => {
            let windows = crate::run::byte_config(cfg).windows;
            let frame = longest_frame(cfg);
            let per_cycle: i128 = windows
                .of_class(p.class)
                .map(|(open, close)| {
                    // ⌊(close − open) / frame⌋, exactly.
                    let (num, den) = (close.num * open.den - open.num * close.den, close.den * open.den);
                    (num * frame.den).div_euclid(den * frame.num)
                })
                .sum();
            let cycle = windows.cycle();
            per_cycle as f64 * 1e9 * cycle.den as f64 / cycle.num as f64
        }
    }
}

/// Refuse `p` where its class carries fewer frames a second than PTP needs (`class`: its name).
pub fn check(cfg: &Config, p: &PtpConfig, class: &str) -> Result<(), ConfigError> {
    let (need, what) = needs(p);
    let room = has(cfg, p);
    if room + 1e-9 < need {
        return Err(ConfigError(format!(
            "ptp.class = \"{class}\": its {} carry {room:.1} frames/s, PTP needs {need:.1} at its intervals ({what}): \
             give the class more {}, or lengthen the intervals (ptp.log_sync_interval, …)",
            if cfg.timing == WireTiming::Bytes { "windows" } else { "ring slots" },
            if cfg.timing == WireTiming::Bytes { "window time" } else { "slots" },
        )));
    }
    Ok(())
}

/// What a running daemon keeps for PTP when its schedule changes (a `Schedule` or `ScheduleWindows` request):
/// a change that names PTP's class must leave it the room [`check`] asks of the configuration.
#[derive(Clone, Debug)]
pub struct Keep {
    class: String,
    need: f64,
    what: String,
}

impl Keep {
    /// For `p` in `cfg`.
    pub fn new(cfg: &Config, p: &PtpConfig) -> Keep {
        let (need, what) = needs(p);
        Keep { class: cfg.ownership.name(p.class).to_owned(), need, what }
    }

    /// Refuse `change` where it leaves PTP's class fewer frames a second than PTP needs (the cycle stays the
    /// running one: a change keeps it).
    pub(crate) fn check(&self, cfg: &Config, change: &crate::daemon::schedule::Change) -> Result<(), String> {
        use crate::daemon::schedule::Change;
        let room = match change {
            Change::Slots(classes) => {
                let Some((_, slots)) = classes.iter().find(|(n, _)| *n == self.class) else { return Ok(()) };
                slots.len() as f64 * 1e9 / cfg.geometry.period().floor_mul(u64::from(cfg.ownership.ring())) as f64
            }
            Change::Windows(classes) => {
                let Some((_, windows)) = classes.iter().find(|(n, _)| *n == self.class) else { return Ok(()) };
                let (unit, cycle) = match cfg.timing {
                    // A window of slots is whole slots ([`crate::daemon::schedule::slots_of`]).
                    WireTiming::Slots => {
                        let d = cfg.geometry.period();
                        let n = u64::from(cfg.ownership.ring());
                        (Rat { num: i128::from(d.num()), den: i128::from(d.den()) }, d.floor_mul(n) as f64)
                    }
                    WireTiming::Bytes => {
                        let c = crate::run::byte_config(cfg).windows.cycle();
                        (longest_frame(cfg), c.num as f64 / c.den as f64)
                    }
                };
                // ⌊len / unit⌋ each, rounded to the nearest whole unit for slot windows (their ends are ⌈i·δ⌉).
                let whole: i128 = windows
                    .iter()
                    .map(|&(_, len)| {
                        let len = i128::from(len) * unit.den;
                        if cfg.timing == WireTiming::Slots {
                            (2 * len + unit.num) / (2 * unit.num)
                        } else {
                            len / unit.num
                        }
                    })
                    .sum();
                whole as f64 * 1e9 / cycle
            }
        };
        if room + 1e-9 < self.need {
            return Err(format!(
                "class {:?} carries PTP (ptp.class): this change leaves it {room:.1} frames/s, PTP needs {:.1} at \
                 its intervals ({})",
                self.class, self.need, self.what
            ));
        }
        Ok(())
    }
}

/// PTP's longest frame on the wire, ns (exact).
pub(crate) fn longest_frame(cfg: &Config) -> Rat {
    let b = cfg.geometry.rate().byte_time();
    let wire = i128::from(crate::ptpconf::PTP_LONGEST_FRAME + WIRE_OVERHEAD_BYTES);
    Rat { num: i128::from(b.num()) * wire, den: i128::from(b.den()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 Gb/s, 1230-byte slots (10 µs), a ring of `slots` with the PTP class owning `owned` of them.
    fn config(slots: u32, owned: &str, ptp: &str) -> Result<Option<PtpConfig>, ConfigError> {
        let text = format!(
            "[link]\nrate = \"1Gbps\"\n[ring]\nslot_bytes = 1230\nslots = {slots}\nbatch = 8\n\
             [[class]]\nname = \"sync\"\nslots = [{owned}]\n[[class]]\nname = \"be\"\n[ptp]\nclass = \"sync\"\n{ptp}"
        );
        PtpConfig::from_config(&Config::parse(&text)?)
    }

    /// What PTP sends at its intervals, per role and profile.
    #[test]
    fn needs_follow_the_intervals_and_the_role() {
        let p = |ptp: &str| config(32, "0", ptp).unwrap().unwrap();
        // Default profile, role auto, E2E: the master's side is the larger — Sync 1 + Follow_Up 1 + Announce 0.5 +
        // Delay_Resp 1.
        let (n, what) = needs(&p(""));
        assert_eq!(n, 3.5, "{what}");
        assert!(what.contains("Sync 1/s") && what.contains("Delay_Resp 1/s"), "{what}");
        assert_eq!(needs(&p("role = \"slave\"\n")).0, 1.0);
        assert_eq!(needs(&p("role = \"master\"\nlog_sync_interval = -4\none_step = true\n")).0, 16.0 + 0.5 + 1.0);
        // gPTP: P2P both ways (3 × 1/s) on top of the master's Sync 8 + Follow_Up 8 + Announce 1.
        let (n, what) = needs(&p("profile = \"gptp\"\n"));
        assert_eq!(n, 8.0 + 8.0 + 1.0 + 3.0, "{what}");
        assert!(what.contains("Pdelay_Req"), "{what}");
        // Automotive: no Announce.
        assert_eq!(needs(&p("profile = \"automotive\"\nrole = \"master\"\n")).0, 8.0 + 8.0 + 3.0);
    }

    /// A class with fewer frames a second than PTP needs is refused, naming it and both rates; with enough room, or
    /// longer intervals, the same schedule is accepted.
    #[test]
    fn a_class_without_room_for_sync_is_refused_naming_it() {
        // 4096 slots of 10 µs, one owned: 24.4 frames/s.
        assert!(config(4096, "0", "profile = \"gptp\"\n").is_ok(), "20 frames/s fit in 24.4");
        let e = config(4096, "0", "role = \"master\"\nlog_sync_interval = -4\n").unwrap_err().0;
        assert!(e.starts_with("ptp.class = \"sync\": its ring slots carry 24.4 frames/s, PTP needs 33.5"), "{e}");
        assert!(e.contains("Sync 16/s") && e.contains("Follow_Up 16/s"), "{e}");
        // Two owned slots carry 48.8 frames/s: room again.
        assert!(config(4096, "0, 2048", "role = \"master\"\nlog_sync_interval = -4\n").is_ok());
        assert!(config(4096, "0", "role = \"master\"\nlog_sync_interval = -3\n").is_ok());
    }

    /// On the byte clock the room is the frames that fit whole in the class's windows, per cycle.
    #[test]
    fn byte_clock_windows_are_counted_in_whole_frames() {
        let cfg = |window: &str, ptp: &str| {
            let text = format!(
                "[link]\nrate = \"1Gbps\"\ntiming = \"bytes\"\n[ring]\nslot_bytes = 1230\nslots = 32\nbatch = 8\n\
                 [schedule]\ncycle_time = \"1s\"\n\
                 [[class]]\nname = \"sync\"\nwindows = [[\"0ns\", \"{window}\"]]\n\
                 [[class]]\nname = \"be\"\n[ptp]\nclass = \"sync\"\n{ptp}"
            );
            PtpConfig::from_config(&Config::parse(&text)?)
        };
        // PTP's longest frame is 130 bytes on the wire, 1 040 ns at 1 Gb/s: 19 fit in 20 µs, 20 need 20.8 µs.
        let e = cfg("20us", "profile = \"gptp\"\n").unwrap_err().0;
        assert!(e.starts_with("ptp.class = \"sync\": its windows carry 19.0 frames/s, PTP needs 20.0"), "{e}");
        assert!(cfg("20800ns", "profile = \"gptp\"\n").is_ok());
        // A live change of the class's windows is held to the same room; one of another class is not looked at.
        let text = "[link]\nrate = \"1Gbps\"\ntiming = \"bytes\"\n[ring]\nslot_bytes = 1230\nslots = 32\nbatch = 8\n\
                    [schedule]\ncycle_time = \"1s\"\n[[class]]\nname = \"sync\"\nwindows = [[\"0ns\", \"30us\"]]\n\
                    [[class]]\nname = \"be\"\n[ptp]\nclass = \"sync\"\nprofile = \"gptp\"\n";
        let c = Config::parse(text).unwrap();
        let keep = Keep::new(&c, &PtpConfig::from_config(&c).unwrap().unwrap());
        use crate::daemon::schedule::Change;
        let change = |name: &str, len: u64| Change::Windows(vec![(name.to_owned(), vec![(0, len)])]);
        let e = keep.check(&c, &change("sync", 20_000)).unwrap_err();
        assert!(e.contains("leaves it 19.0 frames/s, PTP needs 20.0"), "{e}");
        assert!(keep.check(&c, &change("sync", 20_800)).is_ok());
        assert!(keep.check(&c, &change("be", 1)).is_ok());
    }
}
