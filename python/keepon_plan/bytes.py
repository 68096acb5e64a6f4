"""Byte-clock planning (``solve --timing bytes``): time windows sized to the frames, offsets in integer ns.

On the byte clock (docs/byte-clock.md) a real-time frame starts on the byte nearest its txtime, unpadded, and a
class owns *windows* of a cycle on network time instead of ring slots. This module plans for that:

- **Cycle** ``C`` = the hyperperiod of the flows (lcm of the periods, ns). Instance ``l`` of flow ``f`` has txtime
  ``o_f + l·p_f + e_{f,l}`` after a cycle start, with ``0 ≤ e ≤ ⌊j/q⌋·q`` (free phase: ``0 ≤ o_f < p_f``), or in
  ``[φ + l·p, φ + l·p + j]`` with a fixed phase ``φ`` — the slot planner's window form of the jitter bound, in ns.
- **Windows**: every instance gets a window of exactly its wire time ``⌈(max(frame, 64) + 20)·8/rate⌉`` ns plus
  ``guard`` at its txtime (taken modulo ``C``); windows of a class that meet are merged. A window crossing the
  cycle end is written as two pieces, each at least a minimum frame's wire time (the runtime's rule), which the
  runtime joins again.
- **No overlap**: the windows of all instances (so also their wire times) are pairwise disjoint on the circle of
  length ``C``: one CP-SAT ``NoOverlap`` over each interval and its copy one cycle later.
- **Time grid.** Times are multiples of ``q``: the shortest whole number of ns that is a whole number of byte times
  (8 ns at 1 Gb/s, 4 ns = 5 bytes at 10 Gb/s) when every period and the cycle are multiples of it — then every
  txtime lies on one byte grid and the runtime's rounding to the nearest byte moves all frames alike. Otherwise
  ``q = 1`` ns and each frame is followed by one byte time of free link, which that rounding may take.
- A frame the runtime could not lengthen by a minimum frame (longer than ``max_frame − 84`` B) is followed by a
  minimum frame's wire time of free link: the runtime closes a shorter gap after a frame by padding that frame.

The model is exact for these rules: CP-SAT infeasible is a proof that no such placement exists; a capacity count
(the windows' lengths exceed the cycle) and an empty fixed-phase range prove it without the solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from . import __version__
from .deadline import Deadline, check
from .emit import _q, ptp_lines, resolve_base_time
from .model import FlowSet, InputError
from .params import RingChoice, max_data_age, pick_batch
from .units import PREAMBLE_SFD_IFG_BYTES, ceil_frac, floor_frac, format_duration, format_rate, lcm_all, slot_period

PLAN, INFEASIBLE, UNKNOWN = "plan", "infeasible", "unknown"
MAX_INSTANCES = 20_000
"""Most flow instances per cycle the bytes planner takes (one CP-SAT interval pair each)."""
DEFAULT_MAX_FRAME = 1518
MIN_FRAME_BYTES = 64
DEFAULT_SLOT_BYTES = 1230
"""Ring slot in bytes mode when the flow set gives none: it only sets the posting lead's unit δ (10 µs at 1 Gb/s)."""


def byte_time(rate: int) -> Fraction:
    """ns per byte on the wire."""
    return Fraction(8 * 10**9, rate)


def wire_time(frame_bytes: int, rate: int) -> Fraction:
    """A frame's wire time in ns: ``(max(frame, 64) + 20)·8/rate`` (preamble, SFD and gap included)."""
    return (max(frame_bytes, MIN_FRAME_BYTES) + PREAMBLE_SFD_IFG_BYTES) * byte_time(rate)


def min_window(rate: int) -> int:
    """The shortest window the runtime takes, whole ns: a minimum frame's wire time, rounded up."""
    return ceil_frac(wire_time(MIN_FRAME_BYTES, rate))


@dataclass(frozen=True)
class BytesPlan:
    cycle: int
    """ns; the windows repeat every cycle from base_time."""
    windows: tuple[tuple[tuple[int, int], ...], ...]
    """Per class (flow set order): merged (offset, length) windows in ``[0, cycle]``, ascending."""
    times: tuple[tuple[int, ...], ...]
    """Per flow: txtime of each instance in one cycle, ns after a cycle start (not reduced modulo the cycle)."""
    grid: int
    max_frame: int
    method: str = "CP-SAT (no-overlap on the cycle)"


@dataclass
class BytesOutcome:
    status: str
    plan: BytesPlan | None = None
    reason: str = ""


def lead_margin(fs: FlowSet) -> Fraction:
    """What the lead must exceed ``batch·δ`` by on the byte clock: the wire is posted ``batch·δ`` beyond the next
    descriptor the NIC will fetch, in whole descriptors, so up to three longest frames (fillers of ``max_frame``)
    beyond the wire: the one on it, the one fetched after it, and the posting's last; and a frame handed in at
    ``txtime − lead`` reaches the station at its next poll (``[params] poll_budget``). Measured at 1 Gb/s with
    batch 9: lead = batch·δ + one longest frame + poll budget had 19 of 40 frames of a flow rejected ``late``, two
    longest frames none (`tests/test_bytes.py`)."""
    return 3 * wire_time(max(DEFAULT_MAX_FRAME, fs.max_frame), fs.rate) + fs.params.poll_budget


def choose_ring(fs: FlowSet) -> RingChoice:
    """Ring for the posting lead only: slot_bytes (default 1230), slots (default 32), and the largest batch with
    ``batch·δ ≥ poll_budget``, the Eq. 4 bound of ``sync_budget`` (as in slot mode) and the lead
    ``⌈batch·δ + margin⌉`` (:func:`lead_margin`) within ``max_data_age`` (default: the shortest period), or within
    ``[params] lead`` when that is given."""
    slot_bytes = fs.slot_bytes if fs.slot_bytes is not None else DEFAULT_SLOT_BYTES
    slots = fs.slots if fs.slots is not None else 32
    delta = slot_period(slot_bytes, fs.rate)
    p = fs.params
    margin = lead_margin(fs)
    lo = max(1, ceil_frac(Fraction(p.poll_budget) / delta))
    why = [f"batch ≥ {lo}: batch·δ ≥ poll_budget {p.poll_budget} ns", f"batch ≤ {slots - 1}: ring of {slots} slots"]
    hi = slots - 1
    if p.sync_budget is not None:
        b = floor_frac((2 * p.sync_budget - p.master_granularity - max(p.master_jitter, p.station_jitter)) / delta)
        why.append(f"batch ≤ {b}: Eq. 4 offset bound within sync_budget {p.sync_budget} ns")
        hi = min(hi, b)
    limit = p.lead if p.lead is not None else max_data_age(fs)
    b = floor_frac((limit - margin) / delta)
    if p.lead is not None and b * delta + margin == limit:
        b -= 1  # the lead must exceed batch·δ + margin
    why.append(
        f"batch ≤ {b}: batch·δ + {float(margin):g} ns within {'lead' if p.lead is not None else 'max data age'}"
        f" {limit} ns"
    )
    hi = min(hi, b)
    batch, notes = pick_batch(fs, lo, hi, why, "--timing bytes: ")
    lead = p.lead if p.lead is not None else ceil_frac(batch * delta + margin)
    return RingChoice(slot_bytes, slots, batch, lead, tuple(notes))


def grid(fs: FlowSet, cycle: int) -> int:
    """``q``: the shortest whole ns that is whole bytes, if every period (so the cycle) is a multiple; else 1."""
    u = byte_time(fs.rate).numerator
    return u if all(f.period % u == 0 for f in fs.flows) and cycle % u == 0 else 1


def _excluded_starts(cycle: int, window: int, least: int) -> list[tuple[int, int]]:
    """Start times (ns, closed ranges) whose window would cross the cycle end leaving a piece under ``least``."""
    out = []
    lo = max(cycle - window + 1, 0)  # from here on the window crosses the end
    # second piece t + window − cycle < least  <=>  t < cycle − window + least
    if lo <= cycle - window + least - 1:
        out.append((lo, min(cycle - window + least - 1, cycle - 1)))
    # first piece cycle − t < least  <=>  t > cycle − least
    a = max(lo, cycle - least + 1)
    if a <= cycle - 1:
        out.append((a, cycle - 1))
    return out


def plan_bytes(
    fs: FlowSet,
    guard: int = 0,
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    progress=None,
    stop: float = math.inf,
) -> BytesOutcome:
    """Plan the flow set for the byte clock (see the module docstring). Raises :class:`InputError` when the
    flow set is beyond the planner (too many instances per cycle)."""
    rate = fs.rate
    cycle = lcm_all([f.period for f in fs.flows])
    instances = [cycle // f.period for f in fs.flows]
    if sum(instances) > MAX_INSTANCES:
        raise InputError(
            f"--timing bytes: the cycle (hyperperiod {cycle} ns) holds {sum(instances)} flow instances, more than "
            f"the {MAX_INSTANCES} the bytes planner takes",
            fs.path,
        )
    max_frame = max(DEFAULT_MAX_FRAME, fs.max_frame)
    q = grid(fs, cycle)
    sep = 0 if q > 1 else ceil_frac(byte_time(rate))
    least = min_window(rate)
    tail = ceil_frac(wire_time(MIN_FRAME_BYTES, rate))
    wlen = [ceil_frac(wire_time(f.frame_bytes, rate)) + guard for f in fs.flows]  # window length, ns
    occ = [  # no-overlap length in units of q
        ceil_frac(Fraction(w + sep + (tail if f.frame_bytes > max_frame - 84 else 0), q))
        for f, w in zip(fs.flows, wlen, strict=True)
    ]
    units = cycle // q
    used = sum(m * o for m, o in zip(instances, occ, strict=True))
    if used > units:
        per = ", ".join(f"{f.name} {m}×{w} ns" for f, m, w in zip(fs.flows, instances, wlen, strict=True))
        return BytesOutcome(
            INFEASIBLE,
            reason=f"capacity: the frames' windows need {used * q} ns of link per cycle of {cycle} ns ({per}"
            f"{', guard ' + str(guard) + ' ns each' if guard else ''}"
            f"{', with ' + str(sep) + ' ns between frames' if sep else ''})",
        )
    # Ranges of e (units) per flow: the txtime of instance l is base + l·p + e_l.
    ranges = []
    for f in fs.flows:
        if f.phase is None:
            ranges.append((0, f.jitter // q))
        else:
            lo, hi = ceil_frac(Fraction(f.phase, q)), floor_frac(Fraction(f.phase + f.jitter, q))
            if hi < lo:
                return BytesOutcome(
                    INFEASIBLE,
                    reason=f"flow {f.name!r}: no txtime on the {q} ns grid within [phase, phase + jitter] = "
                    f"[{f.phase}, {f.phase + f.jitter}] ns",
                )
            ranges.append((lo, hi))

    from .isolation import _run, load_solver

    cp_model = load_solver()
    model = cp_model.CpModel()
    intervals = []
    starts: list[list] = []
    for i, f in enumerate(fs.flows):
        period = f.period // q
        w = wlen[i]
        bad = _excluded_starts(cycle, w, least)
        allowed = []
        nxt = 0
        for a, b in bad:  # in ns; convert to units: unit t is allowed iff t·q is allowed
            a_u, b_u = ceil_frac(Fraction(a, q)), b // q
            if a_u > b_u:
                continue
            if nxt <= a_u - 1:
                allowed.append([nxt, a_u - 1])
            nxt = b_u + 1
        if nxt <= units - 1:
            allowed.append([nxt, units - 1])
        domain = cp_model.Domain.FromIntervals(allowed)
        o = model.NewIntVar(0, period - 1, f"o{i}") if f.phase is None else 0
        lo, hi = ranges[i]
        row = []
        for l in range(instances[i]):
            e = model.NewIntVar(lo, hi, f"e{i}_{l}") if hi > lo else lo
            t = model.NewIntVarFromDomain(domain, f"t{i}_{l}")
            wrap = model.NewBoolVar(f"w{i}_{l}")
            model.Add(t + units * wrap == o + l * period + e)
            intervals.append(model.NewFixedSizeIntervalVar(t, occ[i], f"x{i}_{l}"))
            intervals.append(model.NewFixedSizeIntervalVar(t + units, occ[i], f"y{i}_{l}"))
            row.append((o, e, l * period))
        starts.append(row)
    model.AddNoOverlap(intervals)
    status, solver = _run(model, time_limit, seed, workers, progress, stop=stop)
    if status == cp_model.INFEASIBLE:
        return BytesOutcome(
            INFEASIBLE,
            reason=f"no placement of the {sum(instances)} frame windows in the {cycle} ns cycle without overlap "
            f"meets every flow's offset, jitter and phase range (CP-SAT, exact; grid {q} ns)",
        )
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return BytesOutcome(UNKNOWN, reason=f"CP-SAT found no plan and no proof in {time_limit:.1f} s")

    def value(x) -> int:
        return x if isinstance(x, int) else solver.Value(x)

    times = tuple(tuple((value(o) + base + value(e)) * q for o, e, base in row) for row in starts)
    per_class: list[list[tuple[int, int]]] = [[] for _ in fs.classes]
    for i, f in enumerate(fs.flows):
        c = fs.classes.index(f.cls)
        for t in times[i]:
            s = t % cycle
            if s + wlen[i] <= cycle:
                per_class[c].append((s, wlen[i]))
            else:
                per_class[c].append((s, cycle - s))
                per_class[c].append((0, s + wlen[i] - cycle))
    windows = tuple(tuple(merge(ws)) for ws in per_class)
    return BytesOutcome(PLAN, BytesPlan(cycle, windows, times, q, max_frame))


def merge(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(offset, length) windows sorted, those that meet or overlap joined."""
    out: list[list[int]] = []
    for s, n in sorted(windows):
        if out and s <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], s + n - out[-1][0])
        else:
            out.append([s, n])
    return [(s, n) for s, n in out]


def runtime_config(
    fs: FlowSet,
    choice: RingChoice,
    plan: BytesPlan,
    header: str = "",
    deadline: Deadline | None = None,
    base_time: int | None = None,
) -> str:
    """The runtime config for the byte clock: ``timing = "bytes"``, the cycle, windows per class, the flows."""
    base = resolve_base_time(fs, base_time)
    delta = slot_period(choice.slot_bytes, fs.rate)
    lines = [f"# keepon runtime config written by keepon-plan {__version__} (byte clock)"]
    lines += [f"# {h}" for h in header.splitlines() if h]
    lines += [
        f"# schedule: {plan.method}; windows sized to the frames' wire times, txtimes on a {plan.grid} ns grid",
        "# times are relative to a cycle start; cycle n starts at base_time + n·cycle_time of TAI ([schedule])",
        "version = 1",
        "",
        "[link]",
        f"rate = {_q(format_rate(fs.rate))}",
        'timing = "bytes"',
    ]
    if plan.max_frame != DEFAULT_MAX_FRAME:
        lines.append(f"max_frame = {plan.max_frame}")
    lines += [
        "",
        f"[ring]  # sets the posting lead batch·δ = {choice.batch} × {delta} ns; no slot holds a frame",
        f"slot_bytes = {choice.slot_bytes}",
        f"slots = {choice.slots}",
        f"batch = {choice.batch}",
        f"policy = {_q(fs.policy)}",
        "",
        "[schedule]",
        f"base_time = {base}",
        f"cycle_time = {_q(format_duration(plan.cycle))}",
    ]
    for c, name in enumerate(fs.classes):
        lines += ["", "[[class]]", f"name = {_q(name)}"]
        if plan.windows[c]:
            pairs = ", ".join(f"[{_q(format_duration(s))}, {_q(format_duration(n))}]" for s, n in plan.windows[c])
            lines.append(f"windows = [{pairs}]")
        else:
            lines.append("# no flows: best effort (no windows)")
    for f, times in zip(fs.flows, plan.times, strict=True):
        check(deadline)
        count = f.count if f.count is not None else max(len(times), math.ceil(10**9 / f.period))
        lines += [
            "",
            "[[flow]]",
            f"name = {_q(f.name)}",
            f"class = {_q(f.cls)}",
            f"period = {_q(format_duration(f.period))}",
        ]
        if all(t == times[0] + l * f.period for l, t in enumerate(times)):
            lines.append(f"offset = {_q(format_duration(times[0]))}")
        else:
            lines.append("instance_offsets = [" + ", ".join(_q(format_duration(t)) for t in times) + "]")
            lines.append(f"repeat = {_q(format_duration(plan.cycle))}")
        lines += [f"frame_bytes = {f.frame_bytes}", f"count = {count}", f"lead = {_q(format_duration(choice.lead))}"]
    lines += ptp_lines(fs)
    return "\n".join(lines) + "\n"


def gate_list(fs: FlowSet, plan: BytesPlan, base_time: int | None = None) -> str:
    """The gate control list of the same windows (taprio syntax, as slot mode writes): one entry per window with
    its class's gate ``i`` open, best effort's gate ``K`` open in between."""
    base = resolve_base_time(fs, base_time)
    k = len(fs.classes)
    owner = sorted((s, n, c) for c, ws in enumerate(plan.windows) for s, n in ws)
    entries: list[tuple[int, int]] = []
    at = 0
    for s, n, c in owner:
        if s > at:
            entries.append((k, s - at))
        entries.append((c, n))
        at = s + n
    if at < plan.cycle:
        entries.append((k, plan.cycle - at))
    width = max(2, (k + 2) // 4 + 1)
    lines = [
        f"# keepon-plan {__version__}: time windows of the end station (byte clock), cycle {plan.cycle} ns",
        "# gate i = traffic class i ("
        + ", ".join(f"{i}={c}" for i, c in enumerate(fs.classes))
        + f"), gate {k} = best effort",
        "# base-time = the station's [schedule] base_time (TAI ns); cycle-time = [schedule] cycle_time.",
        "# Frames reach this switch one link delay later: if the gates must open on their arrival, the switch",
        "# operator adds the link's propagation and store-and-forward delay to base-time.",
        "# e.g. tc qdisc replace dev DEV parent root taprio num_tc "
        f"{k + 1} ... base-time {base} sched-entry ... clockid CLOCK_TAI",
        f"base-time {base}",
        f"cycle-time {plan.cycle}",
    ]
    lines += [f"sched-entry S {1 << g:0{width}x} {interval}" for g, interval in entries]
    return "\n".join(lines) + "\n"
