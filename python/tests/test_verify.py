"""The verifier catches hand-made violations of each constraint, on a hand-written plan, and agrees with the old
quadratic verifier on random plans."""

import math
import random
import time

import pytest
import reference_verify

from keepon_plan.deadline import Deadline, TimeLimitExceeded
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


# --------------------------------------------------------------------------------------------------------------
# The O(M) jitter check against the old O(M²) verifier (tests/reference_verify.py) on random plans


def random_case(rng: random.Random) -> tuple[str, str]:
    """A random flow set (δ = 10 µs) and a random plan for it: valid, or violating any constraint (often (2))."""
    n = rng.choice([2, 3, 4, 6])
    classes = ["c0", "c1"][: rng.randint(1, 2)]
    flows = []
    for i in range(rng.randint(1, 3)):
        p = rng.choice([1, 2, 3, 4, 6])
        jitter = rng.choice([0, rng.randrange(p * 10_000)])
        phase = rng.randrange(p) * 10_000 + rng.choice([0, 3_000]) if rng.random() < 0.3 else None
        if phase is not None and phase >= p * 10_000:
            phase = None
        flows.append((f"f{i}", rng.choice(classes), p, jitter, phase))
    fs = ["[link]", 'rate = "1Gbps"', "[ring]", "slot_bytes = 1230", f"slots = {n}", "batch = 1"]
    for name, cls, p, jitter, phase in flows:
        fs += ["[[flow]]", f'name = "{name}"', f'class = "{cls}"', f"period = {p * 10_000}", f"jitter = {jitter}"]
        fs += ["frame_bytes = 100"] + ([f"phase = {phase}"] if phase is not None else [])
    horizon = math.lcm(n, *(p for _, _, p, _, _ in flows))
    owner = [rng.choice([*classes, None]) for _ in range(n)]
    plan = ["version = 1", "[link]", 'rate = "1Gbps"', "[ring]", "slot_bytes = 1230", f"slots = {n}", "batch = 1"]
    for c in classes:
        mask = sum(1 << r for r in range(n) if owner[r] == c)
        plan += ["[[class]]", f'name = "{c}"'] + ([f'mask = "{mask:#x}"'] if mask else [])
    for name, cls, p, jitter, _ in flows:
        m = horizon // p
        base = rng.randrange(1, p + 2)
        spread = jitter // 10_000 + rng.choice([0, 0, 1, 2, p + 1, 2 * p])  # beyond p: instances out of order
        e = [rng.randint(0, spread) if rng.random() < 0.5 else 0 for _ in range(m)]
        times = [(base + l * p + e[l]) * 10_000 + rng.choice([0, 0, 1, 9_999]) for l in range(m)]
        repeat = m * p * 10_000 + (10_000 if rng.random() < 0.05 else 0)
        plan += ["[[flow]]", f'name = "{name}"', f'class = "{cls}"', f"period = {p * 10_000}"]
        plan += [f"instance_offsets = {times}", f"repeat = {repeat}", "frame_bytes = 100", "count = 5", 'lead = "20us"']
    return "\n".join(fs) + "\n", "\n".join(plan) + "\n"


def test_same_verdicts_as_the_quadratic_verifier():
    rng = random.Random(12)
    seen: dict[str, int] = {}
    for _ in range(600):
        flows, plan = random_case(rng)
        fs = parse_flowset(flows)
        ours = sorted({v.constraint for v in verify_plan_text(fs, plan)})
        reference = sorted({v.constraint for v in reference_verify.verify_plan_text(fs, plan)})
        assert ours == reference, (flows, plan)
        for c in ours or ["valid"]:
            seen[c] = seen.get(c, 0) + 1
    # Not vacuous: both verdicts, and every constraint the random plans can break, occur many times.
    for c in ("valid", "(1) ownership", "(2) jitter", "(3) collision", "phase", "periodicity"):
        assert seen.get(c, 0) >= 20, seen


def test_jitter_violation_names_the_pair_that_deviates_the_spread():
    # a at slots 0 and 4 + 1 (50 µs): 10 µs off one period, over its 5 µs jitter.
    text = mutate('["0ns", "40us"]', '["0ns", "50us"]') + "\n"
    (v,) = [v for v in verify_plan_text(parse_flowset(FLOWS), text) if v.constraint == "(2) jitter"]
    assert "instances 0 and 1 (slots 0 and 5) are 50000 ns apart against 1 periods = 40000 ns: 10000 ns off" in str(v)
    # Out of order (slots 4, 0): the in-order pair is instance 1 and instance 0 of the next repetition.
    text = mutate('["0ns", "40us"]', '["40us", "0ns"]')
    (v,) = [v for v in verify_plan_text(parse_flowset(FLOWS), text) if v.constraint == "(2) jitter"]
    assert "instances 1 and 2 (slots 0 and 12) are 120000 ns apart against 1 periods = 40000 ns: 80000 ns off" in str(v)


def test_an_expired_deadline_stops_the_verifier():
    deadline = Deadline(1.0, start=time.monotonic() - 2.0)
    deadline.stage = "verification"
    with pytest.raises(TimeLimitExceeded, match="during verification"):
        verify_plan_text(parse_flowset(FLOWS), PLAN, deadline=deadline)
