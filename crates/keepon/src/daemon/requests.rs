//! Reading a connection's requests within its budget and answering what can be answered at once; `Stats` and
//! `Schedule` are answered after the poll's reads ([`Later`]), under the per-user limits of [`super::guard`].

use std::collections::HashMap;

use keepon_core::outcome::{Frame, FrameId, Reason};
use keepon_core::time::Tai;

use crate::api::{message_len, Delivery, Info, Request, Response, SyncState, TimeInfo};
use crate::config::Config;

use super::config::Limits;
use super::conn::{Conn, Usage};
use super::feed::Feed;
use super::{guard, schedule, DaemonStats, Owners};

/// What a request needs from the daemon's state besides its connection.
pub(super) struct Ctx<'a> {
    pub(super) cfg: &'a Config,
    pub(super) limits: &'a Limits,
    pub(super) names: &'a [String],
    /// Each class's windows in the cycle (for `Info`).
    pub(super) windows: &'a [Vec<(u64, u64)>],
    pub(super) info: Info,
    pub(super) time: TimeInfo,
    pub(super) now: Tai,
    pub(super) stopping: bool,
}

/// Parse and answer the complete requests buffered on one connection, while its replies are below the
/// backlog limit and `budget` lasts (one per request).
#[allow(clippy::too_many_arguments)]
pub(super) fn serve_requests(
    cid: u64,
    c: &mut Conn,
    usage: &mut HashMap<u32, Usage>,
    ctx: &Ctx,
    budget: &mut usize,
    feed: &mut Feed,
    owner: &mut Owners,
    next_frame: &mut u64,
    stats: &mut DaemonStats,
    later: &mut Later,
) {
    let mut at = 0;
    c.throttled = false;
    while *budget > 0 && c.takes_requests(ctx.limits) {
        let n = match message_len(&c.rbuf[at..]) {
            Ok(Some(n)) => n,
            Ok(None) => break,
            Err(e) => {
                stats.malformed += 1;
                stats.dropped += 1;
                c.respond(&Response::Error(format!("{e}; closing the connection")));
                c.reading = false;
                c.rbuf.clear();
                return;
            }
        };
        let req = Request::parse(&c.rbuf[at + 4..at + n]);
        // A user's rate used up: the request stays where it is (read again next poll), the connection waits.
        let rate = match &req {
            Ok(Request::Submit { .. }) => None,
            Ok(Request::Stats) => Some(guard::Rate::Expensive),
            _ => Some(guard::Rate::Control),
        };
        if rate.is_some_and(|r| !later.guard.allow(c.uid, r, ctx.now)) {
            c.throttled = true;
            break;
        }
        at += n;
        *budget -= 1;
        match req {
            Err(e) => {
                stats.malformed += 1;
                c.respond(&Response::Error(e.0));
            }
            Ok(Request::Info) => c.respond(&Response::Info(Info {
                classes: ctx.names.to_vec(),
                windows: ctx.windows.to_vec(),
                ..ctx.info.clone()
            })),
            Ok(Request::Time) => c.respond(&Response::Time(ctx.time)),
            // Answered after this poll's requests, when the metrics are rendered (once for all who asked); one
            // per connection per poll.
            Ok(Request::Stats) => {
                later.stats.push(cid);
                c.stats_waiting = true;
            }
            // Refused at once, in O(1), for users who may not change the schedule.
            Ok(Request::Schedule { .. } | Request::ScheduleWindows { .. }) if !guard::privileged(c.uid) => {
                let why = schedule::permitted(c.uid).expect_err("not privileged");
                later.guard.note(c.uid, "schedule changes refused", || why.clone(), ctx.now);
                c.respond(&Response::Scheduled(Err(why)));
            }
            // Applied to the station after this poll's requests (it is not in reach here), one per poll; the
            // connection's further requests wait until it is answered.
            Ok(Request::Schedule { base_time, classes }) => {
                let change = schedule::Change::Slots(classes);
                later.changes.push_back(schedule::Request { cid, uid: c.uid, base_time, change });
                c.change_waiting = true;
            }
            Ok(Request::ScheduleWindows { base_time, classes }) => {
                let change = schedule::Change::Windows(classes);
                later.changes.push_back(schedule::Request { cid, uid: c.uid, base_time, change });
                c.change_waiting = true;
            }
            Ok(Request::Subscribe { release_times }) => {
                // Frames already sent keep what they had; the choice holds for outcomes from now on.
                c.release_times = release_times;
                c.respond(&Response::Subscribed { release_times });
            }
            Ok(Request::Submit { tag, class, txtime, frame }) => {
                stats.frames += 1;
                let why = submit(c, usage, ctx, (&class, txtime, frame), feed, next_frame);
                if let Err(why) = why {
                    stats.count(ctx.cfg.ownership.class_named(&class), Err(why));
                    c.respond(&Response::Outcome { tag, delivery: Delivery::Rejected(why) });
                } else {
                    owner.insert(FrameId(*next_frame - 1), (cid, tag, c.uid));
                }
            }
        }
    }
    c.rbuf.drain(..at);
}

/// A `Submit`: checked against the connection's classes, the daemon's state and the limits in flight, then queued
/// for the station as frame `next_frame` (then one more; counted in flight for the connection and its user); or
/// why not.
fn submit(
    c: &mut Conn,
    usage: &mut HashMap<u32, Usage>,
    ctx: &Ctx,
    (class, txtime, frame): (&str, Option<i64>, Vec<u8>),
    feed: &mut Feed,
    next_frame: &mut u64,
) -> Result<(), Reason> {
    let used = usage.entry(c.uid).or_default();
    match ctx.cfg.ownership.class_named(class) {
        None => Err(Reason::UnknownClass),
        Some(id) if !c.allowed[usize::from(id.0)] => Err(Reason::Forbidden),
        Some(_) if ctx.stopping => Err(Reason::Shutdown),
        // Network time asked for while the EPHC is not network time: refused, never sent on a free-running clock.
        Some(id) if txtime.is_some() && !ctx.cfg.is_best_effort(id) && ctx.time.sync == SyncState::NotSynchronised => {
            Err(Reason::NotSynchronised)
        }
        Some(_) if c.in_flight >= ctx.limits.max_in_flight => Err(Reason::QueueFull),
        Some(_) if used.in_flight >= ctx.limits.max_in_flight_per_uid => Err(Reason::QueueFull),
        Some(id) => {
            let f = Frame { id: FrameId(*next_frame), class: id, txtime: txtime.map(Tai), data: frame };
            feed.push(ctx.now, f).map_err(|_| Reason::QueueFull)?;
            *next_frame += 1;
            c.in_flight += 1;
            used.in_flight += 1;
            Ok(())
        }
    }
}

/// Requests answered after a poll's reads: `Stats` (when the metrics are rendered, once for all who asked) and
/// `Schedule` (applied to the station one per poll, in the order asked); and the per-user limits and refusal
/// tallies ([`guard`]).
#[derive(Default)]
pub(super) struct Later {
    pub(super) stats: Vec<u64>,
    pub(super) changes: std::collections::VecDeque<schedule::Request>,
    pub(super) guard: guard::Guard,
}
