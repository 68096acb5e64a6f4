//! Requests: parsed from untrusted bytes with checked lengths, and written by clients.

use super::*;

/// A `Schedule` or `ScheduleWindows` request's base time and classes, each entry `width` bytes read by `entry`.
#[allow(clippy::type_complexity)]
fn schedule_classes<T>(
    b: &[u8],
    width: usize,
    entry: impl Fn(&[u8]) -> T,
) -> Result<(i64, Vec<(String, Vec<T>)>), ProtocolError> {
    if b.len() < 10 {
        return Err(ProtocolError(format!("schedule of {} bytes is shorter than its 10-byte header", b.len())));
    }
    let base_time = u64_at(b, 2) as i64;
    let mut classes = Vec::new();
    let mut at = 10;
    let cut = || ProtocolError("schedule: class cut short".into());
    while at < b.len() {
        let n = usize::from(b[at]);
        let name = b.get(at + 1..at + 1 + n).ok_or_else(cut)?;
        let name = std::str::from_utf8(name).map_err(|_| ProtocolError("schedule: class name is not UTF-8".into()))?;
        at += 1 + n;
        let count = b.get(at..at + 2).ok_or_else(cut)?;
        let count = usize::from(u16::from_le_bytes([count[0], count[1]]));
        at += 2;
        let entries = b.get(at..at + width * count).ok_or_else(cut)?;
        at += width * count;
        classes.push((name.to_owned(), entries.chunks(width).map(&entry).collect()));
    }
    Ok((base_time, classes))
}

impl Request {
    /// Parse a request from untrusted bytes.
    pub fn parse(b: &[u8]) -> Result<Request, ProtocolError> {
        match check_header(b)? {
            K_INFO => Ok(Request::Info),
            K_TIME => Ok(Request::Time),
            K_STATS => Ok(Request::Stats),
            K_SUBSCRIBE => match b {
                [_, _, flags] if flags & !1 == 0 => Ok(Request::Subscribe { release_times: flags & 1 != 0 }),
                [_, _, flags] => perr(format!("subscribe flags {flags:#04x} has unknown bits")),
                _ => perr(format!("subscribe of {} bytes, expected 3", b.len())),
            },
            K_SUBMIT => {
                if b.len() < SUBMIT_HEADER {
                    return perr(format!(
                        "submit of {} bytes is shorter than its {SUBMIT_HEADER}-byte header",
                        b.len()
                    ));
                }
                let flags = b[2];
                if flags & !1 != 0 {
                    return perr(format!("submit flags {flags:#04x} has unknown bits"));
                }
                let class_len = usize::from(b[3]);
                let tag = u64_at(b, 4);
                let txtime = u64_at(b, 12) as i64;
                let end = SUBMIT_HEADER + class_len;
                if b.len() < end {
                    return perr(format!("submit {tag}: class name runs past the message"));
                }
                let class = std::str::from_utf8(&b[SUBMIT_HEADER..end])
                    .map_err(|_| ProtocolError(format!("submit {tag}: class name is not UTF-8")))?
                    .to_string();
                Ok(Request::Submit { tag, class, txtime: (flags & 1 != 0).then_some(txtime), frame: b[end..].to_vec() })
            }
            K_SCHEDULE => {
                let (base_time, classes) = schedule_classes(b, 2, |c| u32::from(u16::from_le_bytes([c[0], c[1]])))?;
                Ok(Request::Schedule { base_time, classes })
            }
            K_SCHEDULE_WINDOWS => {
                let (base_time, classes) = schedule_classes(b, 16, |c| (u64_at(c, 0), u64_at(c, 8)))?;
                Ok(Request::ScheduleWindows { base_time, classes })
            }
            k => perr(format!("unknown request kind {k}")),
        }
    }

    /// Encode (without the length prefix).
    pub fn emit(&self) -> Vec<u8> {
        match self {
            Request::Info => vec![VERSION, K_INFO],
            Request::Time => vec![VERSION, K_TIME],
            Request::Subscribe { release_times } => vec![VERSION, K_SUBSCRIBE, u8::from(*release_times)],
            Request::Stats => vec![VERSION, K_STATS],
            Request::Schedule { base_time, classes } => {
                let mut b = vec![VERSION, K_SCHEDULE];
                b.extend_from_slice(&base_time.to_le_bytes());
                for (name, slots) in classes {
                    let cut = (0..=name.len().min(255)).rev().find(|&i| name.is_char_boundary(i)).unwrap_or(0);
                    b.push(cut as u8);
                    b.extend_from_slice(&name.as_bytes()[..cut]);
                    let slots = &slots[..slots.len().min(usize::from(u16::MAX))];
                    b.extend_from_slice(&(slots.len() as u16).to_le_bytes());
                    for s in slots {
                        b.extend_from_slice(&(u16::try_from(*s).unwrap_or(u16::MAX)).to_le_bytes());
                    }
                }
                b
            }
            Request::ScheduleWindows { base_time, classes } => {
                let mut b = vec![VERSION, K_SCHEDULE_WINDOWS];
                b.extend_from_slice(&base_time.to_le_bytes());
                for (name, windows) in classes {
                    let cut = (0..=name.len().min(255)).rev().find(|&i| name.is_char_boundary(i)).unwrap_or(0);
                    b.push(cut as u8);
                    b.extend_from_slice(&name.as_bytes()[..cut]);
                    let windows = &windows[..windows.len().min(usize::from(u16::MAX))];
                    b.extend_from_slice(&(windows.len() as u16).to_le_bytes());
                    for (offset, length) in windows {
                        b.extend_from_slice(&offset.to_le_bytes());
                        b.extend_from_slice(&length.to_le_bytes());
                    }
                }
                b
            }
            Request::Submit { tag, class, txtime, frame } => {
                let name = &class.as_bytes()[..class.len().min(255)];
                let mut b = Vec::with_capacity(SUBMIT_HEADER + name.len() + frame.len());
                b.extend_from_slice(&[VERSION, K_SUBMIT, u8::from(txtime.is_some()), name.len() as u8]);
                b.extend_from_slice(&tag.to_le_bytes());
                b.extend_from_slice(&txtime.unwrap_or(0).to_le_bytes());
                b.extend_from_slice(name);
                b.extend_from_slice(frame);
                b
            }
        }
    }
}
