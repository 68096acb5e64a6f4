"""``keepon-plan network`` and ``keepon-plan network-verify``: plan a whole network into one directory, check one.

Stages, each under the command's one ``--time-limit`` (:mod:`keepon_plan.deadline`): read the description; choose
every talker's ring (:mod:`.stations`); route (:mod:`.routing`); bad input if a link is slower than its streams;
proven infeasible if a route's latency exceeds a stream's bound; place (greedy first fit, :mod:`.schedule`, then the
exact CP-SAT model of :mod:`.exact` for instances of at most ``--exact-limit`` streams it leaves unplaced, or only
the exact model with ``--method exact``); write the directory (:mod:`.output`) and the standard exports
(:mod:`.export_yang`, :mod:`.export_taprio`); replay it with the independent verifier (:mod:`.verify`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..deadline import Deadline, TimeLimitExceeded, backstop, command_reserve
from ..model import InputError

EXIT_OK, EXIT_INFEASIBLE, EXIT_UNKNOWN, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3, 4


def _say(msg: str) -> None:
    print(f"keepon-plan: {msg}", file=sys.stderr, flush=True)


def plan_network(net, deadline: Deadline, method: str = "auto", exact_limit: int = 60, seed: int = 0, say=_say):
    """(status, payload): ("plan", (routed, departures, rings, method)) or (status, reason)."""
    from .routing import Router, check_utilisation, route_stream
    from .schedule import greedy
    from .stations import station_rings

    deadline.enter("choosing the talkers' rings")
    rings = station_rings(net)
    deadline.enter("routing")
    router = Router(net)
    routed = [route_stream(net, router, s, rings[s.talker].choice.slot_bytes) for s in net.streams]
    check_utilisation(net, routed)
    for r in routed:
        for listener, lat in zip(r.stream.listeners, r.latency_ps, strict=True):
            if lat > r.stream.max_latency_ns * 1000:
                how = "its given route" if r.stream.routes else "its shortest route (so on any route)"
                return "infeasible", (
                    f"stream {r.stream.name!r}: the latency to {listener!r} on {how} "
                    f"{' → '.join(r.paths[r.stream.listeners.index(listener)])} is at least {lat / 1000:g} ns "
                    f"> max_latency {r.stream.max_latency_ns} ns"
                )
    slot_ps = {name: ring.slot_ps for name, ring in rings.items()}
    if method in ("auto", "heuristic"):
        deadline.enter("greedy no-wait placement")
        placement, _ = greedy(routed, slot_ps, deadline)
        say(f"greedy: {len(placement.departure_ps)} of {len(routed)} streams placed in {deadline.elapsed():.3f} s")
        if not placement.unplaced:
            return "plan", (routed, placement.departure_ps, rings, "greedy no-wait first fit")
        first = placement.unplaced[0]
        if method == "heuristic" or len(routed) > exact_limit:
            return "unknown", (
                f"{len(placement.unplaced)} streams not placed by the greedy heuristic, e.g. {first[0]!r}: {first[1]} "
                f"(the exact model runs for at most --exact-limit {exact_limit} streams)"
            )
    deadline.enter("exact no-wait model (CP-SAT)")
    from .exact import INFEASIBLE, PLAN, solve_exact

    outcome = solve_exact(routed, slot_ps, deadline, seed)
    if outcome.status == PLAN:
        return "plan", (routed, outcome.departure_ps, rings, "exact no-wait (CP-SAT)")
    if outcome.status == INFEASIBLE:
        return "infeasible", outcome.reason
    return "unknown", outcome.reason


def write_all(net, out: Path, routed, departures, rings, method: str, deadline: Deadline | None = None) -> None:
    from .export_taprio import write_taprio
    from .export_yang import write_yang
    from .gcl import port_gcls
    from .output import plan_document, write_plan
    from .stations import runtime_configs

    configs = runtime_configs(net, rings, departures)
    gcls = port_gcls(net, routed, departures)
    if out.exists():
        for sub in ("stations", "switches", "yang", "taprio"):
            shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    write_plan(out, net, plan_document(net, routed, departures, method), configs, gcls, routed)
    write_yang(out, net, gcls, rings, departures)
    write_taprio(out, net, gcls)


def cmd_network(args: argparse.Namespace) -> int:
    from .topology import load_network
    from .verify import verify_plan_dir

    deadline = Deadline(args.time_limit, start=args.started, reserve=command_reserve(args.time_limit))
    out = Path(args.out)
    try:
        with backstop(deadline):
            deadline.enter("reading the network")
            net = load_network(args.network)
            _say(
                f"{len(net.stations)} stations, {len(net.switches)} switches, {len(net.links)} links, "
                f"{len(net.streams)} streams"
            )
            status, payload = plan_network(net, deadline, args.method, args.exact_limit, args.seed)
            if status == "infeasible":
                _say(f"infeasible (proven): {payload}")
                return EXIT_INFEASIBLE
            if status != "plan":
                _say(f"unknown: {payload}")
                return EXIT_UNKNOWN
            routed, departures, rings, method = payload
            deadline.enter(f"writing the plan ({method})")
            write_all(net, out, routed, departures, rings, method, deadline)
            deadline.enter(f"verifying the plan ({method})")
            violations = verify_plan_dir(net, out)
    except TimeLimitExceeded as exc:
        _say(f"unknown: {exc} (raise --time-limit)")
        return EXIT_UNKNOWN
    except OSError as exc:
        raise InputError(f"cannot write the plan: {exc.strerror}", exc.filename) from exc
    if violations:
        for v in violations[:20]:
            _say(f"internal error: the written plan fails the verifier: {v}")
        return EXIT_INTERNAL
    _say(f"plan ({method}) of {len(routed)} streams written to {out}; verified in {deadline.elapsed():.3f} s total")
    return EXIT_OK


def cmd_network_verify(args: argparse.Namespace) -> int:
    from .topology import load_network
    from .verify import verify_plan_dir

    net = load_network(args.network)
    violations = verify_plan_dir(net, Path(args.plan))
    for v in violations:
        _say(f"invalid: {v}")
    if violations:
        return EXIT_INFEASIBLE
    _say(f"valid: {args.plan}: no overlap on any link, every frame in an open gate, every latency and jitter bound met")
    return EXIT_OK


def add_network_parsers(sub, seconds) -> None:
    p = sub.add_parser("network", help="plan a network: talkers' configs, switch gate lists, routes (verified)")
    p.add_argument("network", metavar="NETWORK.toml")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--method", choices=("auto", "heuristic", "exact"), default="auto")
    p.add_argument("--exact-limit", type=int, default=60, metavar="N", help="auto: CP-SAT only up to N streams")
    p.add_argument("--time-limit", type=seconds, default=60.0, metavar="S", help="bound on the whole command")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_network)

    p = sub.add_parser("network-verify", help="replay a network plan directory hop by hop (no solver)")
    p.add_argument("network", metavar="NETWORK.toml")
    p.add_argument("plan", metavar="DIR")
    p.set_defaults(func=cmd_network_verify)

    from .push import add_push_parser

    add_push_parser(sub)

    p = sub.add_parser("network-bench", help="scale benchmark of the network planner on generated topologies")
    from .bench import add_arguments, run

    add_arguments(p)
    p.set_defaults(func=run)
