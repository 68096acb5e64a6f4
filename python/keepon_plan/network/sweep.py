"""``keepon-plan network-sweep``: the planner swept by load on generated 802.1Qbv networks (a benchmark, not a test).

Each instance: ``B`` bridges joined as a ring, a line, a star (bridge 0 the hub) or a meshed random regular graph
(degree 3, networkx, seeded); ``K`` keepon stations on every bridge; every link 1 Gb/s with 100 ns propagation, 1 µs
forwarding in every bridge. Streams from a random station to a random station on another bridge (within ``--reach``
bridge hops when given), period from {0.5, 1, 2} ms, frames of 1522 bytes or uniform in 64..1522, every stream's
route given (a shortest path by hops, ties to the lower-numbered bridge), latency bound four periods (the longest
route, 99 bridges, takes 1.3 ms without a wait). Streams are drawn until ``--streams`` are accepted, accepting only
those that keep every directed link's load at the frames' own lengths within the target (at most 5 draws per stream,
40 for ``--stages``): the busiest link then carries about the target. The same description is planned four ways:
talkers on slots or on the byte clock, frames allowed to queue or not. Every plan is written (plan, talkers'
configs, gate lists; not the YANG and taprio exports) and replayed by the independent verifier; the time counted is
planning plus writing plus verifying, per plan.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import random
import tempfile
import time
from pathlib import Path

from ..model import InputError

PERIODS_NS = (500_000, 1_000_000, 2_000_000)
FIELDS = [
    "topology",
    "bridges",
    "frames",
    "target_pct",
    "seed",
    "streams",
    "busiest_own_pct",
    "busiest_padded_pct",
    "timing",
    "queueing",
    "status",
    "placed",
    "kind",
    "plan_s",
    "total_s",
    "cpu_s",
    "verified",
    "reason",
]


def _edges(topology: str, n: int, rng: random.Random) -> list[tuple[int, int]]:
    if topology == "line":
        return [(i, i + 1) for i in range(n - 1)]
    if topology == "ring":
        return [(i, (i + 1) % n) for i in range(n)]
    if topology == "star":
        return [(0, i) for i in range(1, n)]
    if topology == "mesh":
        import networkx as nx

        g = nx.random_regular_graph(3, n, seed=rng.randrange(2**31))
        while not nx.is_connected(g):
            g = nx.random_regular_graph(3, n, seed=rng.randrange(2**31))
        return sorted((min(a, b), max(a, b)) for a, b in g.edges())
    raise ValueError(topology)


def _paths(adj: dict[int, list[int]], src: int, reach: int | None) -> tuple[dict[int, int], list[int]]:
    """BFS predecessors from ``src`` (neighbours in ascending order: ties to the lower-numbered bridge), and the
    bridges within ``reach`` hops (all when None), ``src`` excluded."""
    prev = {src: -1}
    frontier = [src]
    near: list[int] = []
    depth = 0
    while frontier and (reach is None or depth < reach):
        depth += 1
        nxt = []
        for u in frontier:
            for v in adj[u]:
                if v not in prev:
                    prev[v] = u
                    nxt.append(v)
        near += nxt
        frontier = nxt
    return prev, near


def generate(
    topology: str,
    bridges: int,
    streams: int,
    frames: str,
    target_pct: int,
    seed: int,
    per_bridge: int = 2,
    reach: int | None = None,
    draws: int = 5,
) -> tuple[str, int, float]:
    """(description, streams accepted, busiest link's load at the frames' own lengths in %)."""
    rng = random.Random(seed)
    edges = _edges(topology, bridges, rng)
    lines = ["version = 1", "base_time = 0"]
    for i in range(bridges):
        lines += ["[[switch]]", f'name = "b{i}"', 'forwarding_delay = "1us"']
    for a, b in edges:
        lines += ["[[link]]", f'a = "b{a}"', f'b = "b{b}"', 'rate = "1Gbps"', 'delay = "100ns"']
    for i in range(bridges):
        for k in range(per_bridge):
            lines += ["[[station]]", f'name = "h{i}-{k}"']
            lines += ["[[link]]", f'a = "h{i}-{k}"', f'b = "b{i}"', 'rate = "1Gbps"', 'delay = "100ns"']
    adj: dict[int, list[int]] = {i: [] for i in range(bridges)}
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    for v in adj.values():
        v.sort()
    preds: dict[int, tuple[dict[int, int], list[int]]] = {}
    load: dict[tuple[str, str], int] = {}  # ps of wire per 2 ms
    limit = target_pct * 2_000_000 * 1000 // 100
    accepted = 0
    for _draw in range(draws * streams):
        if accepted == streams:
            break
        src = rng.randrange(bridges)
        if src not in preds:
            preds[src] = _paths(adj, src, reach)
        prev, near = preds[src]
        dst = rng.choice(near)
        frame = 1522 if frames == "1522" else rng.randint(64, 1522)
        period = rng.choice(PERIODS_NS)
        talker, listener = f"h{src}-{rng.randrange(per_bridge)}", f"h{dst}-{rng.randrange(per_bridge)}"
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        route = [talker, *(f"b{i}" for i in reversed(path)), listener]
        tx = (frame + 20) * 8000 * (2_000_000 // period)
        keys = list(itertools.pairwise(route))
        if any(load.get(k, 0) + tx > limit for k in keys):
            continue
        for k in keys:
            load[k] = load.get(k, 0) + tx
        lines += [
            "[[stream]]",
            f'name = "s{accepted}"',
            f'talker = "{talker}"',
            f'listeners = ["{listener}"]',
            f"period = {period}",
            f"frame_bytes = {frame}",
            f"max_latency = {4 * period}",
            "route = [" + ", ".join(f'"{x}"' for x in route) + "]",
        ]
        accepted += 1
    busiest = max(load.values(), default=0) * 100 / (2_000_000 * 1000)
    return "\n".join(lines) + "\n", accepted, busiest


def plan_and_verify(text: str, timing: str, queueing: bool, time_limit: float) -> dict:
    """Plan one description (``timing`` set for the whole network), write it, verify it; a result row's fields."""
    from ..deadline import Deadline, TimeLimitExceeded
    from .certificate import load_per_link
    from .command import write_all
    from .plan import plan_network
    from .topology import parse_network
    from .verify import verify_plan_dir

    net = parse_network(f'timing = "{timing}"\n' + text, "<generated>")
    t0 = time.monotonic()
    deadline = Deadline(time_limit, start=t0)
    row: dict = {"timing": timing, "queueing": "yes" if queueing else "no", "kind": "", "reason": ""}
    try:
        status, payload = plan_network(net, deadline, "auto", say=lambda m: None, queueing=queueing)
    except TimeLimitExceeded as exc:
        status, payload = "unknown", str(exc)
    except InputError as exc:
        row.update(status="bad input", placed=0, plan_s=time.monotonic() - t0, total_s=time.monotonic() - t0)
        row.update(verified="", reason=exc.message)
        return row
    t1 = time.monotonic()
    row.update(status=status, plan_s=t1 - t0, placed=0, verified="")
    if status == "infeasible":
        row.update(kind=payload.certificate["kind"], reason=str(payload), total_s=t1 - t0)
        return row
    if status != "plan":
        row.update(reason=str(payload), total_s=t1 - t0)
        return row
    routed, starts, rings, method = payload
    row["placed"] = len(starts)
    padded = load_per_link(routed, own=False)
    row["busiest_padded_pct"] = f"{float(max(padded.values())) * 100:.1f}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plan"
        try:
            write_all(net, out, routed, starts, rings, method, exports=False, station_check=False)
        except InputError as exc:  # a gate list beyond the device's limits
            row.update(status="unknown", reason=exc.message, total_s=time.monotonic() - t0)
            return row
        bad = verify_plan_dir(net, out)
    row.update(verified="yes" if not bad else f"NO: {bad[0]}", total_s=time.monotonic() - t0)
    return row


def _timed(text: str, timing: str, queueing: bool, time_limit: float) -> dict:
    c0 = time.process_time()
    row = plan_and_verify(text, timing, queueing, time_limit)
    row["cpu_s"] = f"{time.process_time() - c0:.3f}"
    return row


STAGE_FIELDS = ["topology", "bridges", "stations", "target_pct", "streams", "busiest_own_pct", "timing", "status"]
STAGE_FIELDS += [
    f"{stage}_{clock}" for stage in ("read", "plan", "write", "verify", "total") for clock in ("s", "cpu_s")
]
STAGE_FIELDS += ["placed", "violations", "reason"]


def stages(text: str, timing: str, time_limit: float) -> dict:
    """One large instance stage by stage (wall and CPU seconds): read, plan, write (plan, configs, gate lists; no
    YANG or taprio; the network verifier stands for the station verifier), verify."""
    from ..deadline import Deadline, TimeLimitExceeded
    from .command import write_all
    from .plan import plan_network
    from .topology import parse_network
    from .verify import verify_plan_dir

    def now() -> tuple[float, float]:
        return time.monotonic(), time.process_time()

    row: dict = {"timing": timing, "reason": ""}
    marks = [now()]
    net = parse_network(f'timing = "{timing}"\n' + text, "<generated>")
    marks.append(now())
    try:
        status, payload = plan_network(net, Deadline(time_limit), "auto", say=lambda m: None)
    except TimeLimitExceeded as exc:
        status, payload = "unknown", str(exc)
    marks.append(now())
    row.update(status=status, placed=0, violations="")
    if status == "plan":
        routed, starts, rings, method = payload
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "plan"
            write_all(net, out, routed, starts, rings, method, exports=False, station_check=False)
            marks.append(now())
            bad = verify_plan_dir(net, out)
            marks.append(now())
        row.update(placed=len(starts), violations=len(bad))
    else:
        row["reason"] = str(payload)[:300]
        marks += [marks[-1], marks[-1]]
    for stage, (a, b) in zip(("read", "plan", "write", "verify"), itertools.pairwise(marks), strict=True):
        row[f"{stage}_s"], row[f"{stage}_cpu_s"] = f"{b[0] - a[0]:.1f}", f"{b[1] - a[1]:.1f}"
    row["total_s"], row["total_cpu_s"] = f"{marks[-1][0] - marks[0][0]:.1f}", f"{marks[-1][1] - marks[0][1]:.1f}"
    return row


def run_stages(args: argparse.Namespace, out: Path, command: str) -> int:
    counts = [int(x) for x in args.streams.split(",")]
    rows = []
    with open(out / "stages.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, STAGE_FIELDS)
        w.writeheader()
        for topo in args.topologies.split(","):
            for bridges in (int(x) for x in args.bridges.split(",")):
                for frames in args.frames.split(","):
                    for k, load in enumerate(int(x) for x in args.loads.split(",")):
                        text, accepted, busiest = generate(
                            topo,
                            bridges,
                            counts[k % len(counts)],
                            frames,
                            load,
                            args.seed,
                            args.per_bridge,
                            args.reach,
                            draws=40,
                        )
                        for timing in sorted({m.split("/")[0] for m in args.modes.split(",")}):
                            row = stages(text, timing, args.time_limit)
                            row.update(
                                topology=topo,
                                bridges=bridges,
                                stations=bridges * args.per_bridge,
                                target_pct=load,
                                streams=accepted,
                                busiest_own_pct=f"{busiest:.1f}",
                            )
                            w.writerow(row)
                            fh.flush()
                            rows.append(row)
                            print(row, flush=True)
    lines = [
        "# keepon-plan network-sweep --stages",
        "",
        f"Produced by `{command}` (raw rows: `stages.csv`). Seconds, wall / CPU of this process.",
        "",
        "| topology | bridges | stations | streams | busiest own % | talkers | status | placed | read | plan | write "
        "| verify | total | violations |",
        "|---|---:|---:|---:|---:|---|---|---:|---|---|---|---|---|---:|",
    ]
    for r in rows:
        cell = {st: f"{r[st + '_s']} / {r[st + '_cpu_s']}" for st in ("read", "plan", "write", "verify", "total")}
        lines.append(
            f"| {r['topology']} | {r['bridges']} | {r['stations']} | {r['streams']} | {r['busiest_own_pct']} | "
            f"{r['timing']} | {r['status']} | {r['placed']} | {cell['read']} | {cell['plan']} | {cell['write']} | "
            f"{cell['verify']} | {cell['total']} | {r['violations']} |"
        )
        if r["reason"]:
            lines.append(f"  ({r['reason']})")
    (out / "stages.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def summarise(rows: list[dict], command: str) -> str:
    """summary.md: per mode and busiest-link load (the target the generator aimed at), the share planned, unknown
    and proven infeasible, median and max time to a verified plan (or to the answer), and plans verified."""
    import statistics

    lines = [
        "# keepon-plan network-sweep",
        "",
        f"Produced by `{command}` (raw rows: `rows.csv`).",
        "",
        "| talkers | queueing | target load % | sets | streams (median) | busiest own % (median) | planned | unknown "
        "| infeasible (certificate kinds) | bad input | median s | max s | median CPU s | verified |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    keys = sorted({(r["timing"], r["queueing"], int(r["target_pct"])) for r in rows})
    for timing, queueing, load in keys:
        sel = [r for r in rows if (r["timing"], r["queueing"], int(r["target_pct"])) == (timing, queueing, load)]
        n = len(sel)
        planned = [r for r in sel if r["status"] == "plan"]
        infeasible = [r for r in sel if r["status"] == "infeasible"]
        kinds: dict[str, int] = {}
        for r in infeasible:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        times = [float(r["total_s"]) for r in sel]
        cpu = [float(r["cpu_s"]) for r in sel]
        verified = sum(1 for r in planned if r["verified"] == "yes")
        lines.append(
            f"| {timing} | {queueing} | {load} | {n} | {statistics.median(int(r['streams']) for r in sel):.0f} | "
            f"{statistics.median(float(r['busiest_own_pct']) for r in sel):.1f} | "
            f"{len(planned)} ({100 * len(planned) / n:.0f} %) | "
            f"{sum(1 for r in sel if r['status'] == 'unknown')} | "
            f"{len(infeasible)} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or '–'}) | "
            f"{sum(1 for r in sel if r['status'] == 'bad input')} | "
            f"{statistics.median(times):.2f} | {max(times):.2f} | "
            f"{statistics.median(cpu):.2f} | {verified} of {len(planned)} |"
        )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topologies", default="ring,mesh,line,star")
    p.add_argument("--bridges", default="20,100")
    p.add_argument("--streams", default="1000", help="most streams per set, cycled over the sets")
    p.add_argument("--frames", default="1522,random")
    p.add_argument("--loads", default="20,35,50,65,75,85,95", help="busiest-link targets, % of own lengths")
    p.add_argument("--modes", default="slots/no-wait,slots/queueing,bytes/no-wait,bytes/queueing")
    p.add_argument("--per-bridge", type=int, default=2)
    p.add_argument("--reach", type=int, default=None, help="listener within this many bridge hops")
    p.add_argument("--time-limit", type=float, default=5.0, metavar="S", help="per plan")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="validation/network-bench", metavar="DIR")
    p.add_argument("--stages", action="store_true", help="large instances stage by stage (stages.csv, stages.md)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(x) for x in args.streams.split(",")]
    modes = [m.split("/") for m in args.modes.split(",")]
    import shlex
    import sys

    command = "keepon-plan " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if args.stages:
        return run_stages(args, out, command)
    worst = 0
    n = 0
    rows: list[dict] = []
    with open(out / "rows.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        for topo in args.topologies.split(","):
            for bridges in (int(x) for x in args.bridges.split(",")):
                for frames in args.frames.split(","):
                    for load in (int(x) for x in args.loads.split(",")):
                        seed = args.seed + n
                        m = counts[n % len(counts)]
                        n += 1
                        text, accepted, busiest = generate(
                            topo, bridges, m, frames, load, seed, args.per_bridge, args.reach
                        )
                        for timing, mode in modes:
                            row = _timed(text, timing, mode == "queueing", args.time_limit)
                            row.update(
                                topology=topo,
                                bridges=bridges,
                                frames=frames,
                                target_pct=load,
                                seed=seed,
                                streams=accepted,
                                busiest_own_pct=f"{busiest:.1f}",
                            )
                            row["plan_s"] = f"{row['plan_s']:.3f}"
                            row["total_s"] = f"{row['total_s']:.3f}"
                            if str(row.get("verified", "")).startswith("NO"):
                                worst = 4
                            w.writerow(row)
                            rows.append(row)
                            fh.flush()
                            print(
                                f"{topo} {bridges} {frames} {load}% {accepted} streams ({busiest:.0f} %) {timing}/"
                                f"{mode}: {row['status']} {row['placed']} in {row['total_s']} s ({row['cpu_s']} s CPU) "
                                f"{row['kind']}",
                                flush=True,
                            )
                        (out / "summary.md").write_text(summarise(rows, command), encoding="utf-8")
    return worst
