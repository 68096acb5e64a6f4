"""Plots of ``keepon eval`` results, drawn from the raw per-frame CSVs (never from the summaries).

    python -m keepon_plan.evalplot fig15 OUT/fig15.csv --out OUT
    python -m keepon_plan.evalplot fig16 OUT/fig16.csv --out OUT
    python -m keepon_plan.evalplot fig17 OUT/fig17.csv --out OUT
    python -m keepon_plan.evalplot fig18 OUT/fig18.csv --out OUT
    python -m keepon_plan.evalplot fig19 OUT/fig19.csv --out OUT
    python -m keepon_plan.evalplot casestudy OUT/casestudy.csv --out OUT
    python -m keepon_plan.evalplot robustness OUT/robustness.csv --out OUT
    python -m keepon_plan.evalplot fig22 OUT/a9/dual_convergence.csv --out OUT   # from keepon-sync-sim
    python -m keepon_plan.evalplot fig12 OUT/a9/fig12.csv --out OUT              # from keepon-sync-sim
    python -m keepon_plan.evalplot records RUN.csv --out OUT      # any records file (keepon run/listen/talk)

Fig 15: inter-arrival jitter (standard deviation of consecutive inter-arrival times at the receiver) against
frame size, one panel per background, one line per station model; and the inter-arrival histogram of the
largest frame size, idle, per model.

Fig 16: jitter against the application's advance (period 1 ms) and against the period (advance 100 µs);
points where frames left late or were refused are drawn hollow and annotated with the on-time share.

Fig 17: UDP throughput against slot size for 100 B and 500 B payloads, with the paper's quoted points.

Fig 18: best-effort UDP throughput against the offered rate, one panel per packet size, one line per
isolation share and the stock driver's line bound (one CSV row per point).

Fig 19: the poll core's CPU utilisation against batch size (300 B slots) and against slot size, with the
paper's quoted points.

Fig 22: convergence of synchronisation, single vs dual clock (keepon-sync-sim's model, simulated): the median
|sync error| of each second from the start, one line per seed and mode, log scale, with the paper's convergence
times as marks.

Fig 12: PTP accuracy by stamping (hardware, software, keepon) and role (keepon-sync-sim's model, simulated):
the mean |offset| the slave reports at each software jitter, median over seeds with the min–max range, next to
the paper's values (dotted, at the jitter the model runs by default).

Records (`keepon report FILE --plot DIR`): for every real-time flow of a records file, the inter-arrival
histogram (receiver timestamps when present, else wire times) and the deviation from the schedule over time
(`tx_ns − sched_ns`, or `tx_ns − txtime_ns` for v1 files) — the way the paper shows its results.

Case study (Fig 26): schedule-to-delivery delay of the first 500 frames of the gateway flows, one panel per
station under test.

Robustness: on-time share and the 99th percentile of |deviation from schedule| against each disturbance (host
jitter, host preemptions, DMA stalls, late completions), one line per station model, median over seeds with the
min–max range as error bars (one CSV row per point, model and seed).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MODELS = ("keepon", "launchtime", "stock-etf")
LABELS = {"keepon": "keepon", "launchtime": "i210 LaunchTime (model)", "stock-etf": "stock driver + ETF (model)"}


class PlotError(Exception):
    """Bad input: the message says what and where."""


def _each(path: Path, need: set[str], what: str, row, comments: bool = False) -> None:
    """Call ``row(r)`` for every row of the CSV at ``path``, which must have the columns ``need``.

    Unreadable files, missing columns and bad values (``ValueError`` from ``row``) become a :class:`PlotError`
    naming the file and line. With ``comments``, lines starting with ``#`` are skipped (records files).
    """
    try:
        with path.open(newline="") as f:
            lines = (line for line in f if not line.startswith("#")) if comments else f
            rows = csv.DictReader(lines)
            if rows.fieldnames is None or not need <= set(rows.fieldnames):
                raise PlotError(f"{path}: not a {what} (need columns {sorted(need)})")
            for i, r in enumerate(rows, start=2):
                try:
                    row(r)
                except ValueError as e:
                    raise PlotError(f"{path}:{i}: {e}") from e
    except OSError as e:
        raise PlotError(f"cannot read {path}: {e}") from e


def _save(fig, out: Path, name: str) -> Path:
    """Lay out, write ``out/name`` (PNG, 120 dpi) and close the figure."""
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    png = out / name
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def read_arrivals(path: Path) -> dict[tuple[str, str, int], list[tuple[int, int]]]:
    """(model, background, frame_bytes) -> [(seq, rx_ns)] of the frames that arrived, in seq order."""
    series: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)

    def row(r):
        if r["rx_ns"]:
            key = (r["model"], r["background"], int(r["frame_bytes"]))
            series[key].append((int(r["seq"]), int(r["rx_ns"])))

    _each(path, {"model", "background", "frame_bytes", "seq", "rx_ns"}, "fig15 CSV", row)
    for v in series.values():
        v.sort()
    return series


def inter_arrivals(arrivals: list[tuple[int, int]]) -> list[int]:
    """Inter-arrival times of consecutive instances (seq k and k+1 both received)."""
    return [b[1] - a[1] for a, b in itertools.pairwise(arrivals) if b[0] == a[0] + 1]


def jitter(ia: list[int]) -> float:
    """Standard deviation of the inter-arrival times (population), ns."""
    if not ia:
        return math.nan
    m = sum(ia) / len(ia)
    return math.sqrt(sum((x - m) ** 2 for x in ia) / len(ia))


# The paper's idle-background jitter at a 1 ms period (§6.2), one number per model (its sizes are not given).
PAPER_FIG15_IDLE_NS = {"keepon": 3.7, "launchtime": 7.7, "stock-etf": 480.1}


def plot_fig15(csv_path: Path, out: Path) -> list[Path]:
    """Write fig15.png (jitter vs frame size) and fig15-hist.png; return their paths."""
    series = read_arrivals(csv_path)
    if not series:
        raise PlotError(f"{csv_path}: no received frames")
    backgrounds = sorted({k[1] for k in series}, key=lambda b: (b != "idle", b))
    fig, axes = plt.subplots(1, len(backgrounds), figsize=(5.5 * len(backgrounds), 4.3), sharey=True, squeeze=False)
    for ax, bg in zip(axes[0], backgrounds, strict=True):
        for m in MODELS:
            pts = sorted((k[2], jitter(inter_arrivals(v))) for k, v in series.items() if k[0] == m and k[1] == bg)
            if not pts:
                continue
            (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{LABELS[m]} (simulated)")
            if bg == "idle" and m in PAPER_FIG15_IDLE_NS:
                ax.axhline(PAPER_FIG15_IDLE_NS[m], color=line.get_color(), linestyle="--", linewidth=1)
                ax.annotate(
                    f"paper {PAPER_FIG15_IDLE_NS[m]} ns",
                    (pts[0][0], PAPER_FIG15_IDLE_NS[m]),
                    textcoords="offset points",
                    xytext=(0, 3),
                    fontsize=7,
                    color=line.get_color(),
                )
        if bg != "idle":
            ax.text(0.02, 0.02, "paper: no busy numbers in its text (figure only)", transform=ax.transAxes, fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("frame size (bytes)")
        ax.set_ylabel("inter-arrival jitter (ns, std dev)")
        ax.set_title(f"{bg} background (simulated; dashed: paper, one number per model)")
        ax.title.set_fontsize(9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    main_png = _save(fig, out, "fig15.png")

    biggest = max(k[2] for k in series)
    fig, axes = plt.subplots(1, len(MODELS), figsize=(15, 3.5), squeeze=False)
    for ax, m in zip(axes[0], MODELS, strict=True):
        ia = inter_arrivals(series.get((m, "idle", biggest), []))
        if ia:
            base = round(sum(ia) / len(ia))
            ax.hist([x - base for x in ia], bins=60)
            ax.set_xlabel(f"inter-arrival − {base} ns")
        ax.set_yscale("log")
        ax.set_title(f"{LABELS[m]}, idle, {biggest} B")
    hist_png = _save(fig, out, "fig15-hist.png")
    return [main_png, hist_png]


def read_sweeps(path: Path) -> dict[tuple[str, str, int], list[tuple[int, int | None, str]]]:
    """(sweep, model, x_us) -> [(seq, rx_ns or None, outcome)] in seq order."""
    series: dict[tuple[str, str, int], list[tuple[int, int | None, str]]] = defaultdict(list)

    def row(r):
        rx = int(r["rx_ns"]) if r["rx_ns"] else None
        series[(r["sweep"], r["model"], int(r["x_us"]))].append((int(r["seq"]), rx, r["outcome"]))

    _each(path, {"sweep", "x_us", "model", "seq", "outcome", "rx_ns"}, "fig16 CSV", row)
    for v in series.values():
        v.sort()
    return series


# What the paper's text says of Fig 16, as (x from, x to, ns, text) per model; it gives bounds, not points.
PAPER_FIG16 = {
    "advance": {
        "keepon": (5, 50, 10.0, "keepon ≤ 10 ns from 5 µs"),
        "launchtime": (30, 50, 300.0, "i210 ≥ 0.3 µs when stable"),
    },
    "period": {"keepon": (20, 100, 10.0, "keepon < 10 ns from 20 µs")},
}


def fig16_points(series, sweep: str, model: str) -> list[tuple[int, float | None, float]]:
    """(x µs, jitter ns or None when fewer than two consecutive frames arrived, on-time share) per swept value."""
    pts = []
    for x in sorted(k[2] for k in series if k[0] == sweep and k[1] == model):
        frames = series[(sweep, model, x)]
        arrived = [(s, rx) for s, rx, _ in frames if rx is not None]
        on_time = sum(1 for _, rx, o in frames if o == "sent" and rx is not None) / len(frames)
        ia = inter_arrivals(arrived)
        pts.append((x, jitter(ia) if ia else None, on_time))
    return pts


def plot_fig16(csv_path: Path, out: Path) -> list[Path]:
    """Write fig16.png (jitter vs advance, jitter vs period)."""
    series = read_sweeps(csv_path)
    if not series:
        raise PlotError(f"{csv_path}: no frames")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), squeeze=False)
    titles = {"advance": "(a) advance time, period 1 ms", "period": "(b) period, advance 100 µs"}
    for ax, sweep in zip(axes[0], ("advance", "period"), strict=True):
        refused_any = False
        for m in ("keepon", "launchtime"):
            pts = fig16_points(series, sweep, m)
            if not pts:
                continue
            measured = [(x, j) for x, j, _ in pts if j is not None]
            (line,) = ax.plot(
                [p[0] for p in measured], [p[1] for p in measured], marker="o", label=f"{LABELS[m]} (simulated)"
            )
            for i, (x, j, share) in enumerate(pts):
                if j is None:
                    # No frame arrived, so there is no jitter to plot: mark it on the x axis instead.
                    refused_any = True
                    ax.plot([x], [0.0], marker="v", color=line.get_color(), transform=ax.get_xaxis_transform())
                    ax.annotate("none sent", (x, 0.03), xycoords=ax.get_xaxis_transform(), fontsize=7)
                elif share < 0.999:
                    ax.plot([x], [j], marker="o", mfc="white", color=line.get_color())
                    ax.annotate(
                        f"{share:.1%} on time",
                        (x, j),
                        textcoords="offset points",
                        xytext=(4, -12 if i % 2 else 4),
                        fontsize=7,
                    )
        for kind, (lo, hi, y, text) in PAPER_FIG16.get(sweep, {}).items():
            colour = "C0" if kind == "keepon" else "C1"
            ax.hlines(y, lo, hi, colors=colour, linestyles="--", linewidth=1, label=f"paper: {text}")
        if sweep == "advance":
            ax.axvspan(0, 30, color="C1", alpha=0.07, label="paper: i210 unstable below 30 µs")
        else:
            ax.text(
                0.02,
                0.02,
                "paper: the i210 fails at every period ≤ 100 µs (no jitter given)",
                transform=ax.transAxes,
                fontsize=7,
            )
        if refused_any:
            ax.plot([], [], "v", color="grey", label="every frame refused (no jitter)")
        ax.set_yscale("log")
        ax.set_xlabel(f"{sweep} (µs)")
        ax.set_ylabel("inter-arrival jitter (ns, std dev)")
        ax.set_title(f"{titles[sweep]} (simulated)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    png = _save(fig, out, "fig16.png")
    return [png]


PAPER_FIG17 = {100: [(200, 218.0), (1500, 73.3)], 500: [(600, 895.0), (1500, 367.0)]}


def plot_fig17(csv_path: Path, out: Path) -> list[Path]:
    """Write fig17.png (throughput vs slot size per payload; the byte clock as a line, the paper as crosses)."""
    pts: dict[int, list[tuple[int, float]]] = defaultdict(list)
    byte_clock: dict[int, float] = {}

    def row(r):
        pts[int(r["payload_bytes"])].append((int(r["slot_bytes"]), float(r["throughput_mbps"])))
        if r.get("bytes_mbps"):
            byte_clock[int(r["payload_bytes"])] = float(r["bytes_mbps"])

    _each(csv_path, {"payload_bytes", "slot_bytes", "throughput_mbps"}, "fig17 CSV", row)
    if not pts:
        raise PlotError(f"{csv_path}: no points")
    fig, axes = plt.subplots(1, len(pts), figsize=(5 * len(pts), 3.6), squeeze=False)
    for ax, b in zip(axes[0], sorted(pts), strict=True):
        v = sorted(pts[b])
        ax.plot([x for x, _ in v], [y for _, y in v], marker="o", label="keepon, slots (simulated)")
        if b in byte_clock:
            ax.axhline(byte_clock[b], color="tab:green", linestyle="--", label="keepon, byte clock (simulated)")
        if b in PAPER_FIG17:
            ax.plot(*zip(*PAPER_FIG17[b], strict=True), "x", markersize=9, label="paper")
        ax.set_title(f"{b} B UDP payload")
        ax.set_xlabel("slot size (bytes)")
        ax.set_ylabel("throughput (Mb/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    png = _save(fig, out, "fig17.png")
    return [png]


# The paper's Fig 22 (§A.10): single clock synchronised within 5 s, dual clock after more than 80 s (one case).
PAPER_FIG22 = {"single": 5.0, "dual": 80.0}


def plot_fig22(csv_path: Path, out: Path) -> list[Path]:
    """Write fig22.png (median |sync error| per second against time, single and dual clock, every seed)."""
    series: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)

    def row(r):
        series[(r["mode"], int(r["seed"]))].append((int(r["second"]), float(r["median_abs_sync_error_ns"])))

    _each(csv_path, {"mode", "seed", "second", "median_abs_sync_error_ns"}, "fig22 CSV", row)
    if not series:
        raise PlotError(f"{csv_path}: no points")
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"single": "tab:blue", "dual": "tab:orange"}
    labelled: set[str] = set()
    for (mode, _seed), pts in sorted(series.items()):
        pts.sort()
        label = None if mode in labelled else f"{mode} clock (simulated, every seed)"
        labelled.add(mode)
        ax.plot(
            [t for t, _ in pts],
            [max(v, 1.0) for _, v in pts],
            color=colors.get(mode, "gray"),
            alpha=0.6,
            linewidth=1,
            label=label,
        )
    for mode, t in PAPER_FIG22.items():
        ax.axvline(t, color=colors[mode], linestyle=":", label=f"paper: {mode} converged by {t:g} s")
    ax.set_yscale("log")
    ax.set_xlabel("time from start (s)")
    ax.set_ylabel("median |sync error| per second (ns)")
    ax.set_title("Fig 22: convergence, single vs dual clock")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return [_save(fig, out, "fig22.png")]


# The paper's Fig 12 (§4.1), µs: station -> (as master, as slave).
PAPER_FIG12 = {"hardware": (0.015, 0.015), "software": (0.5, 6.9), "keepon": (0.3, 3.7)}


def plot_fig12(csv_path: Path, out: Path) -> list[Path]:
    """Write fig12.png (mean |offset| against the software jitter, per station and role; the paper's values)."""
    runs: dict[tuple[str, str, float], list[float]] = defaultdict(list)

    def row(r):
        runs[(r["kind"], r["role"], float(r["jitter_ns"]))].append(float(r["offset_mean_ns"]))

    _each(csv_path, {"kind", "role", "jitter_ns", "seed", "offset_mean_ns", "true_mean_ns"}, "fig12 CSV", row)
    if not runs:
        raise PlotError(f"{csv_path}: no points")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    colors = {"hardware": "tab:green", "software": "tab:red", "keepon": "tab:blue"}
    for ax, role in zip(axes, ("master", "slave"), strict=True):
        for kind, color in colors.items():
            pts = sorted((j, v) for (k, r, j), v in runs.items() if k == kind and r == role)
            if not pts:
                continue
            js = [j / 1000 for j, _ in pts]
            med = [max(_median(v), 0.1) for _, v in pts]
            lo = [m - max(min(v), 0.1) for m, (_, v) in zip(med, pts, strict=True)]
            hi = [max(v) - m for m, (_, v) in zip(med, pts, strict=True)]
            ax.errorbar(js, med, yerr=[lo, hi], color=color, marker="o", capsize=3, label=f"{kind} (simulated)")
            paper = PAPER_FIG12[kind][0 if role == "master" else 1] * 1000
            ax.axhline(paper, color=color, linestyle=":", label=f"paper: {kind} {paper:g} ns")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("software timestamp jitter J (µs, chosen)")
        ax.set_title(f"station under test as {role}")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("mean |offset| the slave reports (ns)")
    for ax in axes:
        ax.legend(fontsize="x-small")
    fig.suptitle("Fig 12: PTP accuracy by timestamping and role (simulated; peer stamps in hardware)")
    return [_save(fig, out, "fig12.png")]


# The paper's quoted Fig 19 points: sweep -> [(x, CPU %)]; the dual clock's (Fig 19 b: "approximately 6 %" at batch
# 54 on both cores) apart.
PAPER_FIG19 = {"batch": [(38, 100.0), (54, 6.3)], "slot": [(370, 100.0), (400, 26.9), (790, 1.7)]}
PAPER_FIG19_DUAL = {"batch": [(54, 6.0)], "slot": []}
FIG19_CORES = {"tx": "TX core (single clock; dual clock's TX)", "rx": "dual clock's RX core"}


def plot_fig19(csv_path: Path, out: Path) -> list[Path]:
    """Write fig19.png (CPU vs batch size and vs slot size per core, the paper's quoted points as crosses)."""
    pts: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)

    def row(r):
        sweep = r["sweep"]
        if sweep not in PAPER_FIG19:
            raise ValueError(f"unknown sweep {sweep!r}")
        core = r.get("core") or "tx"
        if core not in FIG19_CORES:
            raise ValueError(f"unknown core {core!r}")
        x = int(r["batch"] if sweep == "batch" else r["slot_bytes"])
        pts[(sweep, core)].append((x, float(r["cpu_percent"])))

    _each(csv_path, {"sweep", "batch", "slot_bytes", "cpu_percent"}, "fig19 CSV", row)
    if not pts:
        raise PlotError(f"{csv_path}: no points")
    sweeps = sorted({sweep for sweep, _ in pts})
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5 * len(sweeps), 3.6), squeeze=False)
    xlabel = {"batch": "batch size (300 B slots)", "slot": "slot size (bytes, batch 32)"}
    for ax, sweep in zip(axes[0], sweeps, strict=True):
        for core, style in (("tx", "-o"), ("rx", "--s")):
            v = sorted(pts.get((sweep, core), []))
            if v:
                ax.plot(*zip(*v, strict=True), style, markersize=3, label=f"keepon {FIG19_CORES[core]} (simulated)")
        ax.plot(*zip(*PAPER_FIG19[sweep], strict=True), "x", markersize=9, label="paper (single clock)")
        if PAPER_FIG19_DUAL[sweep]:
            ax.plot(
                *zip(*PAPER_FIG19_DUAL[sweep], strict=True), "+", markersize=11, label="paper (dual clock, both cores)"
            )
        ax.set_xlabel(xlabel[sweep])
        ax.set_ylabel("poll core CPU (%)")
        ax.set_ylim(0, 105)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    png = _save(fig, out, "fig19.png")
    return [png]


def plot_fig18(csv_path: Path, out: Path) -> list[Path]:
    """Write fig18.png (throughput vs offered rate per packet size)."""
    pts: dict[tuple[int, str], list[tuple[int, float]]] = defaultdict(list)

    def row(r):
        label = f"keepon-{r['share_pct']}%" if r["model"] == "keepon" else "stock (line bound)"
        pts[(int(r["packet_bytes"]), label)].append((int(r["offered_mbps"]), float(r["throughput_mbps"])))

    need = {"packet_bytes", "share_pct", "offered_mbps", "model", "throughput_mbps"}
    _each(csv_path, need, "fig18 CSV", row)
    if not pts:
        raise PlotError(f"{csv_path}: no points")
    sizes = sorted({k[0] for k in pts})
    fig, axes = plt.subplots(1, len(sizes), figsize=(4 * len(sizes), 3.6), sharey=True, squeeze=False)
    for ax, b in zip(axes[0], sizes, strict=True):
        for (size, label), v in sorted(pts.items()):
            if size == b:
                v.sort()
                style = "--" if label.startswith("stock") else "-"
                ax.plot([x for x, _ in v], [y for _, y in v], style, marker="o", label=label)
        ax.set_title(f"{b} B UDP payload (simulated)")
        ax.set_xlabel("offered (Mb/s)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("best-effort throughput (Mb/s)")
    axes[0][0].legend(fontsize="small")
    png = _save(fig, out, "fig18.png")
    return [png]


def read_records(path: Path) -> dict[str, list[dict[str, str]]]:
    """Sent real-time frames of a keepon records file (v1 to v4), per flow, in seq order.

    Copies a listener's FRER sequence recovery eliminated (``frer`` is ``discarded`` or ``rogue``, v4) are left out:
    they are copies seen, not frames of the stream delivered.
    """
    flows: dict[str, list[dict[str, str]]] = defaultdict(list)

    def row(r):
        if r["outcome"] == "sent" and r["txtime_ns"] and r.get("frer") not in ("discarded", "rogue"):
            flows[r["flow"]].append(r)

    need = {"seq", "flow", "txtime_ns", "outcome", "tx_ns", "rx_ns"}
    _each(path, need, "keepon records file", row, comments=True)
    for v in flows.values():
        v.sort(key=lambda r: int(r["seq"]) if r["seq"].isdigit() else 0)
    return flows


def plot_records(csv_path: Path, out: Path) -> list[Path]:
    """Write records-interarrival.png and records-deviation.png for every real-time flow of a records file."""
    flows = read_records(csv_path)
    if not flows:
        raise PlotError(f"{csv_path}: no sent real-time frames")
    names = sorted(flows)
    series = {}
    try:
        for n in names:
            rows = flows[n]
            stamp = "rx_ns" if all(r["rx_ns"] for r in rows) else "tx_ns"
            arrivals = [(int(r["seq"]), int(r[stamp])) for r in rows if r[stamp]]
            ref = "sched_ns" if rows and "sched_ns" in rows[0] and all(r["sched_ns"] for r in rows) else "txtime_ns"
            dev = [(int(r["seq"]), int(r["tx_ns"]) - int(r[ref])) for r in rows if r["tx_ns"]]
            series[n] = (stamp, inter_arrivals(arrivals), ref, dev)
    except ValueError as e:
        raise PlotError(f"{csv_path}: {e}") from e
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.4), squeeze=False)
    for ax, n in zip(axes[0], names, strict=True):
        stamp, ia, _, _ = series[n]
        if ia:
            base = round(sum(ia) / len(ia))
            ax.hist([x - base for x in ia], bins=50)
            ax.set_xlabel(f"inter-arrival − {base} ns ({stamp}); jitter {jitter(ia):.2f} ns")
        ax.set_yscale("log")
        ax.set_title(f"flow {n}")
    paths.append(_save(fig, out, "records-interarrival.png"))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for n in names:
        _, _, ref, dev = series[n]
        ax.plot([s for s, _ in dev], [d for _, d in dev], marker=".", linewidth=0.5, label=f"{n} (tx − {ref[:-3]})")
    ax.set_xlabel("seq")
    ax.set_ylabel("deviation from schedule (ns)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    paths.append(_save(fig, out, "records-deviation.png"))
    return paths


def read_delays(path: Path) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """(scenario, flow) -> [(seq, delay_ns)] of the frames that arrived, in seq order."""
    series: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)

    def row(r):
        if r["delay_ns"]:
            series[(r["scenario"], int(r["flow"]))].append((int(r["seq"]), float(r["delay_ns"])))

    _each(path, {"scenario", "flow", "seq", "delay_ns"}, "casestudy CSV", row)
    for v in series.values():
        v.sort()
    return series


def plot_casestudy(csv_path: Path, out: Path, first: int = 500, flows: tuple[int, ...] = (2, 3, 4, 7, 8)) -> list[Path]:
    """Write casestudy-fig26.png (delay of the first frames of the gateway flows per scenario)."""
    series = read_delays(csv_path)
    if not series:
        raise PlotError(f"{csv_path}: no delivered frames")
    scenarios = [s for s in ("stock-etf", "keepon", "launchtime") if any(k[0] == s for k in series)]
    fig, axes = plt.subplots(
        len(scenarios), 1, figsize=(10, 3 * len(scenarios)), sharex=True, sharey=True, squeeze=False
    )
    for ax, sc in zip(axes[:, 0], scenarios, strict=True):
        for f in flows:
            pts = series.get((sc, f), [])[:first]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], marker=".", linewidth=0.6, label=f"F{f}")
        ax.set_yscale("log")
        ax.set_ylabel("delay (µs)")
        ax.set_title(f"gateways run {sc} (simulated)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="center right", fontsize="small")
    axes[-1][0].set_xlabel("frame (hyperperiod) index")
    png = _save(fig, out, "casestudy-fig26.png")
    return [png]


ROBUSTNESS_MODELS = ("keepon-strict", "keepon-relaxed", "launchtime", "stock-etf")
ROBUSTNESS_LABELS = {
    "keepon-strict": "keepon, strict",
    "keepon-relaxed": "keepon, relaxed",
    "launchtime": LABELS["launchtime"],
    "stock-etf": LABELS["stock-etf"],
}
ROBUSTNESS_SWEEPS = {
    "host-jitter": "host jitter (µs, uniform per host step)",
    "preemption": "host preemptions per second",
    "dma-stall": "DMA stall probability per fetch (ppm)",
    "completion": "late completion probability per slot (ppm)",
}


def read_robustness(path: Path) -> dict[tuple[str, str, float], list[tuple[float, float | None]]]:
    """(sweep, model, x) -> [(on-time share, p99 |deviation| ns or None)] over seeds."""
    points: dict[tuple[str, str, float], list[tuple[float, float | None]]] = defaultdict(list)

    def row(r):
        dev = float(r["p99_dev_ns"]) if r["p99_dev_ns"] else None
        points[(r["sweep"], r["model"], float(r["x"]))].append((float(r["on_time"]), dev))

    _each(path, {"sweep", "x", "model", "seed", "on_time", "p99_dev_ns"}, "robustness CSV", row)
    return points


def _median(v: list[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def plot_robustness(csv_path: Path, out: Path) -> list[Path]:
    """Write robustness.png: on time (top) and p99 |deviation| (bottom) against each disturbance."""
    points = read_robustness(csv_path)
    if not points:
        raise PlotError(f"{csv_path}: no points")
    sweeps = [s for s in ROBUSTNESS_SWEEPS if any(k[0] == s for k in points)]
    fig, axes = plt.subplots(2, len(sweeps), figsize=(4.2 * len(sweeps), 7.5), squeeze=False)
    for col, sweep in enumerate(sweeps):
        top, bottom = axes[0][col], axes[1][col]
        for i, m in enumerate(ROBUSTNESS_MODELS):
            xs = sorted(k[2] for k in points if k[0] == sweep and k[1] == m)
            if not xs:
                continue
            # keepon strict and relaxed often coincide: relaxed is drawn dashed over strict so both stay visible.
            style = {"marker": "os^v"[i], "color": f"C{i}", "label": f"{ROBUSTNESS_LABELS[m]} (simulated)"}
            on = [[100 * o for o, _ in points[(sweep, m, x)]] for x in xs]
            med = [_median(v) for v in on]
            err = [
                [md - min(v) for md, v in zip(med, on, strict=True)],
                [max(v) - md for md, v in zip(med, on, strict=True)],
            ]
            top.errorbar(xs, med, yerr=err, capsize=3, linestyle="-" if i != 1 else "--", **style)
            devs = [[d for _, d in points[(sweep, m, x)] if d is not None] for x in xs]
            dx = [x for x, v in zip(xs, devs, strict=True) if v]
            dv = [v for v in devs if v]
            dmed = [max(_median(v), 1.0) for v in dv]
            derr = [
                [md - max(min(v), 1.0) for md, v in zip(dmed, dv, strict=True)],
                [max(max(v), 1.0) - md for md, v in zip(dmed, dv, strict=True)],
            ]
            bottom.errorbar(dx, dmed, yerr=derr, capsize=3, linestyle="-" if i != 1 else "--", **style)
        for ax in (top, bottom):
            if sweep != "host-jitter":
                ax.set_xscale("symlog", linthresh=1.0)  # rates and probabilities from 0 over decades
            ax.grid(True, which="both", alpha=0.3)
        top.set_ylim(-2, 102)
        top.set_ylabel("on time, % of frames (|dev| ≤ tolerance)")
        top.set_title(f"{sweep} (simulated)")
        bottom.set_yscale("log")
        bottom.set_ylabel("|deviation| p99 of frames sent (ns; < 1 drawn at 1)")
        bottom.set_xlabel(ROBUSTNESS_SWEEPS[sweep])
        if col == 0:
            top.legend(fontsize=7)
    png = _save(fig, out, "robustness.png")
    return [png]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m keepon_plan.evalplot", description=__doc__.splitlines()[0])
    ap.add_argument(
        "experiment",
        choices=["fig12", "fig15", "fig16", "fig17", "fig18", "fig19", "fig22", "casestudy", "robustness", "records"],
    )
    ap.add_argument("csv", type=Path, help="raw CSV written by `keepon eval` (or a records file)")
    ap.add_argument("--out", type=Path, required=True, help="directory for the PNGs")
    a = ap.parse_args(argv)
    try:
        plot = {
            "fig15": plot_fig15,
            "fig16": plot_fig16,
            "fig17": plot_fig17,
            "fig18": plot_fig18,
            "fig19": plot_fig19,
            "fig12": plot_fig12,
            "fig22": plot_fig22,
            "casestudy": plot_casestudy,
            "robustness": plot_robustness,
            "records": plot_records,
        }[a.experiment]
        for p in plot(a.csv, a.out):
            print(p)
    except PlotError as e:
        print(f"evalplot: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
