"""Gate control lists as ``ieee802-dot1q-sched`` instance data, RFC 7951 JSON and XML.

One file pair per device under ``yang/``: ``NAME.json`` and ``NAME.xml``. Each scheduled port is an
``ietf-interfaces`` interface (``iana-if-type:ethernetCsmacd``) whose ``ieee802-dot1q-bridge:bridge-port`` carries
the ``gate-parameter-table`` that ``ieee802-dot1q-sched-bridge`` (IEEE Std 802.1Qcw-2023) augments onto it:
``gate-enabled``, ``admin-control-list`` (``set-gate-states`` entries: gate states, time interval in ns),
``admin-cycle-time`` (a rational number of seconds), ``admin-base-time`` (PTP seconds + ns), ``config-change`` and
the port's ``supported-*`` limits, which the module's ``must`` statements compare the list against.

A keepon station's port is a scheduled port too: its list is its ring ownership (gate ``c`` open in the slots
traffic class ``c`` owns, the other gates in the free slots), over the fewest ring cycles lasting whole ns, with the
same base time.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from xml.sax.saxutils import escape

from ..units import slot_start_ns
from .gcl import PortGcl
from .topology import Network

NS_IF = "urn:ietf:params:xml:ns:yang:ietf-interfaces"
NS_IANAIF = "urn:ietf:params:xml:ns:yang:iana-if-type"
NS_BRIDGE = "urn:ieee:std:802.1Q:yang:ieee802-dot1q-bridge"
NS_SCHED_BRIDGE = "urn:ieee:std:802.1Q:yang:ieee802-dot1q-sched-bridge"
NS_SCHED = "urn:ieee:std:802.1Q:yang:ieee802-dot1q-sched"

STATION_LIMITS = (4096, 10**9, 10**9)
"""supported-list-max, supported-interval-max (ns), supported-cycle-max (ns) stated for a keepon port."""


def _rational_seconds(ns: int) -> dict:
    g = math.gcd(ns, 10**9)
    return {"numerator": ns // g, "denominator": 10**9 // g}


def gate_table(base_time: int, cycle_ns: int, entries: list[tuple[int, int]], limits: tuple[int, int, int]) -> dict:
    """The ``gate-parameter-table`` of one port (RFC 7951 JSON values: uint64 as a string)."""
    list_max, interval_max, cycle_max = limits
    return {
        "gate-enabled": True,
        "admin-gate-states": 255,
        "admin-control-list": {
            "gate-control-entry": [
                {
                    "index": i,
                    "operation-name": "ieee802-dot1q-sched:set-gate-states",
                    "time-interval-value": interval,
                    "gate-states-value": states,
                }
                for i, (states, interval) in enumerate(entries)
            ]
        },
        "admin-cycle-time": _rational_seconds(cycle_ns),
        "admin-cycle-time-extension": 0,
        "admin-base-time": {"seconds": str(base_time // 10**9), "nanoseconds": base_time % 10**9},
        "config-change": True,
        "supported-list-max": list_max,
        "supported-cycle-max": _rational_seconds(cycle_max),
        "supported-interval-max": interval_max,
    }


def interfaces_document(ports: list[tuple[str, dict]]) -> dict:
    return {
        "ietf-interfaces:interfaces": {
            "interface": [
                {
                    "name": name,
                    "type": "iana-if-type:ethernetCsmacd",
                    "ieee802-dot1q-bridge:bridge-port": {"ieee802-dot1q-sched-bridge:gate-parameter-table": table},
                }
                for name, table in ports
            ]
        }
    }


def _xml_value(key: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if key == "operation-name":
        return "sched:" + str(value).split(":", 1)[1]
    if key == "type":
        return "ianaift:" + str(value).split(":", 1)[1]
    return escape(str(value))


def _xml(key: str, value, indent: int, attrs: str = "") -> list[str]:
    pad = "  " * indent
    name = key.split(":", 1)[-1]
    if key == "operation-name":
        attrs += f' xmlns:sched="{NS_SCHED}"'
    elif key == "type":
        attrs += f' xmlns:ianaift="{NS_IANAIF}"'
    if isinstance(value, dict):
        lines = [f"{pad}<{name}{attrs}>"]
        for k, v in value.items():
            lines += _xml(k, v, indent + 1, _ns_attr(k))
        return [*lines, f"{pad}</{name}>"]
    if isinstance(value, list):
        return [line for item in value for line in _xml(key, item, indent, attrs)]
    return [f"{pad}<{name}{attrs}>{_xml_value(key, value)}</{name}>"]


def _ns_attr(key: str) -> str:
    module = key.split(":", 1)[0] if ":" in key else None
    ns = {
        "ietf-interfaces": NS_IF,
        "ieee802-dot1q-bridge": NS_BRIDGE,
        "ieee802-dot1q-sched-bridge": NS_SCHED_BRIDGE,
    }.get(module or "")
    return f' xmlns="{ns}"' if ns else ""


def to_xml(doc: dict) -> str:
    """RFC 7950 XML encoding of the JSON document (one top-level container)."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    for k, v in doc.items():
        lines += _xml(k, v, 0, _ns_attr(k))
    return "\n".join(lines) + "\n"


def station_entries(ring, owners_tc: dict[int, int]) -> tuple[int, list[tuple[int, int]]]:
    """(cycle ns, entries) of a keepon port: ring slot ``i`` open for the class owning it, else the free gates."""
    n, delta = ring.choice.slots, ring.choice.delta(ring.flowset.rate)
    rings = (n * delta).denominator
    total = n * rings
    used = 0
    for tc in owners_tc.values():
        used |= 1 << tc
    free = 0xFF & ~used
    num, den = delta.numerator, delta.denominator  # slot s starts at ⌈s·δ⌉ ns, as the runtime rounds txtimes
    entries: list[list[int]] = []
    for s in range(total):
        states = 1 << owners_tc[s % n] if s % n in owners_tc else free
        length = -(-(s + 1) * num // den) - -(-s * num // den)
        if entries and entries[-1][0] == states:
            entries[-1][1] += length
        else:
            entries.append([states, length])
    return slot_start_ns(total, delta), [(a, b) for a, b in entries]


def byte_station_entries(ring, departures: dict[str, int]) -> tuple[int, list[tuple[int, int]]]:
    """(cycle ns, entries) of a byte-clock talker's port: its windows with their class's gate open, the free gates
    between them."""
    from .stations import byte_windows

    plan = byte_windows(ring, departures)
    fs = ring.flowset
    tcs = [int(c[2:]) for c in fs.classes]
    used = 0
    for tc in tcs:
        used |= 1 << tc
    free = 0xFF & ~used
    owner = sorted((s, n, 1 << tcs[c]) for c, ws in enumerate(plan.windows) for s, n in ws)
    entries: list[tuple[int, int]] = []
    at = 0
    for s, n, bit in owner:
        if s > at:
            entries.append((free, s - at))
        entries.append((bit, n))
        at = s + n
    if at < plan.cycle:
        entries.append((free, plan.cycle - at))
    return plan.cycle, entries


def write_yang(
    out: Path,
    net: Network,
    gcls: list[PortGcl],
    rings: dict,
    departures: dict[str, int],
    egress: dict[str, str] | None = None,
) -> list[Path]:
    """Write ``yang/NAME.json`` and ``yang/NAME.xml`` for every switch with a scheduled port and every talker (one
    interface per sending port: two on a station with replicated streams)."""
    from ..model import to_problem
    from .stations import port_rings

    (out / "yang").mkdir(parents=True, exist_ok=True)
    written = []
    by_switch: dict[str, list[tuple[str, dict]]] = {}
    for g in gcls:
        sw = net.switches[g.switch]
        limits = (sw.supported_list_max, sw.supported_interval_max, sw.supported_cycle_max_ns)
        by_switch.setdefault(g.switch, []).append(
            (g.port, gate_table(net.base_time, g.cycle_ns, list(g.entries), limits))
        )
    for name, port, ring in port_rings(net, rings, egress).values():
        if ring.timing == "bytes":
            cycle, entries = byte_station_entries(ring, departures)
            by_switch.setdefault(name, []).append((port, gate_table(net.base_time, cycle, entries, STATION_LIMITS)))
            continue
        fs, choice = ring.flowset, ring.choice
        problem = to_problem(fs, choice.slot_bytes, choice.slots)
        owners: dict[int, int] = {}
        for f, sf in zip(fs.flows, problem.flows, strict=True):
            tc = int(f.cls[2:])
            first = departures[f.name] // ring.slot_ps
            for x in range(first, first + problem.horizon, sf.period):
                owners[x % choice.slots] = tc
        cycle, entries = station_entries(ring, owners)
        by_switch.setdefault(name, []).append((port, gate_table(net.base_time, cycle, entries, STATION_LIMITS)))
    for device, ports in sorted(by_switch.items()):
        doc = interfaces_document(ports)
        for suffix, text in ((".json", json.dumps(doc) + "\n"), (".xml", to_xml(doc))):
            path = out / "yang" / f"{device}{suffix}"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
