//! `[sim]`: the simulated NIC and host (`run.backend = "sim"`), and `link.max_frame`, which the simulator carries.

use keepon_core::time::{Nanos, SlotGeometry, Tai};
use keepon_nic::sim::{HostModel, SimConfig};

use super::{err, in_range, ConfigError, Dur, RawConfig, MAX_HOST_DELAY, MAX_T0};

/// The simulator's settings from `raw` (its `max_frame`: `link.max_frame`, checked against the slot size).
pub(super) fn sim(raw: &RawConfig, geometry: SlotGeometry) -> Result<SimConfig, ConfigError> {
    let s = &raw.sim;
    let d = |v: Option<Dur>, default: Nanos| v.map_or(default, |d| d.0);
    let slack = s.wake_slack.unwrap_or(0.0);
    if !(0.0..=10.0).contains(&slack) {
        return err(format!("sim.wake_slack = {slack} must be within 0..=10"));
    }
    let t0 = Tai(s.t0.unwrap_or(1_700_000_000_000_000_000));
    if !(0..=MAX_T0).contains(&t0.0) {
        return err(format!("sim.t0 = {} must be within 0..={MAX_T0} (TAI ns)", t0.0));
    }
    let mut sim = SimConfig::new(geometry, t0);
    sim.seed = s.seed.unwrap_or(1);
    sim.host = HostModel {
        poll_overhead: d(s.poll_overhead, Nanos(500)),
        per_slot: d(s.poll_per_slot, Nanos(5)),
        wake_latency: d(s.wake_latency, Nanos(0)),
        wake_cost: Nanos(0),
        wake_slack_ppm: (slack * 1e6).round() as u32,
        jitter: d(s.jitter, Nanos(0)),
        spike_ppm: s.spike_ppm.unwrap_or(0),
        spike: d(s.spike, Nanos(0)),
    };
    sim.post_latency = d(s.post_latency, Nanos(1_000));
    sim.post_jitter = d(s.post_jitter, Nanos(0));
    sim.rx_quantum = d(s.rx_quantum, Nanos(8));
    sim.rx_delay = d(s.rx_delay, Nanos(0));
    sim.fetch_ahead = s.fetch_ahead.unwrap_or(1);
    if sim.fetch_ahead > 64 {
        return err("sim.fetch_ahead must be at most 64");
    }
    let ppm = s.ppm.unwrap_or(0.0);
    if !ppm.is_finite() || ppm.abs() > 1000.0 {
        return err(format!("sim.ppm = {ppm} must be within ±1000"));
    }
    let wander = s.wander.unwrap_or(0.0);
    if !wander.is_finite() || !(0.0..=100.0).contains(&wander) {
        return err(format!("sim.wander = {wander} must be within 0..=100 (ppm/√s)"));
    }
    sim.oscillator = keepon_nic::sim::Oscillator { ppm, wander };
    let max_frame = raw.link.max_frame.unwrap_or(keepon_core::time::MAX_STD_FRAME_BYTES.max(geometry.slot_bytes()));
    if !(geometry.slot_bytes()..=keepon_core::time::MAX_SLOT_BYTES).contains(&max_frame) {
        return err(format!(
            "link.max_frame = {max_frame} must be within ring.slot_bytes ({})..={}",
            geometry.slot_bytes(),
            keepon_core::time::MAX_SLOT_BYTES
        ));
    }
    sim.max_frame = max_frame;
    for (k, v) in [
        ("sim.poll_overhead", sim.host.poll_overhead),
        ("sim.poll_per_slot", sim.host.per_slot),
        ("sim.wake_latency", sim.host.wake_latency),
        ("sim.jitter", sim.host.jitter),
        ("sim.spike", sim.host.spike),
        ("sim.post_latency", sim.post_latency),
        ("sim.post_jitter", sim.post_jitter),
        ("sim.rx_delay", sim.rx_delay),
    ] {
        in_range(k, v, MAX_HOST_DELAY)?;
    }
    if sim.rx_quantum.0 <= 0 || sim.rx_quantum > MAX_HOST_DELAY {
        return err(format!("sim.rx_quantum = {} ns must be within 1..={} ns", sim.rx_quantum.0, MAX_HOST_DELAY.0));
    }
    if sim.host.spike_ppm > 1_000_000 {
        return err("sim.spike_ppm must be at most 1000000");
    }
    Ok(sim)
}
