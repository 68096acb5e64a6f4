"""Ruin and recreate: a stream left out goes in after a whole stretch of its busiest link is cleared and refilled.

The ejection repair (:mod:`.eject`) takes out only the few streams in the way of one departure, and the greedy's
first fit puts them back where they fit first, usually where they were: on a link loaded to 85 % its moves run out
with a few streams still out (the free time is there, in gaps too short or in the wrong places for the frames
left). One move here, for a stream ``u`` left out:

1. **Ruin**: the streams in the way of ``u`` at one of its least covered departures
   (:func:`~.departures.least_covered`), and as many again (:data:`RUIN_MIN` to :data:`RUIN_MAX`, growing while
   moves fail) drawn from the placed streams that share ``u``'s busiest links (the links by their load at the
   frames' own lengths, the busiest first), are taken out: their windows and their frames in the class queues.
2. **Recreate**: ``u`` goes in first, by the greedy's own first fit (:func:`~.schedule.place_one`: no wait first,
   then with waits where the network allows them); then the streams taken out, in an order drawn at random (most
   moves) or the greedy's order, each by the same first fit, so they fill the cleared stretch around ``u`` packed
   differently than before.
3. The move is kept when at most one stream is lost (then it is left out instead of ``u``: a sideways move, which
   moves the search on), else it is undone exactly (everything back where it was). A stream just put in is tabu
   for a while (no ruin takes it out).

Every state it passes through is one the greedy could have built (every frame placed by the same first fit with the
same rules: links, queues, gates), so what it ends with is checked by the independent verifier like any greedy
placement. It plans only: a stream it cannot put in proves nothing. It stops when every stream is in or at the time
it is given.
"""

from __future__ import annotations

import random
import time

from .departures import least_covered
from .eject import _in_the_way
from .routing import RoutedStream
from .schedule import Placement, _State, departure_range, place_one

RUIN_MIN = 4
"""Streams the smallest ruin takes out besides those in the way."""
RUIN_MAX = 48
"""Most streams one ruin takes out besides those in the way."""
BUSIEST_LINKS = 2
"""Of ``u``'s links, how many (the busiest) the extra streams are drawn from."""
TABU_MOVES = 6
"""Moves for which a stream just put in cannot be taken out."""


class _Ruin:
    def __init__(self, state: _State, by_name: dict[str, RoutedStream], starts, rank, load, seed: int, place) -> None:
        self.place = place
        self.state = state
        self.by_name = by_name
        self.starts = starts
        self.rank = rank
        self.load = load
        self.rng = random.Random(seed)
        self.tabu: dict[str, int] = {}
        self.moves = 0
        self.size = RUIN_MIN
        self.users: dict[tuple[str, str], list[str]] = {}
        for name, r in sorted(by_name.items()):
            for h in r.hops:
                self.users.setdefault((h.src, h.dst), []).append(name)

    def _victims(self, u: RoutedStream) -> list[str] | None:
        grids = self.state.grids
        lo, hi = departure_range(u, grids)
        a = least_covered(self.state, u, lo, hi, grids.departure_ps[u.stream.talker], self.rng)
        if a is None:
            return None
        out = _in_the_way(self.state, u, a)
        links = sorted({(h.src, h.dst) for h in u.hops}, key=lambda k: -self.load.get(k, 0))[:BUSIEST_LINKS]
        pool = sorted({n for k in links for n in self.users[k] if n in self.starts} - out)
        pool = [n for n in pool if self.tabu.get(n, 0) <= self.moves]
        extra = self.rng.sample(pool, min(len(pool), self.size))
        out |= set(extra)
        out.discard(u.stream.name)
        if any(self.tabu.get(v, 0) > self.moves for v in out):
            return None
        return sorted(out)

    def move(self, name: str):
        """Put ``name`` in; (new starts of every stream placed, streams lost with why) or None, the state as
        before."""
        u = self.by_name[name]
        out = self._victims(u)
        if out is None:
            return None
        state, starts = self.state, self.starts
        for v in out:
            state.remove(self.by_name[v], starts[v])
        found, _ = self.place(state, u)
        if found is None:
            for v in out:
                state.add(self.by_name[v], starts[v])
            return None
        state.add(u, found)
        placed = {name: found}
        lost: list[tuple[str, str]] = []
        if self.rng.random() < 0.25:
            again = sorted(out, key=self.rank.__getitem__)
        else:
            again = list(out)
            self.rng.shuffle(again)
        for v in again:
            st, why = self.place(state, self.by_name[v])
            if st is None:
                lost.append((v, why))
                if len(lost) > 1:
                    for w, old in placed.items():
                        state.remove(self.by_name[w], old)
                    for w in out:
                        state.add(self.by_name[w], starts[w])
                    return None
                continue
            state.add(self.by_name[v], st)
            placed[v] = st
        return placed, lost


def ruin_recreate(
    state: _State,
    by_name: dict[str, RoutedStream],
    placement: Placement,
    rank: dict[str, int],
    load: dict[tuple[str, str], float],
    until: float,
    seed: int = 0,
    place=place_one,
) -> tuple[Placement, str]:
    """Moves on ``state`` (which holds ``placement``) until every stream is in or ``time.monotonic()`` passes
    ``until``; returns the best placement seen (the fewest left out) and what it did. ``rank``: the greedy's order;
    ``load``: each directed link's load at the frames' own lengths; ``place``: the greedy run's placement
    (:func:`~.schedule.place_one` or :func:`~.bestfit.place_tight`)."""
    search = _Ruin(state, by_name, dict(placement.starts_ps), rank, load, seed, place)
    why = dict(placement.unplaced)
    left = list(why)
    best = Placement(dict(search.starts), list(placement.unplaced))
    kept = sideways = failed = 0
    while left and time.monotonic() < until:
        search.moves += 1
        name = left[search.rng.randrange(len(left))]
        done = search.move(name)
        if done is None:
            failed += 1
            search.size = min(RUIN_MAX, search.size + 1)
            continue
        search.size = max(RUIN_MIN, search.size - 2)
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
        if len(left) < len(best.unplaced):
            best = Placement(dict(search.starts), [(n, why[n]) for n in left])
    how = (
        f"ruin and recreate: {len(placement.unplaced) - len(best.unplaced)} more placed in {search.moves} moves "
        f"({kept} kept, {sideways} sideways)"
    )
    return best, how
