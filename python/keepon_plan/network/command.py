"""``keepon-plan network`` and ``keepon-plan network-verify``: plan a whole network into one directory, check one.

Stages, each under the command's one ``--time-limit`` (:mod:`keepon_plan.deadline`): read the description; plan it
(:mod:`.plan`: rings, routes, the checks that prove, greedy with queueing, repair, exact no-wait model); write the
directory (:mod:`.output`) and the standard exports (:mod:`.export_yang`, :mod:`.export_taprio`); replay it with the
independent verifier (:mod:`.verify`). A claim of infeasibility comes with a certificate (:mod:`.certificate`),
written with ``--certificate FILE`` and checked by ``network-verify --certificate FILE`` (:mod:`.verify_certificate`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from ..deadline import Deadline, TimeLimitExceeded, backstop, command_reserve
from ..model import InputError
from .certificate import describe_model
from .gcl import GclTooLong
from .plan import plan_network

__all__ = ["add_network_parsers", "cmd_network", "cmd_network_verify", "plan_network", "write_all"]

EXIT_OK, EXIT_INFEASIBLE, EXIT_UNKNOWN, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3, 4


def _say(msg: str) -> None:
    print(f"keepon-plan: {msg}", file=sys.stderr, flush=True)


def write_all(
    net,
    out: Path,
    routed,
    starts,
    rings,
    method: str,
    deadline: Deadline | None = None,
    exports: bool = True,
    station_check: bool = True,
) -> None:
    """Write the plan directory; ``starts``: per stream its hop starts (instance 0, ps); ``exports``: also the YANG
    instance data and taprio scripts; ``station_check``: every talker's config through the station verifier too."""
    departures = {name: st[0] for name, st in starts.items()}
    from .export_taprio import write_taprio
    from .export_yang import write_yang
    from .gcl import port_gcls
    from .output import plan_document, write_plan
    from .stations import runtime_configs

    egress = {r.stream.name: r.paths[0][1] for r in routed}
    configs = runtime_configs(net, rings, departures, station_check, egress)
    gcls = port_gcls(net, routed, starts)
    if out.exists():
        for sub in ("stations", "switches", "yang", "taprio"):
            shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    write_plan(out, net, plan_document(net, routed, starts, method), configs, gcls, routed)
    if exports:
        write_yang(out, net, gcls, rings, departures, egress)
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
            replicated = len({s.replica_of for s in net.streams if s.replica_of is not None})
            _say(
                f"{len(net.stations)} stations, {len(net.switches)} switches, {len(net.links)} links, "
                f"{len(net.streams)} streams"
                + (f" ({replicated} replicated, each as two member streams)" if replicated else "")
            )
            status, payload = plan_network(
                net, deadline, args.method, args.exact_limit, args.seed, queueing=False if args.no_wait else None
            )
            if status == "infeasible":
                c = payload.certificate
                _say(f"infeasible (proven): {payload}")
                _say(f"the claim holds with {describe_model(c['model'])} (certificate: {c['kind']})")
                if args.certificate:
                    Path(args.certificate).write_text(json.dumps(c, indent=1) + "\n", encoding="utf-8")
                    _say(f"certificate written to {args.certificate}")
                return EXIT_INFEASIBLE
            if status != "plan":
                _say(f"unknown: {payload}")
                return EXIT_UNKNOWN
            routed, departures, rings, method = payload
            deadline.enter(f"writing the plan ({method})")
            try:
                write_all(net, out, routed, departures, rings, method, deadline)
            except GclTooLong as exc:
                _say(
                    f"unknown: the plan found ({method}) does not fit a device: {exc.message} (not proven: another "
                    "placement might fit; nothing written)"
                )
                return EXIT_UNKNOWN
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
    if args.certificate:
        from .verify_certificate import check_certificate

        try:
            doc = json.loads(Path(args.certificate).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the certificate: {exc}", args.certificate) from exc
        problems = check_certificate(net, doc)
        for v in problems:
            _say(f"certificate refused: {v}")
        if problems:
            return EXIT_INFEASIBLE
        _say(f"certificate holds: {doc.get('reason', '')}")
        return EXIT_OK
    if args.plan is None:
        raise InputError("network-verify: give a plan directory or --certificate FILE")
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
    p.add_argument("--no-wait", action="store_true", help="no frame waits in a queue (overrides queueing = true)")
    p.add_argument("--certificate", metavar="FILE", help="when proven infeasible, write the certificate (JSON)")
    p.set_defaults(func=cmd_network)

    p = sub.add_parser("network-verify", help="replay a network plan directory hop by hop (no solver)")
    p.add_argument("network", metavar="NETWORK.toml")
    p.add_argument("plan", metavar="DIR", nargs="?")
    p.add_argument("--certificate", metavar="FILE", help="check a certificate of infeasibility instead of a plan")
    p.set_defaults(func=cmd_network_verify)

    from .push import add_push_parser

    add_push_parser(sub)

    p = sub.add_parser("network-bench", help="scale benchmark of the network planner on generated topologies")
    from .bench import add_arguments, run

    add_arguments(p)
    p.set_defaults(func=run)

    from . import sweep

    p = sub.add_parser("network-sweep", help="the planner swept by load on generated networks (benchmark)")
    sweep.add_arguments(p)
    p.set_defaults(func=sweep.run)
