"""Ejection repair: a stream the greedy left out goes in, the few placed streams in its way go out and in again.

One move, for a stream ``u`` left out: the departure of ``u`` whose windows (no wait) meet the fewest placed windows
(:func:`~.departures.least_covered`, one of the least drawn at random) names the streams in the way; they are taken
out (their windows and their frames in the class queues), ``u`` is placed by the greedy's own first fit
(:func:`~.schedule.place_one`: no wait first, then with waits where the network allows them), and each of them is
placed again by the same first fit, in the greedy's order. The move is kept when at most one of them no longer fits
(then that one is left out instead of ``u``: a sideways move, which moves the search on), else it is undone exactly.
A stream just put in is tabu for a while (no move takes it out again), so two streams do not swap back and forth.

Every state the search passes through is one the greedy could have built (every frame placed by the same first fit
with the same rules: links, queues, gates), so a placement it ends with is checked like any other by the
independent verifier. It plans only: a stream it cannot put in proves nothing. It stops when every stream is in,
at the time it is given, or after :data:`MOVES_PER_STREAM` moves per stream left out.
"""

from __future__ import annotations

import random
import time

from .routing import RoutedStream
from .schedule import Placement, _State, departure_range, place_one

MAX_EJECT = 8
"""Most streams one move takes out."""
TABU_MOVES = 25
"""Moves for which a stream just put in cannot be taken out."""
MOVES_PER_STREAM = 40


def _in_the_way(state: _State, r: RoutedStream, a: int) -> set[str]:
    """The streams whose windows meet ``r``'s windows without a wait from departure ``a``."""
    period = r.stream.period_ns * 1000
    out: set[str] = set()
    for k, h in enumerate(r.hops):
        occ = state.busy.get((h.src, h.dst))
        if occ is None:
            continue
        lo, n = state.window(r, k, a + h.offset_ps)
        for base in range(0, state.horizon, period):
            out |= occ.owners(lo + base, n)
    out.discard(r.stream.name)
    return out


def eject(
    state: _State,
    by_name: dict[str, RoutedStream],
    placement: Placement,
    rank: dict[str, int],
    until: float,
    seed: int = 0,
) -> tuple[Placement, str]:
    """Moves on ``state`` (which holds ``placement``) until every stream is in or ``time.monotonic()`` passes
    ``until``; returns the placement it ends with (``state`` holds it) and what it did. ``rank``: the greedy's
    order, in which taken-out streams are placed again."""
    from .departures import least_covered

    rng = random.Random(seed)
    starts = dict(placement.starts_ps)
    why = dict(placement.unplaced)
    left = list(why)
    tabu: dict[str, int] = {}
    moves = kept = sideways = 0
    budget = MOVES_PER_STREAM * len(left)
    while left and moves < budget and time.monotonic() < until:
        moves += 1
        name = left[rng.randrange(len(left))]
        u = by_name[name]
        lo, hi = departure_range(u, state.grids)
        a = least_covered(state, u, lo, hi, state.grids.departure_ps[u.stream.talker], rng)
        if a is None:
            continue
        victims = _in_the_way(state, u, a)
        if len(victims) > MAX_EJECT or any(tabu.get(v, 0) > moves for v in victims):
            continue
        out = sorted(victims, key=rank.__getitem__)
        for v in out:
            state.remove(by_name[v], starts[v])
        found, _ = place_one(state, u)
        if found is None:
            for v in out:
                state.add(by_name[v], starts[v])
            continue
        state.add(u, found)
        again: dict[str, tuple[int, ...]] = {}
        lost: list[tuple[str, str]] = []
        for v in out:
            st, reason = place_one(state, by_name[v])
            if st is None:
                lost.append((v, reason))
                if len(lost) > 1:
                    break
                continue
            state.add(by_name[v], st)
            again[v] = st
        if len(lost) > 1:  # undo: the state is exactly the one before the move
            for v, st in again.items():
                state.remove(by_name[v], st)
            state.remove(u, found)
            for v in out:
                state.add(by_name[v], starts[v])
            continue
        kept += 1
        starts[name] = found
        starts.update(again)
        left.remove(name)
        del why[name]
        tabu[name] = moves + TABU_MOVES
        for v, reason in lost:
            sideways += 1
            del starts[v]
            left.append(v)
            why[v] = reason
    unplaced = [(n, why[n]) for n in left]
    how = (
        f"ejection repair: {len(placement.unplaced) - len(left)} more placed in {moves} moves "
        f"({kept} kept, {sideways} sideways)"
    )
    return Placement(starts, unplaced), how
