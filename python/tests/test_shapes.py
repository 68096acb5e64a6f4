import itertools
import math
import random
import time

import pytest
from helpers import brute_force, candidate_tuples
from test_isolation import check_plan, flowset_text

from keepon_plan import shapes
from keepon_plan.bench import SLOT_BYTES, SLOTS
from keepon_plan.gen import generate
from keepon_plan.hall import GroupFootprint
from keepon_plan.isolation import (
    INFEASIBLE,
    PLAN,
    UNKNOWN,
    _cut_search,
    class_slots_needed,
    decide_by_shapes,
    synthesize,
)
from keepon_plan.model import Problem, SlotFlow, parse_flowset, to_problem


def fits_by_brute_force(problem: Problem, mask: int) -> bool:
    """Whether the one-class problem has a schedule using only the ring slots of ``mask``."""
    n, horizon = problem.slots, problem.horizon
    options = [
        [ss for ss in candidate_tuples(problem, f) if all(mask >> (s % n) & 1 for s in ss)] for f in problem.flows
    ]

    def search(i: int, used: set[int]) -> bool:
        if i == len(options):
            return True
        for ss in options[i]:
            occ = {s % horizon for s in ss}
            if len(occ) == len(ss) and not occ & used and search(i + 1, used | occ):
                return True
        return False

    return search(0, set())


def random_class(rng: random.Random) -> Problem:
    while True:
        n = rng.choice([4, 6, 8])
        periods = [rng.choice([2, 3, 4, 6, 8]) for _ in range(rng.randint(1, 3))]
        if math.lcm(n, *periods) > 12:
            continue
        flows = tuple(SlotFlow(f"f{i}", 0, p, rng.choice([0, 1, 1, 2]) if p > 2 else 0) for i, p in enumerate(periods))
        return Problem(n, ("c",), flows)


def assert_schedule_on(problem: Problem, mask: int, slots) -> None:
    n, horizon = problem.slots, problem.horizon
    occ = [s % horizon for ss in slots for s in ss]
    assert len(set(occ)) == len(occ), "two instances in one slot occurrence"
    for f, ss in zip(problem.flows, slots, strict=True):
        assert len(ss) == problem.instances(f)
        assert all(mask >> (s % n) & 1 for s in ss), "an instance outside the set"
        base = min(s - l * f.period for l, s in enumerate(ss))
        assert max(s - l * f.period for l, s in enumerate(ss)) - base <= f.jitter, "jitter window exceeded"


@pytest.mark.parametrize("seed", range(4))
def test_fits_on_agrees_with_brute_force_for_every_set(seed):
    rng = random.Random(seed)
    for _ in range(6):
        problem = random_class(rng)
        checker = shapes.ShapeChecker(problem)
        for mask in range(1, 1 << problem.slots):
            truth = fits_by_brute_force(problem, mask)
            got = checker.fits_on(mask)
            assert (got is not None) == truth, (problem, bin(mask))
            if got is not None:
                assert_schedule_on(problem, mask, got)


@pytest.mark.parametrize("seed", range(4))
def test_minimum_shapes_is_the_smallest_fitting_set(seed):
    rng = random.Random(100 + seed)
    for _ in range(6):
        problem = random_class(rng)
        n = problem.slots
        fitting = [m for m in range(1, 1 << n) if fits_by_brute_force(problem, m)]
        smallest = min((m.bit_count() for m in fitting), default=n + 1)
        bound, found, done = shapes.minimum_shapes(problem, 1, float("inf"))
        assert done and bound == smallest
        # Every smallest fitting set is a rotation or reflection of exactly one returned shape.
        orbits = {shapes.canonical(m, n) for m in fitting if m.bit_count() == smallest}
        assert sorted(found) == sorted(orbits)


def test_canonical_is_invariant_under_rotation_and_reflection():
    n = 12
    for mask in (0b1, 0b1011, 0b100100100101, 0b11100000001):
        c = shapes.canonical(mask, n)
        assert all(shapes.canonical(o, n) == c for o in shapes.orientations(mask, n))
        assert c in shapes.orientations(mask, n) and c & 1


def test_units_split_off_full_flows():
    flows = (SlotFlow("a", 0, 4, 0), SlotFlow("b", 0, 6, 1), SlotFlow("c", 1, 8, 0), SlotFlow("d", 0, 8, 0))
    parts = shapes.units(Problem(8, ("x", "y"), flows))
    assert [idx for idx, _ in parts] == [[0], [3], [1], [2]]


def test_pack_is_complete_on_small_cases():
    n = 6
    # Three groups of two slots each must tile the ring: possible.
    status, masks = shapes.pack([[0b000011], [0b001100, 0b000110], [0b110000]], n, float("inf"))
    assert status == "plan" and masks is not None
    assert masks[0] | masks[1] | masks[2] == 0b111111 and masks[0] & masks[1] == 0
    # Each option of the second group overlaps the first or the third: impossible.
    status, masks = shapes.pack([[0b000011], [0b000110, 0b011000], [0b110000]], n, float("inf"))
    assert status == "infeasible" and masks is None


def random_free(rng: random.Random):
    while True:
        n = rng.choice([2, 3, 4, 6])
        periods = [rng.choice([2, 3, 4, 6]) for _ in range(rng.randint(2, 4))]
        if math.lcm(n, *periods) > 12:
            continue
        return n, [(rng.randint(0, 1), p, rng.choice([0, 0, 1]) if p > 2 else 0, None) for p in periods]


@pytest.mark.parametrize("seed", range(5))
def test_decide_by_shapes_agrees_with_brute_force(seed):
    rng = random.Random(200 + seed)
    for _ in range(10):
        n, flows = random_free(rng)
        text = flowset_text(n, flows)
        problem = to_problem(parse_flowset(text), 1230, n)
        status, _slots, reason = decide_by_shapes(problem, float("inf"))
        assert status == (PLAN if brute_force(problem) else INFEASIBLE), (flows, n, reason)
        if status == PLAN:
            outcome = synthesize(problem, time_limit=20, stages=("shapes",))
            assert outcome.status == PLAN and outcome.schedule is not None
            check_plan(text, outcome)


def test_shapes_stage_proves_a_generated_70_percent_set_infeasible():
    # Non-harmonic 70 % set 15: the per-class CP-SAT footprints only reach Σ = 32 = N; the shapes stage shows
    # that one flow group alone needs 7 ring slots besides its full flow's 4 (enumeration agrees, in 25 s). Two of
    # that group's flows alone already need 6, which with the other groups' capacity bounds is a proof.
    problem = to_problem(generate("nonharmonic", 70, 15), SLOT_BYTES, SLOTS)
    lines: list[str] = []
    status, slots, reason = decide_by_shapes(problem, float("inf"), progress=lines.append)
    assert status == INFEASIBLE and slots is None
    assert "tc-6: f0+f2+f10 ≥ 6 (its flows f0+f2 alone)" in reason and "Σ = 33 > N = 32" in reason
    assert lines and lines[-1].endswith("Σ ≥ 33 of 32"), lines  # progress names each group's bound as it rises
    # The whole group's own search agrees, and goes further.
    group = next(
        sub for idx, sub in shapes.units(problem) if [problem.flows[i].name for i in idx] == ["f0", "f2", "f10"]
    )
    assert GroupFootprint(group).minimum(6)[0] == 7


def test_shapes_stage_gives_up_cleanly_on_a_tiny_deadline():
    problem = to_problem(generate("nonharmonic", 70, 25), SLOT_BYTES, SLOTS)
    status, slots, reason = decide_by_shapes(problem, 0.0)
    assert status == UNKNOWN and slots is None and "time limit" in reason


@pytest.mark.parametrize("seed", range(4))
def test_cut_search_is_exact_and_greedy_packing_sound(seed):
    rng = random.Random(300 + seed)
    for _ in range(10):
        n, flows = random_free(rng)
        problem = to_problem(parse_flowset(flowset_text(n, flows)), 1230, n)
        parts = shapes.units(problem)
        checkers = [shapes.ShapeChecker(sub) for _, sub in parts]
        minimum = [class_slots_needed(sub)[0] for _, sub in parts]
        status, masks, _cuts = _cut_search(parts, checkers, minimum, n, float("inf"), seed)
        assert status == (PLAN if brute_force(problem) else INFEASIBLE), (flows, n)
        greedy = shapes.greedy_pack(checkers, n, time.monotonic() + 0.2, seed)
        for found in (masks, greedy):
            if found is None:
                continue
            assert all(not a & b for a, b in itertools.combinations(found, 2)), "sets overlap"
            assert all(c.fits_on(m) is not None for c, m in zip(checkers, found, strict=True))
