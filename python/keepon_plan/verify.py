"""Independent verifier: a runtime config (the plan) checked against its flow set, without any solver.

It reads the plan exactly as the runtime would (docs/config.md), maps every instance's txtime to its slot with
the runtime's rule ``slot = ⌊t/δ⌋`` (``t`` relative to a ring-cycle start), takes the slot start ``slot·δ`` as
the transmission time, and checks over ``T = lcm(H, N)`` slots (the ring and the flows both repeat there):

- (1) ownership: every instance's ring slot ``slot mod N`` belongs to its flow's class;
- (2) jitter: the paper's ``||t_a − t_b| − |a − b|·p| ≤ j`` for every pair of instances of a flow, in and across
  repetitions of the horizon, checked in its window form ``max_l e_l − min_l e_l ≤ j`` with ``e_l = t_l − l·p``
  over the ``M`` instances of one horizon (``e_{l+M} = e_l`` by the periodicity check): O(M) per flow, not O(M²).
  The largest deviation over all pairs is exactly that spread. For ``b > a``, ``t_b − t_a − (b − a)·p =
  e_b − e_a``: a pair in order deviates ``|e_b − e_a|``, a pair out of order (``t_b < t_a``, so ``e_a − e_b >
  (b − a)·p``) deviates ``|2(b − a)·p − (e_a − e_b)| < e_a − e_b``; and the instances ``x`` with the smallest
  and ``y`` with the largest ``e`` form an in-order pair, ``(x, y)`` or ``(x, y + M)``, deviating the spread;
- (3) no two instances (of any flows) in the same slot occurrence ``slot mod T``;
- phase: a flow with a fixed phase ``φ`` sends instance ``l`` within ``[φ + l·p, φ + l·p + j]``;
- the ring and classes: masks disjoint and inside the ring, the plan's flows are the flow set's, the schedule
  repeats every ``T`` slots, and the lead covers the batch (``lead ≥ batch·δ``);
- ``[schedule]``: ``base_time`` an integer in ``0 ≤ base_time < 2^62`` and ``cycle_time``, if given, exactly ``N·δ``;
- PTP (the flow set's ``[ptp]``): the plan carries the table unchanged, and its class owns at least
  ``⌈rate × N·δ⌉`` ring slots that no flow instance uses, ``rate`` PTP's frames a second at its intervals.

Only :mod:`keepon_plan.units` and the flow-set parser (with its ``[ptp]`` reader, :mod:`keepon_plan.ptpinput`)
are shared with the planner.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from fractions import Fraction

from .deadline import Deadline, check
from .model import FlowSet, InputError, read_input
from .ptpinput import needs, slots_per_cycle, table_problem
from .units import ValueError_, parse_duration, parse_mask, parse_rate, slot_period

MAX_REPORTED = 20


@dataclass(frozen=True)
class Violation:
    constraint: str
    message: str

    def __str__(self) -> str:
        return f"{self.constraint}: {self.message}"


class _Invalid(Exception):
    def __init__(self, constraint: str, message: str) -> None:
        super().__init__(message)
        self.violation = Violation(constraint, message)


def _req(table: dict, key: str, what: str):
    if key not in table:
        raise _Invalid("format", f"{what}: missing {key!r}")
    return table[key]


def _conv(conv, value, what: str):
    try:
        return conv(value)
    except ValueError_ as exc:
        raise _Invalid("format", f"{what}: {exc}") from exc


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid("format", f"{what}: expected an integer, got {value!r}")
    return value


def verify_plan_file(fs: FlowSet, path: str) -> list[Violation]:
    return verify_plan_text(fs, read_input(path, "plan"), path)


def verify_plan_text(
    fs: FlowSet, text: str, path: str | None = None, deadline: Deadline | None = None
) -> list[Violation]:
    """All violations found (empty: the plan is valid).

    Raises :class:`InputError` if the TOML is unreadable or the flow set cannot be planned at the plan's slot size,
    and :class:`~keepon_plan.deadline.TimeLimitExceeded` if ``deadline`` passes first.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"plan is not valid TOML: {exc}", path) from exc
    try:
        link = doc.get("link")
        if isinstance(link, dict) and link.get("timing", "slots") == "bytes":
            from .verify_bytes import verify_bytes

            return verify_bytes(fs, doc, deadline, Violation, _Invalid, MAX_REPORTED)
        return _verify(fs, doc, deadline)
    except _Invalid as exc:
        return [exc.violation]


def _verify(fs: FlowSet, doc: dict, deadline: Deadline | None) -> list[Violation]:
    out: list[Violation] = []
    counts: dict[str, int] = {}

    def bad(constraint: str, message: str) -> None:
        counts[constraint] = counts.get(constraint, 0) + 1
        if counts[constraint] <= MAX_REPORTED:
            out.append(Violation(constraint, message))

    link, ring = doc.get("link", {}), doc.get("ring", {})
    rate = _conv(parse_rate, _req(link, "rate", "[link]"), "[link] rate")
    slot_bytes = _int(_req(ring, "slot_bytes", "[ring]"), "[ring] slot_bytes")
    n = _int(_req(ring, "slots", "[ring]"), "[ring] slots")
    batch = _int(_req(ring, "batch", "[ring]"), "[ring] batch")
    if rate != fs.rate:
        bad("ring", f"link rate {rate} bit/s differs from the flow set's {fs.rate}")
    for key, want, got in (
        ("slot_bytes", fs.slot_bytes, slot_bytes),
        ("slots", fs.slots, n),
        ("batch", fs.batch, batch),
    ):
        if want is not None and want != got:
            bad("ring", f"{key} = {got} but the flow set fixes it to {want}")
    if not 2 <= n <= 4096 or not 64 <= slot_bytes <= 9018:
        raise _Invalid("ring", f"ring of {n} slots of {slot_bytes} bytes is outside the runtime's limits")
    if not 1 <= batch < n:
        bad("ring", f"batch {batch} must be in 1..={n - 1}")
    if ring.get("policy", "strict") not in ("strict", "relaxed"):
        bad("ring", f"policy {ring.get('policy')!r} is neither strict nor relaxed")
    delta = slot_period(slot_bytes, rate)
    schedule = doc.get("schedule")
    if schedule is not None:
        if not isinstance(schedule, dict):
            raise _Invalid("format", "[schedule] must be a table")
        base = _int(_req(schedule, "base_time", "[schedule]"), "[schedule] base_time")
        if not 0 <= base < 2**62:
            bad("format", f"[schedule] base_time {base} is outside 0 ≤ base_time < 2^62")
        if "cycle_time" in schedule:
            cycle = _conv(parse_duration, schedule["cycle_time"], "[schedule] cycle_time")
            if cycle != n * delta:
                bad("ring", f"[schedule] cycle_time {cycle} ns is not slots × δ = {n * delta} ns")

    # Classes and their ring slots.
    owned: dict[str, set[int]] = {}
    if "slot_masks" in ring:
        if "class" in doc:
            bad("format", "both [ring] slot_masks and [[class]] tables are given")
        for q, m in enumerate(str(ring["slot_masks"]).split(",")):
            owned[f"tc-{q}"] = set(_conv(parse_mask, m.strip(), "[ring] slot_masks"))
    for c in doc.get("class", []):
        name = _req(c, "name", "[[class]]")
        if "mask" in c:
            owned[name] = set(_conv(parse_mask, c["mask"], f"class {name!r} mask"))
        elif "slots" in c:
            owned[name] = {_int(s, f"class {name!r} slots") for s in c["slots"]}
        else:
            owned[name] = set()
    holder: dict[int, str] = {}
    for name, slots in owned.items():
        for s in sorted(slots):
            if not 0 <= s < n:
                bad("(1) ownership", f"class {name!r} owns slot {s}, outside the ring of {n} slots")
            elif s in holder:
                bad("(1) ownership", f"ring slot {s} is owned by both {holder[s]!r} and {name!r}")
            else:
                holder[s] = name

    # Flows: the plan's must be the flow set's.
    planned = {}
    for pf in doc.get("flow", []):
        name = _req(pf, "name", "[[flow]]")
        if name in planned:
            bad("format", f"flow {name!r} appears twice in the plan")
        planned[name] = pf
    wanted = {f.name for f in fs.flows}
    for name in planned:
        if name not in wanted:
            bad("format", f"flow {name!r} is not in the flow set")

    slot_periods: dict[str, int] = {}
    for i, f in enumerate(fs.flows):
        pf = planned.get(f.name)
        if pf is None:
            bad("format", f"flow {f.name!r} of the flow set is missing from the plan")
            continue
        what = f"flow {f.name!r}"
        if pf.get("class") != f.cls:
            bad("(1) ownership", f"{what} is in class {pf.get('class')!r}, the flow set says {f.cls!r}")
        if pf.get("class") not in owned:
            bad("(1) ownership", f"{what}: class {pf.get('class')!r} is not defined in the plan")
        period = _conv(parse_duration, _req(pf, "period", what), f"{what} period")
        if period != f.period:
            bad("format", f"{what}: period {period} ns, the flow set says {f.period} ns")
        frame = _int(_req(pf, "frame_bytes", what), f"{what} frame_bytes")
        if frame != f.frame_bytes or frame > slot_bytes:
            bad("format", f"{what}: frame_bytes {frame} (flow set {f.frame_bytes}, slot_bytes {slot_bytes})")
        if _int(pf.get("count", 0), f"{what} count") < 1:
            bad("format", f"{what}: count must be at least 1")
        lead = _conv(parse_duration, _req(pf, "lead", what), f"{what} lead")
        if lead < batch * delta:
            bad("lead", f"{what}: lead {lead} ns is shorter than batch·δ = {batch * delta} ns")
        p_slots = Fraction(f.period) / delta
        if p_slots.denominator != 1:  # the flow set cannot be planned at this slot size: bad input, as in `solve`
            raise fs.error(
                f"flow {f.name!r}: period {f.period} ns is not a whole number of slots of δ = {delta} ns "
                f"(slot_bytes {slot_bytes} at {rate} bit/s, from the plan)",
                ("flow", i, "period"),
            )
        slot_periods[f.name] = int(p_slots)
    if out and any(v.constraint == "format" for v in out):
        return out

    horizon = math.lcm(n, *slot_periods.values())
    num, den = delta.numerator, delta.denominator
    occupied: dict[int, tuple[str, int]] = {}
    for f in fs.flows:
        check(deadline)
        what, pf = f"flow {f.name!r}", planned[f.name]
        p_slots = slot_periods[f.name]
        jit = f.jitter * den
        instances = horizon // p_slots
        times = _instance_times(pf, 2 * instances, what)
        slots = [t * den // num for t in times]  # ⌊t/δ⌋, exactly
        for l in range(instances):
            if slots[l + instances] != slots[l] + horizon:
                bad(
                    "periodicity",
                    f"{what}: instance {l + instances} is not instance {l} plus T = {horizon} slots",
                )
                break
        slots = slots[:instances]
        if any(t < 0 for t in times):
            bad("format", f"{what}: negative txtime")
        mask = owned.get(f.cls, set())
        for l, s in enumerate(slots):
            if s % n not in mask:
                bad(
                    "(1) ownership",
                    f"{what} instance {l} in slot {s} (ring slot {s % n}) not owned by {f.cls!r}",
                )
        # (2) in its window form (module docstring), in integer units of δ's numerator.
        e = [s - l * p_slots for l, s in enumerate(slots)]
        low = min(range(instances), key=e.__getitem__)
        high = max(range(instances), key=e.__getitem__)
        spread = e[high] - e[low]
        if spread * num > jit:
            a, b = low, high if high > low else high + instances  # the in-order pair that deviates the spread
            sa, sb = slots[a], slots[high] + (b - high) // instances * horizon
            bad(
                "(2) jitter",
                f"{what}: instances {a} and {b} (slots {sa} and {sb}) are {(sb - sa) * delta} ns apart against "
                f"{b - a} periods = {(b - a) * f.period} ns: {spread * delta} ns off (max jitter {f.jitter} ns)",
            )
        if f.phase is not None:
            for l, s in enumerate(slots):
                release = f.phase + l * f.period
                if not release * den <= s * num <= (release + f.jitter) * den:
                    bad(
                        "phase",
                        f"{what} instance {l} starts at {s * delta} ns, outside [{release}, {release + f.jitter}] ns",
                    )
                    break
        for l, s in enumerate(slots):
            u = s % horizon
            if u in occupied:
                other = occupied[u]
                bad(
                    "(3) collision",
                    f"{what} instance {l} and flow {other[0]!r} instance {other[1]} both use slot occurrence {u}",
                )
            else:
                occupied[u] = (f.name, l)
    _ptp_room(fs, doc, owned, {u % n for u in occupied}, n * delta, bad)
    for constraint, k in counts.items():
        if k > MAX_REPORTED:
            out.append(Violation(constraint, f"... {k - MAX_REPORTED} more"))
    return out


def _ptp_room(fs: FlowSet, doc: dict, owned: dict[str, set[int]], used: set[int], cycle: Fraction, bad) -> None:
    """PTP's class keeps ``⌈rate × cycle⌉`` ring slots a cycle that no flow instance uses (``used``: the ring
    slots of every instance), ``rate`` PTP's frames a second at the flow set's intervals."""
    mismatch = table_problem(fs.ptp, doc.get("ptp"))
    if mismatch is not None:
        bad("ptp", mismatch)
    if fs.ptp is None:
        return
    rate, what = needs(fs.ptp)
    k = slots_per_cycle(rate, cycle)
    free = len(owned.get(fs.ptp.cls, set()) - used)
    if free < k:
        carried = float(free * Fraction(10**9) / cycle)
        bad(
            "ptp room",
            f"class {fs.ptp.cls!r} (ptp.class) keeps {free} ring slot{'s' * (free != 1)} a cycle that no flow uses "
            f"({carried:g} frames/s); PTP needs {float(rate):g} frames/s at its intervals ({what}): "
            f"{k} a cycle of {float(cycle):.12g} ns",
        )


def _instance_times(pf: dict, count: int, what: str) -> list[int]:
    """Txtimes (ns after a ring-cycle start) of instances ``0..count-1`` by the runtime's rule."""
    period = _conv(parse_duration, pf["period"], f"{what} period")
    if "instance_offsets" in pf:
        offsets = [_conv(parse_duration, v, f"{what} instance_offsets") for v in pf["instance_offsets"]]
        if not offsets:
            raise _Invalid("format", f"{what}: instance_offsets is empty")
        repeat = _conv(parse_duration, _req(pf, "repeat", what), f"{what} repeat")
        m = len(offsets)
        return [offsets[l % m] + (l // m) * repeat for l in range(count)]
    offset = _conv(parse_duration, pf.get("offset", 0), f"{what} offset")
    return [offset + l * period for l in range(count)]
