"""Hall's condition on time arcs (keepon_plan.hall) against brute force and the exact set check."""

import math
import random
import time

import pytest
from test_shapes import fits_by_brute_force, random_class

from keepon_plan import shapes
from keepon_plan.bench import SLOT_BYTES, SLOTS
from keepon_plan.gen import generate
from keepon_plan.hall import GroupFootprint
from keepon_plan.isolation import INFEASIBLE, decide_by_shapes, synthesize
from keepon_plan.model import Problem, SlotFlow, to_problem


@pytest.mark.parametrize("seed", range(4))
def test_fits_some_agrees_with_brute_force_for_every_size(seed):
    rng = random.Random(300 + seed)
    for _ in range(6):
        problem = random_class(rng)
        n = problem.slots
        sizes = {m.bit_count() for m in range(1, 1 << n) if fits_by_brute_force(problem, m)}
        footprint = GroupFootprint(problem)
        for k in range(1, n + 1):
            found = footprint.fits_some(k)
            assert (found is not None) == (k in sizes), (problem, k)
            if found is not None:
                assert found.bit_count() == k and fits_by_brute_force(problem, found)


def random_group(rng: random.Random) -> Problem:
    """Larger one-class problems than brute force can take: rings up to 16 slots, windows up to P."""
    while True:
        n = rng.choice([4, 6, 8, 12, 16])
        periods = [rng.choice([2, 3, 4, 6, 8, 12, 16, 24]) for _ in range(rng.randint(1, 4))]
        if math.lcm(n, *periods) <= 96:
            flows = tuple(SlotFlow(f"f{i}", 0, p, rng.randint(0, min(p, 5))) for i, p in enumerate(periods))
            return Problem(n, ("c",), flows)


@pytest.mark.parametrize("seed", range(4))
def test_minimum_agrees_with_the_exact_check_over_every_set(seed):
    rng = random.Random(400 + seed)
    for _ in range(8):
        problem = random_group(rng)
        n = problem.slots
        checker = shapes.ShapeChecker(problem)
        smallest = n + 1
        for mask in range(1, 1 << n):
            if mask.bit_count() < smallest and checker.fits_on(mask) is not None:
                smallest = mask.bit_count()
        bound, mask, done = GroupFootprint(problem).minimum(1)
        assert done and bound == smallest, problem
        if mask is None:
            assert bound == n + 1
        else:
            assert mask.bit_count() == bound and checker.fits_on(mask) is not None


def test_minimum_stops_at_the_deadline_with_a_proven_bound():
    problem = to_problem(generate("nonharmonic", 70, 48), SLOT_BYTES, SLOTS)
    _, sub = shapes.units(problem)[0]
    bound, mask, done = GroupFootprint(sub).minimum(1, time.monotonic() - 1)
    assert not done and mask is None and bound == GroupFootprint(sub).capacity()


def test_hall_decides_the_set_enumeration_could_not():
    # Non-harmonic 70 % set 48: enumeration refuted sizes 7–10 for its class tc-0 in 900 s and did not finish 11.
    # Hall's condition shows tc-0 needs 12 (and fits on a set of 12), which with the other groups' 6 + 2 + 3 + 10
    # exceeds the ring by one slot.
    problem = to_problem(generate("nonharmonic", 70, 48), SLOT_BYTES, SLOTS)
    parts = shapes.units(problem)
    sizes = []
    for _, sub in parts:
        bound, mask, done = GroupFootprint(sub).minimum(1, time.monotonic() + 30)
        assert done and mask is not None and mask.bit_count() == bound
        assert shapes.ShapeChecker(sub).fits_on(mask) is not None
        sizes.append(bound)
    assert sizes == [12, 6, 2, 3, 10]
    status, slots, reason = decide_by_shapes(problem, time.monotonic() + 30)
    assert status == INFEASIBLE and slots is None
    assert "Hall's condition" in reason and "Σ = 33 > N = 32" in reason
    # And so does the whole planner, well within the benchmark's 60 s limit.
    outcome = synthesize(problem, time_limit=60)
    assert outcome.status == INFEASIBLE and outcome.stages[-1][:2] == ("shapes", "infeasible")


def test_minimum_declines_a_group_too_large_to_count_arcs():
    # Horizon 64·61·59 = 230 336 slots: even arcs up to one ring cycle need more than MAX_CELLS counts.
    long_horizon = Problem(64, ("c",), (SlotFlow("a", 0, 61, 3), SlotFlow("b", 0, 59, 0)))
    # A ring beyond MAX_SLOTS.
    big_ring = Problem(1024, ("c",), (SlotFlow("a", 0, 4, 1),))
    for sub in (long_horizon, big_ring):
        bound, mask, done = GroupFootprint(sub).minimum(1)
        assert not done and mask is None and bound == GroupFootprint(sub).capacity()


@pytest.mark.parametrize("seed", range(2))
def test_serving_sets_all_fit(seed):
    rng = random.Random(500 + seed)
    for _ in range(6):
        problem = random_group(rng)
        checker = shapes.ShapeChecker(problem)
        footprint = GroupFootprint(problem)
        k, _, done = footprint.minimum(1)
        assert done
        found = list(footprint.serving_sets(k)) if k <= problem.slots else []
        assert bool(found) == (k <= problem.slots)
        for mask in found:
            assert mask.bit_count() == k and checker.fits_on(mask) is not None
