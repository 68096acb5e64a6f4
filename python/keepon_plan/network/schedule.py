"""Fast no-wait placement: first fit over the hyperperiod with per-link occupancy intervals.

Each stream gets one departure ``a`` (a slot start of its talker, ``0 ≤ a < period``); no-wait fixes every hop from
it (:mod:`keepon_plan.network.routing`). Streams are placed one at a time, shortest period first, then most hops:
starting from ``a = 0``, every instance of every hop is looked up in that directed link's occupancy over the
hyperperiod ``H`` (sorted, disjoint intervals of ``[0, H)``, bisect); on a collision ``a`` jumps to where the
blocking interval ends (rounded up to the next slot), and the check starts over. On a switch's egress a hop occupies
its guarded window (:meth:`~keepon_plan.network.routing.Hop.window`). ``a`` only grows, so a stream is
placed or found not to fit in its period. Plans only: a stream that does not fit proves nothing (the exact model in
:mod:`keepon_plan.network.exact` decides small instances).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from ..deadline import Deadline, check
from .routing import RoutedStream


class Occupancy:
    """Disjoint busy intervals ``[start, end)`` of one directed link within ``[0, H)``, sorted by start."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.starts: list[int] = []
        self.ends: list[int] = []

    def _blocked(self, t: int, length: int) -> int:
        """0 if ``[t, t + length)`` (``t + length ≤ H``) is free, else how far ``t`` must move to pass a blocker."""
        i = bisect.bisect_right(self.starts, t) - 1
        if i >= 0 and self.ends[i] > t:
            return self.ends[i] - t
        if i + 1 < len(self.starts) and self.starts[i + 1] < t + length:
            return self.ends[i + 1] - t
        return 0

    def shift_needed(self, t: int, length: int) -> int:
        """0 if ``[t, t + length)`` (mod H) is free, else a positive shift that passes the first blocker found."""
        t %= self.horizon
        if t + length <= self.horizon:
            return self._blocked(t, length)
        head = self._blocked(t, self.horizon - t)
        if head:
            return head
        tail = self._blocked(0, t + length - self.horizon)
        return tail + (self.horizon - t) if tail else 0

    def add(self, t: int, length: int) -> None:
        t %= self.horizon
        pieces = (
            [(t, length)] if t + length <= self.horizon else [(t, self.horizon - t), (0, t + length - self.horizon)]
        )
        for start, n in pieces:
            i = bisect.bisect_left(self.starts, start)
            self.starts.insert(i, start)
            self.ends.insert(i, start + n)


@dataclass
class Placement:
    departure_ps: dict[str, int]
    """Departure of instance 0 (ps after the base time) of every placed stream."""
    unplaced: list[tuple[str, str]]
    """(stream, why) for every stream that did not fit."""


def hyperperiod_ps(routed: list[RoutedStream]) -> int:
    h = 1
    for r in routed:
        h = math.lcm(h, r.stream.period_ns)
    return h * 1000


def greedy(
    routed: list[RoutedStream], slot_ps: dict[str, int], deadline: Deadline | None = None
) -> tuple[Placement, int]:
    """Place every stream it can; returns the placement and the hyperperiod (ps)."""
    horizon = hyperperiod_ps(routed)
    links: dict[tuple[str, str], Occupancy] = {}
    order = sorted(routed, key=lambda r: (r.stream.period_ns, -len(r.hops), r.stream.name))
    placed: dict[str, int] = {}
    unplaced: list[tuple[str, str]] = []
    for n, r in enumerate(order):
        if n % 64 == 0:
            check(deadline)
        period = r.stream.period_ns * 1000
        grid = slot_ps[r.stream.talker]
        occ = [links.setdefault((h.src, h.dst), Occupancy(horizon)) for h in r.hops]
        instances = range(0, horizon, period)
        a = 0
        blocker = ""
        while a < period:
            moved = False
            for h, o in zip(r.hops, occ, strict=True):
                start, length = h.window()
                for base in instances:
                    shift = o.shift_needed(a + start + base, length)
                    if shift:
                        a = -(-(a + shift) // grid) * grid
                        blocker = f"{h.src}→{h.dst}"
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                break
        if a >= period:
            unplaced.append((r.stream.name, f"no free departure in its period (last blocked on {blocker})"))
            continue
        for h, o in zip(r.hops, occ, strict=True):
            start, length = h.window()
            for base in instances:
                o.add(a + start + base, length)
        placed[r.stream.name] = a
    return Placement(placed, unplaced), horizon
