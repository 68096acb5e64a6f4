"""A CNC killed mid-change (a fault-injection hook) and restarted on its database finishes or rolls back."""

from __future__ import annotations

import pytest
from cnc_support import join_body, leave_body, new_cnc, sid

from keepon_plan.cnc.distribute import FakeNetwork
from keepon_plan.cnc.service import Killed
from keepon_plan.cnc.store import Store

A, B, C = sid("t1", 1), sid("t2", 1), sid("t1", 2)


def _kill_at(point: str):
    def fault(where: str) -> None:
        if where == point:
            raise Killed(where)

    return fault


def _converged(cnc, fake: FakeNetwork) -> None:
    """Every device's last configuration is what the database holds in force, and nothing is pending."""
    assert cnc.store.pending() == []
    held = cnc.store.devices()
    empty = {"station": {"classes": {}}, "switch": {"ports": {}}}
    for d, v in fake.devices.items():  # a device without a row has the empty configuration
        assert (v.kind, v.config()) == held.get(d, (v.kind, empty[v.kind])), d
    for talker in {"t1", "t2"} & set(held):
        want = cnc.inc.ring_slots(talker)
        classes = held[talker][1]["classes"]
        assert {c: s for c, s in classes.items() if c in want} == want
        # a class whose last stream left keeps one idle slot no stream uses
        used = {s for slots in want.values() for s in slots}
        for c, s in classes.items():
            if c not in want:
                assert len(s) == 1 and s[0] not in used, (talker, c, s)


@pytest.mark.parametrize("point", ["recorded", "applied:t2", "applied:sw1", "applied:sw2"])
def test_killed_mid_join_then_restarted_before_the_base_time_finishes_it(tmp_path, point):
    # the same two joins never interrupted: what every device must hold after the finished change
    ref_fake = FakeNetwork(time=10**9)
    ref = new_cnc(tmp_path / "ref", ref_fake)
    ref.join(join_body(A, "t1"))
    ref.join(join_body(B, "t2", latest_transmit_offset=2_000))  # B in the ring slot next to A's

    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1"))
    cnc.fault = _kill_at(point)
    with pytest.raises(Killed):
        cnc.join(join_body(B, "t2", latest_transmit_offset=2_000))
    cnc.store.close()
    (pending,) = Store(str(tmp_path / "db")).pending()  # the database knows how far the change got, per device
    applied = {d.device for d in pending.devices if d.applied}
    reached = {
        "recorded": set(),
        "applied:t2": {"t2"},
        "applied:sw1": {"t2", "sw1"},
        "applied:sw2": {"t2", "sw1", "sw2"},
    }
    assert applied == reached[point]
    fake.time += 10_000_000  # restarted 10 ms later: the base time is still 90 ms ahead
    again = new_cnc(tmp_path / "db", fake)
    assert set(again.requests) == {A, B}
    state = again.status(B)["keepon-cnc:output"]
    assert state["keepon-cnc:state"] == "in-force"
    base = int(state["keepon-cnc:base-time"])
    assert base == pending.base_time
    assert {fake.devices[d].history[-1][0] for d in ("t2", "sw1", "sw2")} == {base}  # the one base time kept
    # each device got the change once (none given it again at another base time) and holds what the uninterrupted
    # joins gave it
    assert [b for b, _c in fake.devices["t2"].history] == [base]
    assert {d: v.config() for d, v in fake.devices.items()} == {d: v.config() for d, v in ref_fake.devices.items()}
    # t2 owns exactly B's ring slots, next to t1's A (slot 1 after slot 0)
    assert fake.devices["t2"].config() == {
        "classes": {"tc7": again.status(B)["keepon-cnc:output"]["keepon-cnc:ring-slots"]}
    }
    assert again.inc.ring_slots_of(A) == [0] and again.inc.ring_slots_of(B) == [1]
    _converged(again, fake)
    assert again.inc.starts[A][0] == 0  # the stream in force did not move


def test_killed_mid_join_then_restarted_after_the_base_time_rolls_it_back(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1"))
    sw1 = fake.devices["sw1"].config()
    cnc.fault = _kill_at("applied:sw1")
    with pytest.raises(Killed):
        cnc.join(join_body(B, "t2", latest_transmit_offset=10_000))
    cnc.store.close()
    assert fake.devices["sw1"].config() != sw1  # sw1 took the change before the CNC died
    fake.time += 1_000_000_000  # restarted a second later: the change's base time has passed
    again = new_cnc(tmp_path / "db", fake)
    assert set(again.requests) == {A}
    assert fake.devices["sw1"].config() == sw1  # its previous configuration again
    assert again.store.db.execute("SELECT state FROM changes ORDER BY id").fetchall() == [
        ("in-force",),
        ("rolled-back",),
    ]
    _converged(again, fake)
    # the rolled-back stream's windows are free: it joins again at the same place
    again.join(join_body(B, "t2", latest_transmit_offset=10_000))
    _converged(again, fake)


def test_killed_mid_leave_and_mid_replan_converge(tmp_path):
    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    cnc.join(join_body(A, "t1"))
    cnc.fault = _kill_at("applied:sw2")
    with pytest.raises(Killed):
        cnc.join(join_body(B, "t2", latest_transmit_offset=0, allow=True))  # moves A
    cnc.store.close()
    fake.time += 1_000_000_000
    again = new_cnc(tmp_path / "db", fake)  # rolled back: A where it was, B out
    assert set(again.requests) == {A} and again.inc.starts[A][0] == 0
    _converged(again, fake)

    again.fault = _kill_at("recorded")
    with pytest.raises(Killed):
        again.leave(leave_body(A))
    again.store.close()
    third = new_cnc(tmp_path / "db", fake)  # the leave's base time still ahead: finished
    assert third.requests == {}
    _converged(third, fake)
    third.join(join_body(C, "t1", latest_transmit_offset=0))
    assert third.inc.starts[C][0] == 0


def test_the_log_is_checkpointed_by_the_store_thread_not_by_a_commit(tmp_path):
    """SQLite's automatic checkpoint is off (a commit never waits for one); the store's thread copies the log into
    the database file instead, and a restart reads everything back."""
    import time

    from keepon_plan.cnc import store as store_mod

    fake = FakeNetwork(time=10**9)
    cnc = new_cnc(tmp_path / "db", fake)
    assert cnc.store.db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    size = (tmp_path / "db").stat().st_size
    for n in range(1, 21):
        cnc.join(join_body(sid("t1", n), "t1", interval=(1, 1000), size=64))
        fake.time += 10**9
    # the changes went to the log; the thread copies them into the database file (nothing else here does)
    ran = cnc.store.checkpointer.checkpoints
    end = time.monotonic() + 10 * store_mod.CHECKPOINT_S
    while cnc.store.checkpointer.checkpoints < ran + 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert cnc.store.checkpointer.checkpoints >= ran + 2
    assert (tmp_path / "db").stat().st_size > size
    cnc.store.close()
    assert not cnc.store.checkpointer.is_alive()
    assert len(new_cnc(tmp_path / "db", fake).requests) == 20
