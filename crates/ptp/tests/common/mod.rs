//! What the two-station PTP tests share: judging a locked pair and reading a one-step Sync.

pub mod pair;

use keepon_core::time::Tai;
use keepon_ptp::node::{PtpNode, Role};
use keepon_ptp::servo::{ServoState, ServoStatus};

/// The first node is master, the second a steering slave whose servo is locked, and both judge themselves
/// synchronised (the judgement the daemon gates scheduled frames on); the slave's status.
pub fn locked_pair(master: &PtpNode, slave: &PtpNode, what: &str) -> ServoStatus {
    assert_eq!(master.role(), Role::Master, "{what}: the priority-10 station is master");
    assert_eq!(slave.role(), Role::Slave, "{what}: the other is a steering slave");
    let st = slave.port().servo_status();
    assert_eq!(st.state, ServoState::Locked, "{what}: {st:?}");
    assert!(master.synchronised() && slave.synchronised(), "{what}: judged synchronised: {st:?}");
    st
}

/// Mean and largest |x| of true errors (ns), at least `min` of them.
pub fn mean_max(errs: &[i64], min: usize, what: &str) -> (f64, i64) {
    assert!(errs.len() > min, "{what}: frames judged: {}", errs.len());
    let max = errs.iter().map(|e| e.abs()).max().unwrap_or(0);
    (errs.iter().sum::<i64>() as f64 / errs.len() as f64, max)
}

/// A one-step Sync's originTimestamp, after checking that twoStepFlag is clear.
pub fn one_step_origin(msg: &[u8]) -> Tai {
    assert_eq!(msg[6] & 0x02, 0, "twoStepFlag cleared");
    let secs = u64::from_be_bytes([0, 0, msg[34], msg[35], msg[36], msg[37], msg[38], msg[39]]);
    let ns = u32::from_be_bytes([msg[40], msg[41], msg[42], msg[43]]);
    Tai(secs as i64 * 1_000_000_000 + i64::from(ns))
}
