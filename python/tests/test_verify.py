"""The verifier catches hand-made violations of each constraint, on a hand-written plan."""

import pytest

from keepon_plan.model import InputError, parse_flowset
from keepon_plan.verify import verify_plan_text

FLOWS = """
[link]
rate = "1Gbps"
[ring]
slot_bytes = 1230
slots = 4
batch = 1
[[flow]]
name = "a"
class = "c0"
period = "40us"
jitter = "5us"
frame_bytes = 100
[[flow]]
name = "b"
class = "c0"
period = "80us"
frame_bytes = 100
[[flow]]
name = "c"
class = "c1"
period = "80us"
phase = "20us"
frame_bytes = 100
"""

# δ = 10 µs, N = 4, T = 8 slots. a: slots 0, 4 (ring 0); b: slot 1; c: slot 2 (its phase). c0 = {0, 1}, c1 = {2}.
PLAN = """
version = 1
[link]
rate = "1Gbps"
[ring]
slot_bytes = 1230
slots = 4
batch = 1
policy = "strict"
[[class]]
name = "c0"
mask = "0x3"
[[class]]
name = "c1"
mask = "0x4"
[[flow]]
name = "a"
class = "c0"
period = "40us"
instance_offsets = ["0ns", "40us"]
repeat = "80us"
frame_bytes = 100
count = 10
lead = "20us"
[[flow]]
name = "b"
class = "c0"
period = "80us"
offset = "10us"
frame_bytes = 100
count = 10
lead = "20us"
[[flow]]
name = "c"
class = "c1"
period = "80us"
offset = "20us"
frame_bytes = 100
count = 10
lead = "20us"
"""


def check(plan: str) -> list[str]:
    return [v.constraint for v in verify_plan_text(parse_flowset(FLOWS), plan)]


def mutate(old: str, new: str, text: str = PLAN) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_hand_written_plan_is_valid():
    assert check(PLAN) == []


@pytest.mark.parametrize(
    ("old", "new", "constraint"),
    [
        ('mask = "0x3"', 'mask = "0x1"', "(1) ownership"),  # b's ring slot 1 no longer owned
        ('mask = "0x4"', 'mask = "0x5"', "(1) ownership"),  # ring slot 0 owned twice
        ('class = "c0"\nperiod = "80us"', 'class = "c1"\nperiod = "80us"', "(1) ownership"),
        ('["0ns", "40us"]', '["0ns", "50us"]', "(2) jitter"),  # 10 µs deviation > 5 µs
        ('["0ns", "40us"]', '["40us", "0ns"]', "(2) jitter"),  # passes pairwise |·|, fails across repetitions
        ('offset = "10us"', 'offset = "0ns"', "(3) collision"),  # b on top of a
        ('offset = "20us"', 'offset = "30us"', "(1) ownership"),  # c leaves its slot
        ('repeat = "80us"', 'repeat = "90us"', "periodicity"),
        ('lead = "20us"', 'lead = "5us"', "lead"),  # shorter than batch·δ = 10 µs
        ("slots = 4\n", "slots = 8\n", "ring"),  # the flow set fixes the ring
        (
            'frame_bytes = 100\ncount = 10\nlead = "20us"\n[[flow]]\nname = "b"',
            'frame_bytes = 99\ncount = 10\nlead = "20us"\n[[flow]]\nname = "b"',
            "format",
        ),
    ],
)
def test_each_violation_is_named(old, new, constraint):
    assert constraint in check(mutate(old, new))


def test_phase_violation_alone():
    # c moved to slot 3 and given slot 3: ownership holds, its fixed phase (20 µs, no jitter) does not.
    plan = mutate('mask = "0x4"', 'mask = "0xc"', mutate('offset = "20us"', 'offset = "30us"'))
    assert check(plan) == ["phase"]


def test_missing_flow_is_named():
    cut = PLAN[: PLAN.index('[[flow]]\nname = "c"')]
    assert "format" in check(cut)


def test_bad_toml_is_input_error():
    with pytest.raises(InputError):
        verify_plan_text(parse_flowset(FLOWS), "[ring\n")
