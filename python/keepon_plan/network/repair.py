"""Large-neighbourhood repair of a no-wait placement: free a few streams around one left out, re-place them exactly.

For a stream ``u`` the greedy left out, the neighbourhood is ``u`` and up to :data:`NEIGHBOURS` placed streams that
share a link with it (those on its most loaded link first, the rest drawn with the seed). Every other stream stays
where it is. One CP-SAT model decides the neighbourhood: each free stream's departure on its talker's grid, its
domain already cut to the departures whose every hop misses every fixed frame (the fixed frames' windows taken
modulo the stream's period: for a window of length ``w`` at offset ``d`` and a fixed frame ``[b0, b1)``, the
departures in ``(b0 − w − d, b1 − d)`` are out), and the exact pair condition of :mod:`.exact` between free
streams. A plan for the neighbourhood is a plan with ``u`` placed; "infeasible" only says this neighbourhood cannot
take ``u`` (another might), so the repair tries :data:`ATTEMPTS` neighbourhoods per stream within the time limit and
proves nothing. Works on placements without waits (where a frame waits, the greedy's queue rules would bind the
free streams too).
"""

from __future__ import annotations

import math
import random

from ..deadline import Deadline, interrupt_at
from .routing import RoutedStream
from .schedule import Placement, _State, departure_range

NEIGHBOURS = 16
ATTEMPTS = 3
SOLVE_S = 2.0


def _allowed(state: _State, r: RoutedStream, lo: int, hi: int, grid: int) -> list[list[int]]:
    """Departure indices ``s`` (``a = s·grid``) in ``[lo, hi]`` whose every hop misses every fixed frame."""
    period = r.stream.period_ns * 1000
    bad: list[tuple[int, int]] = []  # forbidden open intervals of a mod period
    for k, _h in enumerate(r.hops):
        off, w = state.window(r, k, r.hops[k].offset_ps)
        occ = state.busy.get((r.hops[k].src, r.hops[k].dst))
        if occ is None:
            continue
        if k and r.hops[k].src in state.net.switches:
            g = state.grids.gate_ps[r.hops[k].src]
            if grid % g or off % g or w % g:  # the window rounds out to the gate grid wherever it lands
                off, w = off - (g - 1), w + 2 * (g - 1)
        for b0, b1 in zip(occ.starts, occ.ends, strict=True):
            x0 = (b0 - w - off) % period
            bad.append((x0, x0 + (b1 - b0) + w))
    bad.sort()
    allowed: list[list[int]] = []
    s_lo, s_hi = -(-lo // grid), hi // grid
    # walk the forbidden arcs over [lo, hi], unrolled across periods
    cuts = []
    for x0, x1 in bad:
        for shift in range((lo - x1) // period, (hi - x0) // period + 2):
            a0, a1 = x0 + shift * period, x1 + shift * period
            if a1 > lo and a0 < hi:
                cuts.append((a0, a1))
    cuts.sort()
    s = s_lo
    for a0, a1 in cuts:
        first_bad = a0 // grid + 1  # a forbidden iff a0 < a < a1
        last_bad = -(-a1 // grid) - 1
        if first_bad > last_bad:
            continue
        if s < first_bad:
            allowed.append([s, min(first_bad - 1, s_hi)])
        s = max(s, last_bad + 1)
        if s > s_hi:
            break
    if s <= s_hi:
        allowed.append([s, s_hi])
    return [x for x in allowed if x[0] <= x[1]]


def repair(
    routed: list[RoutedStream], net, grids, placement: Placement, deadline: Deadline, seed: int, say
) -> tuple[Placement, str]:
    from ortools.sat.python import cp_model

    from .exact import _pairs

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
                dom = _allowed(state, r, lo, hi, grid)
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
                        (i, di, wi), (j, dj, wj) = group[x], group[y]
                        ri, rj = free[i], free[j]
                        pi, pj = ri.stream.period_ns * 1000, rj.stream.period_ns * 1000
                        g = math.gcd(pi, pj)
                        gi, gj = grids.departure_ps[ri.stream.talker], grids.departure_ps[rj.stream.talker]
                        k = m.new_int_var((-(pi + di) + dj - (g - wj)) // g - 1, (pj + dj - di - wi) // g + 1, "")
                        diff = gj * s[j] + dj - gi * s[i] - di
                        m.add(diff - g * k >= wi)
                        m.add(diff - g * k <= g - wj)
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
