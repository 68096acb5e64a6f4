"""The CNC with a byte-clock station (``timing = "bytes"``): joins on the byte grid at the frame's own length, the
daemon given windows, over fake devices."""

from __future__ import annotations

import math

import pytest
from cnc_support import CYCLE, LEAD, MAC, TOPOLOGY, dump, join_body, leave_body, sid

from keepon_plan.bytes import min_window
from keepon_plan.cnc.distribute import FakeNetwork
from keepon_plan.cnc.incremental import Refused
from keepon_plan.cnc.ptp import owner
from keepon_plan.cnc.service import Cnc, Killed, configure
from keepon_plan.cnc.store import Store
from keepon_plan.cnc.tsn_types import RequestError
from keepon_plan.model import InputError
from keepon_plan.ptpinput import PTP_LONGEST_FRAME

T1 = 'name = "t1"\nslot_bytes = 230\nslots = 500\n'
BYTES_TOPOLOGY = TOPOLOGY.replace(T1, 'name = "t1"\ntiming = "bytes"\n')
PTP = '[station.ptp]\nclass = "tc6"\nrole = "slave"\nlog_sync_interval = -4\nlog_delay_req_interval = -4\n'
BYTE_NS = 8  # 1 Gb/s
A, B, C = sid("t1", 1), sid("t1", 2), sid("t1", 3)


def wire_ns(frame: int) -> int:
    return (frame + 20) * BYTE_NS


def bytes_cnc(path, fake: FakeNetwork | None = None, topology: str = BYTES_TOPOLOGY, fault=None) -> Cnc:
    store = Store(str(path))
    if not store.config():
        configure(store, topology, None, CYCLE, {m: s for s, m in MAC.items()})
    cnc = Cnc(store, fake or FakeNetwork(time=10**9), LEAD, fault)
    cnc.recover()
    return cnc


def _out(reply: dict) -> dict:
    return reply["keepon-cnc:output"]


def test_a_byte_clock_join_takes_its_frames_own_wire_time_not_a_slot(tmp_path):
    assert 'timing = "bytes"' in BYTES_TOPOLOGY
    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake)
    a = _out(cnc.join(join_body(A, "t1", size=100)))
    b = _out(cnc.join(join_body(B, "t1", size=300)))
    slot = _out(cnc.join(join_body(sid("t2", 1), "t2", size=100)))  # t2 still pads to its 230-byte slots
    # every hop of the byte-clock stream carries 100 bytes, the slot station's 230
    for h in cnc.inc.routed[A].hops:
        assert h.tx_ps == wire_ns(100) * 1000, h
    assert cnc.inc.routed[sid("t2", 1)].hops[0].tx_ps == wire_ns(230) * 1000
    # B leaves right after A's frame and the minimum frame of free link after it: not on a slot boundary
    da, db = int(a["keepon-cnc:departure-ps"]), int(b["keepon-cnc:departure-ps"])
    assert da == 0 and db == (wire_ns(100) + wire_ns(64)) * 1000
    assert db % (wire_ns(230) * 1000) != 0
    assert "keepon-cnc:ring-slots" in slot and "keepon-cnc:ring-slots" not in a
    # each instance's window: its wire time and one byte, once per interval (1 ms: once a cycle)
    assert a["keepon-cnc:windows-ns"] == [[0, wire_ns(100) + BYTE_NS]]
    assert b["keepon-cnc:windows-ns"] == [[db // 1000, wire_ns(300) + BYTE_NS]]


def test_a_byte_clock_stations_change_carries_windows_not_slots(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1", size=100, interval=(1, 4000)))  # 250 µs: four windows a 1 ms cycle
    cnc.join(join_body(sid("t2", 1), "t2"))
    base, config = fake.devices["t1"].history[-1]
    assert set(config) == {"windows"}
    assert config["windows"] == {"tc7": [[k * 250_000, wire_ns(100) + BYTE_NS] for k in range(4)]}
    assert set(fake.devices["t2"].config()) == {"classes"}
    # at the change's common base time, a cycle start, recorded like a slot change
    assert (base - 0) % CYCLE == 0 and base >= 10**9 + LEAD
    assert cnc.store.devices()["t1"] == ("station", config)
    assert all(b == base for b, _ in fake.devices["sw1"].history[:1])


def test_a_leave_frees_the_window_another_join_then_takes(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1", size=200))
    at = 0  # where A leaves: C asks for exactly that departure
    before = dump(tmp_path / "db")
    with pytest.raises(Refused) as refused:
        cnc.join(join_body(C, "t1", size=200, earliest_transmit_offset=at, latest_transmit_offset=at))
    c = refused.value.certificate
    assert c["kind"] == "blocked" and c["proven"] and c["grid_ps"] == BYTE_NS * 1000, c
    assert c["blocked"][0]["link"] == "t1->sw1" and c["blocked"][0]["busy_with"] == A, c
    assert dump(tmp_path / "db") == before
    cnc.leave(leave_body(A))
    # the class lost its last stream: it keeps one idle window of a minimum frame (the daemon keeps a real-time
    # class at one window at least), where its old one began
    assert fake.devices["t1"].config() == {"windows": {"tc7": [[0, min_window(10**9)]]}}
    out = _out(cnc.join(join_body(C, "t1", size=200, earliest_transmit_offset=at, latest_transmit_offset=at)))
    assert out["keepon-cnc:departure-ps"] == "0"
    assert fake.devices["t1"].config() == {"windows": {"tc7": [[0, wire_ns(200) + BYTE_NS]]}}


def test_an_idle_class_window_moves_off_the_other_classes_windows(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake)
    body = join_body(A, "t1", size=200)
    body["keepon-cnc:input"]["traffic-class"] = 5
    cnc.join(body)
    cnc.leave(leave_body(A))
    assert fake.devices["t1"].config() == {"windows": {"tc5": [[0, min_window(10**9)]]}}
    # a tc7 stream now takes 0: tc5's idle window moves past it (after its frame and free link)
    cnc.join(join_body(B, "t1", size=200, latest_transmit_offset=0))
    windows = fake.devices["t1"].config()["windows"]
    assert windows["tc7"] == [[0, wire_ns(200) + BYTE_NS]]
    (idle,) = windows["tc5"]
    assert idle[0] >= wire_ns(200) + wire_ns(64) and idle[1] == min_window(10**9)


def test_byte_clock_bad_input_names_the_element(tmp_path):
    cnc = bytes_cnc(tmp_path / "db")
    with pytest.raises(RequestError) as e:
        cnc.join(join_body(A, "t1", size=1519))
    assert e.value.element == "talker/traffic-specification/max-frame-size" and "1518" in e.value.message
    with pytest.raises(RequestError) as e:
        cnc.join(join_body(A, "t1", size=63))
    assert e.value.element == "talker/traffic-specification/max-frame-size"
    # 4 ns divides the cycle but is not a whole number of 8 ns byte times
    with pytest.raises(RequestError) as e:
        cnc.join(join_body(A, "t1", interval=(4, 10**9)))
    assert e.value.element == "talker/traffic-specification/interval" and "byte grid" in e.value.message
    with pytest.raises(RequestError) as e:
        cnc.join(join_body(A, "t1", earliest_transmit_offset=CYCLE - 100, latest_transmit_offset=CYCLE - 1))
    assert e.value.element == "talker/traffic-specification/time-aware"


def test_a_byte_clock_topology_the_cycle_does_not_fit_names_the_station(tmp_path):
    topo = BYTES_TOPOLOGY.replace('name = "t2"\nslot_bytes = 230\nslots = 500\n', 'name = "t2"\ntiming = "bytes"\n')
    with pytest.raises(InputError, match="station 't1': the network's cycle 1000004 ns is not a whole number"):
        configure(Store(str(tmp_path / "db")), topo, None, CYCLE + 4, {})
    # every station on the byte clock, a 1.6 µs cycle: PTP's one window a cycle (1 048 ns and 672 ns of free link
    # after it) leaves no room
    topo = BYTES_TOPOLOGY.replace("slot_bytes = 230\nslots = 500\n", 'timing = "bytes"\n')
    topo = topo.replace('timing = "bytes"\n', 'timing = "bytes"\n' + PTP, 1)
    with pytest.raises(InputError, match=r"station 't1': ptp: PTP needs 1 windows of 1048 ns"):
        configure(Store(str(tmp_path / "db2")), topo, None, 1_600, {})
    configure(Store(str(tmp_path / "db3")), topo, None, 3_200, {})  # room enough at twice the cycle


def test_a_byte_clock_stations_ptp_keeps_windows_no_stream_takes(tmp_path):
    topo = BYTES_TOPOLOGY.replace('timing = "bytes"\n', 'timing = "bytes"\n' + PTP)
    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake, topo)
    room = cnc.ptp["t1"]
    k = math.ceil(16 * CYCLE / 10**9)  # Delay_Req at 16/s: ⌈16/s × 1 ms⌉ = 1 a cycle
    assert room.slots == () and len(room.windows) == k
    length = room.windows[0][1]
    assert length >= wire_ns(PTP_LONGEST_FRAME) and length // wire_ns(PTP_LONGEST_FRAME) == 1
    # a stream asking for PTP's window is refused, naming PTP
    at = room.windows[0][0] * 1000
    with pytest.raises(Refused) as refused:
        cnc.join(join_body(A, "t1", earliest_transmit_offset=at, latest_transmit_offset=at))
    assert refused.value.certificate["blocked"][0]["busy_with"] == owner("t1")
    out = _out(cnc.join(join_body(A, "t1", size=100)))
    assert int(out["keepon-cnc:departure-ps"]) >= (room.windows[0][0] + length) * 1000 + wire_ns(64) * 1000
    windows = fake.devices["t1"].config()["windows"]
    assert windows["tc6"] == [list(w) for w in room.windows]
    # the PTP class may not carry a stream
    body = join_body(B, "t1")
    body["keepon-cnc:input"]["traffic-class"] = 6
    with pytest.raises(RequestError, match="windows"):
        cnc.join(body)
    # a restarted CNC keeps the same windows (the database's)
    cnc.store.close()
    again = bytes_cnc(tmp_path / "db", fake, topo)
    assert again.ptp["t1"] == room


def test_a_byte_clock_change_killed_mid_way_is_finished_with_its_windows(tmp_path):
    def kill(where: str) -> None:
        if where == "applied:t1":
            raise Killed(where)

    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake, fault=kill)
    with pytest.raises(Killed):
        cnc.join(join_body(A, "t1", size=100))
    cnc.store.close()
    base, config = fake.devices["t1"].history[-1]
    again = bytes_cnc(tmp_path / "db", fake)  # restarted at once: the base time is ahead, the change finished
    assert again.store.pending() == []
    assert fake.devices["t1"].config() == config == {"windows": {"tc7": [[0, wire_ns(100) + BYTE_NS]]}}
    assert fake.devices["sw1"].history[-1][0] == base
    assert _out(again.status(A))["keepon-cnc:windows-ns"] == [[0, wire_ns(100) + BYTE_NS]]


def test_a_byte_clock_replan_only_with_allow_replan_moves_a_stream_by_bytes(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = bytes_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1", size=200))
    with pytest.raises(Refused):  # B wants A's byte, and may not move it
        cnc.join(join_body(B, "t1", size=100, earliest_transmit_offset=0, latest_transmit_offset=0))
    out = _out(cnc.join(join_body(B, "t1", size=100, allow=True, earliest_transmit_offset=0, latest_transmit_offset=0)))
    assert out["keepon-cnc:moved"] == [A] and out["keepon-cnc:departure-ps"] == "0"
    # A moved to the first byte after B's frame and the free link after it, not to a slot boundary
    a = (wire_ns(100) + wire_ns(64)) * 1000
    assert _out(cnc.status(A))["keepon-cnc:departure-ps"] == str(a)
    base, config = fake.devices["t1"].history[-1]
    assert config == {"windows": {"tc7": [[0, wire_ns(100) + BYTE_NS], [a // 1000, wire_ns(200) + BYTE_NS]]}}
    assert fake.devices["sw1"].history[-1][0] == base  # one change, one base time
