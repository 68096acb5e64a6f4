"""``keepon-plan network-bench``: the network planner at scale, on generated topologies (not a timed test).

Each instance: ``S`` switches in a line, a ring or a tree (binary, breadth first), joined by 10 Gb/s links with
500 ns propagation and 2 µs forwarding delay; ``K`` keepon stations on each switch at 1 Gb/s; ``M`` streams, each
from a random station to one listener on a switch at most ``--reach`` switch hops away (local traffic, as in a
cell or a machine), period from {500 µs, 1 ms, 2 ms}, frames of 64…100 bytes, latency bound 1 ms. On the ring the
generator gives every stream its route (shortest, ties clockwise), as a user of a ring must. Reported per instance:
the time to a *verified* plan (reading, rings, routing, placement, writing every file including the YANG and taprio
exports, and the independent verifier's replay), each stage's share, and the streams placed.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from ..model import InputError

PERIODS = ("500us", "1ms", "2ms")


def generate(
    topology: str,
    switches: int,
    streams: int,
    per_switch: int,
    reach: int,
    seed: int,
    guard: str | None = None,
    max_jitter: str | None = None,
) -> str:
    """The description of one instance; ``guard`` and ``max_jitter`` (durations) are written when given."""
    rng = random.Random(seed)
    lines = ["version = 1", "base_time = 1_000_000_000"]
    if guard is not None:
        lines.append(f'guard = "{guard}"')
    sw = [f"sw{i}" for i in range(switches)]
    for name in sw:
        lines += ["[[switch]]", f'name = "{name}"', 'forwarding_delay = "2us"']
    edges: list[tuple[int, int]] = []
    if topology == "line":
        edges = [(i, i + 1) for i in range(switches - 1)]
    elif topology == "ring":
        edges = [(i, (i + 1) % switches) for i in range(switches)]
    elif topology == "tree":
        edges = [((i - 1) // 2, i) for i in range(1, switches)]
    else:
        raise ValueError(topology)
    for a, b in edges:
        lines += ["[[link]]", f'a = "{sw[a]}"', f'b = "{sw[b]}"', 'rate = "10Gbps"', 'delay = "500ns"']
    adj: dict[int, list[int]] = {i: [] for i in range(switches)}
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    for i in range(switches):
        for k in range(per_switch):
            lines += ["[[station]]", f'name = "h{i}-{k}"', "[[link]]", f'a = "h{i}-{k}"', f'b = "{sw[i]}"']
            lines += ['rate = "1Gbps"', 'delay = "100ns"']
    for n in range(streams):
        src = rng.randrange(switches)
        # switches within `reach` hops, with the path to each (BFS; on a ring ties go clockwise: i+1 first)
        prev = {src: None}
        frontier = [src]
        for _ in range(reach):
            nxt = []
            for u in frontier:
                for v in sorted(adj[u], key=lambda v, u=u: (v - u) % switches):
                    if v not in prev:
                        prev[v] = u
                        nxt.append(v)
            frontier = nxt
        dst = rng.choice(list(prev))
        talker = f"h{src}-{rng.randrange(per_switch)}"
        listener = f"h{dst}-{rng.randrange(per_switch)}"
        while listener == talker:
            listener = f"h{dst}-{rng.randrange(per_switch)}"
        lines += [
            "[[stream]]",
            f'name = "s{n}"',
            f'talker = "{talker}"',
            f'listeners = ["{listener}"]',
            f'period = "{rng.choice(PERIODS)}"',
            f"frame_bytes = {rng.randint(64, 100)}",
            'max_latency = "1ms"',
        ]
        if max_jitter is not None:
            lines.append(f'max_jitter = "{max_jitter}"')
        if topology == "ring":
            path = [dst]
            while path[-1] != src:
                path.append(prev[path[-1]])
            route = [talker, *(sw[i] for i in reversed(path)), listener]
            lines.append("route = [" + ", ".join(f'"{x}"' for x in route) + "]")
    return "\n".join(lines) + "\n"


def run_one(text: str, time_limit: float) -> dict:
    from ..deadline import Deadline
    from .command import plan_network, write_all
    from .topology import parse_network
    from .verify import verify_plan_dir

    t0 = time.monotonic()
    deadline = Deadline(time_limit, start=t0)
    net = parse_network(text, "<generated>")
    t1 = time.monotonic()
    status, payload = plan_network(net, deadline, "heuristic", say=lambda m: None)
    t2 = time.monotonic()
    row = {"streams": len(net.streams), "status": status, "read_s": t1 - t0, "plan_s": t2 - t1}
    if status != "plan":
        row.update(placed=0, verified=False, total_s=t2 - t0, reason=str(payload))
        return row
    routed, departures, rings, method = payload
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plan"
        write_all(net, out, routed, departures, rings, method)
        t3 = time.monotonic()
        bad = verify_plan_dir(net, out)
        t4 = time.monotonic()
    row.update(placed=len(departures), verified=not bad, write_s=t3 - t2, verify_s=t4 - t3, total_s=t4 - t0)
    return row


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topologies", default="line,ring,tree", help="comma-separated: line, ring, tree")
    p.add_argument("--switches", default="10,100", help="comma-separated switch counts")
    p.add_argument("--streams", default="100,1000,10000", help="comma-separated stream counts")
    p.add_argument("--per-switch", type=int, default=4, help="keepon stations per switch")
    p.add_argument("--reach", type=int, default=3, help="largest switch hops from talker to listener")
    p.add_argument("--time-limit", type=float, default=300.0, metavar="S", help="per instance")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--write", metavar="DIR", help="also write each generated description to DIR")


def run(args: argparse.Namespace) -> int:
    print(
        "| topology | switches | stations | streams | placed | verified | read s | plan s | write s | verify s "
        "| total s |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    worst = 0
    for topo in args.topologies.split(","):
        for s in (int(x) for x in args.switches.split(",")):
            for m in (int(x) for x in args.streams.split(",")):
                text = generate(topo, s, m, args.per_switch, args.reach, args.seed)
                if args.write:
                    Path(args.write).mkdir(parents=True, exist_ok=True)
                    (Path(args.write) / f"{topo}-{s}-{m}.toml").write_text(text, encoding="utf-8")
                try:
                    r = run_one(text, args.time_limit)
                except InputError as exc:  # e.g. a gate list beyond supported_list_max: reported, not fatal
                    print(f"| {topo} | {s} | {s * args.per_switch} | {m} | – | – | bad input: {exc.message} |||||")
                    continue
                if r["status"] == "plan" and not r["verified"]:
                    worst = 4
                print(
                    f"| {topo} | {s} | {s * args.per_switch} | {m} | {r['placed']} | "
                    f"{'yes' if r.get('verified') else 'no'} | {r['read_s']:.2f} | {r['plan_s']:.2f} | "
                    f"{r.get('write_s', 0):.2f} | {r.get('verify_s', 0):.2f} | {r['total_s']:.2f} |",
                    flush=True,
                )
                if r["status"] != "plan":
                    print(f"  ({r['status']}: {r['reason']})", flush=True)
    return worst
