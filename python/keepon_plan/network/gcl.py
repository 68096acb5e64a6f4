"""Gate control lists of the switches' egress ports, from the placed streams.

A port's cycle is the lcm of the periods of the streams it sends (whole ns), starting at the network's base time.
Each frame's transmission ``[t, t + tx)`` (ps), widened by the network's ``guard`` on both sides, opens the gate of
its traffic class over ``[⌊t − guard⌋, ⌈t + tx + guard⌉)`` ns, taken modulo the cycle. Outside every window the
gates of the classes no stream on the port uses are open (best effort), so a scheduled frame never waits behind one:
Qbv starts a frame only if it ends before its gate closes. A best-effort gap shorter than the shortest Ethernet frame
(64 bytes plus 20 of preamble and gap) could carry nothing, so it is given to the window before it: lists get
shorter and every window only grows. Entries longer than the port's ``supported_interval_max`` are split; a list
longer than ``supported_list_max`` or a cycle longer than ``supported_cycle_max`` is an error naming the port.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..model import InputError
from .routing import RoutedStream
from .topology import Network

MIN_FRAME_WIRE_BYTES = 64 + 20


class GclTooLong(InputError):
    """A port's gate list is longer than its ``supported_list_max`` (names the port; the planner may re-plan)."""

    def __init__(self, message: str, switch: str, towards: str) -> None:
        super().__init__(message)
        self.port = (switch, towards)


@dataclass(frozen=True)
class PortGcl:
    switch: str
    port: str
    neighbour: str
    cycle_ns: int
    entries: tuple[tuple[int, int], ...]
    """(gate states: bit i = traffic class i open, interval ns), summing to ``cycle_ns``."""


def port_gcls(
    net: Network,
    routed: list[RoutedStream],
    starts_ps: dict[str, tuple[int, ...]],
    only: set[tuple[str, str]] | None = None,
) -> list[PortGcl]:
    """``starts_ps``: per stream, the first bit of instance 0 on each of its hops; ``only``: just these ports
    ``(switch, neighbour)`` (default every port the streams use)."""
    frames: dict[tuple[str, str], list[tuple[int, int, int, int]]] = {}  # (start ps, tx ps, tc, period ns)
    for r in routed:
        for h, t in zip(r.hops, starts_ps[r.stream.name], strict=True):
            if h.src in net.switches and (only is None or (h.src, h.dst) in only):
                start, length = h.window()
                frames.setdefault((h.src, h.dst), []).append(
                    (t + start - h.offset_ps, length, r.stream.traffic_class, r.stream.period_ns)
                )
    return [_port_list(net, sw, nb, fr) for (sw, nb), fr in sorted(frames.items())]


def _port_list(net: Network, sw: str, nb: str, frames: list[tuple[int, int, int, int]]) -> PortGcl:
    switch = net.switches[sw]
    port = net.port_name(sw, nb)
    where = f"switch {sw!r} port {port!r} (towards {nb!r})"
    cycle = 1
    for *_, p in frames:
        cycle = math.lcm(cycle, p)
    if cycle > switch.supported_cycle_max_ns:
        raise InputError(f"{where}: cycle {cycle} ns exceeds supported_cycle_max {switch.supported_cycle_max_ns} ns")
    gran = switch.gate_granularity_ns
    if cycle % gran:
        raise InputError(f"{where}: cycle {cycle} ns is not a whole number of its gate_granularity {gran} ns")
    scheduled = 0
    opens: list[tuple[int, int, int]] = []  # (start ns, end ns, tc bit) within [0, cycle), split at the wrap
    for start, tx, tc, period in frames:
        scheduled |= 1 << tc
        for base in range(0, cycle, period):
            lo = (start + base * 1000) // (1000 * gran) * gran
            hi = -(-(start + base * 1000 + tx) // (1000 * gran)) * gran
            lo_c, length = lo % cycle, hi - lo
            if lo_c + length <= cycle:
                opens.append((lo_c, lo_c + length, 1 << tc))
            else:
                opens.append((lo_c, cycle, 1 << tc))
                opens.append((0, lo_c + length - cycle, 1 << tc))
    best_effort = 0xFF & ~scheduled
    bounds = sorted({0, cycle, *(x for o in opens for x in o[:2])})
    # gate state per elementary interval: sweep over the sorted window edges
    events: dict[int, list[tuple[int, int]]] = {}
    for lo, hi, bit in opens:
        events.setdefault(lo, []).append((bit, 1))
        events.setdefault(hi, []).append((bit, -1))
    count = [0] * 8
    entries: list[list[int]] = []
    for b0, b1 in itertools.pairwise(bounds):
        for bit, d in events.get(b0, ()):
            count[bit.bit_length() - 1] += d
        state = sum(1 << tc for tc in range(8) if count[tc] > 0) or best_effort
        if entries and entries[-1][0] == state:
            entries[-1][1] += b1 - b0
        else:
            entries.append([state, b1 - b0])
    link = net.link(sw, nb)
    assert link is not None
    useless = -(-(MIN_FRAME_WIRE_BYTES * link.byte_ps()) // 1000)  # ns: no best-effort frame fits in less
    merged: list[list[int]] = []
    for k, (state, interval) in enumerate(entries):
        if merged and state == best_effort and interval < useless and k + 1 < len(entries):
            merged[-1][1] += interval
        elif merged and merged[-1][0] == state:
            merged[-1][1] += interval
        else:
            merged.append([state, interval])
    entries = merged
    split: list[tuple[int, int]] = []
    for state, interval in entries:
        while interval > switch.supported_interval_max:
            split.append((state, switch.supported_interval_max))
            interval -= switch.supported_interval_max
        split.append((state, interval))
    if len(split) > switch.supported_list_max:
        raise GclTooLong(
            f"{where}: its gate control list needs {len(split)} entries, more than supported_list_max "
            f"{switch.supported_list_max}",
            sw,
            nb,
        )
    return PortGcl(sw, port, nb, cycle, tuple(split))
