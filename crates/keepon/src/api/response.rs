//! Responses: written by the daemon, parsed by clients from untrusted bytes with checked lengths.

use super::*;

impl Response {
    /// Parse a response from untrusted bytes.
    pub fn parse(b: &[u8]) -> Result<Response, ProtocolError> {
        match check_header(b)? {
            K_INFO_REPLY => parse_info(b).map(Response::Info),
            K_OUTCOME => parse_outcome(b),
            K_ERROR => Ok(Response::Error(String::from_utf8_lossy(&b[2..]).into_owned())),
            K_RELEASED => {
                if b.len() != RELEASED_LEN {
                    return perr(format!("released of {} bytes, expected {RELEASED_LEN}", b.len()));
                }
                if b[2] & !3 != 0 {
                    return perr(format!("released flags {:#04x} has unknown bits", b[2]));
                }
                Ok(Response::Released {
                    tag: u64_at(b, 4),
                    released: (b[2] & 1 != 0).then(|| u64_at(b, 12) as i64),
                    stamped: b[2] & 2 != 0,
                })
            }
            K_SUBSCRIBED => match b {
                [_, _, flags] if flags & !1 == 0 => Ok(Response::Subscribed { release_times: flags & 1 != 0 }),
                _ => perr("malformed subscribed reply"),
            },
            K_STATS_REPLY => std::str::from_utf8(&b[2..])
                .map(|t| Response::Stats(t.to_owned()))
                .map_err(|_| ProtocolError("stats reply is not UTF-8".into())),
            K_TIME_REPLY => parse_time(b).map(Response::Time),
            K_SCHEDULED => {
                if b.len() < SCHEDULED_FIXED {
                    return perr(format!("scheduled reply of {} bytes, expected at least {SCHEDULED_FIXED}", b.len()));
                }
                let text = String::from_utf8_lossy(&b[SCHEDULED_FIXED..]).into_owned();
                match b[2] {
                    0 => Ok(Response::Scheduled(Ok(Scheduled { time: u64_at(b, 4) as i64, rejected: u64_at(b, 12) }))),
                    1 => Ok(Response::Scheduled(Err(text))),
                    s => perr(format!("scheduled reply: unknown status {s}")),
                }
            }
            k => perr(format!("unknown response kind {k:#04x}")),
        }
    }

    /// Encode (without the length prefix).
    pub fn emit(&self) -> Vec<u8> {
        match self {
            Response::Info(i) => {
                let mut b = vec![VERSION, K_INFO_REPLY];
                b.extend_from_slice(&i.rate_bps.to_le_bytes());
                b.extend_from_slice(&i.slot_bytes.to_le_bytes());
                b.extend_from_slice(&i.ring.to_le_bytes());
                b.extend_from_slice(&i.batch.to_le_bytes());
                b.extend_from_slice(&i.now.to_le_bytes());
                b.extend_from_slice(&i.cycle_start.to_le_bytes());
                b.extend_from_slice(&i.base_time.to_le_bytes());
                b.extend_from_slice(&i.cycle.0.to_le_bytes());
                b.extend_from_slice(&i.cycle.1.to_le_bytes());
                b.extend_from_slice(&i.host.to_le_bytes());
                for (k, c) in i.classes.iter().enumerate() {
                    // At most 255 bytes, cut at a character boundary.
                    let cut = (0..=c.len().min(255)).rev().find(|&i| c.is_char_boundary(i)).unwrap_or(0);
                    let n = &c.as_bytes()[..cut];
                    b.push(n.len() as u8);
                    b.extend_from_slice(n);
                    let w = i.windows.get(k).map_or(&[][..], Vec::as_slice);
                    let w = &w[..w.len().min(usize::from(u16::MAX))];
                    b.extend_from_slice(&(w.len() as u16).to_le_bytes());
                    for (off, len) in w {
                        b.extend_from_slice(&off.to_le_bytes());
                        b.extend_from_slice(&len.to_le_bytes());
                    }
                }
                b
            }
            Response::Outcome { tag, delivery } => {
                let mut b = vec![VERSION, K_OUTCOME, 0, 0];
                b.extend_from_slice(&tag.to_le_bytes());
                match delivery {
                    Delivery::Sent { slot, time, ring_slot, off_schedule } => {
                        b[2] = if *off_schedule { 2 } else { 0 };
                        b.extend_from_slice(&slot.to_le_bytes());
                        b.extend_from_slice(&time.to_le_bytes());
                        b.extend_from_slice(&ring_slot.to_le_bytes());
                    }
                    Delivery::Rejected(r) => {
                        b[2] = 1;
                        b[3] = r.index() as u8;
                        b.extend_from_slice(&[0u8; 20]);
                    }
                }
                b
            }
            Response::Error(text) => {
                let mut b = vec![VERSION, K_ERROR];
                b.extend_from_slice(text.as_bytes());
                b
            }
            Response::Released { tag, released, stamped } => {
                let flags = u8::from(released.is_some()) | (u8::from(*stamped) << 1);
                let mut b = vec![VERSION, K_RELEASED, flags, 0];
                b.extend_from_slice(&tag.to_le_bytes());
                b.extend_from_slice(&released.unwrap_or(0).to_le_bytes());
                b
            }
            Response::Subscribed { release_times } => vec![VERSION, K_SUBSCRIBED, u8::from(*release_times)],
            Response::Stats(t) => {
                let mut b = vec![VERSION, K_STATS_REPLY];
                b.extend_from_slice(t.as_bytes());
                b
            }
            Response::Scheduled(r) => {
                let (status, time, rejected, text) = match r {
                    Ok(s) => (0, s.time, s.rejected, ""),
                    Err(why) => (1, 0, 0, why.as_str()),
                };
                let mut b = vec![VERSION, K_SCHEDULED, status, 0];
                b.extend_from_slice(&time.to_le_bytes());
                b.extend_from_slice(&rejected.to_le_bytes());
                b.extend_from_slice(text.as_bytes());
                b
            }
            Response::Time(t) => {
                let flags = u8::from(t.offset.is_some())
                    | (u8::from(t.path_delay.is_some()) << 1)
                    | (u8::from(t.alignment.is_some()) << 2);
                let mut b = vec![VERSION, K_TIME_REPLY, t.sync as u8, t.port as u8, t.servo as u8, flags];
                let (a50, a99, amax) = t.alignment.unwrap_or((0, 0, 0));
                for v in [
                    t.ephc_now,
                    t.host_now,
                    t.offset.unwrap_or(0),
                    t.freq_ppt,
                    t.path_delay.unwrap_or(0),
                    a50,
                    a99,
                    amax,
                ] {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                b
            }
        }
    }
}

/// An `Info` reply: the fixed part, then each class's name and windows.
fn parse_info(b: &[u8]) -> Result<Info, ProtocolError> {
    if b.len() < INFO_FIXED {
        return perr("info reply too short");
    }
    let (mut classes, mut windows) = (Vec::new(), Vec::new());
    let mut at = INFO_FIXED;
    let cut = || ProtocolError("class cut short".into());
    while at < b.len() {
        let n = usize::from(b[at]);
        let name = b.get(at + 1..at + 1 + n).ok_or_else(cut)?;
        let name = std::str::from_utf8(name).map_err(|_| ProtocolError("class name is not UTF-8".into()))?;
        at += 1 + n;
        let count = b.get(at..at + 2).ok_or_else(cut)?;
        let count = usize::from(u16::from_le_bytes([count[0], count[1]]));
        at += 2;
        if b.len() < at + 16 * count {
            return Err(cut());
        }
        windows.push((0..count).map(|w| (u64_at(b, at + 16 * w), u64_at(b, at + 16 * w + 8))).collect());
        at += 16 * count;
        classes.push(name.to_owned());
    }
    let cycle = (u64_at(b, 46), u64_at(b, 54));
    if cycle.1 == 0 {
        return perr("info reply: cycle denominator 0");
    }
    Ok(Info {
        rate_bps: u64_at(b, 2),
        slot_bytes: u32_at(b, 10),
        ring: u32_at(b, 14),
        batch: u32_at(b, 18),
        now: u64_at(b, 22) as i64,
        cycle_start: u64_at(b, 30) as i64,
        base_time: u64_at(b, 38) as i64,
        cycle,
        host: u32_at(b, 62),
        classes,
        windows,
    })
}

/// An `Outcome`: sent (slot, time, ring slot, whether off its schedule) or rejected (a reason).
fn parse_outcome(b: &[u8]) -> Result<Response, ProtocolError> {
    if b.len() != 32 {
        return perr(format!("outcome of {} bytes, expected 32", b.len()));
    }
    let tag = u64_at(b, 4);
    let delivery = match b[2] {
        0 | 2 => Delivery::Sent {
            slot: u64_at(b, 12),
            time: u64_at(b, 20) as i64,
            ring_slot: u32_at(b, 28),
            off_schedule: b[2] == 2,
        },
        1 => Delivery::Rejected(
            *Reason::ALL.get(usize::from(b[3])).ok_or_else(|| ProtocolError(format!("unknown reason {}", b[3])))?,
        ),
        s => return perr(format!("unknown outcome status {s}")),
    };
    Ok(Response::Outcome { tag, delivery })
}

/// A `Time` reply: the synchronisation state, port role and servo, then the readings its flags say are there.
fn parse_time(b: &[u8]) -> Result<TimeInfo, ProtocolError> {
    if b.len() != TIME_REPLY_LEN {
        return perr(format!("time reply of {} bytes, expected {TIME_REPLY_LEN}", b.len()));
    }
    let sync = match b[2] {
        0 => SyncState::FreeRunning,
        1 => SyncState::Synchronised,
        2 => SyncState::NotSynchronised,
        s => return perr(format!("unknown sync state {s}")),
    };
    let port = match b[3] {
        0 => PortRole::None,
        1 => PortRole::Master,
        2 => PortRole::Slave,
        p => return perr(format!("unknown port role {p}")),
    };
    let servo = match b[4] {
        0 => ServoCode::Unlocked,
        1 => ServoCode::Stepping,
        2 => ServoCode::Locked,
        s => return perr(format!("unknown servo state {s}")),
    };
    let flags = b[5];
    if flags & !7 != 0 {
        return perr(format!("time reply flags {flags:#04x} has unknown bits"));
    }
    let i = |k: usize| u64_at(b, 6 + 8 * k) as i64;
    Ok(TimeInfo {
        sync,
        port,
        servo,
        ephc_now: i(0),
        host_now: i(1),
        offset: (flags & 1 != 0).then(|| i(2)),
        freq_ppt: i(3),
        path_delay: (flags & 2 != 0).then(|| i(4)),
        alignment: (flags & 4 != 0).then(|| (i(5), i(6), i(7))),
    })
}
