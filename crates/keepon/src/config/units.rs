//! The configuration's values: durations and rates with units, MAC addresses, and the error that names a key.

use std::fmt;

use keepon_core::time::Nanos;
use serde::de::{self, Deserializer};
use serde::Deserialize;

/// A configuration error, naming the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

/// Check that a duration is within `0..=max`, naming the key.
pub(super) fn in_range(key: &str, v: Nanos, max: Nanos) -> Result<Nanos, ConfigError> {
    if v.0 < 0 || v > max {
        return err(format!("{key} = {} ns must be within 0..={} ns", v.0, max.0));
    }
    Ok(v)
}

pub(super) fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

/// Parse a duration: integer ns, or a string with unit `ns`, `us`/`µs`, `ms`, `s`; decimals must come to whole
/// nanoseconds.
pub fn parse_duration(text: &str) -> Result<Nanos, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_alphabetic() || c == 'µ').unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let scale: i64 = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (use ns, us, ms or s)")),
    };
    parse_scaled(num, scale).map(Nanos).ok_or_else(|| format!("`{text}` is not a whole number of nanoseconds"))
}

/// `num` (decimal, optional sign and `_`) times `scale`, if it is a whole number.
fn parse_scaled(num: &str, scale: i64) -> Option<i64> {
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let (neg, digits) = match num.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, num.as_str()),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    if !whole.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut v: i128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    v *= i128::from(scale);
    let mut place = i128::from(scale);
    for d in frac.chars() {
        let d = i128::from(d.to_digit(10)?);
        if place % 10 != 0 {
            if d != 0 {
                return None;
            }
            continue;
        }
        place /= 10;
        v += d * place;
    }
    let v = i64::try_from(v).ok()?;
    Some(if neg { -v } else { v })
}

/// Parse a rate: integer b/s or a string like `1Gbps`, `2.5Gbps`, `100Mbps`, `10Kbps`, `1000000bps`.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (num, scale) = if let Some(n) = lower.strip_suffix("gbps").or_else(|| lower.strip_suffix("gb/s")) {
        (n, 1_000_000_000)
    } else if let Some(n) = lower.strip_suffix("mbps").or_else(|| lower.strip_suffix("mb/s")) {
        (n, 1_000_000)
    } else if let Some(n) = lower.strip_suffix("kbps").or_else(|| lower.strip_suffix("kb/s")) {
        (n, 1_000)
    } else if let Some(n) = lower.strip_suffix("bps").or_else(|| lower.strip_suffix("b/s")) {
        (n, 1)
    } else {
        (lower.as_str(), 1)
    };
    parse_scaled(num.trim(), scale)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| format!("`{text}` is not a rate like 1Gbps, 2.5Gbps or 100Mbps"))
}

/// A duration value in the file (integer ns or string with unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dur(pub Nanos);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration: an integer number of nanoseconds, or a string with a unit like \"10us\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                Ok(Dur(Nanos(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                i64::try_from(v).map(|v| Dur(Nanos(v))).map_err(|_| E::custom(format!("{v} ns is out of range")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{v} is not a whole number of nanoseconds: write an integer (ns) or a string with a unit, \
                     like \"1.5us\""
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A rate value in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate(pub u64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a rate: an integer number of b/s, or a string like \"1Gbps\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                u64::try_from(v).map(Rate).map_err(|_| E::custom(format!("{v} b/s: a rate must be positive")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Ok(Rate(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
                Err(E::custom(format!(
                    "{v} is not a whole number of b/s: write an integer or a string like \"2.5Gbps\""
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                parse_rate(v).map(Rate).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

pub(super) fn parse_mac(key: &str, text: &str) -> Result<[u8; 6], ConfigError> {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return err(format!("{key} = \"{text}\" is not a MAC address like 02:00:00:00:00:01"));
    }
    for (m, p) in mac.iter_mut().zip(&parts) {
        *m = u8::from_str_radix(p, 16)
            .map_err(|_| ConfigError(format!("{key} = \"{text}\" is not a MAC address like 02:00:00:00:00:01")))?;
    }
    Ok(mac)
}
