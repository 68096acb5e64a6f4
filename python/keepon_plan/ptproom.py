"""Room for synchronisation in the plan (the flow set's ``[ptp]``, :mod:`keepon_plan.ptpinput`).

PTP's messages go out in ``ptp.class``'s owned ring slots only, and the runtime refuses a configuration whose PTP
class carries fewer frames a second than PTP sends at its intervals (``crates/keepon/src/ptproom.rs``). The planner
keeps that room *in addition to* what the class's flows use:

    k = ⌈rate × N·δ⌉   ring slots per cycle, rate = PTP's frames/s (ptpinput.needs), N·δ the ring cycle

as ``k`` reservation flows of the class with period ``N`` and no jitter: each takes one ring slot in every cycle,
which no flow may then use. The synthesis stages decide the set with them like any other flows (a proof of
infeasibility covers the reservation), and :func:`release` drops them from the schedule, keeping their ring slots
owned by the class — moved, among the slots no class owns, to lie as evenly over the cycle as those allow.

On the byte clock the class's windows must hold ``k`` longest PTP frames' wire times a cycle beside its flows'
frames (:func:`bytes_flows`: frames of their own for the bytes planner, placed anywhere in the cycle).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from .model import Flow, FlowSet, Problem, SlotFlow
from .ptpinput import PTP_LONGEST_FRAME, PtpInput, describe, needs, slots_per_cycle
from .units import PREAMBLE_SFD_IFG_BYTES, lcm_all, slot_period

if TYPE_CHECKING:  # importing isolation would import the solver's stages
    from .isolation import Schedule

MAX_FRAME = 1518
"""The runtime's default ``link.max_frame``, which the planner's configs keep."""
MAX_PPM = 100
"""With ``[ptp]`` the runtime refuses slots that leave fillers no room to lengthen by ±100 ppm a slot
(``schedule_keepable`` in crates/keepon/src/ptpconf.rs)."""
MAX_SPREAD_ANCHORS = 512


@dataclass(frozen=True)
class Room:
    """What PTP needs of a ring of ``slots`` slots of ``delta`` ns."""

    cls: int
    name: str
    slots: int
    """``k``: ring slots per cycle kept for PTP."""
    rate: Fraction
    """PTP's frames a second."""
    cycle: Fraction
    """The ring cycle ``N·δ``, ns."""

    def carried(self, slots: int) -> float:
        """Frames a second ``slots`` ring slots a cycle carry."""
        return float(slots * Fraction(10**9) / self.cycle)


def room(fs: FlowSet, slot_bytes: int, ring: int) -> Room | None:
    """PTP's room in a ring of ``ring`` slots of ``slot_bytes`` (``None`` without ``[ptp]``); bad input where the
    runtime would refuse the slot size with ``[ptp]``."""
    if fs.ptp is None:
        return None
    problem = slot_problem(slot_bytes)
    if problem is not None:
        raise fs.error(f"[ptp]: {problem}", ("ptp",))
    return room_of(fs.ptp, fs.classes, slot_bytes, ring, fs.rate)


def slot_problem(slot_bytes: int) -> str | None:
    """Why the runtime refuses slots of ``slot_bytes`` with ``[ptp]`` (fillers cannot lengthen by ±100 ppm), or
    ``None``."""
    grow = -(-(slot_bytes + PREAMBLE_SFD_IFG_BYTES) * MAX_PPM // 10**6)
    if MAX_FRAME - slot_bytes >= grow:
        return None
    return (
        f"slot_bytes {slot_bytes} leaves the runtime's fillers no room to lengthen (link.max_frame = "
        f"{MAX_FRAME} B) by the ±{MAX_PPM} ppm a synchronised station absorbs ({grow} B a slot): use slots of at "
        f"most {MAX_FRAME - grow} B ([ring] slot_bytes) or smaller frames"
    )


def room_of(p: PtpInput, classes: tuple[str, ...], slot_bytes: int, ring: int, rate_bps: int) -> Room:
    """PTP's room for ``p`` (its class one of ``classes``) in a ring of ``ring`` slots of ``slot_bytes`` on a link
    of ``rate_bps``."""
    rate, _ = needs(p)
    cycle = ring * slot_period(slot_bytes, rate_bps)
    return Room(classes.index(p.cls), p.cls, slots_per_cycle(rate, cycle), rate, cycle)


def note(r: Room, whose: str = "beyond its flows'") -> str:
    """One line for the user: what is kept (``whose``: besides what) and why."""
    return (
        f"ptp: class {r.name!r} keeps {r.slots} ring slot{'s' * (r.slots != 1)} a cycle for PTP {whose} "
        f"({r.carried(r.slots):g} frames/s; {_needs_text(r)})"
    )


def _needs_text(r: Room) -> str:
    return f"{describe_rate(r)}: ⌈{float(r.rate):g}/s × {float(r.cycle):.12g} ns⌉ = {r.slots} a cycle"


def describe_rate(r: Room) -> str:
    return f"PTP needs {float(r.rate):g} frames/s"


def reserve(problem: Problem, r: Room) -> Problem:
    """``problem`` with ``r.slots`` reservation flows of PTP's class appended (period ``N``, no jitter)."""
    extra = tuple(SlotFlow(f"[ptp] {r.name} #{i}", r.cls, problem.slots, 0) for i in range(r.slots))
    return replace(problem, flows=problem.flows + extra)


def capacity_reason(problem: Problem, r: Room, fs: FlowSet) -> str | None:
    """Why the flows and PTP's room cannot share the ring by counting alone, naming the class and both rates (or
    ``None``; a ring the flows alone overfill is left to the planner's own capacity message)."""
    flows = sum(-(-d.numerator // d.denominator) for d in map(problem.class_demand, range(len(problem.classes))))
    n = problem.slots
    if flows > n or flows + r.slots <= n:
        return None
    free = n - flows
    assert fs.ptp is not None
    return (
        f"ptp: class {r.name!r} needs {r.slots} ring slot{'s' * (r.slots != 1)} a cycle beyond its flows' for PTP "
        f"({describe(fs.ptp)}; ⌈{float(r.rate):g}/s × cycle {float(r.cycle):.12g} ns⌉ = {r.slots}), but the flows need "
        f"Σ⌈N·U_c⌉ = {flows} of the N = {n} ring slots: the {free} left carry {r.carried(free):g} frames/s, PTP needs "
        f"{float(r.rate):g}; lengthen the PTP intervals (ptp.log_sync_interval, …) or plan fewer flows"
    )


def explain(reason: str, r: Room) -> str:
    """An infeasibility ``reason`` of the planner, with the PTP room it included."""
    return (
        f"{reason} (with {r.slots} ring slot{'s' * (r.slots != 1)} a cycle kept for PTP in class {r.name!r}: "
        f"{describe_rate(r)}, {'it carries' if r.slots == 1 else 'they carry'} {r.carried(r.slots):g}; without "
        "[ptp] none would be kept)"
    )


def release(problem: Problem, r: Room, schedule: Schedule) -> Schedule:
    """``schedule`` of :func:`reserve`'s problem for ``problem`` (the flows only): the reservation flows dropped,
    their ring slots kept by PTP's class and spread over the cycle among the ring slots no class owns."""
    n, real = problem.slots, len(problem.flows)
    kept = {ss[0] % n for ss in schedule.slots[real:]}
    owners = set().union(*schedule.owned)
    free = (set(range(n)) - owners) | kept
    chosen = spread(sorted(free), r.slots, n, kept)
    owned = list(schedule.owned)
    owned[r.cls] = frozenset((set(owned[r.cls]) - kept) | chosen)
    return replace(schedule, owned=tuple(owned), slots=schedule.slots[:real])


def largest_gap(slots: set[int] | list[int], n: int) -> int:
    """The longest stretch between consecutive ones of ``slots`` on the ring of ``n`` (``n`` for one slot)."""
    s = sorted(slots)
    return max((b - a) % n or n for a, b in zip(s, s[1:] + s[:1], strict=True))


def spread(candidates: list[int], k: int, n: int, current: set[int]) -> set[int]:
    """``k`` of ``candidates`` (sorted ring slots) whose largest gap is least among greedy choices from each
    anchor, or ``current`` when none is better: from anchor ``a``, the ``i``-th slot is the first candidate at or
    after ``a + ⌈i·n/k⌉`` (leaving enough candidates for the rest)."""
    if k <= 1 or len(candidates) <= k:
        return current
    best, best_gap = current, largest_gap(current, n)
    step = max(1, len(candidates) // MAX_SPREAD_ANCHORS)
    for a in candidates[::step]:
        ds = sorted((c - a) % n for c in candidates)
        picks, last = [0], 0
        for i in range(1, k):
            target = -(-i * n // k)
            j = max(last + 1, min(bisect.bisect_left(ds, target), len(ds) - (k - i)))
            picks.append(j)
            last = j
        chosen = {(ds[j] + a) % n for j in picks}
        gap = largest_gap(chosen, n)
        if gap < best_gap:
            best, best_gap = chosen, gap
    return best


def bytes_flows(fs: FlowSet) -> tuple[FlowSet, int, Fraction] | None:
    """On the byte clock: ``fs`` with ``k = ⌈rate × cycle⌉`` frames of PTP's longest length (one a cycle each,
    anywhere in it) added to PTP's class, ``cycle`` the flows' hyperperiod; ``k`` and one such frame's wire time
    in ns. Their windows (each at least that wire time) make the class's windows hold ``k`` PTP frames a cycle
    beside the flows' frames, as the runtime counts (``⌊window / frame⌋``). ``None`` without ``[ptp]``."""
    if fs.ptp is None:
        return None
    cycle = lcm_all([f.period for f in fs.flows])
    k, wire = bytes_room(fs.ptp, cycle, fs.rate)
    extra = tuple(Flow(f"[ptp] {fs.ptp.cls} #{i}", fs.ptp.cls, cycle, 0, PTP_LONGEST_FRAME) for i in range(k))
    return replace(fs, flows=fs.flows + extra), k, wire


def bytes_room(p: PtpInput, cycle_ns: int, rate_bps: int) -> tuple[int, Fraction]:
    """On the byte clock: ``k = ⌈rate × cycle⌉`` PTP frames of its longest length a cycle of ``cycle_ns``, and one
    such frame's wire time in ns on a link of ``rate_bps`` (the runtime counts ``⌊window / that⌋`` per window)."""
    rate, _ = needs(p)
    k = slots_per_cycle(rate, Fraction(cycle_ns))
    return k, (PTP_LONGEST_FRAME + PREAMBLE_SFD_IFG_BYTES) * Fraction(8 * 10**9, rate_bps)


def note_bytes(fs: FlowSet, k: int, wire: Fraction) -> str:
    assert fs.ptp is not None
    return (
        f"ptp: class {fs.ptp.cls!r} keeps room for {k} PTP frame{'s' * (k != 1)} of {PTP_LONGEST_FRAME} B "
        f"({float(wire):g} ns on the wire) a cycle beyond its flows' ({describe(fs.ptp)})"
    )


def explain_bytes(reason: str, fs: FlowSet, k: int, wire: Fraction) -> str:
    """A byte-clock infeasibility ``reason`` with the PTP room it included."""
    assert fs.ptp is not None
    return (
        f"{reason} (with room for {k} PTP frame{'s' * (k != 1)} of {float(wire):g} ns a cycle kept in class "
        f"{fs.ptp.cls!r}: {describe(fs.ptp)}; without [ptp] it would not be kept)"
    )
