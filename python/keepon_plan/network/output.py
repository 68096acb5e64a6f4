"""The plan directory: what ``keepon-plan network`` writes, file by file.

::

    plan.json            every stream: talker, listeners, routes, departure, every hop's window, latency (ps, exact);
                         the guard and the topology it was planned on (switches, links: what a replay needs); per
                         replicated stream (802.1CB) its members and whether their routes are node- or edge-disjoint
    streams.csv          one row per (stream, listener): route, departure and latency in ns, the bounds
    stations/NAME.toml   keepon runtime config of every talker (the format of docs/config.md); a talker with two
                         ports (replicated streams, 802.1CB) has one per port, stations/NAME.PORT.toml
    switches/NAME.json   every scheduled egress port: cycle, base time, gate control list (gate states, ns)

All times are relative to the network's ``base_time`` (TAI ns), which every file carries.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from .gcl import PortGcl
from .routing import RoutedStream
from .stations import ns_of
from .topology import Network


def plan_document(net: Network, routed: list[RoutedStream], starts_ps: dict[str, tuple[int, ...]], method: str) -> dict:
    streams = []
    for r in routed:
        s, starts = r.stream, starts_ps[r.stream.name]
        a = starts[0]
        streams.append(
            {
                "name": s.name,
                "talker": s.talker,
                "listeners": list(s.listeners),
                "traffic_class": s.traffic_class,
                "period_ns": s.period_ns,
                "wire_bytes": r.wire_bytes,
                "departure_ps": a,
                "routes": [list(p) for p in r.paths],
                "timing": net.stations[s.talker].timing,
                "hops": [
                    {"link": f"{h.src}->{h.dst}", "start_ps": t, "end_ps": t + h.tx_ps, "wait_ps": w}
                    for h, t, w in zip(r.hops, starts, r.waits_ps(starts), strict=True)
                ],
                "latency_ps": dict(zip(s.listeners, r.latencies_ps(starts), strict=True)),
                "jitter_ps": 0,
                "max_latency_ns": s.max_latency_ns,
                "max_jitter_ns": s.max_jitter_ns,
                "earliest_offset_ns": s.earliest_offset_ns,
                "latest_offset_ns": s.latest_offset_ns,
                "deadline_ns": s.deadline_ns,
                **({"replica_of": s.replica_of, "member": s.member} if s.replica_of is not None else {}),
            }
        )
    doc = {
        "version": 1,
        "written_by": f"keepon-plan {__version__}",
        "method": method,
        "base_time_ns": net.base_time,
        "guard_ps": net.guard_ps,
        "network": network_document(net),
    }
    from .frer import Shared, members

    replicated = []
    for name, (a, b) in members(routed).items():
        shared = Shared(a.paths[0], b.paths[0])
        replicated.append(
            {
                "name": name,
                "members": [a.stream.name, b.stream.name],
                "disjoint": "edge" if shared.nodes else "node",
                "shared_switches": shared.nodes,
            }
        )
    if replicated:  # 802.1CB FRER: how disjoint each replicated stream's member routes are
        doc["replicated"] = replicated
    return {**doc, "streams": streams}


def network_document(net: Network) -> dict:
    """The topology as planned: stations, switches (forwarding delay), links (ports, rate, propagation delay)."""
    return {
        "stations": sorted(net.stations),
        "switches": [{"name": sw.name, "forwarding_delay_ps": sw.forwarding_delay_ps} for sw in net.switches.values()],
        "links": [
            {
                "a": lk.a,
                "b": lk.b,
                "a_port": lk.a_port,
                "b_port": lk.b_port,
                "rate_bps": lk.rate,
                "delay_ps": lk.delay_ps,
            }
            for lk in net.links
        ],
    }


def switch_document(net: Network, switch: str, gcls: list[PortGcl]) -> dict:
    return {
        "switch": switch,
        "base_time_ns": net.base_time,
        "ports": [
            {
                "port": g.port,
                "towards": g.neighbour,
                "cycle_ns": g.cycle_ns,
                "entries": [{"gate_states": st, "interval_ns": iv} for st, iv in g.entries],
            }
            for g in gcls
        ],
    }


def write_plan(
    out: Path, net: Network, plan: dict, configs: dict[str, str], gcls: list[PortGcl], routed: list[RoutedStream]
) -> None:
    (out / "stations").mkdir(parents=True, exist_ok=True)
    (out / "switches").mkdir(parents=True, exist_ok=True)
    head = json.dumps({k: v for k, v in plan.items() if k != "streams"})[:-1]
    body = ",\n ".join(json.dumps(s) for s in plan["streams"])  # one stream per line (and json's C encoder)
    (out / "plan.json").write_text(f'{head}, "streams": [\n {body}\n]}}\n', encoding="utf-8")
    departures = {s["name"]: s["departure_ps"] for s in plan["streams"]}
    latencies = {s["name"]: s["latency_ps"] for s in plan["streams"]}
    rows = ["stream,talker,listener,route,departure_ns,latency_ns,max_latency_ns,jitter_ns,max_jitter_ns"]
    for r in routed:
        s = r.stream
        for listener, path in zip(s.listeners, r.paths, strict=True):
            lat = latencies[s.name][listener]
            dep = departures[s.name]
            rows.append(
                f"{s.name},{s.talker},{listener},{' '.join(path)},{ns_of(dep)},{ns_of(lat)},{s.max_latency_ns},0,"
                f"{s.max_jitter_ns}"
            )
    (out / "streams.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    for name, text in configs.items():
        (out / "stations" / f"{name}.toml").write_text(text, encoding="utf-8")
    by_switch: dict[str, list[PortGcl]] = {}
    for g in gcls:
        by_switch.setdefault(g.switch, []).append(g)
    for sw in net.switches:
        doc = switch_document(net, sw, by_switch.get(sw, []))
        (out / "switches" / f"{sw}.json").write_text(json.dumps(doc) + "\n", encoding="utf-8")
