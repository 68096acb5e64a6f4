"""Plots of the A.9 synchronisation simulation (simulated time), like the paper's Fig. 28 and Fig. 29.

Input: the raw per-exchange CSV that ``keepon-sync-sim --out DIR`` writes (``DIR/a9_rounds.csv``). Everything
shown is computed here from the raw rows; the Eq. 4 / Eq. 6 bounds are recomputed from the parameters.

Usage: ``python -m keepon_plan.plots_sync DIR [--out OUTDIR]`` writes ``fig28_sync.png`` and ``fig29_sync.png``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

INTERVAL_NS = 100_000_000
SETTLE = 50
FIG29_POINT = ("granularity", 800.0, 1000.0)


def load(path: Path) -> dict[tuple[str, float, float, int], list[dict[str, float]]]:
    """Rows grouped by (sweep, granularity, jitter, window), in exchange order."""
    groups: dict[tuple[str, float, float, int], list[dict[str, float]]] = defaultdict(list)
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            key = (r["sweep"], float(r["granularity_ns"]), float(r["jitter_ns"]), int(r["window"]))
            groups[key].append(
                {
                    "n": int(r["n"]),
                    "offset_error": float(r["offset_error_ns"]),
                    "drift": float(r["drift_ns"]) if r["drift_ns"] else float("nan"),
                    "residual_ppm": float(r["residual_ppm"]),
                }
            )
    return groups


def eq4(g: float, j: float) -> float:
    """Eq. 4 with g_M = g_S = g and all four jitters j (ns)."""
    return 0.5 * (2 * g + 2 * j)


def eq6(g: float, j: float, interval: float = INTERVAL_NS) -> float:
    """Eq. 6 with rho_M = 1 (ns per interval)."""
    return interval * max((g + j) / (interval - g - j), (g + j) / (interval + g + j))


def _settled(rows: list[dict[str, float]], field: str) -> list[float]:
    return [abs(r[field]) for r in rows if r["n"] > SETTLE and r[field] == r[field]]


# The paper's Fig 28 values that its text gives (A.9): median offset error 0.5 and 2.7 µs at granularity 0.8 and
# 12 µs; 0.03 and 1.5 µs at the ends of its jitter sweep, whose jitter values the text does not give.
PAPER_FIG28_GRANULARITY = [(0.8, 0.5), (12.0, 2.7)]
PAPER_FIG28_JITTER_US = (0.03, 1.5)


def fig28(groups, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for col, sweep in enumerate(("granularity", "jitter")):
        for row, field in enumerate(("offset_error", "drift")):
            ax = axes[row][col]
            for window, style in ((1, "s--"), (10, "o-")):
                keys = sorted(k for k in groups if k[0] == sweep and k[3] == window)
                xs = [(k[1] if sweep == "granularity" else k[2]) / 1000 for k in keys]
                med = [statistics.median(_settled(groups[k], field)) / 1000 for k in keys]
                mx = [max(_settled(groups[k], field)) / 1000 for k in keys]
                label = "unfiltered" if window == 1 else f"moving average ({window})"
                ax.plot(xs, med, style, label=f"median, {label}")
                ax.plot(xs, mx, style, alpha=0.35, label=f"max, {label}")
            keys = sorted(k for k in groups if k[0] == sweep and k[3] == 10)
            xs = [(k[1] if sweep == "granularity" else k[2]) / 1000 for k in keys]
            bound = [(eq4 if field == "offset_error" else eq6)(k[1], k[2]) / 1000 for k in keys]
            ax.plot(xs, bound, "k:", label="Eq. 4 bound" if field == "offset_error" else "Eq. 6 bound")
            if field == "offset_error" and sweep == "granularity":
                px, py = zip(*PAPER_FIG28_GRANULARITY, strict=True)
                ax.plot(px, py, "rx", markersize=9, label="paper: median 0.5 → 2.7 µs (text)")
            elif field == "offset_error":
                for y in PAPER_FIG28_JITTER_US:
                    ax.axhline(y, color="r", linestyle="--", linewidth=0.8)
                ax.plot([], [], "r--", label="paper: 0.03 → 1.5 µs (its jitter range is not in its text)")
            else:
                ax.text(
                    0.98, 0.03, "paper: no drift numbers in its text", transform=ax.transAxes, fontsize=7, ha="right"
                )
            ax.set_xlabel("clock granularity (µs)" if sweep == "granularity" else "timestamp jitter (µs)")
            ax.set_ylabel("|offset error| (µs)" if field == "offset_error" else "|drift per interval| (µs)")
            ax.set_title(f"({'abcd'[2 * row + col]}) {field.replace('_', ' ')} vs {sweep}")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("A.9 reproduction (simulated): 100 ms sync, 10 µs delay, 1 ppm initial error", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fig29(groups, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    sweep, g, j = FIG29_POINT
    for window, colour in ((1, "grey"), (10, "black")):
        rows = groups.get((sweep, g, j, window), [])
        n = [r["n"] for r in rows]
        label = "unfiltered" if window == 1 else f"moving average ({window})"
        axes[0].plot(n, [r["residual_ppm"] for r in rows], color=colour, lw=0.7, label=label)
        axes[1].plot(n, [r["drift"] / 1000 for r in rows], color=colour, lw=0.7, label=label)
        axes[2].plot(n, [r["offset_error"] / 1000 for r in rows], color=colour, lw=0.7, label=label)
    axes[0].set_ylabel("remaining frequency error (ppm)")
    axes[1].set_ylabel("drift per interval (µs)")
    axes[2].set_ylabel("offset error (µs)")
    for ax, t in zip(axes, ("(a) frequency", "(b) drift", "(c) offset error"), strict=True):
        ax.set_xlabel("sync exchange")
        ax.set_title(t)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"A.9 reproduction (simulated): granularity {g / 1000} µs, jitter {j / 1000} µs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m keepon_plan.plots_sync", description=__doc__.split("\n")[0])
    p.add_argument("dir", type=Path, help="directory with a9_rounds.csv (from keepon-sync-sim --out DIR)")
    p.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default: DIR)")
    args = p.parse_args(argv)
    src = args.dir / "a9_rounds.csv"
    if not src.is_file():
        print(f"plots_sync: {src} not found (run keepon-sync-sim --out {args.dir} first)", file=sys.stderr)
        return 2
    groups = load(src)
    if not groups:
        print(f"plots_sync: {src} has no rows", file=sys.stderr)
        return 2
    out = args.out or args.dir
    out.mkdir(parents=True, exist_ok=True)
    fig28(groups, out / "fig28_sync.png")
    fig29(groups, out / "fig29_sync.png")
    print(f"wrote {out / 'fig28_sync.png'} and {out / 'fig29_sync.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
