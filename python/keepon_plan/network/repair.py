"""Large-neighbourhood repair of a no-wait placement: free a few streams around one left out, re-place them exactly.

For a stream ``u`` the greedy left out, the neighbourhood is ``u`` and up to :data:`NEIGHBOURS` placed streams that
share a link with it (those on its most loaded link first, the rest drawn with the seed). Every other stream stays
where it is. One CP-SAT model decides the neighbourhood: each free stream's departure on its talker's grid, its
domain already cut to the departures whose every hop misses every fixed frame (:mod:`.departures`), and the exact
pair condition of :mod:`.exact` between free streams. A plan for the neighbourhood is a plan with ``u`` placed;
"infeasible" only says this neighbourhood cannot take ``u`` (another might), so the repair tries :data:`ATTEMPTS`
neighbourhoods per stream within the time limit and proves nothing. Works on placements without waits (where a
frame waits, the greedy's queue rules would bind the free streams too).
"""

from __future__ import annotations

import math
import random

from ..deadline import Deadline, interrupt_at
from .departures import free_ranges
from .routing import RoutedStream
from .schedule import Placement, _State, departure_range

NEIGHBOURS = 16
ATTEMPTS = 3
SOLVE_S = 2.0


def repair(
    routed: list[RoutedStream], net, grids, placement: Placement, deadline: Deadline, seed: int, say
) -> tuple[Placement, str]:
    from ortools.sat.python import cp_model

    from .exact import _pairs, add_apart

    rng = random.Random(seed)
    by_name = {r.stream.name: r for r in routed}
    starts = dict(placement.starts_ps)
    left = [name for name, _ in placement.unplaced]
    users: dict[tuple[str, str], list[str]] = {}
    for r in routed:
        for h in r.hops:
            users.setdefault((h.src, h.dst), []).append(r.stream.name)
    horizon = math.lcm(*(r.stream.period_ns for r in routed)) * 1000
    fixed_ok = 0
    tried = 0
    for name in list(left):
        u = by_name[name]
        for _attempt in range(ATTEMPTS):
            if deadline.remaining() < SOLVE_S / 4:
                break
            tried += 1
            near: dict[str, int] = {}
            for h in u.hops:
                for other in users[(h.src, h.dst)]:
                    if other in starts:
                        near[other] = near.get(other, 0) + 1
            ranked = sorted(near, key=lambda n: (-near[n], rng.random()))
            free = [u, *(by_name[n] for n in ranked[:NEIGHBOURS])]
            names = {r.stream.name for r in free}
            state = _State(horizon, net, grids)
            for n, st in starts.items():
                if n not in names:
                    state.add(by_name[n], st)
            m = cp_model.CpModel()
            s = []
            empty = False
            for r in free:
                grid = grids.departure_ps[r.stream.talker]
                lo, hi = departure_range(r, grids)
                dom = [list(x) for x in free_ranges(state, r, lo, hi, grid)]
                if not dom:
                    empty = True
                    break
                v = m.new_int_var_from_domain(cp_model.Domain.from_intervals(dom), r.stream.name)
                if r.stream.name in starts:
                    m.add_hint(v, starts[r.stream.name][0] // grid)
                s.append(v)
            if empty:
                continue
            local = {r.stream.name: i for i, r in enumerate(free)}
            for group in _pairs(free, grids).values():
                for x in range(len(group)):
                    for y in range(x + 1, len(group)):
                        add_apart(m, s, free, grids, group[x], group[y])
            solver = cp_model.CpSolver()
            solver.parameters.max_time_in_seconds = min(SOLVE_S, max(0.05, deadline.remaining() - 0.1))
            solver.parameters.num_workers = 1
            solver.parameters.random_seed = seed
            with interrupt_at(deadline.at, solver.stop_search):
                status = solver.solve(m)
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                for r in free:
                    a = solver.value(s[local[r.stream.name]]) * grids.departure_ps[r.stream.talker]
                    starts[r.stream.name] = r.nowait_starts(a)
                left.remove(name)
                fixed_ok += 1
                break
    unplaced = [(n, why) for n, why in placement.unplaced if n in left]
    how = f"LNS repair (CP-SAT on {NEIGHBOURS + 1}-stream neighbourhoods): {fixed_ok} of {len(placement.unplaced)} "
    how += f"placed in {tried} neighbourhoods"
    say(how)
    return Placement(starts, unplaced), how
