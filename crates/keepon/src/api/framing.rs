//! Framing: the `u32` little-endian length prefix, with the limits of requests and replies.

use super::{perr, u32_at, ProtocolError, MAX_MESSAGE, MAX_REPLY};

/// Append one length-prefixed message to `out`.
pub fn frame_message(msg: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    out.extend_from_slice(msg);
}

/// Length, prefix included, of the complete request at the front of `buf`: `Ok(None)` while it is
/// incomplete, `Err` if its length prefix is beyond [`MAX_MESSAGE`].
pub fn message_len(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    length_within(buf, MAX_MESSAGE)
}

/// Length, prefix included, of the complete reply at the front of `buf` ([`MAX_REPLY`] is its limit).
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    length_within(buf, MAX_REPLY)
}

fn length_within(buf: &[u8], limit: usize) -> Result<Option<usize>, ProtocolError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32_at(buf, 0) as usize;
    if len > limit {
        return perr(format!("message length {len} exceeds {limit}"));
    }
    Ok((buf.len() - 4 >= len).then_some(4 + len))
}

/// Split complete replies off the front of `buf`. `Err` if a length prefix is beyond [`MAX_REPLY`].
pub fn split_messages(buf: &mut Vec<u8>) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(n) = reply_len(&buf[at..])? {
        out.push(buf[at + 4..at + n].to_vec());
        at += n;
    }
    buf.drain(..at);
    Ok(out)
}
