"""The CNC over fake devices: incremental joins, re-plans only when allowed, leaves, bad input, the schema."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cnc_support import CYCLE, MAC, TOPOLOGY, dump, join_body, leave_body, new_cnc, sid

from keepon_plan.cnc.distribute import FakeNetwork
from keepon_plan.cnc.incremental import Refused
from keepon_plan.cnc.service import Cnc, configure
from keepon_plan.cnc.store import SCHEMA_VERSION, Store
from keepon_plan.cnc.tsn_types import RequestError
from keepon_plan.model import InputError

A, B = sid("t1", 1), sid("t2", 1)


def _out(reply: dict) -> dict:
    return reply["keepon-cnc:output"]


def _offset(reply: dict) -> int:
    return _out(reply)["interface-configuration"]["interface-list"][0]["config-list"][0]["time-aware-offset"]


def test_a_join_is_placed_around_the_streams_in_force_without_moving_them(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    first = cnc.join(join_body(A, "t1"))
    before = {n: cnc.inc.starts[n] for n in cnc.inc.starts}
    sw1_before = fake.devices["sw1"].config()
    second = cnc.join(join_body(B, "t2"))
    assert _out(second)["keepon-cnc:moved"] == []
    assert cnc.inc.starts[A] == before[A]  # the stream in force kept every hop start
    assert cnc.status(A) == cnc._answer(A)
    assert _offset(cnc.status(A)) == _offset(first)
    # the second stream's windows were added on sw1's egress: the first's are all still there
    old = sw1_before["ports"]["swp3"]["entries"]
    new = fake.devices["sw1"].config()["ports"]["swp3"]["entries"]
    assert all(any(a <= x and y <= b for a, b in _open_windows(new)) for x, y in _open_windows(old))
    assert sum(y - x for x, y in _open_windows(new)) == 2 * sum(y - x for x, y in _open_windows(old))
    # every device of a change got it at one base time, a cycle start at least the lead ahead
    bases = {fake.devices[d].history[-1][0] for d in ("t2", "sw1", "sw2")}
    assert len(bases) == 1 and (base := bases.pop()) % CYCLE == 0 and base >= fake.time + cnc.lead_ns
    assert _out(second)["keepon-cnc:base-time"] == str(base)


def _open_windows(entries) -> set[tuple[int, int]]:
    """(start, end) ns of every tc7 window in a gate list."""
    out, t = set(), 0
    for states, ns in entries:
        if states == 1 << 7:
            out.add((t, t + ns))
        t += ns
    return out


def test_a_join_that_would_move_a_running_stream_is_refused_unless_allowed(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1"))  # free to go anywhere: placed at the first slot, 0
    assert cnc.inc.starts[A][0] == 0
    db_before, history = dump(tmp_path / "db"), {d: list(v.history) for d, v in fake.devices.items()}
    # B must leave in the first slot, and meets A on sw1 → sw2 there
    with pytest.raises(Refused) as refused:
        cnc.join(join_body(B, "t2", latest_transmit_offset=0))
    c = refused.value.certificate
    assert c["kind"] == "blocked" and c["proven"] and c["departure_range_ps"] == [0, 0]
    assert c["blocked"][0]["link"] == "sw1->sw2" and c["blocked"][0]["port"] == "swp3"
    assert "allow-replan is false" in c["reason"] and "swp3" in c["reason"]
    assert dump(tmp_path / "db") == db_before
    assert {d: v.history for d, v in fake.devices.items()} == history
    assert cnc.inc.starts[A][0] == 0 and B not in cnc.requests

    reply = cnc.join(join_body(B, "t2", latest_transmit_offset=0, allow=True))
    assert _out(reply)["keepon-cnc:moved"] == [A]
    assert cnc.inc.starts[B][0] == 0 and cnc.inc.starts[A][0] > 0
    assert _offset(cnc.status(A)) == -(-cnc.inc.starts[A][0] // 1000)
    # one coordinated change: A's talker, B's talker and both switches at one base time
    bases = {fake.devices[d].history[-1][0] for d in ("t1", "t2", "sw1", "sw2")}
    assert len(bases) == 1
    assert fake.devices["t1"].config()["classes"]["tc7"] == cnc.inc.ring_slots_of(A) != [0]


def test_a_leave_frees_windows_that_another_join_then_uses(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1", latest_transmit_offset=0))
    with_a = fake.devices["sw1"].config()["ports"]["swp3"]
    with_a_slots = fake.devices["t1"].config()["classes"]["tc7"]
    with pytest.raises(Refused):
        cnc.join(join_body(B, "t2", latest_transmit_offset=0))
    assert _out(cnc.leave(leave_body(A)))["keepon-cnc:state"] == "left"
    # no stream on the port: every gate open, given explicitly (the switch replaces the table it had)
    assert fake.devices["sw1"].config()["ports"] == {
        "swp3": {"towards": "sw2", "cycle_ns": CYCLE, "entries": [[255, CYCLE]]}
    }
    # the class keeps one slot, idle: keepon's daemon has no real-time class without slots
    kept = fake.devices["t1"].config()["classes"]["tc7"]
    assert len(kept) == 1 and kept[0] in with_a_slots
    with pytest.raises(RequestError) as gone:
        cnc.status(A)
    assert gone.value.tag == "data-missing"
    cnc.join(join_body(B, "t2", latest_transmit_offset=0))
    assert cnc.inc.starts[B][0] == 0
    assert fake.devices["sw1"].config()["ports"]["swp3"] == with_a  # the same windows, now B's


def test_the_schema_is_migrated_from_version_1(tmp_path):
    # a version-2 CNC makes a real stream and device configuration to copy
    donor = new_cnc(tmp_path / "donor")
    donor.join(join_body(A, "t1"))
    (stream,) = donor.store.db.execute("SELECT name, talker, request, starts FROM streams").fetchall()
    devices = donor.store.db.execute("SELECT device, kind, config FROM device_changes").fetchall()

    old = Store(str(tmp_path / "db"), create_version=1)
    assert old.version() == 1
    configure(old, TOPOLOGY, None, CYCLE, {m: s for s, m in MAC.items()})
    cols = [r[1] for r in old.db.execute("PRAGMA table_info(device_changes)")]
    assert "previous" not in cols
    with old.tx() as db:  # a version-1 CNC stopped with the stream's join pending, one device applied
        db.execute("INSERT INTO changes VALUES (1, 'join', ?, 5, 'pending')", (A,))
        db.execute("INSERT INTO streams VALUES (?, ?, ?, ?, 'joining', 1)", stream)
        for i, (d, k, c) in enumerate(devices):
            db.execute("INSERT INTO device_changes VALUES (1, ?, ?, ?, ?)", (d, k, c, "applied" if i else "pending"))
    old.close()

    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    assert cnc.store.version() == SCHEMA_VERSION == 3
    assert "previous" in [r[1] for r in cnc.store.db.execute("PRAGMA table_info(device_changes)")]
    # no previous configuration recorded by version 1: the change cannot be rolled back, so it is finished at a new
    # base time on every device
    assert cnc.store.change_state(1) == "in-force"
    assert {d.history[-1][0] for d in fake.devices.values()} == {cnc.next_base()}
    assert len(fake.devices) == len(devices)
    assert _out(cnc.status(A))["keepon-cnc:state"] == "in-force"
    # a database newer than the CNC is refused
    cnc.store.db.execute("UPDATE schema_version SET version = 99")
    cnc.store.close()
    with pytest.raises(Exception, match="schema version 99"):
        Store(str(tmp_path / "db"))


def _numerator_as_string(b):
    b["keepon-cnc:input"]["talker"]["traffic-specification"]["interval"]["numerator"] = "1"


def _no_frame_size(b):
    del b["keepon-cnc:input"]["talker"]["traffic-specification"]["max-frame-size"]


def _unknown_member(b):
    b["keepon-cnc:input"]["talker"]["traffic-specification"]["max-frames"] = 1


def _bad_stream_id(b):
    b["keepon-cnc:input"]["stream-id"] = "not-a-stream-id"


def _unknown_talker(b):
    b["keepon-cnc:input"]["talker"]["end-station-interfaces"][0]["mac-address"] = "02-00-00-00-00-99"


BAD = [
    (_unknown_talker, "talker/end-station-interfaces[0]/mac-address", "unknown end station 02-00-00-00-00-99"),
    (_numerator_as_string, "talker/traffic-specification/interval/numerator", "got a string"),
    (_no_frame_size, "talker/traffic-specification/max-frame-size", "missing"),
    (_unknown_member, "talker/traffic-specification/max-frames", "unknown member"),
    (_bad_stream_id, "stream-id", "does not match"),
]


@pytest.mark.parametrize(("corrupt", "element", "words"), BAD, ids=[b[0].__name__[1:] for b in BAD])
def test_a_malformed_request_is_refused_naming_the_element_and_changes_nothing(tmp_path, corrupt, element, words):
    cnc = new_cnc(tmp_path / "db")
    cnc.join(join_body(A, "t1"))
    before = dump(tmp_path / "db")
    body = join_body(B, "t2")
    corrupt(body)
    with pytest.raises(RequestError) as exc:
        cnc.join(body)
    assert exc.value.element == element and words in exc.value.message
    assert dump(tmp_path / "db") == before


def test_an_interval_that_does_not_divide_the_cycle_is_refused(tmp_path):
    cnc = new_cnc(tmp_path / "db")
    before = dump(tmp_path / "db")
    for interval, words in (((3, 10000), "does not divide the network's cycle 1000000 ns"), ((1, 3000), "whole")):
        with pytest.raises(RequestError) as exc:
            cnc.join(join_body(B, "t2", interval=interval))
        assert exc.value.element.startswith("talker/traffic-specification/interval") and words in exc.value.message
    assert dump(tmp_path / "db") == before and not cnc.requests


def test_a_latency_bound_no_route_meets_is_refused_with_its_certificate(tmp_path):
    cnc = new_cnc(tmp_path / "db")
    before = dump(tmp_path / "db")
    with pytest.raises(RequestError) as exc:
        cnc.join(join_body(B, "t2", latency=5_000))  # three hops of 2 µs frames and 2 µs forwarding: 8 µs at least
    e = exc.value
    assert e.element == "talker/user-to-network-requirements/max-latency"
    assert e.certificate["kind"] == "latency" and e.certificate["latency_ps"] == 8_000_000
    assert e.certificate["route"] == ["t2", "sw1", "sw2", "l1"] and "any route" in e.message
    assert dump(tmp_path / "db") == before
    cnc.join(join_body(B, "t2", latency=8_000))  # exactly the route's latency: admitted


def test_a_stream_joined_twice_or_left_unknown_is_an_error(tmp_path):
    cnc = new_cnc(tmp_path / "db")
    cnc.join(join_body(A, "t1"))
    with pytest.raises(RequestError) as twice:
        cnc.join(join_body(A, "t1"))
    assert twice.value.tag == "data-exists"
    with pytest.raises(RequestError) as unknown:
        cnc.leave(leave_body(B))
    assert unknown.value.tag == "data-missing" and B in unknown.value.message


def test_the_topology_must_fix_every_ring_to_the_cycle(tmp_path):
    store = Store(str(tmp_path / "db"))
    with pytest.raises(InputError, match="station 't1': its ring of 500 slots of 2000000 ps lasts"):
        configure(store, TOPOLOGY, None, 2 * CYCLE, {})
    with pytest.raises(InputError, match="give slot_bytes and slots"):
        configure(store, TOPOLOGY.replace("slot_bytes = 230\nslots = 500\n", "", 1), None, CYCLE, {})
    assert store.config() == {}


def test_a_device_that_refuses_rolls_the_change_back(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1"))
    sw1 = fake.devices["sw1"].config()
    fake.devices["sw2"].fail = "no such port"
    before_rows = json.dumps(cnc.store.streams())
    from keepon_plan.cnc.distribute import DistributionError

    with pytest.raises(DistributionError, match="sw2: no such port"):
        cnc.join(join_body(B, "t2"))
    assert json.dumps(cnc.store.streams()) == before_rows and B not in cnc.requests
    assert fake.devices["sw1"].config() == sw1  # it took the change, then its previous configuration again
    assert len(fake.devices["sw1"].history) == 3
    states = [r[0] for r in cnc.store.db.execute("SELECT state FROM changes ORDER BY id")]
    assert states == ["in-force", "rolled-back"]


def test_a_database_that_is_not_one_is_bad_input(tmp_path):
    path = tmp_path / "db"
    sqlite3.connect(str(path)).execute("CREATE TABLE x (y)").connection.commit()
    with pytest.raises(Exception, match="not a CNC database"):
        Cnc(Store(str(path)), FakeNetwork())


def test_a_class_that_loses_its_last_stream_keeps_one_free_slot_or_the_change_is_refused(tmp_path, monkeypatch):
    cnc = new_cnc(tmp_path / "db", FakeNetwork(time=10**9))
    ring = cnc.net.stations["t1"].slots
    monkeypatch.setattr(cnc.inc, "ring_slots", lambda _t: {"tc6": [3]})
    # one of its own slots that no stream uses
    assert cnc._station_classes("t1", {"tc7": [3, 5], "tc6": [1]}) == {"tc6": [3], "tc7": [5]}
    # none of its own free: the ring's first free slot
    assert cnc._station_classes("t1", {"tc7": [3]}) == {"tc6": [3], "tc7": [0]}
    monkeypatch.setattr(cnc.inc, "ring_slots", lambda _t: {"tc6": list(range(ring))})
    with pytest.raises(Refused) as full:
        cnc._station_classes("t1", {"tc7": [3]})
    assert full.value.certificate["kind"] == "station-ring-full" and "tc7" in full.value.certificate["reason"]
