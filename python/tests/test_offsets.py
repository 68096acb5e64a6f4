import math
import random

import pytest
from helpers import brute_force
from ortools.sat.python import cp_model

from keepon_plan.bench import to_problem
from keepon_plan.emit import runtime_config
from keepon_plan.gen import BATCH, SLOT_BYTES, SLOTS, generate
from keepon_plan.isolation import INFEASIBLE, PLAN, _run, _zero_jitter_model, synthesize
from keepon_plan.model import Problem, SlotFlow
from keepon_plan.offsets import EXHAUSTED, LIMIT, search_offsets
from keepon_plan.params import RingChoice, default_lead
from keepon_plan.units import slot_period
from keepon_plan.verify import verify_plan_text


def random_problem(rng: random.Random, freedom: bool = True) -> Problem:
    """A small problem (horizon ≤ 48), free or fixed phase; ``freedom=False``: jitter 0 and one-slot windows."""
    while True:
        n = rng.choice([4, 6, 8, 12])
        periods = [rng.choice([3, 4, 6, 8, 8, 12, 12, 24]) for _ in range(rng.randint(2, 5))]
        if math.lcm(n, *periods) <= 48:
            break
    classes = rng.randint(1, 3)
    fixed = rng.random() < 0.5
    flows = []
    for i, p in enumerate(periods):
        window = None
        if fixed and rng.random() < 0.8:
            lo = rng.randrange(p)
            window = (lo, lo + (rng.choice([0, 0, 1, 2]) if freedom else 0))
        jitter = rng.randint(0, 1) if freedom else 0
        flows.append(SlotFlow(f"f{i}", rng.randrange(classes), p, jitter, window))
    return Problem(n, tuple(f"c{c}" for c in range(classes)), tuple(flows))


def check_offsets(problem: Problem, offsets: dict[int, int]) -> None:
    """Independent check of a zero-jitter plan: offsets in range, distinct occurrences, one class per ring slot."""
    n, horizon = problem.slots, problem.horizon
    assert sorted(offsets) == list(range(len(problem.flows)))
    seen: set[int] = set()
    owner: dict[int, int] = {}
    for i, f in enumerate(problem.flows):
        o = offsets[i]
        if f.window is None:
            assert 0 <= o < f.period
        else:
            assert f.window[0] <= o <= f.window[1]
        for l in range(problem.instances(f)):
            s = o + l * f.period
            assert s % horizon not in seen, (i, l, s)
            seen.add(s % horizon)
            assert owner.setdefault(s % n, f.cls) == f.cls, (i, l, s)


def cp_sat_feasible(problem: Problem) -> bool:
    model, _, _ = _zero_jitter_model(problem)
    status, _ = _run(model, 20, 0, 1, None)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE)
    return status != cp_model.INFEASIBLE


def test_agrees_with_the_cp_sat_zero_jitter_model():
    rng = random.Random(1)
    seen = {(PLAN, False): 0, (PLAN, True): 0, (EXHAUSTED, False): 0, (EXHAUSTED, True): 0}
    for _ in range(60):
        problem = random_problem(rng)
        result, offsets = search_offsets(problem)
        assert result != LIMIT, problem
        assert (result == PLAN) == cp_sat_feasible(problem), problem
        if result == PLAN:
            check_offsets(problem, offsets)
        else:
            assert offsets is None
        seen[result, problem.fixed_phase] += 1
    assert min(seen.values()) >= 5, seen


def test_agrees_with_brute_force_without_freedom():
    rng = random.Random(2)
    outcomes = set()
    for _ in range(30):
        problem = random_problem(rng, freedom=False)
        result, offsets = search_offsets(problem)
        assert result != LIMIT
        assert (result == PLAN) == brute_force(problem), problem
        if result == PLAN:
            check_offsets(problem, offsets)
        outcomes.add(result)
    assert outcomes == {PLAN, EXHAUSTED}


def test_anchor_empty_window_limit_and_determinism():
    free = Problem(8, ("a", "b"), (SlotFlow("x", 0, 4, 0), SlotFlow("y", 1, 8, 0), SlotFlow("z", 1, 8, 0)))
    result, offsets = search_offsets(free)
    assert result == PLAN and offsets[1] == 0  # longest period, lowest index: anchored at 0
    check_offsets(free, offsets)
    assert search_offsets(free) == (result, offsets)
    assert search_offsets(free, node_limit=1) == (LIMIT, None)
    empty = Problem(4, ("a",), (SlotFlow("x", 0, 4, 0, (2, 1)),))
    assert search_offsets(empty) == (EXHAUSTED, None)


def test_synthesize_decides_with_the_offset_search():
    # Same class, periods 2 and 3, no freedom: offsets always collide (a proof by the search alone).
    p = Problem(6, ("a",), (SlotFlow("x", 0, 2, 0), SlotFlow("y", 0, 3, 0)))
    out = synthesize(p, time_limit=10)
    assert out.status == INFEASIBLE and out.stages[-1][0] == "offset-search" and "proved" in out.reason
    # With jitter freedom an exhausted search only skips the CP-SAT zero-jitter stage.
    q = Problem(6, ("a",), (SlotFlow("x", 0, 2, 1), SlotFlow("y", 0, 3, 1)))
    out = synthesize(q, time_limit=10)
    names = [s for s, _, _ in out.stages]
    assert "offset-search" in names and "zero-jitter" not in names
    assert out.status == (PLAN if brute_force(q) else INFEASIBLE)


@pytest.mark.parametrize("index", range(4))
def test_fixed_phase_half_load_is_decided_by_the_offset_search(index):
    fs = generate("fixed-phase", 50, index)
    problem = to_problem(fs, SLOT_BYTES, SLOTS)
    out = synthesize(problem, time_limit=10)
    assert out.status == PLAN and out.stages[-1][0] == "offset-search"
    assert out.schedule.method == "offset search (zero-jitter)"
    delta = slot_period(SLOT_BYTES, fs.rate)
    choice = RingChoice(SLOT_BYTES, SLOTS, BATCH, default_lead(fs, delta, BATCH))
    assert verify_plan_text(fs, runtime_config(fs, choice, problem, out.schedule)) == []
