"""Ejection repair: a stream the greedy left out goes in, the few placed streams in its way go out and in again.

One move, for a stream ``u`` left out: the departure of ``u`` whose windows (no wait) meet the fewest placed windows
(:func:`~.departures.least_covered`, one of the least drawn at random) names the streams in the way; they are taken
out (their windows and their frames in the class queues), ``u`` is placed by the greedy's own first fit
(:func:`~.schedule.place_one`: no wait first, then with waits where the network allows them), and each of them is
placed again by the same first fit, in the greedy's order. One that no longer fits gets a move of its own, one
level deep (an ejection chain: the streams in *its* way, none of those already moved, go out and in again; that
inner move must lose none). The move is kept when at most one stream is lost (then it is left out instead of ``u``:
a sideways move, which moves the search on), else it is undone exactly. A stream just put in is tabu for a while
(no move takes it out again), so two streams do not swap back and forth.

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
MAX_EJECT_INNER = 4
"""Most streams the inner move of a chain takes out."""
TABU_MOVES = 8
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


class _Search:
    def __init__(self, state: _State, by_name, starts, rank, seed: int) -> None:
        self.state = state
        self.by_name = by_name
        self.starts = starts
        self.rank = rank
        self.rng = random.Random(seed)
        self.tabu: dict[str, int] = {}
        self.moves = 0

    def _victims(self, u: RoutedStream, protect: set[str], most: int) -> list[str] | None:
        from .departures import least_covered

        lo, hi = departure_range(u, self.state.grids)
        a = least_covered(self.state, u, lo, hi, self.state.grids.departure_ps[u.stream.talker], self.rng)
        if a is None:
            return None
        victims = _in_the_way(self.state, u, a)
        if len(victims) > most or victims & protect or any(self.tabu.get(v, 0) > self.moves for v in victims):
            return None
        return sorted(victims, key=self.rank.__getitem__)

    def move(self, name: str, protect: set[str], inner: bool):
        """Put ``name`` in; (new starts of every stream placed, streams lost with why) or None, the state as before.
        The outer move may lose one stream; an inner one none."""
        u = self.by_name[name]
        out = self._victims(u, protect, MAX_EJECT_INNER if inner else MAX_EJECT)
        if out is None:
            return None
        state, starts = self.state, self.starts
        for v in out:
            state.remove(self.by_name[v], starts[v])
        found, _ = place_one(state, u)
        if found is None:
            for v in out:
                state.add(self.by_name[v], starts[v])
            return None
        state.add(u, found)
        placed = {name: found}
        lost: list[tuple[str, str]] = []
        guard = protect | {name, *out}
        for v in out:
            st, why = place_one(state, self.by_name[v])
            if st is not None:
                state.add(self.by_name[v], st)
                placed[v] = st
                continue
            chain = None if inner else self.move(v, guard, True)
            if chain is not None:
                placed.update(chain[0])
                guard |= set(chain[0])
                continue
            lost.append((v, why))
            if len(lost) > (0 if inner else 1):
                self._undo(name, placed, out)
                return None
        return placed, lost

    def _undo(self, name: str, placed: dict, out: list[str]) -> None:
        """Back to the state before the move of ``name``: its new placements out, the streams it took out back where
        they were (an inner move's victims are among ``placed`` and were placed before too; ``name`` was out)."""
        for v, st in placed.items():
            self.state.remove(self.by_name[v], st)
        for v in {*out, *placed} - {name}:
            if v in self.starts:
                self.state.add(self.by_name[v], self.starts[v])


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
    search = _Search(state, by_name, dict(placement.starts_ps), rank, seed)
    why = dict(placement.unplaced)
    left = list(why)
    kept = sideways = 0
    budget = MOVES_PER_STREAM * len(left)
    while left and search.moves < budget and time.monotonic() < until:
        search.moves += 1
        name = left[search.rng.randrange(len(left))]
        done = search.move(name, set(), False)
        if done is None:
            continue
        placed, lost = done
        kept += 1
        search.starts.update(placed)
        left.remove(name)
        del why[name]
        search.tabu[name] = search.moves + TABU_MOVES
        for v, reason in lost:
            sideways += 1
            del search.starts[v]
            left.append(v)
            why[v] = reason
    unplaced = [(n, why[n]) for n in left]
    how = (
        f"ejection repair: {len(placement.unplaced) - len(left)} more placed in {search.moves} moves "
        f"({kept} kept, {sideways} sideways)"
    )
    return Placement(search.starts, unplaced), how
