//! PTP accuracy by how a station stamps its messages and which role it takes (the paper's Fig. 12), on the A.9
//! exchange model ([`crate::a9::run_between`]; simulated time).
//!
//! The station under test is master or slave; its peer stamps in hardware. Three kinds of station:
//!
//! - **hardware** (the paper's IGB, an i210): every stamp on an 8 ns PHC period, no jitter;
//! - **software** (GENET's software timestamps): TX and RX stamps taken by the host, each late by a jitter
//!   uniform in `[0, J]`;
//! - **keepon** (single clock): TX stamps exact — the slot's time is known before the frame leaves — and RX
//!   stamps in software, as GENET's.
//!
//! Per run: the mean |offset| the slave measures after the servo has settled (what a PTP slave reports, the
//! quantity of the paper's figure) and the mean |true offset| (ground truth). `J` is *chosen*: the software jitter
//! nobody here measured on the paper's hardware; [`JITTERS`] sweeps it. The dual clock is not here: its RX times
//! come from the slot count, not from stamps of this kind (`crate::dualsim`, validation/dual-clock.md).

use crate::a9::{run_between, A9Config, Stamping};
use crate::clock::ClockError;

/// The software jitter `J` of the main run, ns (the kernel stamping jitter the station tests model, U[0, 2 µs]).
pub const JITTER: f64 = 2_000.0;
/// The sweep of `J`, ns.
pub const JITTERS: [f64; 5] = [500.0, 1_000.0, 2_000.0, 5_000.0, 10_000.0];
/// The hardware clock's period, ns (an i210's PHC counts 8 ns).
pub const HARDWARE_NS: f64 = 8.0;
/// Exchanges per run.
pub const ROUNDS: u32 = 1_000;
/// Exchanges left out at the start (the servo settling).
pub const SETTLE: u32 = 50;

/// How the station under test stamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Every stamp on the PHC.
    Hardware,
    /// Every stamp by the host.
    Software,
    /// TX exact (the slot's time), RX by the host.
    Keepon,
}

impl Kind {
    /// All kinds, in the figure's order.
    pub const ALL: [Kind; 3] = [Kind::Hardware, Kind::Software, Kind::Keepon];

    /// The name in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hardware => "hardware",
            Kind::Software => "software",
            Kind::Keepon => "keepon",
        }
    }

    /// Its stamping with software jitter `j`.
    pub fn stamping(self, j: f64) -> Stamping {
        match self {
            Kind::Hardware => Stamping::uniform(HARDWARE_NS, 0.0),
            Kind::Software => Stamping::uniform(1.0, j),
            Kind::Keepon => Stamping { tx: (0.0, 0.0), rx: (1.0, j) },
        }
    }

    /// The paper's Fig. 12 values, µs: (as master, as slave).
    pub fn paper_us(self) -> (f64, f64) {
        match self {
            Kind::Hardware => (0.015, 0.015),
            Kind::Software => (0.5, 6.9),
            Kind::Keepon => (0.3, 3.7),
        }
    }
}

/// One run's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fig12Run {
    /// Mean |measured offset| after settling, ns.
    pub offset_mean: f64,
    /// Mean |true offset| after settling, ns.
    pub true_mean: f64,
}

/// Run the station of `kind` as master (`as_master`) or slave against a hardware peer, with software jitter `j`.
pub fn run(kind: Kind, as_master: bool, j: f64, seed: u64) -> Result<Fig12Run, ClockError> {
    let cfg = A9Config::paper(HARDWARE_NS, 0.0, 10, ROUNDS, seed);
    let (dut, peer) = (kind.stamping(j), Kind::Hardware.stamping(j));
    let rounds = if as_master { run_between(&cfg, dut, peer)? } else { run_between(&cfg, peer, dut)? };
    let late: Vec<_> = rounds.iter().filter(|r| r.n > SETTLE).collect();
    let n = late.len().max(1) as f64;
    Ok(Fig12Run {
        offset_mean: late.iter().map(|r| (r.true_offset + r.offset_error).abs()).sum::<f64>() / n,
        true_mean: late.iter().map(|r| r.true_offset.abs()).sum::<f64>() / n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the mechanisms predict, whatever `J`: hardware is best; exact TX stamps make keepon better than
    /// software in both roles; and the seed matters (the result is stochastic).
    #[test]
    fn exact_tx_stamps_put_keepon_between_hardware_and_software() {
        for j in [1_000.0, 5_000.0] {
            for as_master in [true, false] {
                let r = |k| run(k, as_master, j, 3).unwrap();
                let (h, s, k) = (r(Kind::Hardware), r(Kind::Software), r(Kind::Keepon));
                assert!(h.offset_mean < k.offset_mean && k.offset_mean < s.offset_mean, "J {j}: {h:?} {k:?} {s:?}");
                assert!(h.true_mean < k.true_mean && k.true_mean < s.true_mean, "J {j}: {h:?} {k:?} {s:?}");
            }
        }
        assert_ne!(run(Kind::Keepon, false, JITTER, 1).unwrap(), run(Kind::Keepon, false, JITTER, 2).unwrap());
    }
}
