"""Independent check of a certificate of infeasibility (:mod:`.certificate`) against the network description.

It recomputes everything from the description: that the link exists and each stream named uses it on the route the
certificate states (which must be the stream's given route when the model says ``routes = "given"``, and must exist
and reach the listener otherwise); wire times from the link rates and the frame lengths the model states (``own
length``: the frame's, at least 64 bytes; ``padded``: the talker's ring slot, which it takes from the station
planner's choice — the one piece it shares with the planner); the demand in the interval; the pair condition by
interval arithmetic over the departure differences; the latency of a route by summing its hops, and for ``any route``
the least latency by its own Dijkstra over the topology. Returns the reasons it refuses (empty: the claim holds).
"""

from __future__ import annotations

import heapq
import itertools
import math

from .topology import Network

PS_PER_BYTE = 8 * 10**12


def _wire_ps(net: Network, u: str, v: str, wire_bytes: int) -> int:
    link = net.link(u, v)
    assert link is not None
    return (wire_bytes + 20) * (PS_PER_BYTE // link.rate)


def _hop_ps(net: Network, route: list[str], wire_bytes: int) -> list[tuple[tuple[str, str], int]]:
    """Per link of the route: its no-wait offset from the departure; and the latency as the last element."""
    out = []
    d = 0
    for k, (u, v) in enumerate(itertools.pairwise(route)):
        out.append(((u, v), d))
        link = net.link(u, v)
        d += _wire_ps(net, u, v, wire_bytes) + link.delay_ps
        if k + 2 < len(route):
            d += net.switches[v].forwarding_delay_ps
    out.append((("", ""), d))
    return out


def _shortest(net: Network, src: str, dst: str, wire_bytes: int) -> int | None:
    adj: dict[str, list[tuple[str, int]]] = {}
    for lk in net.links:
        for u, v in ((lk.a, lk.b), (lk.b, lk.a)):
            fwd = net.switches[v].forwarding_delay_ps if v in net.switches and v != dst else 0
            if u != src and u not in net.switches:
                continue  # only switches forward
            adj.setdefault(u, []).append((v, _wire_ps(net, u, v, wire_bytes) + lk.delay_ps + fwd))
    best = {src: 0}
    heap = [(0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if u == dst:
            return d
        if d > best.get(u, math.inf):
            continue
        for v, w in adj.get(u, []):
            if d + w < best.get(v, math.inf):
                best[v] = d + w
                heapq.heappush(heap, (d + w, v))
    return None


def check_certificate(net: Network, cert: dict) -> list[str]:
    try:
        return _check(net, cert)
    except (KeyError, TypeError, ValueError, AssertionError) as exc:
        return [f"malformed certificate: {exc!r}"]


def _check(net: Network, c: dict) -> list[str]:
    bad: list[str] = []
    streams = {s.name: s for s in net.streams}
    m = c["model"]
    padded_ring: dict = {}

    def expected_wire(name: str) -> int:
        s = streams[name]
        if m["frames"] == "own length":
            return max(s.frame_bytes, 64)
        if not padded_ring:
            from .stations import station_rings

            padded_ring.update(station_rings(net))
        return padded_ring[s.talker].choice.slot_bytes

    def route_ok(name: str, route: list[str]) -> bool:
        s = streams.get(name)
        if s is None:
            bad.append(f"stream {name!r} is not in the description")
            return False
        if route[0] != s.talker or route[-1] not in s.listeners:
            bad.append(f"stream {name!r}: route {route} does not join its talker to a listener")
            return False
        if any(net.link(u, v) is None for u, v in itertools.pairwise(route)):
            bad.append(f"stream {name!r}: route {' → '.join(route)} does not exist")
            return False
        if any(n not in net.switches for n in route[1:-1]):
            bad.append(f"stream {name!r}: route {' → '.join(route)} passes through a station")
            return False
        if s.routes is not None and tuple(route) not in s.routes:
            bad.append(f"stream {name!r}: route {' → '.join(route)} is not its given route")
            return False
        if s.routes is None and m["routes"] == "given":
            bad.append(f"stream {name!r}: the model says the routes are given, the description gives none")
            return False
        return True

    kind = c["kind"]
    if kind in ("capacity", "pair"):
        u, v = c["link"].split("->")
        if net.link(u, v) is None:
            return [f"link {c['link']} does not exist"]
    if kind == "capacity":
        lo, hi = c["interval_ps"]
        length = hi - lo
        demand = 0
        for row in c["streams"]:
            name = row["name"]
            if not route_ok(name, row["route"]):
                continue
            if (u, v) not in itertools.pairwise(row["route"]):
                bad.append(f"stream {name!r}: its route does not use link {u}→{v}")
                continue
            period = streams[name].period_ns * 1000
            if length <= 0 or length % period:
                bad.append(f"interval of {length} ps is not a whole number of stream {name!r}'s period {period} ps")
                continue
            wire = expected_wire(name)
            if row["wire_bytes"] != wire:
                bad.append(f"stream {name!r}: {row['wire_bytes']} wire bytes, the model's frames have {wire}")
            demand += length // period * _wire_ps(net, u, v, wire)
        if not bad and demand != c["demand_ps"]:
            bad.append(f"the demand is {demand} ps, not {c['demand_ps']} ps as stated")
        if not bad and demand <= length:
            bad.append(f"the demand {demand} ps fits in the interval of {length} ps")
        return bad
    if kind == "pair":
        rows = c["streams"]
        if len(rows) != 2:
            return ["a pair certificate names two streams"]
        occ, off, rng = [], [], []
        for row in rows:
            name = row["name"]
            if not route_ok(name, row["route"]):
                return bad
            hops = dict(_hop_ps(net, row["route"], expected_wire(name)))
            if (u, v) not in hops:
                return [f"stream {name!r}: its route does not use link {u}→{v}"]
            guard = net.guard_ps if u in net.switches else 0
            occ.append(_wire_ps(net, u, v, expected_wire(name)) + 2 * guard)
            off.append(hops[(u, v)] - guard)
            r = row["departure_range_ps"]
            s = streams[name]
            if r is not None:
                if m["hops"] != "no-wait":
                    return ["restricted departure ranges make a pair claim only in the no-wait model"]
                lo = s.earliest_offset_ns * 1000
                hi = (s.latest_offset_ns if s.latest_offset_ns is not None else s.period_ns) * 1000
                if s.deadline_ns is not None:
                    hi = min(hi, s.deadline_ns * 1000)
                if r[0] < lo or r[1] > hi:
                    return [f"stream {name!r}: departure range {r} is not within its offsets [{lo}, {hi}] ps"]
            rng.append(r)
        g = math.gcd(*(streams[row["name"]].period_ns for row in rows)) * 1000
        if None in rng:
            if g >= occ[0] + occ[1]:
                bad.append(f"gcd {g} ps ≥ the frames' {occ[0]} + {occ[1]} ps: they can be apart")
            return bad
        from .plan import _separable

        lo = rng[1][0] + off[1] - rng[0][1] - off[0]
        hi = rng[1][1] + off[1] - rng[0][0] - off[0]
        if _separable(lo, hi, g, occ[0], occ[1]):
            bad.append("some difference of their departures keeps the two frames apart on the link")
        return bad
    if kind in ("latency", "deadline"):
        name, route = c["stream"], c["route"]
        if not route_ok(name, route):
            return bad
        s = streams[name]
        wire = expected_wire(name)
        lat = _hop_ps(net, route, wire)[-1][1]
        if c.get("scope", "").startswith("its shortest") or "any route" in c.get("scope", ""):
            if s.routes is not None:
                return ["the stream has a given route: 'any route' does not apply"]
            least = _shortest(net, s.talker, route[-1], wire)
            lat = least if least is not None else lat
        if lat != c["latency_ps"]:
            bad.append(f"the latency is {lat} ps, not {c['latency_ps']} ps as stated")
        if kind == "latency" and lat <= s.max_latency_ns * 1000:
            bad.append(f"latency {lat} ps is within max_latency {s.max_latency_ns} ns")
        if kind == "deadline":
            earliest = c["earliest_departure_ps"]
            if earliest > s.earliest_offset_ns * 1000 + _grid_bound(net, s, m):
                bad.append(f"the earliest departure {earliest} ps is later than the stream's earliest_offset allows")
            if s.deadline_ns is None or earliest + lat <= s.deadline_ns * 1000:
                bad.append("the stream can arrive by its deadline")
        return bad
    if kind == "offset":
        return ["an empty transmit-offset window is checked by reading the description (not a certificate)"]
    if kind == "solver":
        return ["a CP-SAT proof cannot be re-checked without a solver"]
    return [f"unknown kind {kind!r}"]


def _grid_bound(net: Network, s, m: dict) -> int:
    """How much later than ``earliest_offset`` the first departure on the talker's grid can lie (a grid step)."""
    link = next(lk for lk in net.links if s.talker in (lk.a, lk.b))
    if net.stations[s.talker].timing == "bytes":
        return math.lcm(PS_PER_BYTE // link.rate, 1000)
    from .stations import station_rings

    return station_rings(net)[s.talker].slot_ps
