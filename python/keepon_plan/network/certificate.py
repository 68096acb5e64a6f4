"""Certificates of infeasibility: what a claim "no plan exists" rests on, in which model, checkable without a solver.

A claim names the model it holds in (``model``): the frames' lengths on the wire (``"own length"``, or ``"padded"``
to the talkers' ring slots), the hops (``"strictly periodic"``: every hop of a stream at the same offset in every
period, waiting in queues or not — every plan keepon writes; or ``"no-wait"``), and the routes (``"given"``, or
``"planner's shortest"`` when the description leaves them to the planner). Kinds:

- ``capacity``: on directed link ``link`` the streams listed send ``Σ (interval/period)·wire`` ps of frames in every
  interval whose length is a multiple of all their periods; more than the interval lasts.
- ``pair``: two streams on one link meet every ``g = gcd(p_i, p_j)``; with ``x`` the difference of their times on
  the link, they are disjoint iff ``x mod g ∈ [w_i, g − w_j]``. With full departure ranges (any model) that needs
  ``g ≥ w_i + w_j``; with restricted ranges in the no-wait model, ``x`` lies in
  ``[lo_j + d_j − hi_i − d_i, hi_j + d_j − lo_i − d_i]`` and no integer there qualifies.
- ``latency``: the route's latency without any wait exceeds ``max_latency`` (``scope = "any route"``: the shortest).
- ``deadline``: the earliest departure allowed plus the least latency exceeds the stream's absolute deadline.
- ``solver``: a CP-SAT proof (``detail`` says of what); the checker cannot re-check it and says so.

:mod:`.verify_certificate` checks one against the description alone.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from .routing import RoutedStream
from .topology import Network


def model(net: Network, routed: list[RoutedStream], hops: str, padded: bool) -> dict:
    given = all(r.stream.routes is not None for r in routed)
    return {
        "frames": "padded" if padded else "own length",
        "hops": hops,
        "routes": "given" if given else "planner's shortest",
    }


def describe_model(m: dict) -> str:
    frames = "frames padded to the talkers' ring slots" if m["frames"] == "padded" else "frames at their own length"
    return f"{frames}, {m['hops']} hops, on the {m['routes']} routes"


def load_per_link(routed: list[RoutedStream], own: bool) -> dict[tuple[str, str], Fraction]:
    """Σ wire/period per directed link, at the frames' own length (``own``) or as planned (padded or not)."""
    h = 1
    for r in routed:
        h = math.lcm(h, r.stream.period_ns)
    busy: dict[tuple[str, str], int] = {}  # ps of wire per h ns
    for r in routed:
        wire = max(r.stream.frame_bytes, 64) if own else r.wire_bytes
        n = h // r.stream.period_ns
        for hop in r.hops:
            tx = hop.tx_ps * (wire + 20) // (r.wire_bytes + 20)
            key = (hop.src, hop.dst)
            busy[key] = busy.get(key, 0) + n * tx
    return {key: Fraction(ps, h * 1000) for key, ps in busy.items()}


def capacity(net: Network, routed: list[RoutedStream], link: tuple[str, str], own: bool) -> dict:
    users = [r for r in routed if any((h.src, h.dst) == link for h in r.hops)]
    length = 1
    for r in users:
        length = math.lcm(length, r.stream.period_ns)
    length *= 1000
    streams = []
    demand = 0
    for r in users:
        wire = max(r.stream.frame_bytes, 64) if own else r.wire_bytes
        h = next(h for h in r.hops if (h.src, h.dst) == link)
        tx = h.tx_ps * (wire + 20) // (r.wire_bytes + 20)
        demand += length // (r.stream.period_ns * 1000) * tx
        k = r.stream.listeners.index(next(p[-1] for p in r.paths if link in itertools.pairwise(p)))
        streams.append(
            {"name": r.stream.name, "period_ns": r.stream.period_ns, "wire_bytes": wire, "route": list(r.paths[k])}
        )
    m = model(net, users, "strictly periodic", padded=not own)
    return {
        "claim": "infeasible",
        "kind": "capacity",
        "model": m,
        "link": f"{link[0]}->{link[1]}",
        "interval_ps": [0, length],
        "streams": streams,
        "demand_ps": demand,
        "reason": f"link {link[0]}→{link[1]}: its {len(users)} streams need {demand} ps of wire time in every "
        f"{length} ps ({demand * 100 / length:.1f} %), {describe_model(m)}",
    }


def pair(net: Network, a: RoutedStream, b: RoutedStream, link: tuple[str, str], ranges, hops: str) -> dict:
    """``ranges``: per stream (lo, hi) of its departure (ps), or None for the whole period."""
    rows = []
    for r, rng in zip((a, b), ranges, strict=True):
        h = next(h for h in r.hops if (h.src, h.dst) == link)
        k = next(i for i, p in enumerate(r.paths) if link in itertools.pairwise(p))
        start, length = h.window()
        rows.append(
            {
                "name": r.stream.name,
                "period_ns": r.stream.period_ns,
                "wire_bytes": r.wire_bytes,
                "occupancy_ps": length,
                "hop_offset_ps": start,
                "departure_range_ps": list(rng) if rng else None,
                "route": list(r.paths[k]),
            }
        )
    m = model(net, [a, b], hops, padded=a.wire_bytes != max(a.stream.frame_bytes, 64))
    g = math.gcd(a.stream.period_ns, b.stream.period_ns) * 1000
    return {
        "claim": "infeasible",
        "kind": "pair",
        "model": m,
        "link": f"{link[0]}->{link[1]}",
        "gcd_ps": g,
        "streams": rows,
        "reason": f"streams {a.stream.name!r} and {b.stream.name!r} on link {link[0]}→{link[1]} meet every {g} ps "
        f"and cannot be apart"
        + (
            f" with departures in {list(ranges[0]) if ranges[0] else 'their period'} and "
            f"{list(ranges[1]) if ranges[1] else 'their period'} ps"
            if any(ranges)
            else f": {rows[0]['occupancy_ps']} + {rows[1]['occupancy_ps']} ps of frames"
        )
        + f" ({describe_model(m)})",
    }


def latency(net: Network, r: RoutedStream, listener: str, lat: int, scope: str) -> dict:
    k = r.stream.listeners.index(listener)
    m = model(net, [r], "strictly periodic", padded=r.wire_bytes != max(r.stream.frame_bytes, 64))
    return {
        "claim": "infeasible",
        "kind": "latency",
        "model": m,
        "stream": r.stream.name,
        "listener": listener,
        "route": list(r.paths[k]),
        "scope": scope,
        "wire_bytes": r.wire_bytes,
        "latency_ps": lat,
        "bound_ns": r.stream.max_latency_ns,
        "reason": f"stream {r.stream.name!r}: the latency to {listener!r} on {scope} "
        f"{' → '.join(r.paths[k])} is at least {lat / 1000:g} ns > max_latency {r.stream.max_latency_ns} ns",
    }


def deadline(net: Network, r: RoutedStream, listener: str, earliest_ps: int, lat: int) -> dict:
    k = r.stream.listeners.index(listener)
    m = model(net, [r], "strictly periodic", padded=r.wire_bytes != max(r.stream.frame_bytes, 64))
    return {
        "claim": "infeasible",
        "kind": "deadline",
        "model": m,
        "stream": r.stream.name,
        "listener": listener,
        "route": list(r.paths[k]),
        "scope": "given route" if r.stream.routes else "its route",
        "wire_bytes": r.wire_bytes,
        "earliest_departure_ps": earliest_ps,
        "latency_ps": lat,
        "deadline_ns": r.stream.deadline_ns,
        "reason": f"stream {r.stream.name!r}: leaving at {earliest_ps / 1000:g} ns at the earliest and taking at "
        f"least {lat / 1000:g} ns to {listener!r}, it arrives after its deadline {r.stream.deadline_ns} ns",
    }


def solver(net: Network, routed: list[RoutedStream], detail: str, hops: str) -> dict:
    m = model(net, routed, hops, padded=any(r.wire_bytes != max(r.stream.frame_bytes, 64) for r in routed))
    return {
        "claim": "infeasible",
        "kind": "solver",
        "model": m,
        "streams": [r.stream.name for r in routed],
        "reason": f"{detail} ({describe_model(m)}; a CP-SAT proof, which the verifier cannot re-check)",
    }
