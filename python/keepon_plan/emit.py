"""Export a schedule: the keepon runtime config (docs/config.md) and a taprio-style gate list.

The schedule is absolute, with IEEE 802.1Qbv semantics: ring cycle ``n`` starts at ``base_time + n·cycle_time`` of
network time (TAI ns), ``cycle_time = N·δ``, and ring slot ``i`` of a cycle at its start plus ``i·δ``. Both files
carry the same base time: ``[schedule] base_time`` in the config, ``base-time`` in the gate list. Times in the config
are integer ns relative to a cycle start. Slot ``s`` is written as ``⌈s·δ⌉`` so that the runtime's ``⌊t/δ⌋`` lands
in ``s`` again (see :func:`keepon_plan.units.slot_start_ns`).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import TYPE_CHECKING

from . import __version__
from .deadline import Deadline, check
from .model import FlowSet, Problem, check_base_time
from .params import RingChoice
from .units import ValueError_, format_duration, format_rate, mask_hex, slot_period, slot_start_ns

if TYPE_CHECKING:  # importing isolation would import the solver
    from .isolation import Schedule


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exact_ns(x: Fraction) -> str:
    """An exact number of ns for a comment: ``2150.4`` (a terminating decimal) or ``10752/7``."""
    d = x.denominator
    for places in range(d.bit_length()):  # d = 2^a·5^b divides 10^max(a, b), and max(a, b) < bit_length
        if 10**places % d == 0:
            if places == 0:
                return str(x.numerator)
            whole, frac = divmod(abs(x.numerator) * (10**places // d), 10**places)
            return f"{'-' if x < 0 else ''}{whole}.{frac:0{places}d}"
    return f"{x.numerator}/{d}"


def resolve_base_time(fs: FlowSet, base_time: int | None) -> int:
    """The base time to write: ``base_time`` if given (the command line), else the flow set's (default 0)."""
    value = fs.base_time if base_time is None else base_time
    try:
        return check_base_time(value)
    except ValueError_ as exc:
        raise ValueError(f"base_time: {exc}") from exc


def pattern_length(slots: tuple[int, ...], period: int, deadline: Deadline | None = None) -> int:
    """Smallest ``m`` dividing the instance count with ``s_{l+m} = s_l + m·period`` (1: strictly periodic)."""
    count = len(slots)
    for m in range(1, count + 1):
        if count % m:
            continue
        check(deadline)
        if all(slots[l + m] == slots[l] + m * period for l in range(count - m)):
            return m
    return count


def runtime_config(
    fs: FlowSet,
    choice: RingChoice,
    problem: Problem,
    schedule: Schedule,
    header: str = "",
    deadline: Deadline | None = None,
    base_time: int | None = None,
) -> str:
    """The runtime config; ``base_time`` (TAI ns) overrides the flow set's."""
    base = resolve_base_time(fs, base_time)
    delta = slot_period(choice.slot_bytes, fs.rate)
    horizon = problem.horizon * delta
    cycle = choice.slots * delta
    lines = [f"# keepon runtime config written by keepon-plan {__version__}"]
    lines += [f"# {h}" for h in header.splitlines() if h]
    lines += [
        f"# schedule: {schedule.method}; repeats every T = {problem.horizon} slots "
        f"({format_duration(int(horizon)) if horizon.denominator == 1 else exact_ns(horizon) + ' ns'})",
        "# times are relative to a ring-cycle start; cycle n starts at base_time + n·cycle_time of TAI ([schedule])",
        "version = 1",
        "",
        "[link]",
        f"rate = {_q(format_rate(fs.rate))}",
        "",
        "[ring]",
        f"slot_bytes = {choice.slot_bytes}",
        f"slots = {choice.slots}",
        f"batch = {choice.batch}",
        f"policy = {_q(fs.policy)}",
        "",
        "[schedule]",
        f"base_time = {base}",
    ]
    if cycle.denominator == 1:
        lines.append(f"cycle_time = {_q(format_duration(int(cycle)))}")
    else:
        lines.append(
            f"# cycle_time omitted: slots × δ = {choice.slots} × {exact_ns(delta)} ns = {exact_ns(cycle)} ns is not a "
            "whole number of ns"
        )
    for c, name in enumerate(fs.classes):
        lines += ["", "[[class]]", f"name = {_q(name)}"]
        if schedule.owned[c]:
            lines.append(f"mask = {_q(mask_hex(schedule.owned[c]))}")
            lines.append(f"# slots {sorted(schedule.owned[c])}")
        else:
            lines.append("# no flows: best effort (owns no slots)")
    for f, sf, slots in zip(fs.flows, problem.flows, schedule.slots, strict=True):
        check(deadline)
        count = f.count if f.count is not None else max(len(slots), math.ceil(10**9 / f.period))
        lines += [
            "",
            "[[flow]]",
            f"name = {_q(f.name)}",
            f"class = {_q(f.cls)}",
            f"period = {_q(format_duration(f.period))}",
        ]
        m = pattern_length(slots, sf.period, deadline)
        if m == 1:
            lines.append(f"offset = {_q(format_duration(slot_start_ns(slots[0], delta)))}")
        else:
            offsets = ", ".join(_q(format_duration(slot_start_ns(s, delta))) for s in slots[:m])
            lines.append(f"instance_offsets = [{offsets}]")
            lines.append(f"repeat = {_q(format_duration(m * f.period))}")
        lines += [
            f"frame_bytes = {f.frame_bytes}",
            f"count = {count}",
            f"lead = {_q(format_duration(choice.lead))}",
        ]
    lines += ptp_lines(fs)
    return "\n".join(lines) + "\n"


def ptp_lines(fs: FlowSet) -> list[str]:
    """The flow set's ``[ptp]`` table, unchanged (values are strings, integers and booleans), or nothing."""
    if fs.ptp is None:
        return []
    out = ["", "# PTP: its class keeps room for PTP's messages beyond its flows' (keepon-plan, ptproom)", "[ptp]"]
    for key, value in fs.ptp.table.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        else:
            text = json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
        out.append(f"{key} = {text}")
    return out


def gate_list(
    fs: FlowSet,
    choice: RingChoice,
    schedule: Schedule,
    deadline: Deadline | None = None,
    base_time: int | None = None,
) -> str:
    """Gate control list of the end station's slot ownership, for the first-hop switch (taprio syntax).

    Traffic class ``i`` of the plan is gate ``i``; best effort (slots no class owns) is gate ``K``. One cycle is
    the shortest whole number of rings whose length is a whole number of ns; entry boundaries are rounded as
    the runtime rounds txtimes (``⌈s·δ⌉``), so the intervals add up to the cycle exactly. ``base-time`` is the
    runtime config's ``base_time`` (``base_time`` overrides the flow set's, as in :func:`runtime_config`): every
    gate cycle then starts at a ring-cycle start, since it is a whole number of rings.
    """
    base = resolve_base_time(fs, base_time)
    delta = slot_period(choice.slot_bytes, fs.rate)
    n, k = choice.slots, len(fs.classes)
    owner = [k] * n
    for c, slots in enumerate(schedule.owned):
        for r in slots:
            owner[r] = c
    rings = (Fraction(n) * delta).denominator
    total = n * rings
    entries: list[tuple[int, int]] = []  # (gate, interval ns)
    start = 0
    for s in range(1, total + 1):
        if s % 4096 == 0:
            check(deadline)
        if s == total or owner[s % n] != owner[start % n]:
            entries.append((owner[start % n], slot_start_ns(s, delta) - slot_start_ns(start, delta)))
            start = s
    cycle = slot_start_ns(total, delta)
    width = max(2, (k + 2) // 4 + 1)
    lines = [
        f"# keepon-plan {__version__}: slot ownership of the end station, {n} slots of δ = {delta} ns",
        "# gate i = traffic class i ("
        + ", ".join(f"{i}={c}" for i, c in enumerate(fs.classes))
        + f"), gate {k} = best effort",
        "# base-time = the station's [schedule] base_time (TAI ns); cycle-time = "
        f"{rings} ring cycle{'s' if rings > 1 else ''} of {n} slots,",
        "# so every cycle here starts with a ring cycle. Frames reach this switch one link delay later: if the gates",
        "# must open on their arrival, the switch operator adds the link's propagation and store-and-forward delay",
        "# to base-time.",
        "# e.g. tc qdisc replace dev DEV parent root taprio num_tc "
        f"{k + 1} ... base-time {base} sched-entry ... clockid CLOCK_TAI",
        f"base-time {base}",
        f"cycle-time {cycle}",
    ]
    lines += [f"sched-entry S {1 << g:0{width}x} {interval}" for g, interval in entries]
    return "\n".join(lines) + "\n"
