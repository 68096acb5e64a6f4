import tomllib
from fractions import Fraction

import pytest

from keepon_plan.emit import gate_list, pattern_length, runtime_config
from keepon_plan.isolation import PLAN, synthesize
from keepon_plan.model import parse_flowset, to_problem
from keepon_plan.params import ParamError, batch_bounds, choose, slot_candidates, sync_bound, tradeoff_table
from keepon_plan.units import floor_frac, parse_duration, parse_mask, slot_period, slot_start_ns
from keepon_plan.verify import verify_plan_text

TEN_GIG = """
[link]
rate = "10Gbps"
[ring]
slot_bytes = 64
slots = 4
batch = 1
[[flow]]
name = "a"
class = "x"
period = "8400ns"
jitter = "200ns"
frame_bytes = 64
[[flow]]
name = "b"
class = "y"
period = "16800ns"
jitter = "0ns"
frame_bytes = 64
[[flow]]
name = "c"
class = "x"
period = "25200ns"
jitter = "150ns"
frame_bytes = 64
"""


def solve(text: str):
    fs = parse_flowset(text)
    choice = choose(fs)
    problem = to_problem(fs, choice.slot_bytes, choice.slots)
    out = synthesize(problem, time_limit=20)
    assert out.status == PLAN
    return fs, choice, problem, out.schedule


def test_fractional_slot_period_offsets_land_in_their_slots():
    fs, choice, problem, schedule = solve(TEN_GIG)
    delta = slot_period(64, 10**10)
    assert delta == Fraction(336, 5)  # 67.2 ns
    text = runtime_config(fs, choice, problem, schedule)
    assert verify_plan_text(fs, text) == []
    doc = tomllib.loads(text)
    for pf, slots in zip(doc["flow"], schedule.slots, strict=True):
        if "offset" in pf:
            assert floor_frac(Fraction(parse_duration(pf["offset"])) / delta) == slots[0]
        else:
            offsets = [parse_duration(v) for v in pf["instance_offsets"]]
            for t, s in zip(offsets, slots, strict=False):
                assert floor_frac(Fraction(t) / delta) == s
    for s in range(1000):
        assert floor_frac(Fraction(slot_start_ns(s, delta)) / delta) == s


def test_gate_list_matches_ownership_and_adds_up():
    fs, choice, _, schedule = solve(TEN_GIG)
    delta = slot_period(64, 10**10)
    lines = gate_list(fs, choice, schedule).splitlines()
    cycle = int(next(x for x in lines if x.startswith("cycle-time")).split()[1])
    entries = [(int(x.split()[2], 16), int(x.split()[3])) for x in lines if x.startswith("sched-entry")]
    assert sum(i for _, i in entries) == cycle
    assert Fraction(cycle) / delta % choice.slots == 0  # whole rings
    # walk the entries: each slot's start time falls in an entry whose gate is its owner
    owner = {r: c for c, slots in enumerate(schedule.owned) for r in slots}
    t, bounds = 0, []
    for gate, interval in entries:
        bounds.append((t, t + interval, gate))
        t += interval
    for s in range(int(Fraction(cycle) / delta)):
        start = slot_start_ns(s, delta)
        gate = next(g for lo, hi, g in bounds if lo <= start < hi)
        assert gate == 1 << owner.get(s % choice.slots, len(fs.classes))


def test_jitter_schedules_use_instance_offsets():
    assert pattern_length((0, 4, 8, 12), 4) == 1
    assert pattern_length((0, 5, 8, 13), 4) == 2
    assert pattern_length((0, 5, 9, 12), 4) == 4


def test_example2_masks_are_disjoint_and_cover_the_flows(tmp_path):
    from conftest import EXAMPLES

    fs, choice, problem, schedule = solve((EXAMPLES / "example2.toml").read_text())
    doc = tomllib.loads(runtime_config(fs, choice, problem, schedule))
    masks = [set(parse_mask(c["mask"])) for c in doc["class"]]
    assert not masks[0] & masks[1]
    assert len(masks[0]) == 1 and len(masks[1]) == 2  # 32/32 and 32/16 instances per ring cycle
    assert doc["ring"] == {"slot_bytes": 1230, "slots": 32, "batch": 8, "policy": "strict"}


PARAMS = """
[link]
rate = "1Gbps"
[params]
sync_budget = "5us"
master_granularity = "8ns"
station_jitter = "2us"
poll_budget = "2us"
[[flow]]
name = "a"
class = "x"
period = "320us"
frame_bytes = 300
[[flow]]
name = "b"
class = "y"
period = "160us"
frame_bytes = 200
"""


def test_slot_choice_is_smallest_candidate_holding_the_largest_frame():
    fs = parse_flowset(PARAMS)
    cands = slot_candidates(fs)
    assert 1230 in cands  # δ = 10 µs divides 160 µs
    for s in cands:
        assert (Fraction(160_000) / slot_period(s, fs.rate)).denominator == 1
    choice = choose(fs)
    assert choice.slot_bytes == min(s for s in cands if s >= 300) == 380  # δ = 3.2 µs
    # hyperperiod 320 µs / 3.2 µs = 100 slots: its largest power-of-two divisor (4) is below 32, so the ring is
    # the largest divisor of the hyperperiod up to 4096
    assert choice.slots == 100


def test_batch_is_largest_within_eq4_budget():
    fs = parse_flowset(PARAMS)
    choice = choose(fs)
    delta = slot_period(choice.slot_bytes, fs.rate)
    assert sync_bound(fs, delta, choice.batch) <= 5000 < sync_bound(fs, delta, choice.batch + 1)
    lo, hi, _ = batch_bounds(fs, delta, choice.slots)
    assert lo <= choice.batch == hi
    assert "δ_TS" in tradeoff_table(fs, choice)


def test_contradictory_bounds_are_an_input_error():
    fs = parse_flowset(PARAMS.replace('poll_budget = "2us"', 'poll_budget = "50us"'))
    with pytest.raises(ParamError):
        choose(fs)


def test_a_slow_flow_does_not_blow_up_the_ring():
    from conftest import EXAMPLES

    from keepon_plan.params import hyperperiod_slots

    fs = parse_flowset((EXAMPLES / "station.toml").read_text())
    choice = choose(fs)
    # periods 25, 50, 100, 75 and 12500 slots: the 125 ms flow alone would make the ring 3750 slots
    assert choice.slots == 300
    assert hyperperiod_slots(fs, choice.slot_bytes) % choice.slots == 0
