//! What every station model shares on the simulated wire: its transmit oscillator, the PHY's serialisation
//! jitter, the cable, and the receiver's clock and timestamp quantisation.
//!
//! Station models (keepon on the simulated NIC, the LaunchTime and stock-driver models) say when, **on their
//! own oscillator**, a frame's first bit left the MAC. [`Wire::deliver`] turns that into a true time (the
//! reference timescale) and into the receiver's timestamp. All times are `f64` nanoseconds since the run's
//! origin, so sub-nanosecond effects survive (runs stay below 10¹³ ns, where an `f64` still resolves 2 ps).
//!
//! Sources of the defaults ([`RealismSpec::default`]):
//! - **Oscillator frequency offset**: IEEE 802.3 allows ±100 ppm for 1000BASE-T; the crystals of real boards
//!   sit within a few tens of ppm. The defaults (+12 ppm transmitter, −2.5 ppm receiver) are two such values,
//!   chosen, not measured; inter-arrival jitter under 8 ns quantisation depends on the *relative* offset
//!   modulo one quantum (see `Wire`), which the report states.
//! - **Wander**: white frequency noise with an Allan deviation of 1·10⁻⁹ at 1 s (an ordinary XO; assumption),
//!   i.e. a phase random walk of `adev·√(Δt·1 s)` — about 30 ps over 1 ms.
//! - **PHY serialisation jitter**: Gaussian, σ = 0.2 ns (assumption of the order IEEE 802.3 clause 40 allows a
//!   1000BASE-T transmitter, about 1.4 ns peak to peak).
//! - **Receiver**: an Intel i210 stamps arrivals with 8 ns resolution (the paper §6.1; i210 datasheet). Its
//!   own free-running clock has an offset and ppm like any oscillator; a timestamp is its clock floored to a
//!   multiple of 8 ns.
//! - **Cable**: 2 m at 5 ns/m, constant (it shifts every arrival alike).

use crate::dist::Draw;

/// One oscillator's deviation from the reference timescale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OscillatorSpec {
    /// Phase offset at the origin, ns.
    pub offset_ns: f64,
    /// Frequency offset, parts per million (positive: runs fast).
    pub ppm: f64,
    /// Allan deviation at 1 s of its white frequency noise (dimensionless); 0 = no wander.
    pub adev_1s: f64,
}

/// An oscillator mapping its input timescale to its output (a transmitter: own time → true time; a receiver:
/// true time → its clock reading).
pub struct Oscillator {
    spec: OscillatorSpec,
    draw: Draw,
    last: Option<f64>,
    wander: f64,
}

impl Oscillator {
    /// An oscillator with its own stream of draws.
    pub fn new(spec: OscillatorSpec, draw: Draw) -> Oscillator {
        Oscillator { spec, draw, last: None, wander: 0.0 }
    }

    /// The output time at input time `t`. Calls must come with non-decreasing `t` (wander is a random walk
    /// along the input); an earlier `t` reuses the current wander.
    pub fn map(&mut self, t: f64) -> f64 {
        let dt = self.last.map_or(0.0, |l| t - l);
        if dt > 0.0 && self.spec.adev_1s > 0.0 {
            self.wander += self.draw.normal(0.0, self.spec.adev_1s * (dt * 1e9).sqrt());
        }
        if dt >= 0.0 {
            self.last = Some(t);
        }
        self.spec.offset_ns + t * (1.0 + self.spec.ppm * 1e-6) + self.wander
    }

    /// The deterministic part of [`Oscillator::map`] inverted: the input time at which the output reads `out`
    /// (ignoring wander, which is picoseconds over the spans it is used for).
    pub fn inverse(&self, out: f64) -> f64 {
        (out - self.spec.offset_ns - self.wander) / (1.0 + self.spec.ppm * 1e-6)
    }
}

/// The realism shared by every station model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RealismSpec {
    /// Each transmitter's oscillator (the same crystal spec for every station model).
    pub tx: OscillatorSpec,
    /// PHY serialisation jitter, standard deviation in ns.
    pub phy_jitter_sd: f64,
    /// Cable delay, ns.
    pub propagation: f64,
    /// The receiver's clock.
    pub rx: OscillatorSpec,
    /// Receiver timestamp resolution, ns.
    pub rx_quantum: f64,
}

impl Default for RealismSpec {
    fn default() -> Self {
        RealismSpec {
            tx: OscillatorSpec { offset_ns: 1_234.5, ppm: 12.0, adev_1s: 1e-9 },
            phy_jitter_sd: 0.2,
            propagation: 10.0,
            rx: OscillatorSpec { offset_ns: -777.25, ppm: -2.5, adev_1s: 1e-9 },
            rx_quantum: 8.0,
        }
    }
}

impl RealismSpec {
    /// No realism at all: exact clocks, no jitter, 1 ns "quantum" (for tests that isolate a model).
    pub fn ideal() -> RealismSpec {
        let exact = OscillatorSpec { offset_ns: 0.0, ppm: 0.0, adev_1s: 0.0 };
        RealismSpec { tx: exact, phy_jitter_sd: 0.0, propagation: 0.0, rx: exact, rx_quantum: 1.0 }
    }
}

/// What the receiver saw of one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    /// True time the first bit left the transmitter's PHY, ns since the origin.
    pub tx_true: f64,
    /// The receiver's timestamp (its clock, floored to its quantum), ns.
    pub rx: i64,
}

/// One transmitter's link to the shared receiver model.
pub struct Wire {
    spec: RealismSpec,
    tx: Oscillator,
    rx: Oscillator,
    phy: Draw,
}

impl Wire {
    /// A wire whose random streams are `(seed, stream_base + 0..3)`.
    pub fn new(spec: RealismSpec, seed: u64, stream_base: u64) -> Wire {
        Wire {
            spec,
            tx: Oscillator::new(spec.tx, Draw::new(seed, stream_base)),
            rx: Oscillator::new(spec.rx, Draw::new(seed, stream_base + 1)),
            phy: Draw::new(seed, stream_base + 2),
        }
    }

    /// The transmitter's oscillator (a station model that schedules against true time — a PTP-synchronised
    /// PHC — needs it to find its own clock's ticks).
    pub fn tx_oscillator(&self) -> &Oscillator {
        &self.tx
    }

    /// The transmitter's own time at which its clock reads true time `t` (ignoring wander).
    pub fn local_of_true(&self, t: f64) -> f64 {
        self.tx.inverse(t)
    }

    /// A frame whose first bit the transmitter's MAC started at `tx_local` on its own oscillator.
    /// Calls must come in non-decreasing `tx_local`.
    pub fn deliver(&mut self, tx_local: f64) -> Arrival {
        let tx_true = self.tx.map(tx_local) + self.phy.normal(0.0, self.spec.phy_jitter_sd);
        let rx_clock = self.rx.map(tx_true + self.spec.propagation);
        let q = self.spec.rx_quantum.max(1e-9);
        Arrival { tx_true, rx: ((rx_clock / q).floor() * q) as i64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_timestamps_are_quantised_and_follow_the_relative_frequency() {
        let mut w = Wire::new(RealismSpec::default(), 1, 0);
        let a: Vec<Arrival> = (0..2_000).map(|k| w.deliver(f64::from(k) * 1e6)).collect();
        assert!(a.iter().all(|x| x.rx % 8 == 0), "8 ns quantum");
        // Over 2 s the receiver sees the transmitter's 1 ms period stretched by (1 + 12e-6)(1 − 2.5e-6).
        let span = (a[1999].rx - a[0].rx) as f64;
        let want = 1999.0 * 1e6 * (1.0 + 12e-6) * (1.0 - 2.5e-6);
        assert!((span - want).abs() < 20.0, "{span} vs {want}");
        // Inter-arrivals take the two quantised values around the stretched period (plus rare PHY noise).
        let ia: Vec<i64> = a.windows(2).map(|p| p[1].rx - p[0].rx).collect();
        assert!(ia.iter().all(|d| (d - 1_000_009).abs() <= 8), "{:?}", &ia[..10]);
    }

    #[test]
    fn ideal_realism_is_exact() {
        let mut w = Wire::new(RealismSpec::ideal(), 1, 0);
        for k in 0..100 {
            let t = f64::from(k) * 1e6 + 0.25;
            let a = w.deliver(t);
            assert_eq!(a.tx_true, t);
            assert_eq!(a.rx, t.floor() as i64);
        }
    }
}
