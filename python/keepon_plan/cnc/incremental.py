"""Incremental planning: a stream placed around the streams in force, which keep their offsets and windows.

The CNC keeps the network planner's placement state (:class:`keepon_plan.network.schedule._State`: every directed
link's busy windows and every switch's class queues over one **network cycle**) for the streams in force, and a
join is the planner's first fit for one stream (:func:`~keepon_plan.network.schedule.place_one`) against it: the
streams in force are not moved, so a join costs one route and one first fit, whatever their number. A leave frees
the stream's windows. Only when the first fit fails and the request allows it, :meth:`Incremental.replan` runs the
planner's greedy over every stream, the new one first; what it moves is applied as one change.

The network's cycle ``C`` is fixed for the CNC's life: every switch gate cycle and every station ring cycle is
``C`` or divides it, so a join never changes a cycle. Hence a stream's interval must divide ``C`` (``C`` is a whole
number of intervals), and every slot station's ring must last exactly ``C`` (``slots · δ = C``, its ring slot ``i``
is the ``i``-th slot of the cycle) with ``slot_bytes`` and ``slots`` stated: a running daemon cannot change its ring.

A **byte-clock** station (``timing = "bytes"``, as in the network planner's topology) is placed as the planner places
one (:mod:`keepon_plan.network.stations`): departures on its byte grid (the shortest whole ns that is whole bytes),
each frame its own length (at least 64 B) on every hop, a minimum frame of free link after it on the station's own
link, and its window in its class (wire time and one byte, whole ns) inside the cycle; its daemon's cycle
(``[schedule] cycle_time``) must be ``C``, and it is given its classes' windows (:meth:`Incremental.class_windows`).

Checks before the fit, each an error naming the request's element: the frame within the talker's slot (on the byte
clock: at most the daemon's largest frame, :data:`~keepon_plan.bytes.DEFAULT_MAX_FRAME`), the
interval (divides ``C``, a whole number of the talker's slots), the route's latency against ``max-latency`` (a
``latency`` certificate: the route is the shortest, so no route meets it), the transmit-offset window on the talker's
grid. A link the stream would load beyond 100 % is a refusal with the planner's ``capacity`` certificate. A failed
fit is refused with a ``blocked`` certificate: every departure of the window on the talker's grid, in ranges, and
the link (port) and busy window of a stream in force that each range meets, in the model where the streams in force
stay where they are and the new frame does not wait (with queueing allowed it also could not wait anywhere within
:data:`~keepon_plan.network.schedule.MAX_QUEUED_TRIES` departures, which is not part of the proof).
"""

from __future__ import annotations

import bisect

from ..bytes import DEFAULT_MAX_FRAME, merge
from ..model import InputError
from ..network import certificate as cert
from ..network.gcl import GclTooLong, PortGcl, port_frames
from ..network.routing import RoutedStream, Router, route_stream
from ..network.schedule import MAX_TRIES, Grids, _nowait, _State, departure_range, greedy, place_one
from ..network.stations import byte_grid_ps, byte_tail_ps, byte_window_ns, fs_delta_ps, tc_class
from ..network.topology import Network, Stream
from .gates import PortGates
from .ptp import PtpRoom, reserve, stream_class_problem
from .tsn_types import RequestError

SCAN_LIMIT = 20 * MAX_TRIES
"""Departure ranges a refusal's certificate may list before it gives up proving."""


class Refused(Exception):
    """A join that does not fit: ``certificate`` (a dict with ``reason``) says where and in which model."""

    def __init__(self, certificate: dict) -> None:
        self.certificate = certificate
        super().__init__(certificate["reason"])


def ring_delta_ps(net: Network, station: str) -> int:
    """The station's departure grid: its slot period δ, or on the byte clock its byte grid."""
    st = net.stations[station]
    link = net.links_of(station)[0]
    if st.timing == "bytes":
        return byte_grid_ps(link.rate)
    return fs_delta_ps(link.rate, st.slot_bytes)


def is_bytes(net: Network, station: str) -> bool:
    return net.stations[station].timing == "bytes"


def check_topology(net: Network, cycle_ns: int) -> None:
    """Every slot station's ring lasts the network cycle, every byte-clock station's grid divides it; every switch
    able to hold the cycle."""
    for name, st in net.stations.items():
        if st.timing == "bytes":
            grid = ring_delta_ps(net, name)
            if cycle_ns * 1000 % grid:
                raise InputError(
                    f"station {name!r}: the network's cycle {cycle_ns} ns is not a whole number of its {grid} ps "
                    "byte grid"
                )
            continue
        if st.slot_bytes is None or st.slots is None:
            raise InputError(f"station {name!r}: give slot_bytes and slots (a running daemon cannot change its ring)")
        delta = ring_delta_ps(net, name)
        if st.slots * delta != cycle_ns * 1000:
            raise InputError(
                f"station {name!r}: its ring of {st.slots} slots of {delta} ps lasts {st.slots * delta} ps, not the "
                f"network's cycle {cycle_ns} ns"
            )
    for name, sw in net.switches.items():
        if cycle_ns > sw.supported_cycle_max_ns:
            raise InputError(f"switch {name!r}: the cycle {cycle_ns} ns exceeds its supported_cycle_max")


class Incremental:
    """The streams in force and their placement; joins, leaves and re-plans change it (and nothing else does)."""

    def __init__(self, net: Network, cycle_ns: int, ptp: dict[str, PtpRoom] | None = None) -> None:
        check_topology(net, cycle_ns)
        self.net = net
        self.cycle_ns = cycle_ns
        self.ptp = dict(ptp or {})
        """Per station that runs PTP: the ring slots its PTP class keeps (:mod:`.ptp`), busy in every state."""
        delta = {name: ring_delta_ps(net, name) for name in net.stations}
        self.grids = Grids(
            delta,
            {},
            {n: byte_tail_ps(net.links_of(n)[0].rate) if is_bytes(net, n) else 0 for n in net.stations},
            {n: sw.gate_granularity_ns * 1000 for n, sw in net.switches.items()},
            {n: net.queueing and net.guard_ps == 0 and sw.max_queue_frames > 0 for n, sw in net.switches.items()},
        )
        self.state = self.fresh_state()
        self.router = Router(net)
        self.routed: dict[str, RoutedStream] = {}
        self.starts: dict[str, tuple[int, ...]] = {}
        self.load: dict[tuple[str, str], int] = {}
        """Per directed link: ps of frames in every cycle (at most the cycle)."""
        self.users: dict[tuple[str, str], set[str]] = {}
        self.by_talker: dict[str, set[str]] = {}
        self.gates: dict[tuple[str, str], PortGates] = {}
        """Per switch egress port: its gate list, kept window by window (:mod:`.gates`)."""

    def fresh_state(self) -> _State:
        """A placement state with no stream in it, and every station's PTP slots busy."""
        state = _State(self.cycle_ns * 1000, self.net, self.grids)
        for room in self.ptp.values():
            reserve(state, self.net, room, self.grids.departure_ps[room.station])
        return state

    # --- a request's stream, routed and checked ---------------------------------------------------------------------

    def latest_ps(self, s: Stream) -> int:
        """The latest departure in the period: on the byte clock, the last whose window ends within it (the
        daemon's windows lie inside the cycle)."""
        if not is_bytes(self.net, s.talker):
            return s.period_ns * 1000 - 1
        return (s.period_ns - byte_window_ns(s.frame_bytes, self.net.links_of(s.talker)[0].rate)) * 1000

    def route(self, s: Stream) -> RoutedStream:
        st = self.net.stations[s.talker]
        size = "talker/traffic-specification/max-frame-size"
        if st.timing == "bytes":
            wire_bytes = s.frame_bytes
            if s.frame_bytes > DEFAULT_MAX_FRAME:
                raise RequestError(size, f"{s.frame_bytes} bytes exceed the byte-clock talker's {DEFAULT_MAX_FRAME}")
        else:
            assert st.slot_bytes is not None
            wire_bytes = st.slot_bytes
            if s.frame_bytes > st.slot_bytes:
                raise RequestError(size, f"{s.frame_bytes} bytes do not fit the talker's {st.slot_bytes}-byte slots")
        if s.frame_bytes < 64:
            raise RequestError(size, f"{s.frame_bytes} bytes: an Ethernet frame has at least 64")
        ptp_problem = stream_class_problem(self.ptp.get(s.talker), s.traffic_class)
        if ptp_problem is not None:
            raise RequestError("traffic-class", ptp_problem)
        where = "talker/traffic-specification/interval"
        if self.cycle_ns % s.period_ns:
            raise RequestError(
                where,
                f"{s.period_ns} ns does not divide the network's cycle {self.cycle_ns} ns (the cycle must be a whole "
                "number of intervals)",
            )
        delta = self.grids.departure_ps[s.talker]
        unit = "byte grid" if st.timing == "bytes" else "slots"
        if s.period_ns * 1000 % delta:
            raise RequestError(where, f"{s.period_ns} ns is not a whole number of the talker's {delta} ps {unit}")
        try:
            r = route_stream(self.net, self.router, s, wire_bytes)
        except InputError as exc:
            raise RequestError("listeners", exc.message) from exc
        self.grids.latest_ps[s.name] = self.latest_ps(s)
        for listener, lat in zip(s.listeners, r.latency_ps, strict=True):
            if lat > s.max_latency_ns * 1000:
                c = cert.latency(self.net, r, listener, lat, "its shortest route (so on any route)")
                raise RequestError("talker/user-to-network-requirements/max-latency", c["reason"], c)
        lo, hi = departure_range(r, self.grids)
        if lo > hi:
            raise RequestError(
                "talker/traffic-specification/time-aware",
                f"no departure on the talker's grid ({delta} ps) lies in [earliest-transmit-offset, "
                "latest-transmit-offset]",
            )
        return r

    def capacity(self, r: RoutedStream) -> None:
        """Refused (a ``capacity`` certificate) when a link would carry more than its rate with ``r``."""
        n = self.cycle_ns // r.stream.period_ns
        for h in r.hops:
            key = (h.src, h.dst)
            if self.load.get(key, 0) + n * h.tx_ps > self.cycle_ns * 1000:
                users = [self.routed[n] for n in sorted(self.users.get(key, ()))] + [r]
                raise Refused(cert.capacity(self.net, users, key, own=False))

    # --- placement ------------------------------------------------------------------------------------------------

    def fit(self, r: RoutedStream) -> tuple[int, ...]:
        """The hop starts of ``r`` around the streams in force, or :class:`Refused`."""
        self.capacity(r)
        found, _why = place_one(self.state, r)
        if found is None:
            raise Refused(self.blocked(r))
        return found

    def add(self, r: RoutedStream, starts: tuple[int, ...]) -> None:
        name = r.stream.name
        self.grids.latest_ps[name] = self.latest_ps(r.stream)
        self.state.add(r, starts)
        self.routed[name] = r
        self.starts[name] = starts
        self.by_talker.setdefault(r.stream.talker, set()).add(name)
        n = self.cycle_ns // r.stream.period_ns
        for h in r.hops:
            key = (h.src, h.dst)
            self.load[key] = self.load.get(key, 0) + n * h.tx_ps
            self.users.setdefault(key, set()).add(name)
        for (sw, nb), frames in port_frames(self.net, [r], {name: starts}).items():
            g = self.gates.get((sw, nb))
            if g is None:
                g = self.gates[(sw, nb)] = PortGates(self.net, sw, nb, self.cycle_ns)
            for f in frames:
                g.add(f)

    def remove(self, name: str) -> RoutedStream:
        r = self.routed.pop(name)
        starts = self.starts.pop(name)
        self.state.remove(r, starts)
        for port, frames in port_frames(self.net, [r], {name: starts}).items():
            for f in frames:
                self.gates[port].remove(f)
        self.by_talker[r.stream.talker].discard(name)
        n = self.cycle_ns // r.stream.period_ns
        for h in r.hops:
            key = (h.src, h.dst)
            self.load[key] -= n * h.tx_ps
            self.users[key].discard(name)
        return r

    def replan(self, r: RoutedStream) -> dict[str, tuple[int, ...]] | None:
        """Every stream in force and ``r`` placed afresh (``r`` first, then shortest period first), or None; the
        state is unchanged (:meth:`adopt` takes the result)."""
        others = sorted(self.routed.values(), key=lambda x: (x.stream.period_ns, -len(x.hops), x.stream.name))
        fresh = self.fresh_state()
        placement, _ = greedy([r, *others], self.net, self.grids, None, [r, *others], fresh)
        return None if placement.unplaced else placement.starts_ps

    def adopt(self, starts: dict[str, tuple[int, ...]], routed: dict[str, RoutedStream]) -> None:
        """Replace the placement by ``starts`` (a re-plan's, or the database's on a restart)."""
        for name in list(self.routed):
            self.remove(name)
        self.state = self.fresh_state()
        for name, st in starts.items():
            self.add(routed[name], st)

    # --- what the devices are given -------------------------------------------------------------------------------

    def ring_slots(self, talker: str) -> dict[str, list[int]]:
        """Per traffic class (``tcN``) of the talker's streams, and its PTP class: the ring slots it owns (its
        daemon's ``Schedule``)."""
        delta = self.grids.departure_ps[talker]
        out: dict[str, set[int]] = {}
        room = self.ptp.get(talker)
        if room is not None:
            out[room.cls] = set(room.slots)
        slots = self.net.stations[talker].slots
        assert slots is not None
        for name in self.by_talker.get(talker, ()):
            r, a = self.routed[name], self.starts[name][0]
            owned = out.setdefault(tc_class(r.stream.traffic_class), set())
            for base in range(0, self.cycle_ns * 1000, r.stream.period_ns * 1000):
                owned.add((a + base) // delta % slots)
        return {c: sorted(v) for c, v in sorted(out.items())}

    def class_windows(self, talker: str) -> dict[str, list[list[int]]]:
        """A byte-clock talker's classes: per traffic class of its streams (``tcN``), and its PTP class, its windows
        ``[offset, length]`` ns in the cycle (its daemon's ``ScheduleWindows``), each instance's window merged with
        those it meets."""
        out: dict[str, list[tuple[int, int]]] = {}
        room = self.ptp.get(talker)
        if room is not None:
            out[room.cls] = list(room.windows)
        for name in self.by_talker.get(talker, ()):
            out.setdefault(tc_class(self.routed[name].stream.traffic_class), []).extend(self.windows_of(name))
        return {c: [list(w) for w in merge(v)] for c, v in sorted(out.items())}

    def windows_of(self, name: str) -> list[tuple[int, int]]:
        """A byte-clock stream's windows ``(offset, length)`` ns: one per instance in the cycle."""
        r, a = self.routed[name], self.starts[name][0]
        assert a % 1000 == 0
        n = byte_window_ns(r.stream.frame_bytes, self.net.links_of(r.stream.talker)[0].rate)
        return [(a // 1000 + b, n) for b in range(0, self.cycle_ns, r.stream.period_ns)]

    def idle_window(self, talker: str, length: int, prefer: list[list[int]], taken: list[list[int]]) -> list[int]:
        """A window of ``length`` ns for a byte-clock class that lost its last stream (a real-time class keeps one):
        the first of ``prefer`` (its own) that is free on the talker's link and meets none of ``taken`` (the other
        classes' windows), else the earliest such gap after a busy stretch; :class:`Refused` when none is."""
        link = self.net.links_of(talker)[0]
        nb = link.b if link.a == talker else link.a
        busy = self.state.occ((talker, nb))
        grid = self.grids.departure_ps[talker] // 1000

        def free(o: int) -> bool:
            if o < 0 or o + length > self.cycle_ns or busy.shift_needed(o * 1000, length * 1000):
                return False
            return all(o + length <= a or a + n <= o for a, n in taken)

        ends = [0, *(-(-e // 1000 // grid) * grid for e in busy.ends), *(a + n for a, n in taken)]
        for o in [w[0] for w in prefer] + sorted(-(-e // grid) * grid for e in ends):
            if free(o):
                return [o, length]
        raise Refused(
            {
                "kind": "station-ring-full",
                "proven": True,
                "reason": f"station {talker}: a class lost its last stream and must keep one {length} ns window, "
                "but no stretch of its link is free for it",
            }
        )

    def ring_slots_of(self, name: str) -> list[int]:
        """The ring slots of one stream's instances in the cycle."""
        r, a = self.routed[name], self.starts[name][0]
        delta = self.grids.departure_ps[r.stream.talker]
        slots = self.net.stations[r.stream.talker].slots
        assert slots is not None
        return sorted({(a + b) // delta % slots for b in range(0, self.cycle_ns * 1000, r.stream.period_ns * 1000)})

    def port_lists(self, ports: set[tuple[str, str]]) -> dict[tuple[str, str], PortGcl]:
        """The gate lists of the switch egress ports ``(switch, neighbour)``, read off the coverage kept window by
        window (:class:`~keepon_plan.cnc.gates.PortGates`); a port with no stream has none.
        :class:`~keepon_plan.network.gcl.GclTooLong` when one needs more entries than the switch allows."""
        out = {}
        for port in sorted(ports):
            g = self.gates.get(port)
            lst = g.gcl() if g is not None else None
            if lst is not None:
                out[port] = lst
        return out

    def fits_devices(self, ports: set[tuple[str, str]]) -> dict[tuple[str, str], PortGcl]:
        """The ports' gate lists (:meth:`port_lists`), or Refused when one would not fit its switch
        (``supported_list_max``)."""
        try:
            return self.port_lists(ports)
        except GclTooLong as exc:
            sw, nb = exc.port
            raise Refused(
                {
                    "claim": "refused",
                    "kind": "gate-list",
                    "port": {"switch": sw, "port": self.net.port_name(sw, nb), "towards": nb},
                    "reason": exc.message + " (in the model where the streams in force stay where they are)",
                }
            ) from exc

    # --- the certificate of a refusal ----------------------------------------------------------------------------

    def blocked(self, r: RoutedStream) -> dict:
        """Every departure of ``r``'s window meets a stream in force (no-wait, the others fixed), in ranges."""
        s = r.stream
        period = s.period_ns * 1000
        grid = self.grids.departure_ps[s.talker]
        lo, hi = departure_range(r, self.grids)
        ranges: list[list] = []
        a, complete = lo, False
        for _ in range(SCAN_LIMIT):
            if a > hi:
                complete = True
                break
            shift, where = _nowait(self.state, r, a, period)
            if not shift:
                break  # free without a wait: only the queue rules refused it, which this certificate does not cover
            nxt = -(-(a + shift) // grid) * grid
            if ranges and ranges[-1][2] == where and ranges[-1][1] == a:
                ranges[-1][1] = nxt
            else:
                ranges.append([a, nxt, where])
            a = nxt
        rows = []
        for a0, a1, where in ranges:
            u, v = where.split("→")
            hop = next(h for h in r.hops if (h.src, h.dst) == (u, v))
            busy = self.state.occ((u, v))
            t = (a0 + hop.offset_ps) % busy.horizon
            i = max(0, bisect.bisect_right(busy.starts, t) - 1)
            if i < len(busy.starts) and busy.ends[i] <= t and i + 1 < len(busy.starts):
                i += 1
            window = [busy.starts[i], busy.ends[i]] if busy.starts else None
            rows.append(
                {
                    "departures_ps": [a0, min(a1, hi + grid)],
                    "link": f"{u}->{v}",
                    "port": self.net.port_name(u, v) if u in self.net.switches else f"{u} (talker)",
                    "busy_window_ps": window,
                    "busy_with": busy.who[i] if busy.starts else None,
                }
            )
        widest = max(rows, key=lambda x: x["departures_ps"][1] - x["departures_ps"][0]) if rows else None
        where = (
            f"; most of them on link {widest['link']} (port {widest['port']}), busy over "
            f"{widest['busy_window_ps']} ps of the {self.cycle_ns * 1000} ps cycle"
            if widest
            else ""
        )
        claim = "every" if complete else "not every"
        return {
            "claim": "refused",
            "kind": "blocked",
            "model": {"hops": "no-wait", "streams in force": "fixed", "cycle_ps": self.cycle_ns * 1000},
            "proven": complete,
            "stream": s.name,
            "departure_range_ps": [lo, hi],
            "grid_ps": grid,
            "blocked": rows,
            "reason": f"stream {s.name!r}: {claim} departure in [{lo}, {hi}] ps on {s.talker}'s {grid} ps grid "
            f"meets a stream in force{' or PTP' * bool(self.ptp)} ({len(rows)} ranges){where}",
        }
