"""The A.9 plot script reads keepon-sync-sim's raw CSV and writes both figures; bad input is a clear error."""

import csv
import random

from keepon_plan import plots_sync


def _write_rounds(path, rounds=80):
    rng = random.Random(3)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "sweep",
                "granularity_ns",
                "jitter_ns",
                "window",
                "n",
                "offset_error_ns",
                "drift_ns",
                "freq_ppm",
                "residual_ppm",
            ]
        )
        for sweep, points in (("granularity", [(800.0, 1000.0), (1600.0, 1000.0)]), ("jitter", [(100.0, 0.0)])):
            for g, j in points:
                for window in (1, 10):
                    for n in range(1, rounds + 1):
                        drift = "" if n == 1 else f"{rng.uniform(-g, g):.3f}"
                        w.writerow([sweep, g, j, window, n, f"{rng.uniform(-g, g):.3f}", drift, "-1.0", "0.01"])


def test_plots_from_raw_rows(tmp_path):
    _write_rounds(tmp_path / "a9_rounds.csv")
    groups = plots_sync.load(tmp_path / "a9_rounds.csv")
    assert len(groups) == 6
    assert all(len(rows) == 80 for rows in groups.values())
    assert plots_sync.main([str(tmp_path), "--out", str(tmp_path / "png")]) == 0
    for name in ("fig28_sync.png", "fig29_sync.png"):
        assert (tmp_path / "png" / name).stat().st_size > 10_000


def test_bounds_match_the_paper_formulas():
    # Eq. 4 with g_M = g_S = g, all jitters j: g + j; Eq. 6 at I = 100 ms is ≈ g + j.
    assert plots_sync.eq4(800.0, 1000.0) == 1800.0
    assert abs(plots_sync.eq6(800.0, 1000.0) - 1800.0) < 0.1


def test_missing_input_is_a_clear_error(tmp_path, capsys):
    assert plots_sync.main([str(tmp_path)]) == 2
    assert "a9_rounds.csv not found" in capsys.readouterr().err
