"""Independent verifier of a network plan directory: replays every frame instance hop by hop.

It reads the network description and the written files only — each talker's runtime config (``stations/*.toml``, as
keepon reads it), the routes in ``plan.json`` and the switches' gate control lists (``switches/*.json``) — and
uses nothing of the scheduler: it recomputes every time from the topology itself. Over the hyperperiod ``H`` (lcm of
all periods) it checks:

1. every stream of the description has a plan entry whose routes exist and reach exactly its listeners;
2. the talker sends instance ``l`` at the start of slot ``⌊(offset + l·period)/δ⌋`` of its ring (keepon's mapping),
   in a ring slot its class owns (the station's own gate);
3. hop by hop (store-and-forward, no wait): the frame, padded to the talker's slot size, is on the wire of each
   directed link at the replayed time, which ``plan.json`` must state exactly;
4. no two frames overlap on any directed link (modulo ``H``);
5. on every switch egress port, the gate of the frame's traffic class is open for its whole transmission, widened by
   the network's ``guard`` on both sides (and these widened windows do not overlap either);
6. every listener receives every instance within ``max_latency``, and the instances' latencies spread by at most
   ``max_jitter``.

Each violation is one line naming the stream, link or port.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import tomllib
from pathlib import Path

from ..units import parse_duration, parse_mask
from .topology import Network


def _byte_ps(rate: int) -> int:
    return 8 * 10**12 // rate


def _station_flows(path: Path) -> tuple[int, int, dict[str, tuple[int, int, list[int]]]]:
    """(slot ps, ring size, {flow: (offset ns, period ns, owned ring slots)}) from a runtime config."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    rate = doc["link"]["rate"]
    from ..units import parse_rate

    bps = parse_rate(rate)
    slot_bytes = doc["ring"]["slot_bytes"]
    delta = (slot_bytes + 20) * _byte_ps(bps)
    n = doc["ring"]["slots"]
    masks = {c["name"]: parse_mask(c["mask"]) if "mask" in c else [] for c in doc.get("class", [])}
    flows = {}
    for f in doc.get("flow", []):
        if "offset" not in f:
            raise ValueError(f"{path.name}: flow {f['name']!r} is not strictly periodic (no offset)")
        flows[f["name"]] = (parse_duration(f["offset"]), parse_duration(f["period"]), masks.get(f["class"], []))
    return delta, n, flows


def _gate_opens(doc: dict) -> dict[str, tuple[int, list[tuple[int, int, int]], list[int]]]:
    """Per port: (cycle ps, [(start ps, end ps, gate states)], [start ps]) from a switch's GCL file."""
    out = {}
    for p in doc.get("ports", []):
        t = 0
        spans = []
        for e in p["entries"]:
            spans.append((t * 1000, (t + e["interval_ns"]) * 1000, e["gate_states"]))
            t += e["interval_ns"]
        if t != p["cycle_ns"]:
            raise ValueError(
                f"switch {doc['switch']!r} port {p['port']!r}: entries sum to {t} ns, cycle {p['cycle_ns']}"
            )
        out[p["port"]] = (p["cycle_ns"] * 1000, spans, [a for a, _, _ in spans])
    return out


def _open_throughout(gate: tuple, tc: int, t: int, length: int) -> bool:
    """Whether gate ``tc`` is open during ``[t, t + length)`` (mod cycle), across entries and cycle wraps."""
    cycle, spans, starts = gate
    t %= cycle
    end = t + length
    while t < end:
        i = bisect.bisect_right(starts, t % cycle) - 1
        _s, e, states = spans[i]
        if not states >> tc & 1:
            return False
        t += e - (t % cycle)
    return True


def verify_plan_dir(net: Network, out: Path) -> list[str]:
    bad: list[str] = []
    try:
        plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"plan.json unreadable: {exc}"]
    entries = {s["name"]: s for s in plan.get("streams", [])}
    base = plan.get("base_time_ns")
    if base != net.base_time:
        bad.append(f"plan.json: base time {base} differs from the network's {net.base_time}")
    stations: dict[str, tuple] = {}
    gates: dict[str, dict] = {}
    for sw in net.switches:
        try:
            doc = json.loads((out / "switches" / f"{sw}.json").read_text(encoding="utf-8"))
            if doc.get("base_time_ns") != net.base_time:
                bad.append(f"switch {sw!r}: GCL base time {doc.get('base_time_ns')} is not the network's")
            gates[sw] = _gate_opens(doc)
        except (OSError, ValueError, KeyError) as exc:
            bad.append(f"switch {sw!r}: gate control lists unreadable: {exc}")
            gates[sw] = {}
    horizon = 1
    for s in net.streams:
        horizon = math.lcm(horizon, s.period_ns)
    horizon *= 1000
    busy: dict[tuple[str, str], list[tuple[int, int, str]]] = {}

    for s in net.streams:
        e = entries.get(s.name)
        if e is None:
            bad.append(f"stream {s.name!r}: not in plan.json")
            continue
        if s.talker not in stations:
            try:
                stations[s.talker] = _station_flows(out / "stations" / f"{s.talker}.toml")
            except (OSError, ValueError, KeyError) as exc:
                bad.append(f"station {s.talker!r}: runtime config unreadable: {exc}")
                stations[s.talker] = (1, 1, {})
        delta, ring, flows = stations[s.talker]
        if s.name not in flows:
            bad.append(f"stream {s.name!r}: no [[flow]] in the runtime config of its talker {s.talker!r}")
            continue
        offset, period, owned = flows[s.name]
        if period != s.period_ns:
            bad.append(f"stream {s.name!r}: the talker's flow has period {period} ns, the stream {s.period_ns} ns")
            continue
        routes = [tuple(r) for r in e.get("routes", [])]
        if sorted(r[-1] for r in routes if r) != sorted(s.listeners):
            bad.append(f"stream {s.name!r}: its routes do not reach exactly its listeners {list(s.listeners)}")
            continue
        first = net.link(s.talker, routes[0][1]) if len(routes[0]) > 1 else None
        if first is None:
            bad.append(f"stream {s.name!r}: its route does not leave the talker on its link")
            continue
        wire = delta // _byte_ps(first.rate) - 20  # the talker's slot size: keepon pads every frame to it
        claimed = {h["link"]: h["start_ps"] for h in e.get("hops", [])}
        p_ps = s.period_ns * 1000
        # each directed link of the tree once: (u, v) -> offset from the departure
        tree: dict[tuple[str, str], int] = {}
        latency: dict[str, int] = {}
        ok = True
        for route in routes:
            if route[0] != s.talker or any(net.link(u, v) is None for u, v in itertools.pairwise(route)):
                bad.append(f"stream {s.name!r}: route {' → '.join(route)} does not exist in the topology")
                ok = False
                break
            if any(n not in net.switches for n in route[1:-1]):
                bad.append(f"stream {s.name!r}: route {' → '.join(route)} is forwarded by a station")
                ok = False
                break
            d = 0
            for k, (u, v) in enumerate(itertools.pairwise(route)):
                link = net.link(u, v)
                tx = (wire + 20) * _byte_ps(link.rate)
                if tree.setdefault((u, v), d) != d:
                    bad.append(f"stream {s.name!r}: two routes reach {u}→{v} at different times")
                d += tx + link.delay_ps
                if k + 2 < len(route):
                    d += net.switches[v].forwarding_delay_ps
            latency[route[-1]] = d
        if not ok:
            continue
        worst = {listener: [] for listener in latency}
        for l in range(horizon // p_ps):
            slot = (offset * 1000 + l * p_ps) // delta
            a = slot * delta
            if l == 0:
                for (u, v), d in tree.items():
                    if claimed.get(f"{u}->{v}") != a + d:
                        bad.append(
                            f"stream {s.name!r}: plan.json puts hop {u}→{v} at {claimed.get(f'{u}->{v}')} ps, the "
                            f"replay at {a + d} ps"
                        )
            if slot % ring not in owned:
                bad.append(f"stream {s.name!r} instance {l}: talker slot {slot} (ring slot {slot % ring}) not owned")
            for (u, v), d in tree.items():
                link = net.link(u, v)
                # on a switch's egress the frame's window is widened by the guard on both sides
                g_ps = net.guard_ps if u in net.switches else 0
                tx = (wire + 20) * _byte_ps(link.rate) + 2 * g_ps
                t = a + d - g_ps
                busy.setdefault((u, v), []).append((t % horizon, tx, s.name))
                if u in net.switches:
                    port = net.port_name(u, v)
                    g = gates.get(u, {}).get(port)
                    if g is None:
                        bad.append(f"stream {s.name!r}: switch {u!r} port {port!r} has no gate control list")
                    elif not _open_throughout(g, s.traffic_class, t, tx):
                        bad.append(
                            f"stream {s.name!r} instance {l}: on switch {u!r} port {port!r} the gate of traffic class "
                            f"{s.traffic_class} is not open for the whole transmission [{t}, {t + tx}) ps"
                        )
            for listener, d in latency.items():
                worst[listener].append(d)  # a − a: no-wait latency is the route's, per instance
        for listener, lats in worst.items():
            if max(lats) > s.max_latency_ns * 1000:
                bad.append(
                    f"stream {s.name!r}: latency to {listener!r} is {max(lats)} ps > max_latency {s.max_latency_ns} ns"
                )
            if max(lats) - min(lats) > s.max_jitter_ns * 1000:
                bad.append(f"stream {s.name!r}: jitter to {listener!r} exceeds max_jitter {s.max_jitter_ns} ns")

    for (u, v), frames in busy.items():
        frames.sort()
        for (t0, n0, s0), (t1, _, s1) in itertools.pairwise(frames):
            if t0 + n0 > t1:
                bad.append(f"link {u}→{v}: frames of {s0!r} and {s1!r} overlap at {t1} ps (mod {horizon} ps)")
        if frames and frames[-1][0] + frames[-1][1] > frames[0][0] + horizon:
            bad.append(f"link {u}→{v}: frames of {frames[-1][2]!r} and {frames[0][2]!r} overlap across the wrap")
    return bad
