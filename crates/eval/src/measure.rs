//! Deliver a station model's frames through a [`Wire`] and measure them at the receiver.

use crate::model::TxRecord;
use crate::realism::Wire;
use crate::stats::Jitter;

/// What the receiver saw of one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measured {
    /// Frames that left on time.
    pub sent: u64,
    /// Frames that left, but after their schedule could be kept.
    pub late: u64,
    /// Frames that never left (rejected, e.g. too late to be placed or released, with the reason in the CSV).
    pub lost: u64,
    /// Inter-arrival statistics at the receiver.
    pub rx: Jitter,
    /// Inter-arrival statistics of the true PHY times (no receiver quantisation).
    pub tx: Jitter,
}

/// Deliver `recs` through `wire` (in the order they leave) and measure them. One CSV row per frame:
/// `key,seq,txtime_ns,outcome,tx_true_ns,rx_ns` (`key` = the caller's leading columns, already joined).
pub fn deliver(
    recs: &[TxRecord],
    wire: &mut Wire,
    key: &str,
    csv: &mut dyn std::io::Write,
) -> Result<Measured, String> {
    let mut order: Vec<usize> = (0..recs.len()).filter(|&i| recs[i].wire.is_some()).collect();
    order.sort_by(|&a, &b| recs[a].wire.partial_cmp(&recs[b].wire).unwrap_or(std::cmp::Ordering::Equal));
    let mut arrivals = vec![None; recs.len()];
    for i in order {
        if let Some(t) = recs[i].wire {
            arrivals[i] = Some(wire.deliver(t));
        }
    }
    let mut m = Measured::default();
    let (mut rx, mut tx) = (Vec::new(), Vec::new());
    for (r, a) in recs.iter().zip(&arrivals) {
        match (r.outcome.as_str(), a) {
            ("sent", Some(_)) => m.sent += 1,
            (_, Some(_)) => m.late += 1,
            (_, None) => m.lost += 1,
        }
        if let Some(a) = a {
            rx.push((r.seq, a.rx as f64));
            tx.push((r.seq, a.tx_true));
        }
        let (t, x) = a.map_or((String::new(), String::new()), |a| (format!("{:.3}", a.tx_true), a.rx.to_string()));
        writeln!(csv, "{key},{},{:.0},{},{t},{x}", r.seq, r.txtime, r.outcome).map_err(|e| e.to_string())?;
    }
    m.rx = Jitter::of(&rx);
    m.tx = Jitter::of(&tx);
    Ok(m)
}
