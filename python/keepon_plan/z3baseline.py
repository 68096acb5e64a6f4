"""The paper's approach (A.8) as a baseline: one SMT model in Z3, constraints (1)–(3) written pairwise.

Written from the paper's description, not from its code: an integer transmission slot ``t_{f,l}`` per instance,
a Boolean per (class, ring slot) for the partition, and

- (1) ``t mod N = r → own[c][r]`` for every ring slot ``r``;
- (2) ``||t_a − t_b| − |a − b|·P| ≤ J`` for every pair of instances of a flow (O(M²) per flow);
- (3) ``Distinct`` over the instances of each class (the paper: within an application);
- disjoint partitions: at most one class per ring slot.

Two changes keep it comparable with keepon-plan: instances live in one horizon ``T = lcm(H, N)`` (``0 ≤ t < T``,
the paper used ``H``, which is only right when ``N | H``) so distinct values are distinct slot occurrences, and
fixed phases bound each instance to its window. Like the paper's, this model does not constrain jitter across
the horizon's wrap-around. ``z3-solver`` is an optional dependency (extra ``bench``).
"""

from __future__ import annotations

import time

from .isolation import INFEASIBLE, PLAN, UNKNOWN
from .model import Problem


def available() -> bool:
    try:
        import z3  # noqa: F401
    except ImportError:
        return False
    return True


def solve_z3(problem: Problem, timeout_s: float, seed: int = 0) -> tuple[str, float]:
    """(status, seconds): ``plan`` (sat), ``infeasible`` (unsat) or ``unknown`` (timeout)."""
    import z3

    start = time.monotonic()
    n, horizon = problem.slots, problem.horizon
    solver = z3.Solver()
    solver.set("timeout", max(1, int(timeout_s * 1000)))
    solver.set("random_seed", seed)
    own = [[z3.Bool(f"own_{c}_{r}") for r in range(n)] for c in range(len(problem.classes))]
    for r in range(n):
        column = [own[c][r] for c in range(len(problem.classes))]
        if len(column) > 1:
            solver.add(z3.AtMost(*column, 1))
    by_class: dict[int, list] = {}
    for i, f in enumerate(problem.flows):
        ts = []
        for l in range(problem.instances(f)):
            t = z3.Int(f"t_{i}_{l}")
            if f.window is None:
                solver.add(t >= 0, t < horizon)
                occurrence = t
            else:
                lo, hi = l * f.period + f.window[0], l * f.period + f.window[1]
                solver.add(t >= lo, t <= hi)
                occurrence = z3.If(t >= horizon, t - horizon, t) if hi >= horizon else t
            ring_slot = t % n
            for r in range(n):
                solver.add(z3.Implies(ring_slot == r, own[f.cls][r]))
            ts.append(t)
            by_class.setdefault(f.cls, []).append(occurrence)
        for a in range(len(ts)):
            for b in range(a + 1, len(ts)):
                diff = ts[a] - ts[b]
                gap = z3.If(diff >= 0, diff, -diff) - (b - a) * f.period
                solver.add(z3.If(gap >= 0, gap, -gap) <= f.jitter)
    for occurrences in by_class.values():
        if len(occurrences) > 1:
            solver.add(z3.Distinct(*occurrences))
    result = solver.check()
    seconds = time.monotonic() - start
    if result == z3.sat:
        return PLAN, seconds
    if result == z3.unsat:
        return INFEASIBLE, seconds
    return UNKNOWN, seconds
