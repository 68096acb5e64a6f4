"""CP-SAT around a stream left out: the streams near its windows are freed and placed again exactly, every other
stream fixed where it is, waits included.

The greedy and the ejection repair (:mod:`.eject`) place one stream at a time; what is left out at the end is a
stream whose links have free time, but not at the same moment on all of them (on a line loaded to 85 % every link
of a long route is): making room means moving several streams on several links at once, by a little each. One
neighbourhood, for a stream ``u`` left out: one of ``u``'s least covered departures
(:func:`~.departures.least_covered`, drawn), and the placed streams whose windows lie within :data:`REACH` of
``u``'s frames of ``u``'s windows from it, on any of its links in any instance (the ones in the way first, then the
nearer); on every other attempt also those near the windows of the ones in the way, on their own links (to move,
they need room too); at most :data:`NEIGHBOURS`. They and ``u`` are **free**; every other stream stays where it
is, with its waits. One CP-SAT model decides the free streams' departures **without a wait**:

- each free stream's domain: the departures on its talker's grid whose every hop misses every fixed window
  (:func:`~.departures.free_ranges`), and misses too, on a switch's egress, the wait of every fixed frame that waits
  there (from its ready time, or a minimum frame before its start if that is earlier, to its start): a frame that
  does not wait and starts while another waits would overtake it (the queue rule 1 of :mod:`.queues`), and one
  that ends just before a waiting frame starts would leave the gate idle and open before it (rule 2);
- between two free streams on a link, the exact pair condition of :mod:`.exact` (once per pair and relative
  position: two frames of one length keep their distance along the links they share, one condition for all).

On every other attempt, when that model has no solution, a second one may leave one of the other free streams out
instead of ``u`` (a **sideways** move, as the ejection repair's: the count stays, the search moves on; a stream just
put in is not left out again for :data:`TABU` neighbourhoods). A solution is placed into the greedy's state stream
by stream, each checked by the greedy's own no-wait check (links and class queues, :func:`~.schedule._nowait`); the
neighbourhood is kept only when every stream it places passes (else the state is as before). So what it ends with
is a placement the greedy could have built, checked by the independent verifier like any other. "Infeasible" says
only that this neighbourhood cannot take ``u``: it proves nothing, and the repair goes on with another neighbourhood
(another departure drawn) within its time.
"""

from __future__ import annotations

import random
import time

import numpy as np

from ..deadline import interrupt_at
from .departures import free_ranges, least_covered
from .routing import RoutedStream
from .schedule import Placement, _nowait, _State, departure_range

NEIGHBOURS = 60
"""Most placed streams freed with ``u``."""
REACH = 6
TABU = 8
"""Neighbourhoods for which a stream just put in is not left out by a sideways move."""
"""How far from ``u``'s windows (in ``u``'s frames) the streams freed with it lie, at most."""
ATTEMPTS = 50
"""Most passes over the streams left out (one neighbourhood per stream and pass)."""
SOLVE_S = 1.0
"""Most seconds one neighbourhood's model may take."""


class _Busy:
    """What :func:`~.departures.free_ranges` reads of a link's occupancy: intervals sorted by start, may overlap."""

    def __init__(self, b0: np.ndarray, b1: np.ndarray) -> None:
        order = np.argsort(b0, kind="stable")
        self._arrays = (b0[order], b1[order])
        self.starts = list(self._arrays[0])

    def arrays(self):
        return self._arrays


class _Fixed:
    """The fixed streams as :func:`~.departures.free_ranges` sees them: their windows, and the waits of their frames
    on a switch's egress (see the module's notes), as busy time."""

    def __init__(self, state: _State, waits: dict[tuple[str, str], list[tuple[int, int]]]) -> None:
        self.net, self.grids, self.horizon, self.window = state.net, state.grids, state.horizon, state.window
        self.busy: dict = {}
        for link, occ in state.busy.items():
            b0, b1 = occ.arrays()
            extra = waits.get(link)
            if extra:
                b0 = np.concatenate((b0, np.array([x for x, _ in extra], dtype=np.int64)))
                b1 = np.concatenate((b1, np.array([y for _, y in extra], dtype=np.int64)))
            if len(b0):
                self.busy[link] = _Busy(b0, b1)


def _waits(state: _State, r: RoutedStream, starts: tuple[int, ...]) -> list[tuple[tuple[str, str], int, int]]:
    """(link, lo, hi) over the hyperperiod: the time a frame that does not wait must not start in (or, for the gap,
    end in) on each switch's egress where a frame of ``r`` waits."""
    out = []
    period = r.stream.period_ns * 1000
    for k, h in enumerate(r.hops):
        if not k or not state.queueing or h.src not in state.net.switches:
            continue
        p = r.parents[k]
        ready = starts[p] + h.offset_ps - r.hops[p].offset_ps
        t = starts[k]
        if t <= ready:
            continue
        lo = min(ready, t - state.gap_ps(h) - 1000)
        for base in range(0, state.horizon, period):
            for a, b in _pieces(lo + base, t + base, state.horizon):
                out.append(((h.src, h.dst), a, b))
    return out


def _pieces(a: int, b: int, horizon: int) -> list[tuple[int, int]]:
    a, b = a % horizon, a % horizon + (b - a)
    return [(a, b)] if b <= horizon else [(a, horizon), (0, b - horizon)]


def _near(state: _State, r: RoutedStream, starts: tuple[int, ...], reach: int, near: dict[str, int], extra: int):
    """Into ``near``: every stream whose windows lie within ``d ≤ reach`` of ``r``'s frames of ``r``'s windows at
    hop starts ``starts``, on any of its links in any instance, with ``d + extra`` (the least kept)."""
    period = r.stream.period_ns * 1000
    for k, h in enumerate(r.hops):
        occ = state.busy.get((h.src, h.dst))
        if occ is None or not occ.starts:
            continue
        start, n = state.window(r, k, starts[k])
        for base in range(0, state.horizon, period):
            for d in range(reach + 1):
                for other in occ.owners(start + base - d * h.tx_ps, n + 2 * d * h.tx_ps):
                    near[other] = min(near.get(other, d + extra), d + extra)


def _neighbourhood(state: _State, u: RoutedStream, starts, by_name, rng, attempt: int) -> list[str]:
    """Up to :data:`NEIGHBOURS` placed streams around ``u``, the nearer first: from one of ``u``'s least covered
    departures (:func:`~.departures.least_covered`, drawn), without a wait, the streams whose windows lie within
    :data:`REACH` of ``u``'s frames of ``u``'s windows (on its links, in any instance: distance 0 for those in the
    way); on odd attempts also those within :data:`REACH` of the windows of the ones in the way, on their own links
    (distance one more): to make room for ``u`` these must move, and to move, so may those around them (measured:
    either kind alone left more streams out on the sweep's lines and rings at 85 %)."""
    lo, hi = departure_range(u, state.grids)
    a = least_covered(state, u, lo, hi, state.grids.departure_ps[u.stream.talker], rng)
    if a is None:
        return []
    near: dict[str, int] = {}
    _near(state, u, u.nowait_starts(a), REACH, near, 0)
    near.pop(u.stream.name, None)
    for other in [n for n, d in near.items() if d == 0 and attempt % 2]:
        _near(state, by_name[other], starts[other], REACH, near, 1)
    near.pop(u.stream.name, None)
    return sorted(near, key=lambda x: (near[x], rng.random()))[:NEIGHBOURS]


def _solve(free: list[RoutedStream], view: _Fixed, grids, starts, seed: int, until: float, spare=()):
    """Departures (ps) of the free streams, or None. With ``spare`` (names), one of those free streams may be left
    out instead (its departure None): the model keeps the pair conditions of two streams only when both are in."""
    from ortools.sat.python import cp_model

    from .exact import _pairs, add_apart

    m = cp_model.CpModel()
    s, keep = [], []
    for r in free:
        grid = grids.departure_ps[r.stream.talker]
        lo, hi = departure_range(r, grids)
        dom = [list(x) for x in free_ranges(view, r, lo, hi, grid)] if lo <= hi else []
        if not dom and r.stream.name not in spare:
            return None
        v = m.new_int_var_from_domain(cp_model.Domain.from_intervals(dom or [[0, 0]]), r.stream.name)
        if r.stream.name in starts and dom:
            m.add_hint(v, starts[r.stream.name][0] // grid)
        s.append(v)
        keep.append(m.new_bool_var("") if r.stream.name in spare else True)
        if not dom:
            m.add(keep[-1] == 0)
    optional = [b for b in keep if b is not True]
    if optional:
        m.add(sum(optional) >= len(optional) - 1)
    seen = set()
    for group in _pairs(free, grids).values():
        for x in range(len(group)):
            for y in range(x + 1, len(group)):
                (i, di, wi), (j, dj, wj) = group[x], group[y]
                if (i, j, dj - di, wi, wj) in seen:
                    continue  # the same condition on another link the two share (equal frames keep their distance)
                seen.add((i, j, dj - di, wi, wj))
                both = [b for b in (keep[i], keep[j]) if b is not True]
                add_apart(m, s, free, grids, group[x], group[y], both)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, min(SOLVE_S, until - time.monotonic()))
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    with interrupt_at(until, solver.stop_search):
        status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return [
        solver.value(v) * grids.departure_ps[r.stream.talker] if b is True or solver.value(b) else None
        for r, v, b in zip(free, s, keep, strict=True)
    ]


def neighbourhood_repair(
    state: _State, routed: list[RoutedStream], placement: Placement, until: float, seed: int = 0
) -> tuple[Placement, str]:
    """Neighbourhoods on ``state`` (which holds ``placement``) until every stream is in or ``time.monotonic()``
    passes ``until``; returns the placement (``state`` holds it) and what it did."""
    rng = random.Random(seed)
    by_name = {r.stream.name: r for r in routed}
    starts = dict(placement.starts_ps)
    why = dict(placement.unplaced)
    left = list(why)
    waiting = {n: w for n, st in starts.items() if (w := _waits(state, by_name[n], st))}
    tried = solved = sideways = 0
    tabu: dict[str, int] = {}
    for attempt in range(ATTEMPTS):
        for name in list(left):
            if time.monotonic() >= until - 0.05:
                break
            tried += 1
            u = by_name[name]
            free = [u, *(by_name[n] for n in _neighbourhood(state, u, starts, by_name, rng, attempt))]
            for r in free[1:]:
                state.remove(r, starts[r.stream.name])
            waits: dict[tuple[str, str], list[tuple[int, int]]] = {}
            names = {r.stream.name for r in free}
            for n, w in waiting.items():
                if n not in names:
                    for link, a, b in w:
                        waits.setdefault(link, []).append((a, b))
            view = _Fixed(state, waits)
            deps = _solve(free, view, state.grids, starts, seed + tried, until)
            if deps is None and attempt % 2:  # a sideways move: one of the others may be left out instead
                spare = {r.stream.name for r in free[1:] if tabu.get(r.stream.name, 0) <= tried}
                deps = _solve(free, view, state.grids, starts, seed + tried, until, spare)
            kept = [(r, a) for r, a in zip(free, deps or [], strict=False) if a is not None]
            added: list[RoutedStream] = []
            for r, a in kept:
                if _nowait(state, r, a, r.stream.period_ns * 1000)[0]:
                    break
                state.add(r, r.nowait_starts(a))
                added.append(r)
            if deps is None or len(added) < len(kept):
                for r in added:
                    state.remove(r, r.nowait_starts(deps[free.index(r)]))
                for r in free[1:]:
                    state.add(r, starts[r.stream.name])
                continue
            for r, a in zip(free, deps, strict=True):
                waiting.pop(r.stream.name, None)
                if a is None:
                    del starts[r.stream.name]
                    left.append(r.stream.name)
                    why[r.stream.name] = f"taken out by the neighbourhood repair to put {name!r} in"
                    sideways += 1
                else:
                    starts[r.stream.name] = r.nowait_starts(a)
            left.remove(name)
            del why[name]
            tabu[name] = tried + TABU
            solved += 1
    how = (
        f"neighbourhood repair (CP-SAT on up to {NEIGHBOURS} streams near one left out, the rest fixed): "
        f"{len(placement.unplaced) - len(left)} of {len(placement.unplaced)} placed in {tried} neighbourhoods "
        f"({solved} kept, {sideways} sideways)"
    )
    return Placement(starts, [(n, why[n]) for n in left]), how
