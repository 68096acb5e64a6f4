"""Each switch port's gate list kept window by window, for the CNC: a join or leave changes only its own windows.

:func:`keepon_plan.network.gcl.port_gcls` builds a port's list from every frame on it; at 10 000 streams in force a
busy port carries thousands, and rebuilding it on each join cost the CNC most of its slow joins. :class:`PortGates`
keeps the port's gate coverage instead: the sorted edges of its windows over the network cycle ``C`` and, per
traffic class in use, how many windows cover each elementary interval. A frame adds or removes its instances'
windows (:func:`~keepon_plan.network.gcl.frame_windows`, the same rounding to the gate granularity), touching only
the intervals they cover; an edge no longer separating different coverage goes. The list itself
(:meth:`PortGates.gcl`) is read off the coverage over the port's cycle ``L`` (the lcm of its streams' periods, which
divides ``C``: the coverage over ``C`` repeats every ``L``) and finished by
:func:`~keepon_plan.network.gcl.finish_list`: the same list :func:`~keepon_plan.network.gcl.port_gcls` gives for
the same frames.
"""

from __future__ import annotations

import bisect
from collections import Counter

from ..network.gcl import Frame, PortGcl, finish_list, frame_windows, port_cycle
from ..network.topology import Network


class PortGates:
    """The gate coverage of one switch egress port ``(switch, neighbour)`` over the network cycle ``cycle_ns``."""

    def __init__(self, net: Network, switch: str, neighbour: str, cycle_ns: int) -> None:
        self.net, self.switch, self.neighbour, self.cycle = net, switch, neighbour, cycle_ns
        self.gran = net.switches[switch].gate_granularity_ns
        self.edges: list[int] = [0]
        """Sorted; elementary interval ``i`` is ``[edges[i], edges[i + 1])`` (the last one ends at the cycle)."""
        self.cover: dict[int, list[int]] = {}
        """Per traffic class in use: how many windows cover each elementary interval."""
        self.periods: Counter[int] = Counter()
        self.classes: Counter[int] = Counter()

    def __bool__(self) -> bool:
        return bool(self.periods)

    def _edge(self, x: int) -> int:
        """The index of the interval starting at ``x`` (``x`` made an edge if it was not one)."""
        i = bisect.bisect_left(self.edges, x)
        if i < len(self.edges) and self.edges[i] == x:
            return i
        self.edges.insert(i, x)
        for counts in self.cover.values():
            counts.insert(i, counts[i - 1])
        return i

    def _drop_edge(self, i: int) -> None:
        """Remove edge ``i`` if the intervals on both sides have the same coverage."""
        if 0 < i < len(self.edges) and all(c[i] == c[i - 1] for c in self.cover.values()):
            del self.edges[i]
            for counts in self.cover.values():
                del counts[i]

    def add(self, frame: Frame) -> None:
        tc = frame[2]
        if tc not in self.cover:
            self.cover[tc] = [0] * len(self.edges)
        self._change(frame, 1)
        self.periods[frame[3]] += 1
        self.classes[tc] += 1

    def remove(self, frame: Frame) -> None:
        tc = frame[2]
        self._change(frame, -1)
        for counter, key in ((self.periods, frame[3]), (self.classes, tc)):
            counter[key] -= 1
            if not counter[key]:
                del counter[key]
        if tc not in self.classes:
            del self.cover[tc]
            for i in range(len(self.edges) - 1, 0, -1):
                self._drop_edge(i)

    def _change(self, frame: Frame, d: int) -> None:
        counts = self.cover[frame[2]]
        for lo, hi, _bit in frame_windows(frame, self.cycle, self.gran):
            i = self._edge(lo)
            j = self._edge(hi) if hi < self.cycle else len(self.edges)
            for k in range(i, j):
                counts[k] += d
            if d < 0:
                if j < len(self.edges):
                    self._drop_edge(j)
                self._drop_edge(i)

    def gcl(self) -> PortGcl | None:
        """The port's gate list (None when no stream uses the port); :class:`~keepon_plan.network.gcl.GclTooLong`
        when it has more entries than the switch allows."""
        if not self.periods:
            return None
        cycle = port_cycle(self.net, self.switch, self.neighbour, self.periods)
        best_effort = 0xFF & ~sum(1 << tc for tc in self.classes)
        covers = list(self.cover.items())
        edges = self.edges
        n = bisect.bisect_left(edges, cycle)
        entries: list[list[int]] = []
        for i in range(n):
            state = 0
            for tc, counts in covers:
                if counts[i]:
                    state |= 1 << tc
            state = state or best_effort
            length = (edges[i + 1] if i + 1 < n else cycle) - edges[i]
            if entries and entries[-1][0] == state:
                entries[-1][1] += length
            else:
                entries.append([state, length])
        return finish_list(self.net, self.switch, self.neighbour, cycle, best_effort, entries)
