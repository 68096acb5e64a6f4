"""Shared helpers of the CNC tests: a small topology, requests in tsn-types JSON, a CNC over fakes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from keepon_plan.cnc.distribute import FakeNetwork
from keepon_plan.cnc.service import Cnc, configure
from keepon_plan.cnc.store import Store

# t1, t2 on sw1; l1, l2 on sw2; 1 Gb/s; 230-byte slots (2 µs), 500 slots: a 1 ms ring, the network's cycle.
TOPOLOGY = (
    """
version = 1
base_time = 0
"""
    + "".join(f'[[station]]\nname = "{n}"\nslot_bytes = 230\nslots = 500\n' for n in ("t1", "t2", "l1", "l2"))
    + """
[[switch]]
name = "sw1"
forwarding_delay = "1us"
[[switch]]
name = "sw2"
forwarding_delay = "1us"
[[link]]
a = "t1"
b = "sw1"
rate = "1Gbps"
[[link]]
a = "t2"
b = "sw1"
rate = "1Gbps"
[[link]]
a = "sw1"
b = "sw2"
rate = "1Gbps"
a_port = "swp3"
b_port = "swp3"
[[link]]
a = "sw2"
b = "l1"
rate = "1Gbps"
[[link]]
a = "sw2"
b = "l2"
rate = "1Gbps"
"""
)
CYCLE = 1_000_000
MAC = {"t1": "02-00-00-00-00-01", "t2": "02-00-00-00-00-02", "l1": "02-00-00-00-00-03", "l2": "02-00-00-00-00-04"}
LEAD = 100_000_000


def sid(talker: str, n: int) -> str:
    return f"{MAC[talker]}:00-{n:02X}"


def join_body(
    stream: str,
    talker: str,
    listeners=("l1",),
    interval=(1, 1000),
    size: int = 128,
    latency: int = 100_000,
    allow: bool = False,
    **time_aware,
) -> dict:
    spec = {
        "interval": {"numerator": interval[0], "denominator": interval[1]},
        "max-frames-per-interval": 1,
        "max-frame-size": size,
    }
    if time_aware:
        spec["time-aware"] = {k.replace("_", "-"): v for k, v in time_aware.items()}
    return {
        "keepon-cnc:input": {
            "stream-id": stream,
            "allow-replan": allow,
            "talker": {
                "end-station-interfaces": [{"mac-address": MAC[talker], "interface-name": "eth0"}],
                "traffic-specification": spec,
                "user-to-network-requirements": {"num-seamless-trees": 1, "max-latency": latency},
            },
            "listeners": [{"end-station-interfaces": [{"mac-address": MAC[x]}]} for x in listeners],
        }
    }


def leave_body(stream: str) -> dict:
    return {"keepon-cnc:input": {"stream-id": stream}}


def new_cnc(path: Path, fake: FakeNetwork | None = None, fault=None, version: int | None = None) -> Cnc:
    store = Store(str(path)) if version is None else Store(str(path), create_version=version)
    if not store.config():
        configure(store, TOPOLOGY, None, CYCLE, {m: s for s, m in MAC.items()})
    cnc = Cnc(store, fake or FakeNetwork(time=10**9), LEAD, fault)
    cnc.recover()
    return cnc


def dump(path: Path) -> list:
    """Every row of every table: to show that a refused request changed nothing."""
    db = sqlite3.connect(str(path))
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(t, sorted(map(repr, db.execute(f"SELECT * FROM {t}")))) for t in tables]
    finally:
        db.close()
