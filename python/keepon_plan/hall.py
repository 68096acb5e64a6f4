"""Exact ring-slot footprints of a flow group by Hall's condition on time arcs.

For one class with free phases, fixed offsets turn the schedule into a bipartite matching: each instance's window
``[o + l·P, o + l·P + J]`` (an arc of the cyclic time ``Z_T``, ``T = lcm(periods, N)``) needs its own occurrence
of a ring slot of ``S`` inside it. A set of arcs that violates Hall's condition contains one whose windows cover a
single arc (split it into connected parts; one part violates), and taking every window inside that arc only makes
the violation worse. So, for fixed offsets, a schedule on ``S`` exists **iff** every time arc ``[t, t + L)`` holds
at most as many windows as it holds occurrences of ``S``.

The occurrences depend on ``S`` only through ``t mod N``: with ``L = q·N + m`` the arc holds ``q·|S|`` plus the
slots of ``S`` in the ring arc ``[t, t + m)``. Writing ``x_i = |S ∩ [0, i)]`` (``x_0 = 0``, ``x_N = k``,
``0 ≤ x_{i+1} − x_i ≤ 1``), every requirement "ring arc ``[s, s + m)`` holds at least ``R`` slots" is a difference
constraint, so whether *some* ``S`` of size ``k`` serves given offsets is a shortest-path question (no negative
cycle) on ``N + 1`` nodes, and the distances are such an ``S``.

The offsets: shifting time by ``τ`` moves every offset and ``S`` together and keeps ``|S|``, so the first flow
takes offset 0 and the ``j``-th only ``gcd(lcm(P_1..P_{j−1}), P_j)`` values: one per class of offset vectors.
A depth-first search over them adds one flow's windows at a time; fewer windows only weaken the requirements, so a
partial assignment no set of size ``k`` serves is cut with all its completions. The search for ``k`` either finds
offsets and a set (the group fits on ``k`` slots) or exhausts the classes (it does not), which is a proof.

Arcs longer than needed are skipped soundly: an arc of length ``L`` holds at most ``L·U + F`` windows (``U`` the
group's instances per slot, ``F`` its flows) and at least ``⌊L/N⌋·k`` occurrences, so past the length where the
second exceeds the first its requirement is void.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from .model import Problem
from .shapes import Timeout

_INF = 1 << 40
MAX_CELLS = 1 << 23
"""Window counts are kept per (arc start, arc length): a group whose horizon times arc lengths exceed this many
cells (32 MiB per flow) is not searched; its bound stays the capacity bound."""
MAX_SLOTS = 512
"""Rings larger than this are not searched (the shortest paths take ``N³`` steps per node)."""


class Work:
    """A budget of work shared by searches, counted in array cells touched, not in seconds: a search cut by it
    gives the same answer on any machine under any load (the deadline stays only as a safety net)."""

    def __init__(self, cells: float) -> None:
        self.left = cells

    def spend(self, cells: int) -> None:
        self.left -= cells
        if self.left < 0:
            raise Timeout


class GroupFootprint:
    """Decides, for a one-class free-phase problem, whether some ring-slot set of a given size carries it."""

    def __init__(self, sub: Problem) -> None:
        assert len(sub.classes) == 1 and not sub.fixed_phase
        self.n = sub.slots
        # Small periods first: they have the most windows (strong requirements early) and the smallest offset sets.
        self.flows = sorted(sub.flows, key=lambda f: (f.period, f.jitter, f.name))
        self.horizon = math.lcm(self.n, *(f.period for f in self.flows))
        self.rate = sum((Fraction(1, f.period) for f in self.flows), Fraction(0))
        self.offsets = []
        lcm = 0
        for f in self.flows:
            self.offsets.append(math.gcd(lcm, f.period) if lcm else 1)
            lcm = math.lcm(lcm, f.period) if lcm else f.period
        self._length = 0
        self._base: list[np.ndarray] = []

    def capacity(self) -> int:
        """``⌈N·U⌉``: fewer ring slots cannot hold the instances of one horizon."""
        return math.ceil(self.n * self.rate)

    def _arcs(self, k: int) -> int:
        """Arc lengths ``0..L−1`` (a multiple of ``N``) that can constrain a set of size ``k``."""
        n, horizon = self.n, self.horizon
        slack = Fraction(k, n) - self.rate
        if slack <= 0:
            length = horizon
        else:
            bound = (len(self.flows) + Fraction((n - 1) * k, n)) / slack
            length = min(horizon, math.floor(bound) + 1)
        return -(-length // n) * n

    def _windows(self, length: int) -> None:
        """Per flow, windows inside ``[t, t + L)`` for offset 0 (rows ``t``, columns ``L``); other offsets roll."""
        if length <= self._length:
            return
        t = np.arange(self.horizon, dtype=np.int64)[:, None]
        arc = np.arange(length, dtype=np.int64)[None, :]
        self._base = []
        for f in self.flows:
            starts = arc - f.jitter  # a window inside the arc starts in [t, t + L − J)
            inside = (t + starts - 1) // f.period - (t - 1) // f.period
            self._base.append(np.where(starts > 0, inside, 0).astype(np.int32))
        self._length = length

    def _serves(self, windows: np.ndarray, k: int) -> int | None:
        """A ring-slot set of size ``k`` whose occurrences cover every arc's windows, or ``None``."""
        n, horizon = self.n, self.horizon
        length = windows.shape[1]
        cycles = np.arange(length) // n
        need = (windows - cycles[None, :] * k).reshape(horizon // n, n, length // n, n).max(axis=(0, 2))
        if (need[:, 0] > 0).any():  # whole ring cycles: q·k occurrences must suffice
            return None
        dist = np.full((n + 1, n + 1), _INF, dtype=np.int64)
        np.fill_diagonal(dist, 0)
        idx = np.arange(n)
        dist[idx, idx + 1] = 1  # x_{i+1} − x_i ≤ 1
        dist[idx + 1, idx] = 0  # x_i − x_{i+1} ≤ 0
        dist[0, n] = min(dist[0, n], k)
        dist[n, 0] = -k
        s, m = np.nonzero(need[:, 1:] > 0)
        m = m + 1
        r = need[s, m].astype(np.int64)
        end = s + m
        inner = end <= n
        # [s, s + m) within the ring: x_{s+m} − x_s ≥ r, i.e. the edge s+m → s of weight −r.
        np.minimum.at(dist, (end[inner], s[inner]), -r[inner])
        # Wrapping round: k − x_s + x_{s+m−N} ≥ r, i.e. the edge s+m−N → s of weight k − r.
        wrap = ~inner
        np.minimum.at(dist, (end[wrap] - n, s[wrap]), k - r[wrap])
        for v in range(n + 1):
            np.minimum(dist, dist[:, v, None] + dist[None, v, :], out=dist)
            if dist[v, v] < 0:
                return None
        if (np.diagonal(dist) < 0).any():
            return None
        x = dist[0]
        return sum(1 << i for i in range(n) if x[i + 1] - x[i] == 1)

    def serving_sets(self, k: int, deadline: float = math.inf, work: Work | None = None) -> Iterator[int]:
        """For every class of offsets some set of size ``k`` serves, one such set (the shortest-path one), in
        search order; none when the group fits on no set of size ``k``. Raises :class:`Timeout` at the deadline
        or when ``work`` runs out (each partial assignment costs its window cells and the shortest paths' ``N³``)."""
        if not self.capacity() <= k <= self.n:
            return
        length = self._arcs(k)
        self._windows(length)
        bases = [b[:, :length] for b in self._base]
        cost = self.horizon * length + (self.n + 1) ** 3

        def search(j: int, windows: np.ndarray) -> Iterator[int]:
            if time.monotonic() > deadline:
                raise Timeout
            for o in range(self.offsets[j]):
                if work is not None:
                    work.spend(cost)
                grown = windows + np.roll(bases[j], o, axis=0)
                found = self._serves(grown, k)
                if found is None:
                    continue
                if j + 1 == len(self.flows):
                    yield found
                else:
                    yield from search(j + 1, grown)

        yield from search(0, np.zeros((self.horizon, length), dtype=np.int32))

    def fits_some(self, k: int, deadline: float = math.inf, work: Work | None = None) -> int | None:
        """A ring-slot set of size ``k`` the group fits on, or ``None`` when none exists (exhaustive, exact).
        Raises :class:`Timeout` when the deadline or the work runs out first."""
        return next(self.serving_sets(k, deadline, work), None)

    def minimum(self, lower: int, deadline: float = math.inf, work: Work | None = None) -> tuple[int, int | None, bool]:
        """``(k, mask, done)``: ``k`` is a proven lower bound on the ring slots the group needs (at least
        ``lower``); when ``done``, it is exact and ``mask`` is a set of that size the group fits on, or ``k = N + 1``
        and ``mask`` is ``None`` (not even the whole ring). ``done`` is false when the deadline or the work ran out
        first."""
        k = max(lower, self.capacity())
        if self.n > MAX_SLOTS or self.horizon * self._arcs(min(k, self.n)) > MAX_CELLS:
            return k, None, False
        while k <= self.n:
            try:
                found = self.fits_some(k, deadline, work)
            except Timeout:
                return k, None, False
            if found is not None:
                return k, found, True
            k += 1
        return self.n + 1, None, True


SUBSET_SIZES = (2, 3, 4)
"""Sizes of the flow subsets whose exact minima bound their group's (:func:`subset_bound`)."""
SUBSET_WORK = 4e8
"""Work (:class:`Work`, array cells) a subset's search may do per size, about 3 s on the development machine at
most and usually far less: a subset is cheap, its search tree a fraction of its group's."""


def subset_bound(sub: Problem, lower: int, deadline: float = math.inf) -> tuple[int, tuple[int, ...]]:
    """A lower bound on the ring slots a one-class group needs, from the exact minima of its small flow subsets.

    Dropping flows keeps a schedule a schedule, so a subset never needs more ring slots than its group, and its
    exact minimum (Hall's condition, as :meth:`GroupFootprint.minimum`) is a bound on the group's. A subset's
    search tree is far smaller than its group's, and a few flows with short periods and little jitter often need
    nearly as many slots as all of them (non-harmonic 85 % set 7: 4 of 6 flows need 14 slots, found in 1.6 s;
    the whole group's search takes 63 s). Subsets of :data:`SUBSET_SIZES` flows are tried in order, each asked
    only whether it needs more than the bound so far, each size within :data:`SUBSET_WORK`.
    Returns the bound (at least ``lower``) and the indices of the flows of the subset that gave it (empty: none
    did better). Raises :class:`Timeout` at the deadline.
    """
    best, which = lower, ()
    count = len(sub.flows)
    for size in SUBSET_SIZES:
        if size >= count:
            break
        for combo in itertools.combinations(range(count), size):
            part = Problem(sub.slots, sub.classes, tuple(sub.flows[i] for i in combo))
            footprint = GroupFootprint(part)
            if footprint.n > MAX_SLOTS or footprint.horizon * footprint._arcs(best + 1) > MAX_CELLS:
                continue
            # Fitting is monotone in the set, so a size no set fits on refutes every smaller size too.
            k = best + 1
            while k <= sub.slots:
                try:
                    if footprint.fits_some(k, deadline, Work(SUBSET_WORK)) is not None:
                        break
                except Timeout:
                    if time.monotonic() > deadline:
                        raise
                    break
                k += 1
            if k > best + 1:
                best, which = k, combo
    return best, which
