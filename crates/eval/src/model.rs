//! What every station model produces, and the best-effort background they share.

use crate::dist::Draw;

/// One real-time frame's fate in a station model, on the transmitter's own timescale.
#[derive(Clone, Debug, PartialEq)]
pub struct TxRecord {
    /// Instance number of the flow.
    pub seq: u64,
    /// Scheduled transmission time, ns since the run's origin.
    pub txtime: f64,
    /// When the MAC started the frame on the transmitter's oscillator, or `None` if it never left.
    pub wire: Option<f64>,
    /// `sent`, `late` (left, but after its schedule could be kept), or the rejection reason.
    pub outcome: String,
}

/// The periodic real-time stream of a microbenchmark.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stream {
    /// Period, ns.
    pub period: i64,
    /// How long before its txtime the application hands a frame over, ns.
    pub advance: i64,
    /// L2 frame size including FCS, bytes.
    pub frame_bytes: u32,
    /// Frames.
    pub count: u64,
}

/// Best-effort traffic sharing the transmitter's port.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Background {
    /// Fraction of the line rate the best-effort traffic uses (0 = idle).
    pub load: f64,
    /// L2 size of its frames, bytes.
    pub frame_bytes: u32,
}

impl Background {
    /// No background traffic.
    pub const IDLE: Background = Background { load: 0.0, frame_bytes: 1230 };
    /// The "busy" background of the evaluation: best effort at half the line rate in 1230-byte frames
    /// (an assumption: the paper does not give its busy load).
    pub const BUSY: Background = Background { load: 0.5, frame_bytes: 1230 };

    /// Wire time of one background frame at 1 Gb/s (preamble, SFD and inter-frame gap included), ns.
    pub fn frame_ns(&self) -> f64 {
        f64::from(self.frame_bytes + 20) * 8.0
    }

    /// How long a frame that becomes ready at a random instant waits for a background frame already on the
    /// wire (Ethernet does not preempt; real-time traffic has strict priority over *queued* best effort, so
    /// only the frame in flight blocks). For a stationary wire busy a fraction `load` of the time with
    /// fixed-length frames, an instant falls inside a frame with probability `load`, and the frame's residual
    /// is then uniform over its length (renewal theory). Used by the baseline models; keepon's real station
    /// runs real background frames through its ring instead.
    pub fn blocking(&self, draw: &mut Draw) -> f64 {
        if draw.chance(self.load) {
            draw.uniform(0.0, self.frame_ns())
        } else {
            0.0
        }
    }
}
