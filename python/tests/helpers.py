"""Test helpers: a brute-force decider for tiny problems and plan emission."""

from __future__ import annotations

import itertools

from keepon_plan.emit import runtime_config
from keepon_plan.model import FlowSet, Problem, SlotFlow, to_problem
from keepon_plan.params import choose
from keepon_plan.units import slot_period


def candidate_tuples(problem: Problem, f: SlotFlow):
    """Every assignment of slots to the instances of ``f`` that meets its jitter/phase rule."""
    m, p = problem.instances(f), f.period
    if f.window is None:
        for o in range(p):
            for es in itertools.product(range(f.jitter + 1), repeat=m):
                yield tuple(o + l * p + e for l, e in enumerate(es))
    else:
        lo, hi = f.window
        for es in itertools.product(range(hi - lo + 1), repeat=m):
            yield tuple(lo + l * p + e for l, e in enumerate(es))


def brute_force(problem: Problem) -> bool:
    """Whether a valid partition and schedule exist, by depth-first search over whole-flow assignments."""
    n, horizon = problem.slots, problem.horizon
    options = [list(candidate_tuples(problem, f)) for f in problem.flows]

    def search(i: int, occupied: set[int], owner: dict[int, int]) -> bool:
        if i == len(problem.flows):
            return True
        c = problem.flows[i].cls
        for slots in options[i]:
            occ = [s % horizon for s in slots]
            if len(set(occ)) != len(occ) or any(u in occupied for u in occ):
                continue
            rings = {s % n for s in slots}
            if any(owner.get(r, c) != c for r in rings):
                continue
            new_owner = dict(owner)
            new_owner.update((r, c) for r in rings)
            if search(i + 1, occupied | set(occ), new_owner):
                return True
        return False

    return search(0, set(), {})


def emit_plan(fs: FlowSet, schedule) -> str:
    choice = choose(fs)
    problem = to_problem(fs, choice.slot_bytes, choice.slots)
    return runtime_config(fs, choice, problem, schedule)


def delta_of(fs: FlowSet):
    return slot_period(choose(fs).slot_bytes, fs.rate)
