"""The CNC keeps a station's PTP ring slots out of its plans (``[station.ptp]``), over fake devices."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from cnc_support import MAC, TOPOLOGY, dump, join_body, new_cnc, sid

from keepon_plan.cnc.distribute import FakeNetwork
from keepon_plan.cnc.incremental import Refused
from keepon_plan.cnc.ptp import owner
from keepon_plan.cnc.service import Cnc, configure
from keepon_plan.cnc.store import SCHEMA_VERSION, Store
from keepon_plan.cnc.tsn_types import RequestError
from keepon_plan.model import InputError
from keepon_plan.ptproom import largest_gap

RING = 4000
SLOT_NS = 2_000  # 230-byte slots at 1 Gb/s
CYCLE = RING * SLOT_NS
PTP = """[station.ptp]
class = "tc6"
role = "master"
log_sync_interval = -7
log_announce_interval = -3
log_delay_req_interval = -7
"""
RATE = 128 + 128 + 8 + 128
"""PTP's frames a second as master at these intervals: Sync, Follow_Up, Announce, Delay_Resp."""
T1 = 'name = "t1"\nslot_bytes = 230\nslots = 500\n'
PTP_TOPOLOGY = TOPOLOGY.replace("slots = 500", f"slots = {RING}").replace(
    T1.replace("500", str(RING)), T1.replace("500", str(RING)) + PTP
)
A, B, C = sid("t1", 1), sid("t2", 1), sid("t1", 2)


def ptp_cnc(path, fake: FakeNetwork | None = None, topology: str = PTP_TOPOLOGY) -> Cnc:
    store = Store(str(path))
    if not store.config():
        configure(store, topology, None, CYCLE, {m: s for s, m in MAC.items()})
    cnc = Cnc(store, fake or FakeNetwork(time=10**9), 100_000_000)
    cnc.recover()
    return cnc


def _out(reply: dict) -> dict:
    return reply["keepon-cnc:output"]


def test_the_ptp_slots_are_the_planners_room_spread_over_the_ring(tmp_path):
    assert "[station.ptp]" in PTP_TOPOLOGY
    cnc = ptp_cnc(tmp_path / "db")
    (room,) = cnc.ptp.values()
    assert room.station == "t1" and room.cls == "tc6"
    k = math.ceil(RATE * CYCLE / 10**9)  # ⌈rate × cycle⌉
    assert len(room.slots) == k > 1
    assert largest_gap(room.slots, RING) == math.ceil(RING / k)
    assert room.table["log_sync_interval"] == -7
    # kept in the database
    rows = cnc.store.db.execute("SELECT station, class, slots FROM ptp").fetchall()
    assert [(st, cls, json.loads(slots)) for st, cls, slots in rows] == [("t1", "tc6", list(room.slots))]


def test_no_join_takes_a_ptp_slot_and_the_daemon_keeps_them_owned(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = ptp_cnc(tmp_path / "db", fake)
    ptp = set(cnc.ptp["t1"].slots)
    first = min(ptp)
    # a stream that must leave in a PTP slot is refused, the certificate naming PTP's window on t1's link
    before = dump(tmp_path / "db")
    at = first * SLOT_NS
    with pytest.raises(Refused) as refused:
        cnc.join(join_body(C, "t1", interval=(1, 125), earliest_transmit_offset=at, latest_transmit_offset=at))
    c = refused.value.certificate
    assert c["kind"] == "blocked" and c["proven"], c
    assert c["blocked"][0]["link"] == "t1->sw1" and c["blocked"][0]["busy_with"] == owner("t1"), c
    assert dump(tmp_path / "db") == before
    # with the slot after it allowed too, it takes that one
    reply = cnc.join(
        join_body(C, "t1", interval=(1, 125), earliest_transmit_offset=at, latest_transmit_offset=at + SLOT_NS)
    )
    assert int(_out(reply)["keepon-cnc:departure-ps"]) == (first + 1) * SLOT_NS * 1000
    given = fake.devices["t1"].config()["classes"]
    assert given["tc6"] == sorted(ptp) and given["tc7"] == [first + 1]
    # unconstrained, a stream of 1 ms (8 instances a cycle) avoids every PTP slot in every instance
    cnc.join(join_body(A, "t1"))
    assert not set(cnc.inc.ring_slots_of(A)) & ptp
    given = fake.devices["t1"].config()["classes"]
    assert given["tc6"] == sorted(ptp) and given["tc7"] == sorted([first + 1, *cnc.inc.ring_slots_of(A)])
    # t2 runs no PTP: its stream may leave in the slot that is t1's PTP slot
    reply = cnc.join(join_body(B, "t2", earliest_transmit_offset=at, latest_transmit_offset=at))
    assert first in _out(reply)["keepon-cnc:ring-slots"]
    assert "tc6" not in fake.devices["t2"].config()["classes"]


def test_a_replan_keeps_the_ptp_slots(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = ptp_cnc(tmp_path / "db", fake)
    ptp = set(cnc.ptp["t1"].slots)
    cnc.join(join_body(A, "t1"))
    a = int(cnc.inc.starts[A][0])
    # B at A's offset meets A on sw1 → sw2: only a re-plan that moves A lets it in
    reply = cnc.join(
        join_body(B, "t2", earliest_transmit_offset=a // 1000, latest_transmit_offset=a // 1000, allow=True)
    )
    assert _out(reply)["keepon-cnc:moved"] == [A] and cnc.inc.starts[A][0] != a
    assert not set(cnc.inc.ring_slots_of(A)) & ptp
    assert fake.devices["t1"].config()["classes"]["tc6"] == sorted(ptp)
    # a stream that can only leave in a PTP slot: no re-plan places it either
    at = min(ptp) * SLOT_NS
    with pytest.raises(Refused) as refused:
        cnc.join(join_body(C, "t1", earliest_transmit_offset=at, latest_transmit_offset=at, allow=True))
    assert "a re-plan of every stream did not place them all either" in refused.value.certificate["reason"]


def test_a_stream_may_not_ask_for_its_talkers_ptp_class(tmp_path):
    cnc = ptp_cnc(tmp_path / "db")
    body = join_body(A, "t1")
    body["keepon-cnc:input"]["traffic-class"] = 6
    with pytest.raises(RequestError) as bad:
        cnc.join(body)
    assert bad.value.element == "traffic-class" and "PTP" in bad.value.message and "t1" in bad.value.message
    body = join_body(B, "t2")
    body["keepon-cnc:input"]["traffic-class"] = 6  # t2 runs no PTP
    cnc.join(body)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('class = "tc6"', 'class = "ptp"'), "station 't1': ptp.class = \"ptp\": no such class"),
        (('role = "master"', 'role = "boss"'), "station 't1': ptp.role"),
        (("log_sync_interval = -7", "log_sync_interval = -9"), "station 't1': ptp.log_sync_interval = -9"),
        (("log_sync_interval", "log_sink_interval"), "station 't1': unknown key 'log_sink_interval' in \\[ptp\\]"),
    ],
)
def test_bad_ptp_input_names_the_station_and_writes_nothing(tmp_path, change, message):
    store = Store(str(tmp_path / "db"))
    with pytest.raises(InputError, match=message):
        configure(store, PTP_TOPOLOGY.replace(*change), None, CYCLE, {})
    assert store.config() == {} and store.ptp() == {}


def test_ptp_room_the_runtime_would_refuse_names_the_station(tmp_path):
    # 1518-byte slots leave fillers no room to lengthen by ±100 ppm: the runtime refuses them with [ptp]
    big = PTP_TOPOLOGY.replace(T1.replace("500", str(RING)), 'name = "t1"\nslot_bytes = 1518\nslots = 500\n')
    cycle = 500 * (1518 + 20) * 8
    big = big.replace(f"slots = {RING}", f"slots = {cycle // SLOT_NS}")
    store = Store(str(tmp_path / "db"))
    with pytest.raises(InputError, match="station 't1': ptp: slot_bytes 1518 leaves the runtime's fillers no room"):
        configure(store, big, None, cycle, {})
    assert store.config() == {} and store.ptp() == {}
    # the same network without PTP is fine
    configure(store, big.replace(PTP, ""), None, cycle, {})


def test_the_network_planner_refuses_station_ptp():
    from keepon_plan.network.topology import parse_network

    with pytest.raises(InputError, match="station 't1': ptp: only the CNC's topology"):
        parse_network(PTP_TOPOLOGY, None, streams_required=False)


def test_a_restarted_cnc_keeps_the_ptp_slots(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = ptp_cnc(tmp_path / "db", fake)
    ptp = cnc.ptp
    cnc.join(join_body(A, "t1"))
    cnc.store.close()
    again = Cnc(Store(str(tmp_path / "db")), fake, 100_000_000)
    assert again.ptp == ptp
    at = min(ptp["t1"].slots) * SLOT_NS
    with pytest.raises(Refused):
        again.join(join_body(C, "t1", earliest_transmit_offset=at, latest_transmit_offset=at, allow=True))
    # a database whose PTP rows are not the topology's is refused
    again.store.db.execute("DELETE FROM ptp")
    with pytest.raises(InputError, match="the database keeps PTP room for \\[\\], the topology asks it for \\['t1'\\]"):
        Cnc(again.store, fake, 100_000_000)


def test_the_schema_is_migrated_from_version_2(tmp_path):
    # a version-3 CNC makes a real stream to copy
    donor = new_cnc(tmp_path / "donor")
    donor.join(join_body(A, "t1"))
    (stream,) = donor.store.db.execute("SELECT name, talker, request, starts FROM streams").fetchall()
    old = Store(str(tmp_path / "db"), create_version=2)
    assert old.version() == 2
    configure(old, TOPOLOGY, None, 1_000_000, {m: s for s, m in MAC.items()})
    tables = {r[0] for r in old.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "ptp" not in tables
    with old.tx() as db:  # a version-2 CNC stopped with the stream in force
        db.execute(
            "INSERT INTO changes (id, kind, stream, base_time, state) VALUES (1, 'join', ?, 5, 'in-force')", (A,)
        )
        db.execute("INSERT INTO streams VALUES (?, ?, ?, ?, 'in-force', 1)", stream)
    old.close()
    cnc = new_cnc(tmp_path / "db")
    assert cnc.store.version() == SCHEMA_VERSION == 3
    assert cnc.store.ptp() == {} and cnc.ptp == {}
    assert _out(cnc.status(A))["keepon-cnc:state"] == "in-force"
    assert cnc.inc.starts[A] == donor.inc.starts[A]
    cnc.join(join_body(B, "t2"))
    assert sqlite3.connect(str(tmp_path / "db")).execute("SELECT count(*) FROM streams").fetchone() == (2,)
