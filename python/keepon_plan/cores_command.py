"""``keepon-plan cores``: allocate a station's streams to poll cores (:mod:`keepon_plan.cores`), from a stream list
or from the talkers of a network plan directory (``--plan DIR``, each sending port on its own), every allocation
checked by the instance-by-instance verifier.

Exit status as ``solve``'s: 0 every allocation found and verified, 1 some port proven infeasible on ``K`` cores (the
conflicting streams named), 2 unknown (CP-SAT's time limit), 3 bad input, 4 an allocation failed the verifier.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from .cores import (
    DEFAULT_BUDGET,
    FOUND,
    INFEASIBLE,
    CoreBudget,
    CoreStream,
    allocate,
    load_cores,
    min_cores,
    verify_allocation,
)
from .model import InputError
from .units import ValueError_, parse_duration

EXIT_OK, EXIT_INFEASIBLE, EXIT_UNKNOWN, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3, 4


def _say(msg: str) -> None:
    print(f"keepon-plan: {msg}", file=sys.stderr, flush=True)


def _duration(text: str) -> int:
    try:
        return parse_duration(int(text) if text.isdigit() else text)
    except ValueError_ as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_arguments(p: argparse.ArgumentParser, positive, seconds) -> None:
    p.add_argument("streams", metavar="STREAMS.toml", nargs="?", help="a stream list (or --plan DIR)")
    p.add_argument("--plan", metavar="DIR", help="allocate the talkers of a keepon-plan network directory instead")
    p.add_argument("--station", metavar="NAME", help="--plan: this talker only (default: every talker)")
    p.add_argument(
        "--cores", type=positive, metavar="K", help="cores available (default: [core] cores, else the fewest)"
    )
    for flag, what in (
        ("--host-delay", "worst-case host delay"),
        ("--prefetch", "NIC pre-fetch lead"),
        ("--per-frame", "cost per frame"),
        ("--per-descriptor", "cost per descriptor"),
    ):
        p.add_argument(flag, type=_duration, metavar="DURATION", help=f"{what} (overrides [core] and the default)")
    p.add_argument("--out", metavar="FILE.json", help="write the allocation (JSON)")
    p.add_argument("--time-limit", type=seconds, default=10.0, metavar="S", help="CP-SAT's time per port (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def _budget(args: argparse.Namespace, budget: CoreBudget) -> CoreBudget:
    changes = {
        field: value
        for field, value in (
            ("host_delay_ns", args.host_delay),
            ("prefetch_ns", args.prefetch),
            ("per_frame_ns", args.per_frame),
            ("per_descriptor_ns", args.per_descriptor),
        )
        if value is not None
    }
    return dataclasses.replace(budget, **changes)


def streams_of_plan(directory: str) -> dict[str, list[CoreStream]]:
    """Per sending port of a network plan (the talker's name, or ``talker.port`` on a two-port talker), its streams
    with the launch offsets the plan fixed (``departure_ps`` modulo the period; a departure between two ns becomes a
    window over both, so the allocation holds for either rounding)."""
    path = Path(directory) / "plan.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        links = doc["network"]["links"]
        entries = doc["streams"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a keepon-plan network directory: {exc}", str(path)) from exc
    ports: dict[str, list[tuple[str, str]]] = {}
    for lk in links:
        ports.setdefault(lk["a"], []).append((lk["b"], lk["a_port"]))
        ports.setdefault(lk["b"], []).append((lk["a"], lk["b_port"]))
    out: dict[str, list[CoreStream]] = {}
    for e in entries:
        talker, period = e["talker"], e["period_ns"]
        neighbour = e["routes"][0][1]
        sender = talker
        if len(ports.get(talker, [])) > 1:
            sender = f"{talker}.{next(p for n, p in ports[talker] if n == neighbour)}"
        at_ps = e["departure_ps"] % (period * 1000)
        earliest, latest = at_ps // 1000, -(-at_ps // 1000) % period
        if latest < earliest:  # ceil wrapped to the next period start: keep the floor
            latest = earliest
        out.setdefault(sender, []).append(CoreStream(e["name"], period, e["wire_bytes"], earliest, latest))
    return out


def run(args: argparse.Namespace) -> int:
    if (args.streams is None) == (args.plan is None):
        raise InputError("cores: give a stream list (STREAMS.toml) or --plan DIR, not both or neither")
    if args.station is not None and args.plan is None:
        raise InputError("cores: --station selects a talker of --plan DIR")
    if args.plan is not None:
        senders = streams_of_plan(args.plan)
        if args.station is not None:
            senders = {s: v for s, v in senders.items() if s == args.station or s.startswith(args.station + ".")}
            if not senders:
                raise InputError(f"--station {args.station}: no talker of that name in the plan", args.plan)
        budget, k_file = _budget(args, DEFAULT_BUDGET), None
    else:
        streams, file_budget, k_file = load_cores(args.streams)
        senders = {"": streams}
        budget = _budget(args, file_budget)
    k = args.cores if args.cores is not None else k_file
    _say(
        f"a core holds each frame host delay {budget.host_delay_ns} + prefetch {budget.prefetch_ns} + per frame "
        f"{budget.per_frame_ns} + descriptors × {budget.per_descriptor_ns} ns before its launch"
    )
    docs, worst = {}, EXIT_OK
    for sender, streams in sorted(senders.items()):
        code, doc = _one(sender, streams, budget, k, args)
        docs[sender] = doc
        worst = max(worst, code, key=lambda c: (0, 2, 1, 3, 4)[c])  # internal > infeasible (proven) > unknown > ok
    if args.out and worst == EXIT_OK:
        whole = docs[""] if "" in docs else {"ports": docs}
        try:
            Path(args.out).write_text(json.dumps(whole, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the allocation: {exc.strerror}", exc.filename) from exc
        _say(f"written to {args.out}")
    return worst


def _one(sender: str, streams: list[CoreStream], budget: CoreBudget, k: int | None, args) -> tuple[int, dict]:
    """Allocate one sending port's streams; (exit status, its JSON document)."""
    who = f"{sender}: " if sender else ""
    _say(f"{who}{len(streams)} streams")
    if k is None:
        fewest, exact = min_cores(streams, budget, args.time_limit, args.seed)
        if fewest is None:
            k = 1  # a stream fits no core: allocate() names it
        else:
            k = fewest
            _say(f"{who}fewest cores: {fewest}" + ("" if exact else " (not proven: CP-SAT did not decide fewer)"))
    outcome = allocate(streams, budget, k, args.time_limit, args.seed)
    if outcome.status == INFEASIBLE:
        _say(f"{who}infeasible (proven): {outcome.reason}")
        _say(f"{who}conflicting streams: {', '.join(outcome.conflicting)}")
        return EXIT_INFEASIBLE, {}
    if outcome.status != FOUND:
        _say(f"{who}unknown: {outcome.reason} (raise --time-limit)")
        return EXIT_UNKNOWN, {}
    violations = verify_allocation(streams, budget, outcome.cores)
    if violations:
        for v in violations:
            _say(f"{who}internal error: the allocation fails the verifier: {v}")
        return EXIT_INTERNAL, {}
    for c, names in enumerate(outcome.cores):
        print(f"{who}core {c}: {', '.join(names) if names else '(none)'}")
    bound = f"optimal: {outcome.bound}" if outcome.optimal else f"not proven optimal: {outcome.bound}"
    _say(f"{who}allocation ({outcome.method}) on {outcome.used} of {k} cores; verified; {bound}")
    return EXIT_OK, {
        "cores": k,
        "used": outcome.used,
        "lower_bound": outcome.lower_bound,
        "optimal": outcome.optimal,
        "lower_bound_proof": outcome.bound,
        "method": outcome.method,
        "budget_ns": {
            "per_descriptor": budget.per_descriptor_ns,
            "per_frame": budget.per_frame_ns,
            "host_delay": budget.host_delay_ns,
            "prefetch": budget.prefetch_ns,
        },
        "allocation": [{"core": c, "streams": names} for c, names in enumerate(outcome.cores)],
    }
