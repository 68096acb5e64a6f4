//! Periodic test flows: the application side of `keepon run` and `keepon talk`.
//!
//! Instance `l` of a flow is scheduled at `epoch + offset + l·period` (or, for planner schedules with
//! per-instance offsets, `epoch + offsets[l mod M] + ⌊l/M⌋·repeat`) and handed to the station `lead` earlier.
//! Each frame carries a [`TestHeader`] (flow, sequence number, txtime) so a listener can match it, and, for a flow
//! with `rtag`, an IEEE 802.1CB R-TAG numbered on network time ([`FlowSpec::rtag_seq`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use keepon_core::frer::rtag::{self, Rtag, RTAG_LEN};
use keepon_core::isolation::ClassId;
use keepon_core::outcome::{Frame, FrameId};
use keepon_core::testframe::TestHeader;
use keepon_core::time::{Nanos, Tai};

use crate::driver::Source;

/// When a flow's instances are scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// `offset + l·period` after the epoch.
    Periodic {
        /// Instance 0's offset from the epoch.
        offset: Nanos,
        /// Period.
        period: Nanos,
    },
    /// `offsets[l mod M] + ⌊l/M⌋·repeat` after the epoch.
    Listed {
        /// Per-instance offsets within one repetition.
        offsets: Vec<Nanos>,
        /// Repetition length.
        repeat: Nanos,
    },
    /// Best effort: submitted every `period` from `offset`, no txtime.
    BestEffort {
        /// First submission's offset from the epoch.
        offset: Nanos,
        /// Interval between submissions.
        period: Nanos,
    },
}

/// One test flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Flow number (index in the configuration).
    pub flow: u16,
    /// Class.
    pub class: ClassId,
    /// Schedule.
    pub pattern: Pattern,
    /// L2 frame length including FCS.
    pub frame_bytes: u32,
    /// Instances.
    pub count: u64,
    /// Submitted this long before the txtime.
    pub lead: Nanos,
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// Carry an IEEE 802.1CB R-TAG whose sequence number is [`FlowSpec::rtag_seq`] (`[[flow]] rtag`).
    pub rtag: bool,
}

impl FlowSpec {
    /// The scheduled time of instance `l` (for best effort: its submission time).
    pub fn time_of(&self, epoch: Tai, l: u64) -> Tai {
        match &self.pattern {
            Pattern::Periodic { offset, period } | Pattern::BestEffort { offset, period } => {
                epoch + *offset + Nanos(period.0 * l as i64)
            }
            Pattern::Listed { offsets, repeat } => {
                let m = offsets.len().max(1) as u64;
                epoch + offsets[(l % m) as usize] + Nanos(repeat.0 * (l / m) as i64)
            }
        }
    }

    /// The R-TAG sequence number of instance `l`: the instance's number on network time (instances of this
    /// pattern counted from TAI 0, however the epoch falls), mod 2¹⁶. Epochs are hyperperiod starts of the
    /// schedule, so two stations running the same flow put the same number on the instance due at the same
    /// network time, whenever each was started: their copies can be eliminated by a listener.
    pub fn rtag_seq(&self, epoch: Tai, l: u64) -> u16 {
        let (start, per_repeat, repeat) = match &self.pattern {
            Pattern::Periodic { offset, period } | Pattern::BestEffort { offset, period } => {
                (i128::from(epoch.0) + i128::from(offset.0), 1, period.0)
            }
            Pattern::Listed { offsets, repeat } => (i128::from(epoch.0), offsets.len() as i128, repeat.0),
        };
        let n = start.div_euclid(i128::from(repeat.max(1))) * per_repeat + i128::from(l);
        keepon_core::frer::generation::sequence_of(n.rem_euclid(1 << 16) as u64)
    }

    /// True for best-effort flows.
    pub fn is_best_effort(&self) -> bool {
        matches!(self.pattern, Pattern::BestEffort { .. })
    }
}

/// Frame id of instance `seq` of `flow`.
pub fn frame_id(flow: u16, seq: u64) -> FrameId {
    FrameId((u64::from(flow) << 48) | (seq & ((1 << 48) - 1)))
}

/// Flow and sequence number of a frame id.
pub fn split_id(id: FrameId) -> (u16, u64) {
    ((id.0 >> 48) as u16, id.0 & ((1 << 48) - 1))
}

/// Build the bytes (without FCS) of one test frame: `frame_bytes − 4` long (at least the header), with an R-TAG
/// of sequence number `rtag` after the MAC addresses if given — in place of padding, so the frame keeps its length
/// where it has [`RTAG_LEN`] bytes of padding to give.
pub fn test_frame(spec: &FlowSpec, seq: u64, txtime: Option<Tai>, rtag: Option<u16>) -> Vec<u8> {
    let len = (spec.frame_bytes.saturating_sub(4) as usize).max(TestHeader::buffer_len());
    let untagged = if rtag.is_some() { len.saturating_sub(RTAG_LEN).max(TestHeader::buffer_len()) } else { len };
    let mut data = vec![0u8; untagged];
    TestHeader { dst: spec.dst, src: spec.src, flow: spec.flow, seq, txtime: txtime.map_or(0, |t| t.0) }
        .emit(&mut data[..TestHeader::buffer_len()]);
    match rtag.map(|s| rtag::insert(&data, Rtag { seq: s })) {
        Some(Ok(tagged)) => tagged,
        // An untagged test frame always has room for the tag after its MAC addresses.
        Some(Err(_)) | None => data,
    }
}

/// All instances of a set of flows, in submission order.
pub struct FlowSource {
    flows: Vec<FlowSpec>,
    epoch: Tai,
    next: Vec<u64>,
    /// (submission time, flow index)
    heap: BinaryHeap<Reverse<(Tai, usize)>>,
}

impl FlowSource {
    /// Flows scheduled relative to `epoch`.
    pub fn new(flows: Vec<FlowSpec>, epoch: Tai) -> FlowSource {
        let mut s = FlowSource { next: vec![0; flows.len()], flows, epoch, heap: BinaryHeap::new() };
        for i in 0..s.flows.len() {
            s.push_next(i);
        }
        s
    }

    fn submit_time(&self, i: usize, l: u64) -> Tai {
        let f = &self.flows[i];
        let t = f.time_of(self.epoch, l);
        if f.is_best_effort() {
            t
        } else {
            t - f.lead
        }
    }

    fn push_next(&mut self, i: usize) {
        let l = self.next[i];
        if l < self.flows[i].count {
            self.heap.push(Reverse((self.submit_time(i, l), i)));
        }
    }

    /// The flows.
    pub fn flows(&self) -> &[FlowSpec] {
        &self.flows
    }

    /// The epoch.
    pub fn epoch(&self) -> Tai {
        self.epoch
    }
}

impl Source for FlowSource {
    fn next_due(&self) -> Option<Tai> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        let Reverse((_, i)) = self.heap.pop()?;
        let seq = self.next[i];
        self.next[i] += 1;
        self.push_next(i);
        let spec = &self.flows[i];
        let txtime = (!spec.is_best_effort()).then(|| spec.time_of(self.epoch, seq));
        let rtag = spec.rtag.then(|| spec.rtag_seq(self.epoch, seq));
        let data = test_frame(spec, seq, txtime, rtag);
        Some(Frame { id: frame_id(spec.flow, seq), class: spec.class, txtime, data })
    }
}

/// Frames given up front, each with its submission time, handed in in that order (tests, experiments).
pub struct Listed {
    frames: Vec<(Tai, Frame<Vec<u8>>)>,
    next: usize,
}

impl Listed {
    /// `frames` as (submission time, frame), sorted here by time (then id).
    pub fn new(mut frames: Vec<(Tai, Frame<Vec<u8>>)>) -> Listed {
        frames.sort_by_key(|(t, f)| (*t, f.id));
        Listed { frames, next: 0 }
    }
}

impl Source for Listed {
    fn next_due(&self) -> Option<Tai> {
        self.frames.get(self.next).map(|(t, _)| *t)
    }
    fn take(&mut self) -> Option<Frame<Vec<u8>>> {
        let f = self.frames.get(self.next).map(|(_, f)| f.clone());
        self.next += 1;
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keepon_core::frer::rtag::Rtag;

    fn spec(pattern: Pattern) -> FlowSpec {
        FlowSpec {
            flow: 3,
            class: ClassId(0),
            pattern,
            frame_bytes: 64,
            count: 10,
            lead: Nanos(0),
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            rtag: true,
        }
    }

    /// Two stations whose epochs differ by whole periods number the instance due at the same network time alike;
    /// the tag takes the place of padding, so the frame keeps its length.
    #[test]
    fn rtag_numbers_instances_on_network_time() {
        let periodic = spec(Pattern::Periodic { offset: Nanos(250), period: Nanos::from_us(1_000) });
        let listed =
            spec(Pattern::Listed { offsets: vec![Nanos(0), Nanos::from_us(300)], repeat: Nanos::from_us(1_000) });
        for f in [periodic, listed] {
            let (early, late) = (Tai(5_000_000_000), Tai(5_000_000_000 + 70_000_000_000));
            // The instance the later station sends first is due when the earlier one sends its 70 000th (or its
            // 140 000th for two instances a repeat).
            let m = if matches!(f.pattern, Pattern::Listed { .. }) { 140_000 } else { 70_000 };
            assert_eq!(f.time_of(early, m), f.time_of(late, 0));
            assert_eq!(f.rtag_seq(early, m), f.rtag_seq(late, 0));
            assert_eq!(f.rtag_seq(late, 1), f.rtag_seq(late, 0).wrapping_add(1));
            let frame = test_frame(&f, 0, Some(f.time_of(late, 0)), Some(f.rtag_seq(late, 0)));
            assert_eq!(frame.len(), 60);
            let (tag, inner) = keepon_core::frer::rtag::strip(&frame).unwrap();
            assert_eq!(tag, Rtag { seq: f.rtag_seq(late, 0) });
            assert_eq!(TestHeader::parse(&inner).unwrap().flow, 3);
        }
        let mut src = FlowSource::new(vec![spec(Pattern::Periodic { offset: Nanos(0), period: Nanos(1_000) })], Tai(0));
        let seqs: Vec<u16> = (0..3).map(|_| Rtag::parse(&src.take().unwrap().data).unwrap().0.seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
    }
}
