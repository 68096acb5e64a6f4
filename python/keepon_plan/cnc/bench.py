"""``keepon-plan cnc-bench``: join latency at N streams in force, and the restart time with them (a benchmark).

A generated network: ``--switches`` 10 Gb/s switches in a line (500 ns links, 1 µs forwarding), ``--stations`` keepon
stations on each at 1 Gb/s (230-byte slots, 2 µs; 500 slots: a 1 ms cycle). Streams go from a random station to a
random station at most two switches away, interval 250 µs, 500 µs or 1 ms, frames 64–200 bytes, max-latency 1 ms.
For each N of ``--streams`` it fills the CNC to N streams in force in one transaction (the same first fit as a join,
without the API; streams that do not fit are skipped; then :meth:`~keepon_plan.cnc.service.Cnc.settle`, as every
join and a restart end), then times ``--joins`` joins through
:meth:`~keepon_plan.cnc.service.Cnc.join` (the whole operation: parse, route, fit, the database's transactions with
``synchronous = FULL``, the fake devices) and the same number of leaves, then the restart: a new CNC over the
database (read, route, rebuild the placement) and its recovery.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path


def topology(switches: int, stations: int) -> str:
    out = ["version = 1", "base_time = 0"]
    for s in range(switches):
        out.append(f'[[switch]]\nname = "sw{s}"\nforwarding_delay = "1us"')
        for k in range(stations):
            out.append(f'[[station]]\nname = "s{s}-{k}"\nslot_bytes = 230\nslots = 500')
            out.append(f'[[link]]\na = "s{s}-{k}"\nb = "sw{s}"\nrate = "1Gbps"')
        if s:
            out.append(f'[[link]]\na = "sw{s - 1}"\nb = "sw{s}"\nrate = "10Gbps"\ndelay = "500ns"')
    return "\n".join(out) + "\n"


def mac(i: int) -> str:
    return "02-00-" + "-".join(f"{b:02X}" for b in i.to_bytes(4, "big"))


def request(sid: int, talker: str, listener: str, rng: random.Random) -> dict:
    den = rng.choice((4000, 2000, 1000))
    return {
        "keepon-cnc:input": {
            "stream-id": f"{talker}:{sid >> 8 & 255:02X}-{sid & 255:02X}",
            "talker": {
                "end-station-interfaces": [{"mac-address": talker}],
                "traffic-specification": {
                    "interval": {"numerator": 1, "denominator": den},
                    "max-frames-per-interval": 1,
                    "max-frame-size": rng.randint(64, 200),
                },
                "user-to-network-requirements": {"max-latency": 1_000_000},
            },
            "listeners": [{"end-station-interfaces": [{"mac-address": listener}]}],
        }
    }


def _pick(rng: random.Random, names: list[list[str]]) -> tuple[str, str]:
    s = rng.randrange(len(names))
    d = min(len(names) - 1, max(0, s + rng.randint(-2, 2)))
    t = rng.choice(names[s])
    lst = rng.choice([n for n in names[d] if n != t])
    return t, lst


def fill(cnc, n: int, rng: random.Random, names: list[list[str]], macs: dict[str, str]) -> int:
    """Place up to ``n`` streams (first fit) and record them in force in one transaction; returns how many."""
    from .incremental import Refused
    from .tsn_types import RequestError, parse_join

    rows = []
    per_talker: dict[str, int] = {}
    tries = 0
    while len(rows) < n and tries < 3 * n:
        tries += 1
        t, lst = _pick(rng, names)
        k = per_talker.get(t, 0)
        per_talker[t] = k + 1
        body = request(k, macs[t], macs[lst], rng)
        join = parse_join(body)
        try:
            r = cnc.inc.route(cnc._stream(join))
            starts = cnc.inc.fit(r)
        except (Refused, RequestError):
            continue
        cnc.inc.add(r, starts)
        cnc.requests[join.stream_id] = join
        rows.append((join.stream_id, t, json.dumps(join.row()), json.dumps(list(starts))))
    with cnc.store.tx() as db:
        db.executemany("INSERT INTO streams VALUES (?, ?, ?, ?, 'in-force', NULL)", rows)
    cnc.settle()  # as after the joins or the restart that would have brought these streams in
    return len(rows)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def run(args: argparse.Namespace) -> int:
    from .distribute import FakeNetwork
    from .service import Cnc, configure
    from .store import Store

    rng = random.Random(args.seed)
    names = [[f"s{s}-{k}" for k in range(args.stations)] for s in range(args.switches)]
    macs = {n: mac(i) for i, n in enumerate(x for row in names for x in row)}
    print("| streams in force | joins | join p50 ms | join p99 ms | leave p50 ms | restart s (open + recover) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in args.streams:
        with tempfile.TemporaryDirectory() as tmp:
            db = str(Path(tmp) / "cnc.db")
            store = Store(db)
            configure(store, topology(args.switches, args.stations), None, 1_000_000, {m: s for s, m in macs.items()})
            fake = FakeNetwork(time=10**9)
            cnc = Cnc(store, fake)
            placed = fill(cnc, n, rng, names, macs)
            joins, leaves, joined = [], [], []
            k = 0
            while len(joins) < args.joins and k < 20 * args.joins:
                k += 1
                t, lst = _pick(rng, names)
                body = request(60000 + k, macs[t], macs[lst], rng)
                t0 = time.perf_counter()
                try:
                    out = cnc.join(body)
                except Exception:  # refused (the network is full there): not a join to time
                    continue
                joins.append(time.perf_counter() - t0)
                joined.append(out["keepon-cnc:output"]["stream-id"])
            for sid in joined:
                t0 = time.perf_counter()
                cnc.leave({"keepon-cnc:input": {"stream-id": sid}})
                leaves.append(time.perf_counter() - t0)
            store.close()
            t0 = time.perf_counter()
            again = Cnc(Store(db), fake)
            again.recover()
            restart = time.perf_counter() - t0
            assert len(again.requests) == placed
            again.store.close()
            print(
                f"| {placed} | {len(joins)} | {_pct(joins, 0.5) * 1e3:.1f} | {_pct(joins, 0.99) * 1e3:.1f} | "
                f"{statistics.median(leaves) * 1e3:.1f} | {restart:.2f} |",
                flush=True,
            )
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 10000])
    p.add_argument("--joins", type=int, default=200, help="joins timed at each size")
    p.add_argument("--switches", type=int, default=20)
    p.add_argument("--stations", type=int, default=10, help="per switch")
    p.add_argument("--seed", type=int, default=0)
