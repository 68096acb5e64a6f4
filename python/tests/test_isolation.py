import math
import random

import pytest
from helpers import brute_force

from keepon_plan.emit import runtime_config
from keepon_plan.isolation import (
    INFEASIBLE,
    PLAN,
    buddy_schedule,
    capacity_bound,
    is_chain,
    synthesize,
)
from keepon_plan.model import Problem, SlotFlow, parse_flowset, to_problem
from keepon_plan.params import RingChoice
from keepon_plan.verify import verify_plan_text

DELTA_US = 10  # 1230-byte slots at 1 Gb/s


def flowset_text(n: int, flows: list[tuple[int, int, int, int | None]]) -> str:
    """flows: (class, period slots, jitter slots, phase slot or None) -> a flow-set TOML with δ = 10 µs."""
    lines = ["[link]", 'rate = "1Gbps"', "[ring]", "slot_bytes = 1230", f"slots = {n}", "batch = 1"]
    for i, (c, p, j, ph) in enumerate(flows):
        lines += [
            "[[flow]]",
            f'name = "f{i}"',
            f'class = "c{c}"',
            f'period = "{p * DELTA_US}us"',
            f'jitter = "{j * DELTA_US}us"',
            "frame_bytes = 100",
        ]
        if ph is not None:
            lines.append(f'phase = "{ph * DELTA_US}us"')
    return "\n".join(lines) + "\n"


def random_tiny(rng: random.Random):
    while True:
        n = rng.choice([2, 3, 4, 6])
        k = rng.randint(2, 3)
        periods = [rng.choice([2, 3, 4, 6]) for _ in range(k)]
        if math.lcm(n, *periods) > 12:
            continue
        flows = []
        for p in periods:
            j = rng.choice([0, 0, 1]) if p > 2 else 0
            ph = rng.randrange(p) if rng.random() < 0.3 else None
            flows.append((rng.randint(0, 1), p, j, ph))
        return n, flows


def check_plan(text: str, outcome) -> None:
    fs = parse_flowset(text)
    problem = to_problem(fs, 1230, fs.slots)
    choice = RingChoice(1230, fs.slots, 1, 20_000)
    plan = runtime_config(fs, choice, problem, outcome.schedule)
    assert verify_plan_text(fs, plan) == []


@pytest.mark.parametrize("seed", range(6))
def test_cross_check_against_brute_force(seed):
    rng = random.Random(seed)
    for _ in range(12):
        n, flows = random_tiny(rng)
        text = flowset_text(n, flows)
        fs = parse_flowset(text)
        problem = to_problem(fs, 1230, n)
        truth = brute_force(problem)
        for stages in (
            ("capacity", "closed-form", "zero-jitter", "complete"),
            ("complete",),
        ):
            outcome = synthesize(problem, time_limit=20, seed=seed, stages=stages)
            assert outcome.status == (PLAN if truth else INFEASIBLE), (flows, n, stages, outcome)
            if outcome.status == PLAN:
                check_plan(text, outcome)


def test_capacity_bound_proves_infeasibility_with_reason():
    # class 0: period 2 -> 16 of 32 ring slots; class 1: periods 4, 4, 8 -> 20: 36 > 32
    p = Problem(
        32, ("a", "b"), (SlotFlow("x", 0, 2, 0), SlotFlow("y", 1, 4, 0), SlotFlow("z", 1, 4, 0), SlotFlow("w", 1, 8, 0))
    )
    reason = capacity_bound(p)
    assert reason is not None and "36" in reason and "capacity" in reason
    out = synthesize(p)
    assert out.status == INFEASIBLE and out.reason == reason


def test_solver_proves_infeasibility_beyond_the_bound():
    # Same class, coprime periods, no jitter: they must collide, though the capacity bound holds (5 <= 6).
    p = Problem(6, ("a",), (SlotFlow("x", 0, 2, 0), SlotFlow("y", 0, 3, 0)))
    assert capacity_bound(p) is None
    assert not brute_force(p)
    out = synthesize(p, time_limit=10)
    assert out.status == INFEASIBLE and "proved" in out.reason
    # With jitter the same pair needs the complete model, and is still infeasible on a ring of 6 with 1 class.
    q = Problem(6, ("a",), (SlotFlow("x", 0, 2, 1), SlotFlow("y", 0, 3, 1)))
    assert brute_force(q) == (synthesize(q, time_limit=10).status == PLAN)


def test_fixed_phase_conflict_is_infeasible():
    # Two flows, windows on the same single slot each period.
    p = Problem(4, ("a", "b"), (SlotFlow("x", 0, 4, 0, (1, 1)), SlotFlow("y", 1, 4, 0, (1, 1))))
    out = synthesize(p, time_limit=10)
    assert out.status == INFEASIBLE
    empty = Problem(4, ("a",), (SlotFlow("x", 0, 4, 0, (2, 1)),))
    assert "no slot starts" in capacity_bound(empty)


def test_chain_detection():
    assert is_chain([8, 16, 32, 128, 32])
    assert not is_chain([8, 24, 32])


@pytest.mark.parametrize("seed", range(20))
def test_closed_form_is_sufficient_on_chains(seed):
    """Σ⌈N·U_c⌉ ≤ N and a divisibility chain: the buddy construction always succeeds, and its plan is valid."""
    rng = random.Random(seed)
    n = 32
    periods = [8, 16, 32, 64, 128]
    while True:
        k = rng.randint(1, 12)
        classes = rng.randint(1, min(k, 8))
        flows = [(rng.randrange(classes), rng.choice(periods), rng.randint(0, 2), None) for _ in range(k)]
        text = flowset_text(n, flows)
        problem = to_problem(parse_flowset(text), 1230, n)
        if capacity_bound(problem) is None:
            break
    schedule = buddy_schedule(problem)
    assert schedule is not None
    out = synthesize(problem, stages=("capacity", "closed-form"))
    assert out.status == PLAN and out.schedule.method.startswith("closed form")
    check_plan(text, out)


def test_deterministic_for_a_seed():
    flows = [(0, 6, 1, None), (0, 8, 1, None), (1, 12, 2, None), (1, 6, 0, None), (2, 24, 3, None)]
    problem = to_problem(parse_flowset(flowset_text(24, flows)), 1230, 24)
    a = synthesize(problem, time_limit=20, seed=3, stages=("complete",))
    b = synthesize(problem, time_limit=20, seed=3, stages=("complete",))
    assert a.status == PLAN and a.schedule == b.schedule


def test_unknown_when_time_runs_out():
    from keepon_plan.gen import generate

    problem = to_problem(generate("nonharmonic", 70, 48), 1230, 32)
    out = synthesize(problem, time_limit=0.3)
    assert out.status == "unknown"
    assert "time limit" in out.reason


def test_normalise_relabels_to_the_first_period():
    from keepon_plan.isolation import normalise

    # P = 4, T = 12: slots 5, 9, 13 (o = 5 >= P) relabel to 1, 5, 9
    assert normalise((5, 9, 13), 4, 12) == (1, 5, 9)
    assert normalise((1, 5, 9), 4, 12) == (1, 5, 9)


def test_footprint_and_packing_give_valid_plans():
    """Per-class schedules packed by rotation: the plan must still pass the verifier."""
    rng = random.Random(5)
    seen = 0
    for _ in range(30):
        n = 24
        flows = [(c, rng.choice([6, 8, 12, 24]), rng.randint(0, 2), None) for c in range(3) for _ in range(2)]
        text = flowset_text(n, flows)
        problem = to_problem(parse_flowset(text), 1230, n)
        out = synthesize(problem, time_limit=10, stages=("capacity", "footprint"))
        if out.status == PLAN:
            assert out.schedule.method.startswith("per-class")
            check_plan(text, out)
            seen += 1
    assert seen >= 5
