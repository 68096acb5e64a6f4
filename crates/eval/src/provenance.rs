//! How every number of a report was obtained, and how much it moves when what was not measured moves.
//!
//! Every comparison table of every report carries a **how obtained** column with one of five words
//! ([`Basis`]): *predicted* (from mechanisms and sourced constants), *fitted* (a constant was tuned so that this
//! very number lands on the paper's), *chosen* (it rests on an assumption nobody measured), *measured* (timed or
//! counted on the machine that ran it: wall clock, CPU time) or *paper* (copied from the paper). A fitted match is
//! not a reproduction; a measured figure holds for that machine and its load.
//!
//! For every fitted or chosen constant the experiments sweep it over a physically plausible range and record the
//! headline result at each value ([`Sens`]); stochastic results are recorded over [`SEEDS`] seeds (from the run's
//! `--seed` on) and reported as median and range. The rows are written raw (`NAME-sensitivity.csv`) and rendered
//! into the summary from them.

use std::fmt::Write as _;

/// Seeds over which every stochastic headline result is reported (`seed, seed + 1, …`).
pub const SEEDS: u64 = 10;

/// How a number was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// From mechanisms and sourced constants; nothing was tuned to this number.
    Predicted,
    /// A constant was tuned so that this number matches the paper's.
    Fitted,
    /// It rests on an assumption (a constant nobody measured), not tuned to the paper.
    Chosen,
    /// Timed or counted on the machine that ran it (wall clock, CPU time): true of that machine and its load.
    Measured,
    /// Copied from the paper.
    Paper,
}

impl Basis {
    /// The word the reports use.
    pub fn word(self) -> &'static str {
        match self {
            Basis::Predicted => "predicted",
            Basis::Fitted => "fitted",
            Basis::Chosen => "chosen",
            Basis::Measured => "measured",
            Basis::Paper => "paper",
        }
    }
}

/// `*word*: why` — one cell of a **how obtained** column.
pub fn label(b: Basis, why: &str) -> String {
    if why.is_empty() {
        format!("*{}*", b.word())
    } else {
        format!("*{}*: {why}", b.word())
    }
}

/// The legend printed under every labelled table.
pub const LEGEND: &str = "how obtained: *predicted* = from mechanisms and sourced constants; *fitted* = a constant \
was tuned so that this number lands on the paper's (a fitted match is not a reproduction); *chosen* = rests on an \
assumption; *measured* = timed on the machine that ran it (true of that machine and its load); *paper* = copied \
from the paper.";

/// Median, smallest and largest of a sample (NaN-free).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Sample size.
    pub n: usize,
}

impl Spread {
    /// Of `v` (NaNs ignored); `None` if nothing is left.
    pub fn of(v: &[f64]) -> Option<Spread> {
        let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
        Some(Spread { median, min: s[0], max: s[n - 1], n })
    }

    /// `median (min–max)` with `prec` decimals.
    pub fn show(&self, prec: usize) -> String {
        format!("{:.prec$} ({:.prec$}–{:.prec$})", self.median, self.min, self.max)
    }
}

/// One recorded point: a constant at one value (or one seed), one headline metric.
#[derive(Clone, Debug, PartialEq)]
pub struct SensRow {
    /// The constant swept (`seed` for the seed sweep).
    pub constant: String,
    /// How the constant's default was obtained.
    pub basis: Basis,
    /// The default used by the report.
    pub default: String,
    /// The value at this point (the seed for a seed sweep).
    pub value: String,
    /// The headline result measured.
    pub metric: String,
    /// Its value.
    pub result: f64,
    /// The paper's value of the metric, if it gives one (text).
    pub paper: String,
}

/// The recorded sweeps of one experiment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sens {
    /// Rows in recording order.
    pub rows: Vec<SensRow>,
}

/// Decimals for showing `x`: enough for three significant digits, at most 3.
fn prec_for(x: f64) -> usize {
    let a = x.abs();
    if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    }
}

/// `x` with [`prec_for`] decimals.
pub fn num(x: f64) -> String {
    if x.is_nan() {
        "—".into()
    } else {
        format!("{x:.*}", prec_for(x))
    }
}

impl Sens {
    /// Record a swept point.
    #[allow(clippy::too_many_arguments)]
    pub fn point(
        &mut self,
        constant: &str,
        basis: Basis,
        default: &str,
        value: &str,
        metric: &str,
        result: f64,
        paper: &str,
    ) {
        self.rows.push(SensRow {
            constant: constant.into(),
            basis,
            default: default.into(),
            value: value.into(),
            metric: metric.into(),
            result,
            paper: paper.into(),
        });
    }

    /// Record one seed's result of a stochastic metric, obtained as `basis` says.
    pub fn seed(&mut self, basis: Basis, seed: u64, metric: &str, result: f64, paper: &str) {
        self.point("seed", basis, "", &seed.to_string(), metric, result, paper);
    }

    /// The raw rows: `constant,basis,default,value,metric,result,paper`.
    pub fn csv(&self) -> String {
        let q = |s: &str| {
            if s.contains([',', '"']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut s = String::from("constant,basis,default,value,metric,result,paper\n");
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{}",
                q(&r.constant),
                r.basis.word(),
                q(&r.default),
                q(&r.value),
                q(&r.metric),
                r.result,
                q(&r.paper)
            );
        }
        s
    }

    /// Groups `(constant, metric)` in first-seen order.
    fn groups(&self, seeds: bool) -> Vec<(String, String)> {
        let mut g: Vec<(String, String)> = Vec::new();
        for r in &self.rows {
            if (r.constant == "seed") == seeds {
                let k = (r.constant.clone(), r.metric.clone());
                if !g.contains(&k) {
                    g.push(k);
                }
            }
        }
        g
    }

    /// The markdown: one table of the swept constants (range of each headline result, every point), one of
    /// the seed sweeps (median and range).
    pub fn render(&self) -> String {
        let mut s = String::new();
        let sweeps = self.groups(false);
        if !sweeps.is_empty() {
            let _ = writeln!(s, "\n### Sensitivity: every fitted or chosen constant swept\n");
            let _ = writeln!(
                s,
                "| constant | how obtained | used | headline result | range over the sweep | at each value | paper |"
            );
            let _ = writeln!(s, "|---|---|---|---|---|---|---|");
            for (c, m) in sweeps {
                let rows: Vec<&SensRow> = self.rows.iter().filter(|r| r.constant == c && r.metric == m).collect();
                let v: Vec<f64> = rows.iter().map(|r| r.result).collect();
                let range = Spread::of(&v).map_or("—".into(), |sp| format!("{}–{}", num(sp.min), num(sp.max)));
                let each: Vec<String> = rows.iter().map(|r| format!("{}: {}", r.value, num(r.result))).collect();
                let _ = writeln!(
                    s,
                    "| {c} | {} | {} | {m} | {range} | {} | {} |",
                    label(rows[0].basis, ""),
                    rows[0].default,
                    each.join("; "),
                    rows[0].paper
                );
            }
        }
        let seeds = self.groups(true);
        if !seeds.is_empty() {
            let n = self.rows.iter().filter(|r| r.constant == "seed").map(|r| &r.value).collect::<Vec<_>>();
            let mut distinct = n.clone();
            distinct.sort();
            distinct.dedup();
            let _ = writeln!(
                s,
                "\n### Over {} seeds ({}…{}): median (min–max)\n",
                distinct.len(),
                self.rows.iter().find(|r| r.constant == "seed").map_or("", |r| r.value.as_str()),
                self.rows.iter().rev().find(|r| r.constant == "seed").map_or("", |r| r.value.as_str())
            );
            let _ = writeln!(s, "| result | how obtained | median (min–max) over seeds | paper |");
            let _ = writeln!(s, "|---|---|---|---|");
            for (_, m) in seeds {
                let rows: Vec<&SensRow> = self.rows.iter().filter(|r| r.constant == "seed" && r.metric == m).collect();
                let v: Vec<f64> = rows.iter().map(|r| r.result).collect();
                let shown = Spread::of(&v).map_or("—".into(), |sp| {
                    let p = prec_for(sp.median).max(prec_for(sp.max - sp.min).min(3));
                    sp.show(p)
                });
                let _ = writeln!(s, "| {m} | {} | {shown} | {} |", label(rows[0].basis, ""), rows[0].paper);
            }
        }
        s
    }

    /// The values of one (constant, metric) sweep, in order.
    pub fn values(&self, constant: &str, metric: &str) -> Vec<f64> {
        self.rows.iter().filter(|r| r.constant == constant && r.metric == metric).map(|r| r.result).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_rendering() {
        let sp = Spread::of(&[3.0, 1.0, f64::NAN, 2.0, 10.0]).unwrap();
        assert_eq!((sp.median, sp.min, sp.max, sp.n), (2.5, 1.0, 10.0, 4));
        assert!(Spread::of(&[f64::NAN]).is_none());
        let mut s = Sens::default();
        s.point("tau", Basis::Fitted, "12 ms", "1 ms", "jitter ns", 17.4, "7.7");
        s.point("tau", Basis::Fitted, "12 ms", "1 s", "jitter ns", 5.1, "7.7");
        s.seed(Basis::Fitted, 1, "jitter ns", 7.5, "7.7");
        s.seed(Basis::Fitted, 2, "jitter ns", 7.6, "7.7");
        let md = s.render();
        assert!(
            md.contains("| tau | *fitted* | 12 ms | jitter ns | 5.10–17.4 | 1 ms: 17.4; 1 s: 5.10 | 7.7 |"),
            "{md}"
        );
        assert!(md.contains("Over 2 seeds"), "{md}");
        assert_eq!(s.csv().lines().count(), 5);
        assert_eq!(s.values("tau", "jitter ns"), vec![17.4, 5.1]);
    }
}
