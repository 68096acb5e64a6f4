//! `[[flow]]`: the flows `keepon run` and `keepon talk` send, each checked against its class and the link.

use keepon_core::bytes::windows::Windows;
use keepon_core::isolation::Ownership;
use keepon_core::time::{Nanos, SlotGeometry, MIN_FRAME_BYTES};
use keepon_nic::source::{FlowSpec, Pattern};

use super::{err, in_range, parse_mac, ConfigError, RawConfig, WireTiming, MAX_SPAN};

/// A flow as the runtime uses it.
#[derive(Clone, Debug)]
pub struct Flow {
    /// Name.
    pub name: String,
    /// Class name.
    pub class_name: String,
    /// Runtime spec.
    pub spec: FlowSpec,
    /// Nominal period (for reports).
    pub period: Nanos,
}

/// The flows of `raw`, against the classes (`ownership`, `windows`) and the link (`timing`, `geometry`).
pub(super) fn flows(
    raw: &RawConfig,
    ownership: &Ownership,
    windows: Option<&Windows>,
    timing: WireTiming,
    geometry: SlotGeometry,
) -> Result<Vec<Flow>, ConfigError> {
    let frame_limit = match timing {
        WireTiming::Slots => geometry.slot_bytes(),
        WireTiming::Bytes => {
            raw.link.max_frame.unwrap_or(keepon_core::time::MAX_STD_FRAME_BYTES).max(geometry.slot_bytes())
        }
    };
    let dst = match &raw.run.dst {
        Some(t) => parse_mac("run.dst", t)?,
        None => [0x02, 0x6b, 0x70, 0x00, 0x00, 0x02],
    };
    let src = match &raw.run.src {
        Some(t) => parse_mac("run.src", t)?,
        None => [0x02, 0x6b, 0x70, 0x00, 0x00, 0x01],
    };
    let mut flows = Vec::new();
    for (i, f) in raw.flows.iter().enumerate() {
        let key = format!("flow[{i}] (`{}`)", f.name);
        if raw.flows[..i].iter().any(|o| o.name == f.name) {
            return err(format!("{key}: flow name used twice"));
        }
        let class = ownership
            .class_named(&f.class)
            .ok_or_else(|| ConfigError(format!("{key}.class = \"{}\": no such class", f.class)))?;
        if f.period.0 .0 <= 0 || f.period.0 > MAX_SPAN {
            return err(format!("{key}.period = {} ns must be within 1..={} ns", f.period.0 .0, MAX_SPAN.0));
        }
        if f.frame_bytes < MIN_FRAME_BYTES || f.frame_bytes > frame_limit {
            return err(format!(
                "{key}.frame_bytes = {} must be within {MIN_FRAME_BYTES}..={frame_limit} ({})",
                f.frame_bytes,
                match timing {
                    WireTiming::Slots => "ring.slot_bytes",
                    WireTiming::Bytes => "link.max_frame on the byte clock",
                }
            ));
        }
        let offset = in_range(&format!("{key}.offset"), f.offset.map_or(Nanos(0), |d| d.0), MAX_SPAN)?;
        let best_effort = match &windows {
            Some(w) => w.is_best_effort(class),
            None => ownership.is_best_effort(class),
        };
        let pattern = match (&f.instance_offsets, f.repeat) {
            (Some(_), _) if best_effort => {
                return err(format!("{key}.instance_offsets: class `{}` is best effort", f.class))
            }
            (Some(list), Some(rep)) => {
                if list.is_empty() {
                    return err(format!("{key}.instance_offsets is empty"));
                }
                if rep.0 .0 <= 0 || rep.0 > MAX_SPAN || list.iter().any(|d| d.0 .0 < 0 || d.0 >= rep.0) {
                    return err(format!("{key}: every instance_offsets entry must be within 0..repeat"));
                }
                Pattern::Listed { offsets: list.iter().map(|d| d.0).collect(), repeat: rep.0 }
            }
            (Some(_), None) => return err(format!("{key}.instance_offsets needs {key}.repeat")),
            (None, Some(_)) => return err(format!("{key}.repeat is only meaningful with instance_offsets")),
            (None, None) if best_effort => Pattern::BestEffort { offset, period: f.period.0 },
            (None, None) => Pattern::Periodic { offset, period: f.period.0 },
        };
        if f.rtag == Some(true) && best_effort {
            return err(format!(
                "{key}.rtag: class `{}` is best effort: its frames have no txtime, so the copies two stations \
                 send cannot be numbered on network time; tag a real-time flow",
                f.class
            ));
        }
        let lead = in_range(&format!("{key}.lead"), f.lead.map_or(Nanos::from_us(150), |d| d.0), MAX_SPAN)?;
        // The whole schedule must be representable: the last instance's time after the epoch.
        let last = match &pattern {
            Pattern::Periodic { offset, period } | Pattern::BestEffort { offset, period } => {
                i128::from(offset.0) + i128::from(period.0) * i128::from(f.count.saturating_sub(1))
            }
            Pattern::Listed { offsets, repeat } => {
                let m = offsets.len() as u64;
                let top = offsets.iter().map(|o| o.0).max().unwrap_or(0);
                i128::from(top) + i128::from(repeat.0) * i128::from(f.count.saturating_sub(1) / m)
            }
        };
        let start = raw.run.start.map_or(0, |d| i128::from(d.0 .0));
        if start + last > i128::from(MAX_SPAN.0) {
            return err(format!(
                "{key}: its last instance ({} periods after offset {} ns) lies {} ns after slot 0 (with run.start), \
                 beyond the {} ns a run can represent; lower count or period",
                f.count.saturating_sub(1),
                offset.0,
                start + last,
                MAX_SPAN.0
            ));
        }
        flows.push(Flow {
            name: f.name.clone(),
            class_name: f.class.clone(),
            period: f.period.0,
            spec: FlowSpec {
                flow: u16::try_from(i).map_err(|_| ConfigError("more than 65535 flows".into()))?,
                class,
                pattern,
                frame_bytes: f.frame_bytes,
                count: f.count,
                lead,
                dst,
                src,
                rtag: f.rtag.unwrap_or(false),
            },
        });
    }
    Ok(flows)
}
