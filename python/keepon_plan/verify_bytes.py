"""Independent verifier of a byte-clock plan (``[link] timing = "bytes"``, ``[[class]] windows``), no solver.

It reads the plan as the runtime would (docs/byte-clock.md) and checks, in exact arithmetic (wire times are
fractions of a ns at 10 Gb/s):

- ``windows``: ``[schedule] cycle_time`` given; every window an (offset, length) pair inside ``[0, cycle]`` and at
  least a minimum frame's wire time ``84·8/rate`` long; no two windows (of one class or two) overlap;
- ``(1) window``: every instance's wire time ``[t, t + (max(frame, 64) + 20)·8/rate)``, ``t`` its txtime modulo
  the cycle, lies inside one window of its class (windows of the class that meet, also across the cycle end, count
  as one, as in the runtime);
- ``(3) collision``: no two instances' wire times overlap on the circle of one cycle;
- ``(2) jitter`` and ``phase`` as in slot mode (the window form ``max_l e_l − min_l e_l ≤ j``, ``e_l = t_l − l·p``),
  ``periodicity`` (instance ``l + M`` is instance ``l`` plus one cycle, ``M = cycle/p``), ``lead > batch·δ``, and
  the plan's flows, rate, classes and frame sizes are the flow set's (frames at most ``link.max_frame``).

- ``ptp room`` (the flow set's ``[ptp]``): the plan carries the table unchanged, and the PTP class's windows hold
  ``⌈rate × cycle⌉`` of PTP's longest frames (110 B) in the gaps its flows' frames leave.

Shares only :mod:`keepon_plan.units` and the flow-set parser (with :mod:`keepon_plan.ptpinput`) with the planner
(not :mod:`keepon_plan.bytes`).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from .deadline import Deadline, check
from .model import FlowSet
from .ptpinput import PTP_LONGEST_FRAME, needs, slots_per_cycle, table_problem
from .units import ValueError_, parse_duration, parse_rate, slot_period


def verify_bytes(fs: FlowSet, doc: dict, deadline: Deadline | None, violation, invalid, max_reported: int) -> list:
    """All violations of a byte-clock plan. ``violation(constraint, message)`` makes one; ``invalid`` is the
    exception that stops at a malformed plan (both from :mod:`keepon_plan.verify`)."""
    out: list = []
    counts: dict[str, int] = {}

    def bad(constraint: str, message: str) -> None:
        counts[constraint] = counts.get(constraint, 0) + 1
        if counts[constraint] <= max_reported:
            out.append(violation(constraint, message))

    def req(table, key: str, what: str):
        if not isinstance(table, dict) or key not in table:
            raise invalid("format", f"{what}: missing {key!r}")
        return table[key]

    def dur(value, what: str) -> int:
        try:
            return parse_duration(value)
        except ValueError_ as exc:
            raise invalid("format", f"{what}: {exc}") from exc

    def integer(value, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid("format", f"{what}: expected an integer, got {value!r}")
        return value

    link, ring, schedule = doc.get("link", {}), doc.get("ring", {}), doc.get("schedule", {})
    try:
        rate = parse_rate(req(link, "rate", "[link]"))
    except ValueError_ as exc:
        raise invalid("format", f"[link] rate: {exc}") from exc
    if rate != fs.rate:
        bad("ring", f"link rate {rate} bit/s differs from the flow set's {fs.rate}")
    byte = Fraction(8 * 10**9, rate)
    max_frame = integer(link.get("max_frame", 1518), "[link] max_frame")
    slot_bytes = integer(req(ring, "slot_bytes", "[ring]"), "[ring] slot_bytes")
    n = integer(req(ring, "slots", "[ring]"), "[ring] slots")
    batch = integer(req(ring, "batch", "[ring]"), "[ring] batch")
    if not 2 <= n <= 4096 or not 64 <= slot_bytes <= 9018 or not 1 <= batch < n:
        bad("ring", f"ring of {n} slots of {slot_bytes} bytes, batch {batch}, is outside the runtime's limits")
    delta = slot_period(slot_bytes, rate)
    base = integer(req(schedule, "base_time", "[schedule]"), "[schedule] base_time")
    if not 0 <= base < 2**62:
        bad("format", f"[schedule] base_time {base} is outside 0 ≤ base_time < 2^62")
    if "cycle_time" not in schedule:
        raise invalid("windows", "[schedule] cycle_time is required with windows")
    cycle = dur(schedule["cycle_time"], "[schedule] cycle_time")
    if cycle <= 0:
        raise invalid("windows", "[schedule] cycle_time must be positive")

    # Windows: inside the cycle, long enough, pairwise disjoint.
    least = 84 * byte
    windows: dict[str, list[tuple[int, int]]] = {}
    every: list[tuple[int, int, str]] = []
    for c in doc.get("class", []):
        name = req(c, "name", "[[class]]")
        if "mask" in c or "slots" in c:
            bad("windows", f"class {name!r} has ring slots in a byte-clock plan")
        ws = []
        for w in c.get("windows", []):
            if not isinstance(w, list) or len(w) != 2:
                raise invalid("format", f"class {name!r}: a window must be [offset, length], got {w!r}")
            s, length = dur(w[0], f"class {name!r} window"), dur(w[1], f"class {name!r} window")
            if s + length > cycle:
                bad("windows", f"class {name!r} window [{s}, {s + length}) ns exceeds the cycle of {cycle} ns")
            if length < least:
                bad("windows", f"class {name!r} window at {s} ns is {length} ns, shorter than a minimum frame {least}")
            ws.append((s, length))
            every.append((s, length, name))
        windows[name] = ws
    every.sort()
    for (s1, n1, c1), (s2, _n2, c2) in itertools.pairwise(every):
        if s1 + n1 > s2:
            bad("windows", f"window [{s1}, {s1 + n1}) ns of {c1!r} overlaps window at {s2} ns of {c2!r}")

    def runs(name: str) -> list[tuple[int, int]]:
        """The class's windows that meet joined, as (start, end) with ``end`` possibly beyond the cycle."""
        out: list[list[int]] = []
        for s, length in sorted(windows.get(name, [])):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], s + length)
            else:
                out.append([s, s + length])
        if len(out) > 1 and out[0][0] == 0 and out[-1][1] == cycle:
            first = out.pop(0)
            out[-1][1] = cycle + first[1]
        elif len(out) == 1 and out[0] == [0, cycle]:
            out[0][1] = 2 * cycle
        return [(a, b) for a, b in out]

    # Flows.
    planned: dict[str, dict] = {}
    for pf in doc.get("flow", []):
        name = req(pf, "name", "[[flow]]")
        if name in planned:
            bad("format", f"flow {name!r} appears twice in the plan")
        planned[name] = pf
    for name in planned:
        if name not in {f.name for f in fs.flows}:
            bad("format", f"flow {name!r} is not in the flow set")
    wires: list[tuple[Fraction, Fraction, str, int]] = []  # (start mod cycle, end, flow, instance)
    for f in fs.flows:
        check(deadline)
        pf = planned.get(f.name)
        what = f"flow {f.name!r}"
        if pf is None:
            bad("format", f"{what} of the flow set is missing from the plan")
            continue
        if pf.get("class") != f.cls or f.cls not in windows:
            bad("(1) window", f"{what} is in class {pf.get('class')!r} (flow set {f.cls!r}), defined: {list(windows)}")
            continue
        period = dur(req(pf, "period", what), f"{what} period")
        frame = integer(req(pf, "frame_bytes", what), f"{what} frame_bytes")
        if period != f.period or frame != f.frame_bytes or not 64 <= frame <= max_frame:
            bad(
                "format",
                f"{what}: period {period} ns, frame {frame} B (flow set {f.period} ns, {f.frame_bytes} B; "
                f"max_frame {max_frame})",
            )
            continue
        lead = dur(req(pf, "lead", what), f"{what} lead")
        if lead <= batch * delta:
            bad("lead", f"{what}: lead {lead} ns is not beyond batch·δ = {batch * delta} ns")
        if cycle % period:
            bad("periodicity", f"{what}: period {period} ns does not divide the cycle {cycle} ns")
            continue
        m = cycle // period
        times = _times(pf, 2 * m, what, dur, invalid)
        if any(times[l + m] != times[l] + cycle for l in range(m)):
            bad("periodicity", f"{what}: instance l + {m} is not instance l plus one cycle ({cycle} ns)")
        times = times[:m]
        e = [t - l * period for l, t in enumerate(times)]
        if max(e) - min(e) > f.jitter:
            bad("(2) jitter", f"{what}: txtimes deviate {max(e) - min(e)} ns from periodicity (max jitter {f.jitter})")
        if f.phase is not None:
            for l, t in enumerate(times):
                if not f.phase + l * period <= t <= f.phase + l * period + f.jitter:
                    bad("phase", f"{what} instance {l} at {t} ns, outside [phase, phase + jitter] of its period")
                    break
        wire = (max(frame, 64) + 20) * byte
        mine = runs(f.cls)
        for l, t in enumerate(times):
            s = t % cycle
            if not any(a <= x and x + wire <= b for a, b in mine for x in (s, s + cycle)):
                bad(
                    "(1) window",
                    f"{what} instance {l}: wire time [{s}, {s + wire}) ns of the cycle is in no "
                    f"single window of class {f.cls!r}",
                )
            wires.append((Fraction(s), s + wire, f.name, l))
    wires.sort()
    for i, (s, end, name, l) in enumerate(wires):
        if i % 4096 == 0:
            check(deadline)
        if i + 1 < len(wires):
            s2, _, name2, l2 = wires[i + 1]
        elif len(wires) > 1 or end > cycle:
            s2, _, name2, l2 = wires[0]
            s2 += cycle
        else:
            continue
        if end > s2:
            bad(
                "(3) collision",
                f"flow {name!r} instance {l} (wire [{s}, {end}) ns) overlaps flow {name2!r} "
                f"instance {l2} (from {s2 % cycle} ns)",
            )
    mismatch = table_problem(fs.ptp, doc.get("ptp"))
    if mismatch is not None:
        bad("ptp", mismatch)
    if fs.ptp is not None:
        classes = {f.name: f.cls for f in fs.flows}
        busy = [(s, end) for s, end, name, _ in wires if classes[name] == fs.ptp.cls]
        _ptp_room(fs, runs(fs.ptp.cls), busy, cycle, byte, bad)
    for constraint, k in counts.items():
        if k > max_reported:
            out.append(violation(constraint, f"... {k - max_reported} more"))
    return out


def _times(pf: dict, count: int, what: str, dur, invalid) -> list[int]:
    """Txtimes of instances ``0..count-1`` after a cycle start, by the runtime's rule."""
    period = dur(pf["period"], f"{what} period")
    if "instance_offsets" in pf:
        offsets = [dur(v, f"{what} instance_offsets") for v in pf["instance_offsets"]]
        if not offsets:
            raise invalid("format", f"{what}: instance_offsets is empty")
        repeat = dur(pf.get("repeat", 0), f"{what} repeat")
        return [offsets[l % len(offsets)] + (l // len(offsets)) * repeat for l in range(count)]
    offset = dur(pf.get("offset", 0), f"{what} offset")
    return [offset + l * period for l in range(count)]


def _ptp_room(fs: FlowSet, runs: list[tuple[int, int]], busy: list, cycle: int, byte: Fraction, bad) -> None:
    """PTP's class's windows (``runs``, joined) hold ``⌈rate × cycle⌉`` of PTP's longest frames beside its flows'
    frames (``busy``: their wire times in the cycle): ``⌊gap / frame⌋`` summed over the gaps the frames leave."""
    assert fs.ptp is not None
    rate, what = needs(fs.ptp)
    k = slots_per_cycle(rate, Fraction(cycle))
    frame = (PTP_LONGEST_FRAME + 20) * byte
    places = 0
    for a, b in runs:
        b = min(b, a + cycle)
        inside = sorted(
            (max(Fraction(a), s + shift), min(Fraction(b), end + shift))
            for s, end in busy
            for shift in (0, cycle)
            if s + shift < b and end + shift > a
        )
        at = Fraction(a)
        for s, end in inside:
            if s > at:
                places += (s - at) // frame
            at = max(at, end)
        if b > at:
            places += (b - at) // frame
    if places < k:
        bad(
            "ptp room",
            f"class {fs.ptp.cls!r} (ptp.class): its windows hold {places} of PTP's {PTP_LONGEST_FRAME} B frames "
            f"({float(frame):g} ns on the wire) a cycle beside its flows' frames "
            f"({float(places * Fraction(10**9, cycle)):g} frames/s); PTP needs {float(rate):g} frames/s at its "
            f"intervals ({what}): {k} a cycle of {cycle} ns",
        )
