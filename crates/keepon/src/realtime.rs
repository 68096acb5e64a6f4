//! `[realtime]`: what the poll loop asks of the host — a `SCHED_FIFO` priority, a CPU of its own, memory that is
//! never paged out — applied by `keepon daemon` (and `keepon run` on network time, which is a daemon) as it
//! starts, and reported: when the host refuses one (no `CAP_SYS_NICE` or `CAP_IPC_LOCK`, an `RLIMIT_RTPRIO` of 0,
//! a CPU outside the allowed set), the daemon says so on its status line and in `Info`, and keeps running.
//!
//! ```toml
//! [realtime]
//! priority = 50        # SCHED_FIFO priority of the poll loop, 1–99; 0 leaves the scheduling policy alone
//! cpu = 1              # pin the poll loop to this CPU (default: not pinned)
//! lock_memory = true   # mlockall(MCL_CURRENT | MCL_FUTURE)
//! ```
//!
//! Without the section the defaults hold: priority 50, memory locked, not pinned. A poll loop that a busy host
//! delays by more than `batch·δ` underruns the link; under `SCHED_FIFO` only other real-time work can delay it.

use serde::Deserialize;

use crate::config::{Config, ConfigError};

/// `[realtime]` as written.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
struct Section {
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    cpu: Option<i64>,
    #[serde(default)]
    lock_memory: Option<bool>,
}

/// What the poll loop asks of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Realtime {
    /// `SCHED_FIFO` priority (1–99), or `None` to leave the policy as inherited.
    pub priority: Option<u8>,
    /// CPU to pin the poll loop to.
    pub cpu: Option<u32>,
    /// Lock the process's memory.
    pub lock_memory: bool,
}

/// The default `SCHED_FIFO` priority (that of `chrt -f 50`, below the kernel's threaded interrupts at 50 only
/// by tie: equal priorities run first come, first served).
pub const DEFAULT_PRIORITY: u8 = 50;

impl Default for Realtime {
    fn default() -> Self {
        Realtime { priority: Some(DEFAULT_PRIORITY), cpu: None, lock_memory: true }
    }
}

impl Realtime {
    /// Read `[realtime]` (the defaults without one); every error names its key.
    pub fn from_config(cfg: &Config) -> Result<Realtime, ConfigError> {
        let Some(table) = cfg.raw.realtime.clone() else { return Ok(Realtime::default()) };
        for (key, ok, what) in [
            ("priority", toml::Value::is_integer as fn(&toml::Value) -> bool, "a whole number from 0 to 99"),
            ("cpu", toml::Value::is_integer, "a CPU number from 0 to 1023"),
            ("lock_memory", toml::Value::is_bool, "true or false"),
        ] {
            if let Some(v) = table.get(key).filter(|v| !ok(v)) {
                return Err(ConfigError(format!("realtime.{key} = {v}: must be {what}")));
            }
        }
        let s: Section =
            table.try_into().map_err(|e: toml::de::Error| ConfigError(format!("[realtime]: {}", e.message())))?;
        let priority = match s.priority {
            None => Some(DEFAULT_PRIORITY),
            Some(0) => None,
            Some(p @ 1..=99) => Some(p as u8),
            Some(p) => {
                return Err(ConfigError(format!(
                    "realtime.priority = {p}: must be a SCHED_FIFO priority from 1 to 99, or 0 to leave the \
                     scheduling policy alone"
                )))
            }
        };
        // The kernel's CPU sets hold CPU_SETSIZE (1024) CPUs.
        let cpu = match s.cpu {
            None => None,
            Some(c @ 0..=1023) => Some(c as u32),
            Some(c) => return Err(ConfigError(format!("realtime.cpu = {c}: must be a CPU number from 0 to 1023"))),
        };
        Ok(Realtime { priority, cpu, lock_memory: s.lock_memory.unwrap_or(true) })
    }

    /// Apply to the calling thread (the poll loop) and the process (memory): what was obtained, and what not.
    pub fn apply(&self) -> Applied {
        let mut a = Applied::default();
        if let Some(p) = self.priority {
            let param = libc::sched_param { sched_priority: i32::from(p) };
            // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
                a.fifo = Some(p);
            } else {
                a.refused.push(format!("SCHED_FIFO priority {p}: {}", std::io::Error::last_os_error()));
            }
        }
        if a.fifo.is_none() {
            a.fifo = current_fifo();
        }
        if let Some(cpu) = self.cpu {
            // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays within it for cpu < CPU_SETSIZE (checked
            // when the configuration was read); pid 0 is the calling thread.
            let ok = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu as usize, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            };
            if ok {
                a.cpu = Some(cpu);
            } else {
                a.refused.push(format!("pinning to CPU {cpu}: {}", std::io::Error::last_os_error()));
            }
        }
        if self.lock_memory {
            if let Err(why) = memlock_room() {
                a.refused.push(why);
            // SAFETY: mlockall takes flags only.
            } else if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } == 0 {
                a.memory_locked = true;
            } else {
                a.refused.push(format!("locking memory: {}", std::io::Error::last_os_error()));
            }
        }
        a
    }
}

/// Locked memory the daemon may come to need (connection buffers at the default limits are about 68 MiB).
const MEMLOCK_NEEDED: u64 = 256 << 20;

/// Whether locking all present and future memory is safe: with `MCL_FUTURE`, every later allocation beyond
/// `RLIMIT_MEMLOCK` would fail, so without `CAP_IPC_LOCK` the limit must leave room for what the daemon may need.
fn memlock_room() -> Result<(), String> {
    // CAP_IPC_LOCK (bit 14 of the effective set) lifts the limit.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    if cap_eff & (1 << 14) != 0 {
        return Ok(());
    }
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is valid for writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return Err(format!("locking memory: RLIMIT_MEMLOCK: {}", std::io::Error::last_os_error()));
    }
    if lim.rlim_cur == libc::RLIM_INFINITY || lim.rlim_cur >= MEMLOCK_NEEDED {
        return Ok(());
    }
    Err(format!(
        "locking memory: no CAP_IPC_LOCK and RLIMIT_MEMLOCK is {} KiB, less than the {} MiB the daemon may need \
         (raise it, e.g. LimitMEMLOCK=infinity, or set realtime.lock_memory = false)",
        lim.rlim_cur >> 10,
        MEMLOCK_NEEDED >> 20
    ))
}

/// The calling thread's `SCHED_FIFO` priority, if it runs under that policy (inherited, e.g. from `chrt`).
fn current_fifo() -> Option<u8> {
    // SAFETY: pid 0 is the calling thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy != libc::SCHED_FIFO {
        return None;
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is valid for writes.
    (unsafe { libc::sched_getparam(0, &mut param) } == 0).then_some(param.sched_priority as u8)
}

/// What the host granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The poll loop runs `SCHED_FIFO` at this priority (asked for, or inherited).
    pub fifo: Option<u8>,
    /// Pinned to this CPU.
    pub cpu: Option<u32>,
    /// Memory is locked.
    pub memory_locked: bool,
    /// What was asked for and refused, with the reason.
    pub refused: Vec<String>,
}

impl Applied {
    /// The flags `Info` carries (see [`crate::api::Info::host`]).
    pub fn flags(&self) -> u32 {
        let mut f = 0;
        if self.fifo.is_some() {
            f |= crate::api::HOST_FIFO;
        }
        if self.memory_locked {
            f |= crate::api::HOST_MEMORY_LOCKED;
        }
        if self.cpu.is_some() {
            f |= crate::api::HOST_PINNED;
        }
        if !self.refused.is_empty() {
            f |= crate::api::HOST_REFUSED;
        }
        f
    }

    /// The status line part: `poll loop SCHED_FIFO 50, memory locked, not pinned`.
    pub fn describe(&self) -> String {
        let fifo = self
            .fifo
            .map_or("poll loop not real-time (SCHED_OTHER)".to_string(), |p| format!("poll loop SCHED_FIFO {p}"));
        let mem = if self.memory_locked { "memory locked" } else { "memory not locked" };
        let cpu = self.cpu.map_or("not pinned".to_string(), |c| format!("pinned to CPU {c}"));
        format!("{fifo}, {mem}, {cpu}")
    }

    /// The warning to print when something was refused.
    pub fn warning(&self) -> Option<String> {
        (!self.refused.is_empty()).then(|| {
            format!(
                "WARNING: the host refused {} ([realtime]; run as root or with CAP_SYS_NICE and CAP_IPC_LOCK): \
                 under load the poll loop may fall behind and underrun the link",
                self.refused.join("; ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(section: &str) -> Result<Realtime, ConfigError> {
        let text = format!(
            "[link]\nrate = \"1Gbps\"\n[ring]\nslot_bytes = 1230\nslots = 32\nbatch = 8\nslot_masks = \"0x01,0\"\n\
             {section}\n"
        );
        Realtime::from_config(&Config::parse(&text).unwrap())
    }

    #[test]
    fn defaults_and_errors_name_the_key() {
        assert_eq!(parse("").unwrap(), Realtime::default());
        assert_eq!(parse("[realtime]\npriority = 0\nlock_memory = false").unwrap().priority, None);
        let r = parse("[realtime]\npriority = 80\ncpu = 1").unwrap();
        assert_eq!((r.priority, r.cpu, r.lock_memory), (Some(80), Some(1), true));
        for (bad, key) in [
            ("priority = 100", "realtime.priority"),
            ("priority = -1", "realtime.priority"),
            ("cpu = 4096", "realtime.cpu"),
            ("lock_memory = 1", "lock_memory"),
            ("nice = 3", "nice"),
        ] {
            let e = parse(&format!("[realtime]\n{bad}")).unwrap_err().0;
            assert!(e.contains(key), "{bad}: {e}");
        }
    }

    /// Applied on a thread of its own (it changes the calling thread): whatever the host grants is reported
    /// as it is, and each refusal names what was refused.
    #[test]
    fn apply_reports_what_the_host_granted() {
        let r = Realtime { priority: Some(10), cpu: Some(0), lock_memory: false };
        let a = std::thread::spawn(move || r.apply()).join().unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!((a.fifo, a.cpu), (Some(10), Some(0)), "{a:?}");
            assert!(a.refused.is_empty(), "{a:?}");
        } else {
            assert!(a.fifo.is_some() || a.refused.iter().any(|r| r.contains("SCHED_FIFO")), "{a:?}");
        }
        assert!(a.describe().contains(if a.fifo.is_some() { "SCHED_FIFO" } else { "SCHED_OTHER" }));
        assert_eq!(a.flags() & crate::api::HOST_REFUSED != 0, !a.refused.is_empty());
    }
}
