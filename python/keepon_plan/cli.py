"""``keepon-plan`` command line."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

# Only light modules here: the solver (ortools, numpy) is imported by the synthesis stages that need it, so
# `--help`, `params`, `verify` and plans decided without CP-SAT do not pay for it.
from . import __version__, ptproom
from .deadline import Deadline, TimeLimitExceeded, backstop, command_reserve, process_start
from .emit import gate_list, runtime_config
from .model import MAX_BASE_TIME, InputError, load_flowset, to_problem
from .params import choose, tradeoff_table
from .verify import verify_plan_file, verify_plan_text

EXIT_OK, EXIT_INFEASIBLE, EXIT_UNKNOWN, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3, 4

EXPORT_SECONDS = 0.1
EXPORT_SECONDS_PER_INSTANCE = 10e-6
"""Time kept after synthesis for export, verification and writing the plan: a fixed part and a part per flow
instance in the horizon. Measured: 2 µs per instance (130 609 instances: export 0.03 s, verification 0.24 s) on a
quiet machine; five times that leaves room for a loaded one."""

DESCRIPTION = """\
Plan keepon's slot ring: slot size, batch, which ring slots each traffic class owns, and the slot of every
flow instance; verify plans; reproduce the paper's schedulability experiment.

  slot k starts at base_time + k·δ (TAI),  δ = (slot_bytes + 20)·8 / rate;  ring slot = k mod N
  |<-------------------- ring cycle: N slots ------------------->|
  | s0 | s1 | s2 | ... | c | ... | c+batch | ... |  c+N-1 |       c = consumer (slot on the wire now)
                        \\_ posted _/\\____ insertion window ____/
  a frame with txtime t goes in slot ⌊t/δ⌋ and leaves at exactly its start; it must be submitted
  `lead` (> batch·δ) before t, into a slot its class owns (mask bit k mod N).
  flow instance l (period P, jitter J slots): slot o + l·P + e_l with 0 ≤ e_l ≤ J
  (fixed phase φ: slot in [φ + l·P, φ + l·P + J]).

exit codes: solve 0 plan, 1 proven infeasible, 2 unknown (--time-limit reached in any stage), 3 bad input;
            verify 0 valid, 1 invalid (violated constraint named), 3 bad input; params 0, 3 bad input;
            bench 0, 3 bad input, 4 a plan failed the verifier;
            cores 0 allocation (verified), 1 proven infeasible (conflicting streams named), 2 unknown, 3 bad input,
            4 the allocation failed the verifier; cores-bench 0, 3 bad input, 4 an allocation failed the verifier.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors are bad input (3), not "unknown" (2)
        self.print_usage(sys.stderr)
        print(f"keepon-plan: bad input: {message}", file=sys.stderr)
        sys.exit(EXIT_INPUT)


def _say(msg: str) -> None:
    print(f"keepon-plan: {msg}", file=sys.stderr, flush=True)


def _throttled(say, every: float):
    """Stage results always; CP-SAT search lines at most once per ``every`` seconds (progress on long solves)."""
    last = [time.monotonic()]

    def progress(message: str) -> None:
        now = time.monotonic()
        if not message.startswith("  cp-sat"):
            say(message)
        elif now - last[0] >= every:
            last[0] = now
            say(message)

    return progress


def _load_and_choose(path: str):
    """Read a flow set, choose its parameters (reporting the choice's notes) and state it in slots.

    The last step is the check every command shares: a period that is not a whole number of the chosen slots, or a
    frame longer than a slot, is bad input (:class:`InputError`, exit 3) naming the flow set's line.
    """
    fs = load_flowset(path)
    choice = choose(fs)
    for note in choice.notes:
        _say(note)
    return fs, choice, to_problem(fs, choice.slot_bytes, choice.slots)


SOLVER_OVERRUN = 0.3
"""Time kept after synthesis's end for a CP-SAT run that returns late (measured: up to 0.24 s past a stop it was
asked to keep, and past its own limit 0.25 s before that; :data:`isolation.CP_SAT_OVERRUN`)."""


def export_seconds(problem) -> float:
    """The reserve for the phases after synthesis: :data:`SOLVER_OVERRUN` and :data:`EXPORT_SECONDS`."""
    instances = sum(problem.instances(f) for f in problem.flows)
    return SOLVER_OVERRUN + EXPORT_SECONDS + EXPORT_SECONDS_PER_INSTANCE * instances


def _write_verified(args: argparse.Namespace, text: str, gcl_text: str, violations: list) -> tuple[Path, Path] | int:
    """Write the plan and its gate list if the verifier found nothing (their paths), else the exit code."""
    if violations:
        for v in violations:
            _say(f"internal error: emitted plan fails the verifier: {v}")
        return EXIT_INTERNAL
    out = Path(args.out)
    gcl = Path(args.gcl) if args.gcl else out.with_suffix(".gcl")
    try:
        out.write_text(text, encoding="utf-8")
        gcl.write_text(gcl_text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the plan: {exc.strerror}", exc.filename) from exc
    return out, gcl


def cmd_solve(args: argparse.Namespace) -> int:
    if args.timing == "bytes":
        return cmd_solve_bytes(args)
    deadline = Deadline(args.time_limit, start=args.started, reserve=command_reserve(args.time_limit))
    try:
        with backstop(deadline):
            deadline.enter("reading the flow set")
            fs, choice, problem = _load_and_choose(args.flows)
            base_time = fs.base_time if args.base_time is None else args.base_time
            _say(
                f"ring {choice.slots} slots of {choice.slot_bytes} B, batch {choice.batch}, lead {choice.lead} ns; "
                f"{len(problem.flows)} flows in {len(problem.classes)} classes, utilisation "
                f"{float(problem.utilisation) * 100:.1f} %, horizon {problem.horizon} slots"
            )
            room = ptproom.room(fs, choice.slot_bytes, choice.slots)
            planned = problem
            if room is not None:
                _say(ptproom.note(room))
                reason = ptproom.capacity_reason(problem, room, fs)
                if reason is not None:
                    _say(f"infeasible (proven): {reason}")
                    return EXIT_INFEASIBLE
                planned = ptproom.reserve(problem, room)
            deadline.enter("synthesis")
            from .isolation import INFEASIBLE, PLAN, synthesize

            progress = _say if args.verbose else _throttled(_say, 5.0)
            before = deadline.elapsed()
            budget = deadline.until(export_seconds(planned))
            outcome = synthesize(planned, time_limit=budget, seed=args.seed, workers=args.workers, progress=progress)
            if outcome.status == INFEASIBLE:
                reason = outcome.reason if room is None else ptproom.explain(outcome.reason, room)
                _say(f"infeasible (proven): {reason}")
                return EXIT_INFEASIBLE
            if outcome.status != PLAN:
                kept = args.time_limit - before - budget
                _say(
                    f"unknown: {outcome.reason} (synthesis had {budget:.1f} s of the {args.time_limit:g} s limit: "
                    f"start-up and reading took {before:.1f} s, {kept:.1f} s were kept for export, verification "
                    "and exit); no plan written (raise --time-limit)"
                )
                return EXIT_UNKNOWN
            assert outcome.schedule is not None
            schedule = outcome.schedule if room is None else ptproom.release(problem, room, outcome.schedule)
            found = f"the plan found by {schedule.method} after {deadline.elapsed():.3f} s"
            deadline.enter("export of " + found)
            text = runtime_config(fs, choice, problem, schedule, f"from {args.flows}", deadline, base_time=base_time)
            gcl_text = gate_list(fs, choice, schedule, deadline, base_time=base_time)
            deadline.enter("verification of " + found)
            violations = verify_plan_text(fs, text, deadline=deadline)
    except TimeLimitExceeded as exc:
        _say(f"unknown: {exc}; no plan written (raise --time-limit)")
        return EXIT_UNKNOWN
    written = _write_verified(args, text, gcl_text, violations)
    if isinstance(written, int):
        return written
    out, gcl = written
    _say(f"plan ({schedule.method}) written to {out}, gate list to {gcl}; verified")
    _say(f"done in {deadline.elapsed():.3f} s of the {args.time_limit:g} s limit")
    return EXIT_OK


def cmd_solve_bytes(args: argparse.Namespace) -> int:
    """``solve --timing bytes``: windows sized to the frames and offsets in ns for the byte clock (bytes.py)."""
    from . import bytes as byteplan

    deadline = Deadline(args.time_limit, start=args.started, reserve=command_reserve(args.time_limit))
    try:
        with backstop(deadline):
            deadline.enter("reading the flow set")
            fs = load_flowset(args.flows)
            choice = byteplan.choose_ring(fs)
            ptp = ptproom.bytes_flows(fs)
            planned = fs if ptp is None else ptp[0]
            if ptp is not None:
                _say(ptproom.note_bytes(fs, ptp[1], ptp[2]))
            for note in choice.notes:
                _say(note)
            base_time = fs.base_time if args.base_time is None else args.base_time
            _say(
                f"byte clock: ring {choice.slots} slots of {choice.slot_bytes} B, batch {choice.batch} (posting lead "
                f"batch·δ), lead {choice.lead} ns; {len(fs.flows)} flows in {len(fs.classes)} classes, guard "
                f"{args.guard} ns"
            )
            deadline.enter("synthesis")
            progress = _say if args.verbose else _throttled(_say, 5.0)
            before = deadline.elapsed()
            budget = deadline.until(SOLVER_OVERRUN + EXPORT_SECONDS)
            outcome = byteplan.plan_bytes(
                planned,
                guard=args.guard,
                time_limit=budget,
                seed=args.seed,
                workers=args.workers,
                progress=progress,
                stop=time.monotonic() + budget,
            )
            if outcome.status == byteplan.INFEASIBLE:
                reason = outcome.reason if ptp is None else ptproom.explain_bytes(outcome.reason, fs, ptp[1], ptp[2])
                _say(f"infeasible (proven): {reason}")
                return EXIT_INFEASIBLE
            if outcome.status != byteplan.PLAN:
                _say(
                    f"unknown: {outcome.reason} (synthesis had {budget:.1f} s of the {args.time_limit:g} s limit; "
                    f"start-up and reading took {before:.1f} s); no plan written (raise --time-limit)"
                )
                return EXIT_UNKNOWN
            plan = outcome.plan
            assert plan is not None
            plan = replace(plan, times=plan.times[: len(fs.flows)])  # PTP's frames stay as windows only
            found = f"the byte-clock plan found after {deadline.elapsed():.3f} s"
            deadline.enter("export of " + found)
            text = byteplan.runtime_config(fs, choice, plan, f"from {args.flows}", deadline, base_time=base_time)
            gcl_text = byteplan.gate_list(fs, plan, base_time=base_time)
            deadline.enter("verification of " + found)
            violations = verify_plan_text(fs, text, deadline=deadline)
    except TimeLimitExceeded as exc:
        _say(f"unknown: {exc}; no plan written (raise --time-limit)")
        return EXIT_UNKNOWN
    written = _write_verified(args, text, gcl_text, violations)
    if isinstance(written, int):
        return written
    out, gcl = written
    windows = sum(len(w) for w in plan.windows)
    _say(
        f"plan ({plan.method}; cycle {plan.cycle} ns, {windows} windows) written to {out}, gate list to {gcl}; verified"
    )
    _say(f"done in {deadline.elapsed():.3f} s of the {args.time_limit:g} s limit")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    fs = load_flowset(args.flows)
    violations = verify_plan_file(fs, args.plan)
    if violations:
        for v in violations:
            _say(f"invalid: {v}")
        return EXIT_INFEASIBLE
    if _is_bytes_plan(args.plan):
        _say(
            f"valid: {args.plan} (byte clock) satisfies windows inside the cycle and disjoint, (1) every frame in a "
            "window of its class, (2) jitter, (3) no two frames overlapping, phases, periodicity and lead"
            + (", PTP's room" if fs.ptp is not None else "")
        )
        return EXIT_OK
    room = ", PTP's room" if fs.ptp is not None else ""
    _say(f"valid: {args.plan} satisfies (1) ownership, (2) jitter, (3) no collision, phases, ring and lead{room}")
    return EXIT_OK


def _is_bytes_plan(path: str) -> bool:
    import tomllib

    try:
        with open(path, "rb") as fh:
            link = tomllib.load(fh).get("link")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(link, dict) and link.get("timing") == "bytes"


def _duration(text: str) -> int:
    from .units import ValueError_, parse_duration

    try:
        return parse_duration(int(text) if text.isdigit() else text)
    except ValueError_ as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def cmd_params(args: argparse.Namespace) -> int:
    fs, choice, _ = _load_and_choose(args.flows)
    print(tradeoff_table(fs, choice))
    print(
        f"chosen: slot_bytes = {choice.slot_bytes}, slots = {choice.slots}, batch = {choice.batch}, "
        f"lead = {choice.lead} ns"
    )
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import run_bench

    return run_bench(args)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _base_time(text: str) -> int:
    """``--base-time NS``: integer TAI ns, ``0 ≤ NS < 2^62`` (as ``base_time`` in the flow file)."""
    value = int(text) if text.isascii() and text.isdigit() else None
    if value is None or value >= MAX_BASE_TIME:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer number of TAI ns in 0 ≤ NS < 2^62")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="keepon-plan", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"keepon-plan {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("solve", help="plan a flow set and write a runtime config")
    p.add_argument("flows", metavar="FLOWS.toml")
    p.add_argument("--out", required=True, metavar="PLAN.toml")
    p.add_argument("--gcl", metavar="FILE", help="gate list output (default: PLAN.gcl)")
    p.add_argument(
        "--base-time",
        type=_base_time,
        metavar="NS",
        help="TAI ns at which ring cycle 0 starts: [schedule] base_time of the plan and base-time of the gate "
        "list (overrides base_time of the flow file; default 0)",
    )
    p.add_argument(
        "--time-limit",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="bound on the whole command: reading, synthesis, export and verification (default 60)",
    )
    p.add_argument(
        "--timing",
        choices=("slots", "bytes"),
        default="slots",
        help="slots (default): slot masks for the slot ring; bytes: [[class]] windows sized to the frames for the "
        'byte clock (link.timing = "bytes", docs/byte-clock.md)',
    )
    p.add_argument(
        "--guard",
        type=_duration,
        default=0,
        metavar="DURATION",
        help="--timing bytes: added to every frame's window (integer ns or e.g. 100ns; default 0)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, choices=(1, 2), help="CP-SAT workers (1 is deterministic)")
    p.add_argument("-v", "--verbose", action="store_true", help="show CP-SAT search progress")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("verify", help="check a plan against its flow set (no solver)")
    p.add_argument("flows", metavar="FLOWS.toml")
    p.add_argument("plan", metavar="PLAN.toml")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("params", help="choose slot size, ring and batch; print the trade-off table")
    p.add_argument("flows", metavar="FLOWS.toml")
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("cores", help="allocate a station's streams to poll cores (conflict-graph colouring)")
    from .cores_command import add_arguments as add_cores

    add_cores(p, _positive, _seconds)

    p = sub.add_parser("cores-bench", help="the DPDK paper's Fig 7(b): feasibility ratio vs cores, random sets")
    from .cores_bench import add_arguments as add_cores_bench

    add_cores_bench(p)

    p = sub.add_parser("bench", help="the paper's schedulability experiment, against a Z3 baseline")
    from .bench import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_bench)

    from .network.command import add_network_parsers

    add_network_parsers(sub, _seconds)
    from .network import compare

    p = sub.add_parser("network-compare", help="network-bench's instances planned by keepon and by TSNKit (subprocess)")
    compare.add_arguments(p)
    p.set_defaults(func=compare.run)
    from .cnc.command import add_cnc_parsers

    add_cnc_parsers(sub)
    return parser


def command(argv: list[str] | None, started: float) -> int:
    """Run one command; a time limit counts from ``started`` (a ``time.monotonic()`` reading)."""
    args = build_parser().parse_args(argv)
    args.started = started
    try:
        return args.func(args)
    except InputError as exc:
        _say(f"bad input: {exc}")
        return EXIT_INPUT


def main(argv: list[str] | None = None) -> int:
    """With ``argv`` (tests, other Python code): run that command and return its exit status; a time limit counts
    from this call.

    Without (the program, on the process's own arguments): a time limit counts from the process's start, and the
    process ends as soon as the command does, without the interpreter's teardown (0.3 s or more once CP-SAT is
    loaded), so ``--time-limit`` bounds the process as a caller sees it.
    """
    if argv is not None:
        return command(argv, time.monotonic())
    try:
        code = command(None, process_start())
    except SystemExit as exc:  # argparse (--help, --version, usage errors), or a message: as Python would exit
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
