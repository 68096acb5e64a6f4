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


Frame = tuple[int, int, int, int]
"""A frame a port sends: (first bit of instance 0 ps, tx ps, traffic class, period ns)."""


def port_frames(
    net: Network,
    routed: list[RoutedStream],
    starts_ps: dict[str, tuple[int, ...]],
    only: set[tuple[str, str]] | None = None,
) -> dict[tuple[str, str], list[Frame]]:
    """Per switch egress port ``(switch, neighbour)`` (only ``only``'s, if given), the frames the streams send."""
    frames: dict[tuple[str, str], list[Frame]] = {}
    for r in routed:
        for h, t in zip(r.hops, starts_ps[r.stream.name], strict=True):
            if h.src in net.switches and (only is None or (h.src, h.dst) in only):
                start, length = h.window()
                frames.setdefault((h.src, h.dst), []).append(
                    (t + start - h.offset_ps, length, r.stream.traffic_class, r.stream.period_ns)
                )
    return frames


def port_gcls(
    net: Network,
    routed: list[RoutedStream],
    starts_ps: dict[str, tuple[int, ...]],
    only: set[tuple[str, str]] | None = None,
) -> list[PortGcl]:
    """``starts_ps``: per stream, the first bit of instance 0 on each of its hops; ``only``: just these ports
    ``(switch, neighbour)`` (default every port the streams use)."""
    frames = port_frames(net, routed, starts_ps, only)
    return [_port_list(net, sw, nb, fr) for (sw, nb), fr in sorted(frames.items())]


def port_cycle(net: Network, sw: str, nb: str, periods) -> int:
    """The port's gate cycle: the lcm of ``periods`` (ns), checked against the switch's limits."""
    switch = net.switches[sw]
    cycle = 1
    for p in periods:
        cycle = math.lcm(cycle, p)
    where = f"switch {sw!r} port {net.port_name(sw, nb)!r} (towards {nb!r})"
    if cycle > switch.supported_cycle_max_ns:
        raise InputError(f"{where}: cycle {cycle} ns exceeds supported_cycle_max {switch.supported_cycle_max_ns} ns")
    gran = switch.gate_granularity_ns
    if cycle % gran:
        raise InputError(f"{where}: cycle {cycle} ns is not a whole number of its gate_granularity {gran} ns")
    return cycle


def frame_windows(frame: Frame, cycle: int, gran: int) -> list[tuple[int, int, int]]:
    """The gate windows ``(start ns, end ns, tc bit)`` of a frame's instances within ``[0, cycle)`` (a multiple of
    its period), rounded out to the granularity ``gran``, split at the wrap."""
    start, tx, tc, period = frame
    out = []
    for base in range(0, cycle, period):
        lo = (start + base * 1000) // (1000 * gran) * gran
        hi = -(-(start + base * 1000 + tx) // (1000 * gran)) * gran
        lo_c, length = lo % cycle, hi - lo
        if lo_c + length <= cycle:
            out.append((lo_c, lo_c + length, 1 << tc))
        else:
            out.append((lo_c, cycle, 1 << tc))
            out.append((0, lo_c + length - cycle, 1 << tc))
    return out


def _port_list(net: Network, sw: str, nb: str, frames: list[Frame]) -> PortGcl:
    cycle = port_cycle(net, sw, nb, (f[3] for f in frames))
    gran = net.switches[sw].gate_granularity_ns
    scheduled = 0
    opens: list[tuple[int, int, int]] = []  # (start ns, end ns, tc bit) within [0, cycle), split at the wrap
    for f in frames:
        scheduled |= 1 << f[2]
        opens += frame_windows(f, cycle, gran)
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
    return finish_list(net, sw, nb, cycle, best_effort, entries)


def finish_list(net: Network, sw: str, nb: str, cycle: int, best_effort: int, entries: list[list[int]]) -> PortGcl:
    """The port's list from its gate states over the cycle (``[state, ns]``, neighbours of different states):
    best-effort gaps too short for any frame given to the window before them, entries longer than the switch's
    ``supported_interval_max`` split, the length checked (:class:`GclTooLong`)."""
    switch = net.switches[sw]
    port = net.port_name(sw, nb)
    where = f"switch {sw!r} port {port!r} (towards {nb!r})"
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
    split: list[tuple[int, int]] = []
    for state, interval in merged:
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
