"""``keepon-plan network-compare``: network-bench's instances, planned by keepon and by TSNKit.

TSNKit (Xue et al., RTAS 2024; PyPI ``tsnkit``, MIT) is a published open-source benchmark of TSN scheduling
algorithms. It is **not** a dependency of keepon: it runs as a subprocess from a Python environment of its own
(``--tsnkit-python``), on two CSV files written here from the same generated description (same generator, same
seed) that network-bench plans.

How a description becomes TSNKit's input (TSNKit 0.3.0 counts time in 100 ns units and rounds every input up to
them; its rates are 1 Gb/s, 100, 10 and 1 Mb/s only):

- nodes are numbered switches first, then stations, in the description's order; every full-duplex link is two
  directed rows ``link,q_num,rate,t_proc,t_prop`` with 8 queues;
- ``rate`` is the fastest TSNKit rate not faster than the link: a 10 Gb/s link is written as 1 Gb/s, so its
  frames take ten times as long there as they do (conservative: TSNKit's problem is harder than keepon's);
- ``t_proc`` of ``u→v`` is the link's propagation delay plus ``v``'s forwarding delay (TSNKit's algorithms add
  ``t_proc`` after each transmission and never read ``t_prop``, which carries the propagation delay alone);
- one stream row ``stream,src,dst,size,period,deadline,jitter`` per stream: ``size`` the bytes a frame occupies on
  the wire as keepon sends it (padded to the talker's slot, with preamble, SFD and gap), ``deadline`` the latency
  bound but at most the period (TSNKit refuses a longer one), ``jitter`` the jitter bound. TSNKit takes no given
  route: it chooses among all simple paths itself (on the ring, either way round).

TSNKit's plan cannot be replayed by keepon's verifier: its departures lie on a 100 ns grid, not on the talkers'
ring slots, and its hop times follow its rounded model (1 Gb/s for 10 Gb/s), not the no-wait times of the real
links that the verifier recomputes. What is checked instead is the plan **in TSNKit's own model**, without its code
(:func:`check_own_model`): every stream's route joins its talker to its listener, every frame of every stream has its
window on every hop at the no-wait time the model gives (``ls`` is no-wait), within the deadline, and no two windows
overlap on any directed link over the hyperperiod.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import itertools
import math
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .topology import Network

TSNKIT_VERSION = "0.3.0"
TSNKIT_UNIT_NS = 100
"""TSNKit's time unit (its ``T_SLOT``): every duration, and the frame size in bytes, is rounded up to it."""
TSNKIT_RATES = {1: 10**9, 10: 10**8, 100: 10**7, 1000: 10**6}
"""TSNKit's ``rate`` column: nanoseconds per bit, so the rates it knows."""
NO_WAIT = {"ls"}
"""Algorithms whose plan puts each hop right after the previous one (what :func:`check_own_model` replays)."""


def _ceil_ns(ps: int) -> int:
    return -(-ps // 1000)


def tsnkit_rate(bps: int) -> int:
    """The code of the fastest TSNKit rate not faster than ``bps``."""
    for code in sorted(TSNKIT_RATES):
        if TSNKIT_RATES[code] <= bps:
            return code
    raise ValueError(f"a link of {bps} b/s is slower than any rate TSNKit knows (1 Mb/s)")


def node_ids(net: Network) -> dict[str, int]:
    """Switches first, then stations, each in the description's order."""
    return {name: i for i, name in enumerate([*net.switches, *net.stations])}


def tsnkit_instance(net: Network, wire_bytes: dict[str, int]) -> tuple[str, str]:
    """(network CSV, stream CSV) in TSNKit's input format; ``wire_bytes``: per talker, a frame's bytes on the wire."""
    ids = node_ids(net)
    topo = io.StringIO()
    w = csv.writer(topo, lineterminator="\n")
    w.writerow(["link", "q_num", "rate", "t_proc", "t_prop"])
    for link in net.links:
        for u, v in ((link.a, link.b), (link.b, link.a)):
            fwd = net.switches[v].forwarding_delay_ps if v in net.switches else 0
            prop = _ceil_ns(link.delay_ps)
            w.writerow([f"({ids[u]}, {ids[v]})", 8, tsnkit_rate(link.rate), _ceil_ns(link.delay_ps + fwd), prop])
    task = io.StringIO()
    w = csv.writer(task, lineterminator="\n")
    w.writerow(["stream", "src", "dst", "size", "period", "deadline", "jitter"])
    for i, s in enumerate(net.streams):
        if len(s.listeners) != 1:
            raise ValueError(f"stream {s.name!r}: TSNKit schedules unicast streams only")
        deadline = min(s.max_latency_ns, s.period_ns)
        row = [i, ids[s.talker], f"[{ids[s.listeners[0]]}]", wire_bytes[s.talker], s.period_ns, deadline]
        w.writerow([*row, min(s.max_jitter_ns, s.period_ns)])
    return topo.getvalue(), task.getvalue()


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _link(text: str) -> tuple[int, int]:
    u, v = ast.literal_eval(text)
    return int(u), int(v)


def check_own_model(topo_csv: str, task_csv: str, out: Path, name: str, no_wait: bool) -> list[str]:
    """Violations of TSNKit's written plan (``out/NAME-{GCL,OFFSET,ROUTE}.csv``) in its own rounded model."""
    unit = TSNKIT_UNIT_NS
    links = {}
    for r in csv.DictReader(io.StringIO(topo_csv)):
        links[_link(r["link"])] = (int(r["rate"]), -(-int(r["t_proc"]) // unit) * unit)
    streams = list(csv.DictReader(io.StringIO(task_csv)))
    gcl: dict[tuple[int, int], list[tuple[int, int]]] = {}
    cycle = 0
    for r in _read(out / f"{name}-GCL.csv"):
        gcl.setdefault(_link(r["link"]), []).append((int(r["start"]), int(r["end"])))
        cycle = int(r["cycle"])
    offset = {int(r["stream"]): int(r["offset"]) for r in _read(out / f"{name}-OFFSET.csv") if r["frame"] == "0"}
    route: dict[int, list[tuple[int, int]]] = {}
    for r in _read(out / f"{name}-ROUTE.csv"):
        route.setdefault(int(r["stream"]), []).append(_link(r["link"]))
    bad = []
    for link, windows in gcl.items():
        windows.sort()
        folded = sorted((a % cycle, b - a) for a, b in windows)
        for (a0, l0), (a1, _) in itertools.pairwise(folded):
            if a0 + l0 > a1:
                bad.append(f"link {link}: windows at {a0} and {a1} ns overlap")
        if folded and folded[-1][0] + folded[-1][1] > cycle + folded[0][0]:
            bad.append(f"link {link}: the last window wraps onto the first")
    starts = {link: {a for a, _ in w} for link, w in gcl.items()}
    for i, s in enumerate(streams):
        hops = route.get(i)
        src, dst = int(s["src"]), ast.literal_eval(s["dst"])[0]
        if not hops or i not in offset:
            bad.append(f"stream {i}: no route or no offset")
            continue
        path = [hops[0][0]] + [v for _, v in hops]
        if (
            path[0] != src
            or path[-1] != dst
            or any(h not in links for h in hops)
            or any(a[1] != b[0] for a, b in itertools.pairwise(hops))
        ):
            bad.append(f"stream {i}: route {hops} does not join {src} to {dst}")
            continue
        if not no_wait:
            continue
        size, period, deadline = -(-int(s["size"]) // unit), int(s["period"]), int(s["deadline"])
        t = offset[i]
        for link in hops:
            rate, proc = links[link]
            tx = math.ceil(size * 8 / rate) * unit
            for k in range(cycle // period):
                if t + k * period not in starts.get(link, ()):
                    bad.append(f"stream {i}: frame {k} has no window on {link} at {t + k * period} ns")
            t += tx + proc
        if t - offset[i] > deadline:
            bad.append(f"stream {i}: latency {t - offset[i]} ns > deadline {deadline} ns")
    return bad


def run_tsnkit(python: str, algorithm: str, topo_csv: str, task_csv: str, limit: float) -> dict:
    """Run one TSNKit algorithm as a subprocess (killed with its process group at ``limit`` s of wall time)."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "net.csv").write_text(topo_csv, encoding="utf-8")
        (d / "task.csv").write_text(task_csv, encoding="utf-8")
        out = d / "out"
        out.mkdir()
        cmd = [python, "-m", f"tsnkit.algorithms.{algorithm}", "task.csv", "net.csv", "out/", "1", "run"]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"flag": "timeout", "wall_s": time.monotonic() - t0, "reason": f"no answer in {limit:g} s"}
        wall = time.monotonic() - t0
        row = {"flag": "err", "wall_s": wall, "reason": (stderr.decode(errors="replace").strip() or "no output")[-300:]}
        for line in stdout.decode(errors="replace").splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 6 and cells[1] == "run":
                row.update(flag=cells[2], solve_s=float(cells[3]), cpu_s=float(cells[4]))
        if row["flag"] == "succ":
            row["violations"] = check_own_model(topo_csv, task_csv, out, "run", algorithm in NO_WAIT)
        return row


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .bench import add_arguments as bench_arguments

    bench_arguments(p)
    p.set_defaults(switches="10", streams="100,1000", time_limit=120.0)
    p.add_argument("--tsnkit-python", required=True, metavar="PY", help=f"a Python with tsnkit=={TSNKIT_VERSION}")
    p.add_argument("--algorithms", default="ls", help="comma-separated TSNKit algorithms (default ls)")


def run(args: argparse.Namespace) -> int:
    from ..model import InputError
    from .bench import generate, run_one
    from .stations import station_rings
    from .topology import parse_network

    algos = args.algorithms.split(",")
    head = "| topology | switches | streams | keepon placed | keepon verified | keepon total s |"
    print(head + "".join(f" TSNKit {a} | {a} wall s | {a} solve s | {a} own-model check |" for a in algos))
    print("|---|---:|---:|---:|---|---:|" + "---|---:|---:|---|" * len(algos), flush=True)
    for topo in args.topologies.split(","):
        for s in (int(x) for x in args.switches.split(",")):
            for m in (int(x) for x in args.streams.split(",")):
                text = generate(topo, s, m, args.per_switch, args.reach, args.seed)
                cells = [topo, str(s), str(m)]
                try:
                    net = parse_network(text, "<generated>")
                    rings = station_rings(net)
                except InputError as exc:
                    print(f"| {topo} | {s} | {m} | bad input: {exc.message} |", flush=True)
                    continue
                notes = []
                try:
                    r = run_one(text, args.time_limit)
                    cells += [str(r["placed"]), "yes" if r.get("verified") else "no", f"{r['total_s']:.2f}"]
                    if r["status"] != "plan":
                        notes.append(f"  (keepon: {r['status']}: {r['reason']})")
                except InputError as exc:  # e.g. a gate list beyond supported_list_max: TSNKit still runs
                    cells += ["–", "–", "–"]
                    notes.append(f"  (keepon: bad input: {exc.message})")
                wire = {name: ring.choice.slot_bytes + 20 for name, ring in rings.items()}
                topo_csv, task_csv = tsnkit_instance(net, wire)
                if args.write:
                    d = Path(args.write)
                    d.mkdir(parents=True, exist_ok=True)
                    (d / f"{topo}-{s}-{m}.toml").write_text(text, encoding="utf-8")
                    (d / f"{topo}-{s}-{m}-tsnkit-topo.csv").write_text(topo_csv, encoding="utf-8")
                    (d / f"{topo}-{s}-{m}-tsnkit-task.csv").write_text(task_csv, encoding="utf-8")
                for a in algos:
                    t = run_tsnkit(args.tsnkit_python, a, topo_csv, task_csv, args.time_limit)
                    check = "–"
                    if "violations" in t:
                        check = "ok" if not t["violations"] else f"{len(t['violations'])} violations"
                        notes += [f"  ({a}: {v})" for v in t["violations"][:3]]
                    elif t["flag"] != "fail":
                        notes.append(f"  ({a}: {t['flag']}: {t['reason']})")
                    solve = f"{t['solve_s']:.2f}" if "solve_s" in t else "–"
                    cells += [t["flag"], f"{t['wall_s']:.2f}", solve, check]
                print("| " + " | ".join(cells) + " |", flush=True)
                for n in notes:
                    print(n, flush=True)
    return 0
