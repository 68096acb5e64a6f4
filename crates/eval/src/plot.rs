//! Plots of any records file (`keepon report FILE --plot DIR`), drawn by the same Python plotting code as the
//! experiments (`python -m keepon_plan.evalplot records`): the inter-arrival histogram and the deviation from
//! the schedule over time of every real-time flow.

use std::path::Path;
use std::process::Command;

/// The interpreter used when `KEEPON_PYTHON` is not set.
pub const DEFAULT_PYTHON: &str = "python3";

/// The interpreter to use: `KEEPON_PYTHON`, else [`DEFAULT_PYTHON`].
pub fn python() -> String {
    std::env::var("KEEPON_PYTHON").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| DEFAULT_PYTHON.into())
}

/// Draw `records`' plots into `dir` with `python` (which must have `keepon-plan` installed); returns the
/// files written, one per line, as the plotter printed them.
pub fn records(python: &str, records: &Path, dir: &Path) -> Result<String, String> {
    let out = Command::new(python)
        .args(["-m", "keepon_plan.evalplot", "records"])
        .arg(records)
        .arg("--out")
        .arg(dir)
        .output()
        .map_err(|e| {
            format!(
                "--plot: cannot run `{python}`: {e}; set KEEPON_PYTHON to a Python with keepon-plan installed \
                 (e.g. python/.venv/bin/python after `make py-env`)"
            )
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("--plot: the plotter failed ({}): {}", out.status, err.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
