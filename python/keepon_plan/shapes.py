"""Exact per-class footprints by enumerating ring-slot sets ("shapes").

A class can be scheduled on a set ``S`` of ring slots or not; that property is monotone in ``S`` and, when every
flow of the class has a free phase, invariant under rotating ``S`` (shift every slot) and reflecting it (reverse
time: ``s'_l = −s_{−l}`` keeps each instance within ``[o', o' + J]`` of ``o' + l·P`` with ``o' = −o − J``). So the
fewest ring slots a class needs is found by checking the sets of size ``k = 1, 2, …`` up to rotation and reflection
(the dihedral group of the ring): the first size with a set that fits is the class's footprint, and every size
checked without one is a proof that more are needed.

:func:`fits_on` decides one set exactly, without a solver: each flow's offsets are filtered to those whose every
instance window meets ``S``; then a depth-first search over the offsets keeps a bipartite matching of instances to
slot occurrences (augmenting paths), so a branch dies as soon as the instances so far cannot all get their own
occurrence. A matching of all instances is a schedule.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import replace

from .model import Problem, SlotFlow


def _rotl(mask: int, k: int, n: int, full: int) -> int:
    k %= n
    return ((mask << k) | (mask >> (n - k))) & full


def _reflect(mask: int, n: int) -> int:
    out = 0
    for r in range(n):
        if mask >> r & 1:
            out |= 1 << ((n - r) % n)
    return out


def canonical(mask: int, n: int) -> int:
    """The smallest integer among the rotations and reflections of a ring-slot bit mask."""
    full = (1 << n) - 1
    best = mask
    for m in (mask, _reflect(mask, n)):
        for k in range(n):
            best = min(best, _rotl(m, k, n, full))
    return best


def _hits(f: SlotFlow, mask: int, n: int, full: int) -> int:
    """Bit ``b`` set iff some ring slot of ``mask`` lies in ``[b, b + J]`` (mod ``n``)."""
    hit = 0
    for d in range(f.jitter + 1):
        hit |= _rotl(mask, -d, n, full)
    return hit


def _comb(r: int, g: int, n: int) -> int:
    return sum(1 << (r + g * i) for i in range(n // g))


class Timeout(Exception):
    """A deadline passed inside an exact check."""


class ShapeChecker:
    """Decides whether the flows of a one-class, free-phase problem fit on ring-slot sets."""

    def __init__(self, sub: Problem) -> None:
        assert len(sub.classes) == 1 and not sub.fixed_phase
        self.sub = sub
        self.n = sub.slots
        self.full = (1 << self.n) - 1
        self.horizon = sub.horizon
        self.combs = [
            [_comb(r, math.gcd(f.period, self.n), self.n) for r in range(math.gcd(f.period, self.n))] for f in sub.flows
        ]

    def offsets(self, mask: int) -> list[list[int]] | None:
        """Per flow, the offsets whose every instance window meets ``mask``; ``None`` if a flow has none."""
        out = []
        for f, combs in zip(self.sub.flows, self.combs, strict=True):
            hit = _hits(f, mask, self.n, self.full)
            ok = [r for r, comb in enumerate(combs) if comb & hit == comb]
            if not ok:
                return None
            g = len(combs)
            out.append([o for o in range(f.period) if o % g in ok])
        return out

    def fits_on(self, mask: int, deadline: float = math.inf) -> tuple[tuple[int, ...], ...] | None:
        """The slots of every instance if the class fits on ``mask`` (exact), else ``None``; raises
        :class:`Timeout` when the deadline passes first."""
        doms = self.offsets(mask)
        if doms is None:
            return None
        n, horizon, flows = self.n, self.horizon, self.sub.flows
        # Shifting the whole class by N slots keeps it on the same ring slots, and moves a flow's offset by N
        # (mod P): so one flow needs only one offset per residue mod gcd(P, N). Take the flow with the most
        # offsets per residue.
        first = max(range(len(flows)), key=lambda i: (flows[i].period // math.gcd(flows[i].period, n), -i))
        doms[first] = [o for o in doms[first] if o < math.gcd(flows[first].period, n)]
        # Per flow and offset, per instance the slot occurrences (mod T) of its window on the set; offsets with
        # the same occurrences are interchangeable, so only the first of them is kept.
        cands: dict[tuple[int, int], list[list[int]]] = {}
        for i, f in enumerate(flows):
            seen: set[tuple[tuple[int, ...], ...]] = set()
            kept = []
            for o in doms[i]:
                starts = range(o, horizon + o, f.period)
                per = [[t % horizon for t in range(b, b + f.jitter + 1) if mask >> (t % n) & 1] for b in starts]
                sig = tuple(map(tuple, per))
                if sig not in seen:
                    seen.add(sig)
                    kept.append(o)
                    cands[i, o] = per
            doms[i] = kept

        def augment(key: tuple[int, int], cand: dict, owner: dict, seen: set) -> bool:
            for t in cand[key]:
                if t in seen:
                    continue
                seen.add(t)
                holder = owner.get(t)
                if holder is None or augment(holder, cand, owner, seen):
                    owner[t] = key
                    return True
            return False

        steps = 0

        def add(owner: dict, cand: dict, i: int, o: int) -> tuple[dict, dict] | None:
            """The matching extended by every instance of flow ``i`` at offset ``o``, or ``None``."""
            nonlocal steps
            steps += 1
            if steps % 256 == 0 and time.monotonic() > deadline:
                raise Timeout
            owner2, cand2 = dict(owner), dict(cand)
            for l, slots in enumerate(cands[i, o]):
                cand2[i, l] = slots
                if not augment((i, l), cand2, owner2, set()):
                    return None
            return owner2, cand2

        def search(owner: dict, cand: dict, left: dict[int, list[int]], chosen: dict[int, int]):
            """Forward checking: an offset that cannot join the matching now never can deeper (the flows
            matched only grow), so every open flow's domain is filtered before branching on the smallest."""
            if not left:
                return owner, chosen
            grown: dict[int, list[tuple[int, tuple[dict, dict]]]] = {}
            for j, dom in left.items():
                ok = [(o, r) for o in dom if (r := add(owner, cand, j, o)) is not None]
                if not ok:
                    return None
                grown[j] = ok
            j = min(grown, key=lambda k: (len(grown[k]), k))
            rest = {k: [o for o, _ in grown[k]] for k in grown if k != j}
            for o, (owner2, cand2) in grown[j]:
                found = search(owner2, cand2, rest, {**chosen, j: o})
                if found is not None:
                    return found
            return None

        found = search({}, {}, dict(enumerate(doms)), {})
        if found is None:
            return None
        owner, offset = found
        slots = [[0] * (horizon // f.period) for f in flows]
        for t, (i, l) in owner.items():
            base = offset[i] + l * flows[i].period
            slots[i][l] = base + (t - base) % horizon
        return tuple(tuple(s) for s in slots)


def minimum_shapes(sub: Problem, lower: int, deadline: float, upper: int | None = None) -> tuple[int, list[int], bool]:
    """Search sizes ``k ≥ lower`` (a proven bound) for ring-slot sets the class fits on, up to symmetry.

    Returns ``(bound, shapes, done)``: ``bound`` is proven (no smaller set fits); ``shapes`` are all canonical masks
    of size ``bound`` that fit when ``done``; ``done`` is false when the deadline cut the search (``shapes`` is then
    empty). Stops after ``upper``: no set of size ≤ ``upper`` fits → bound ``upper + 1``.
    """
    checker = ShapeChecker(sub)
    top = sub.slots if upper is None else min(upper, sub.slots)
    for k in range(max(1, lower), top + 1):
        found = feasible_shapes(checker, k, deadline)
        if found is None:
            return k, [], False
        if found:
            return k, found, True
    return top + 1, [], True


def is_full(f: SlotFlow, n: int) -> bool:
    """A free-phase flow with ``P | N`` and no jitter uses every occurrence of its ``N/P`` ring slots."""
    return f.window is None and n % f.period == 0 and f.jitter == 0


def units(problem: Problem) -> list[tuple[list[int], Problem]]:
    """The classes split into independent *units* (flow indices, one-class problem): each full flow alone, and the
    other flows of the class.

    A full flow uses every occurrence of its ring slots, so no other flow of its class can share them: the class
    fits on ``S`` iff the full flows' slot sets and the rest's set are disjoint subsets of ``S``. Packing the units
    disjointly is therefore the same question as packing the classes.
    """
    out = []
    n = problem.slots
    for c, name in enumerate(problem.classes):
        idx = [i for i, f in enumerate(problem.flows) if f.cls == c]
        full = [i for i in idx if is_full(problem.flows[i], n)]
        rest = [i for i in idx if i not in full]
        for group in [[i] for i in full] + ([rest] if rest else []):
            out.append((group, Problem(n, (name,), tuple(replace(problem.flows[i], cls=0) for i in group))))
    return out


def combinations_count(n: int, k: int) -> int:
    """Sets of size ``k`` containing ring slot 0 (what :func:`feasible_shapes` walks through)."""
    return math.comb(n - 1, k - 1) if k >= 1 else 0


def feasible_shapes(checker: ShapeChecker, k: int, deadline: float) -> list[int] | None:
    """Every canonical mask of size ``k`` the unit fits on; ``None`` if the deadline came first."""
    n = checker.n
    shapes = []
    for rest in itertools.combinations(range(1, n), k - 1):
        if time.monotonic() > deadline:
            return None
        # A canonical (smallest) mask has its largest cyclic gap last, from its highest slot round to n.
        if rest and any(b - a > n - rest[-1] for a, b in itertools.pairwise((0, *rest))):
            continue
        mask = 1 | sum(1 << r for r in rest)
        if checker.offsets(mask) is None or canonical(mask, n) != mask:
            continue
        try:
            if checker.fits_on(mask, deadline) is not None:
                shapes.append(mask)
        except Timeout:
            return None
    return shapes


def orientations(mask: int, n: int) -> set[int]:
    """Every rotation and reflection of a mask."""
    full = (1 << n) - 1
    return {_rotl(m, k, n, full) for m in (mask, _reflect(mask, n)) for k in range(n)}


def minimal_shapes(checker: ShapeChecker, low: int, high: int, deadline: float, below: list[int]) -> list[int] | None:
    """The inclusion-minimal canonical masks of sizes ``low..high`` the unit fits on, given ``below``: every
    canonical mask of size ``low − 1`` it fits on; ``None`` if the deadline came first. A fitting mask is minimal
    iff none of its subsets one slot smaller fits (fitting is monotone), and those were all checked the size before.
    """
    n = checker.n
    out: list[int] = []
    previous: set[int] = set(below)
    for k in range(low, high + 1):
        found = feasible_shapes(checker, k, deadline)
        if found is None:
            return None
        for mask in found:
            subsets = (mask & ~(1 << r) for r in range(n) if mask >> r & 1)
            if not any(canonical(s, n) in previous for s in subsets):
                out.append(mask)
        previous = set(found)
    return out


def pack(options: list[list[int]], n: int, deadline: float) -> tuple[str, list[int] | None]:
    """Pairwise-disjoint masks, one from each option list: ``('plan', masks)``, ``('infeasible', None)`` when the
    search was complete, ``('limit', None)`` at the deadline. Depth-first, the unit with the fewest disjoint
    options first, with the remaining units' smallest sizes as a capacity bound.
    """
    sizes = [min((m.bit_count() for m in opts), default=n + 1) for opts in options]
    out: list[int | None] = [None] * len(options)
    timed_out = False

    def search(left: list[int], used: int, avail: dict[int, list[int]]) -> bool:
        nonlocal timed_out
        if not left:
            return True
        if time.monotonic() > deadline:
            timed_out = True
            return False
        if sum(sizes[u] for u in left) > n - used.bit_count():
            return False
        u = min(left, key=lambda k: (len(avail[k]), k))
        rest = [k for k in left if k != u]
        for m in avail[u]:
            taken = used | m
            narrowed = {k: [x for x in avail[k] if not x & taken] for k in rest}
            if any(not v for v in narrowed.values()):
                continue
            out[u] = m
            if search(rest, taken, narrowed):
                return True
            if timed_out:
                return False
        return False

    found = search(list(range(len(options))), 0, dict(enumerate(options)))
    if found:
        return "plan", [m for m in out if m is not None]
    return ("limit" if timed_out else "infeasible"), None


def greedy_pack(checkers: list[ShapeChecker], n: int, deadline: float, seed: int = 0) -> list[int] | None:
    """Disjoint ring-slot sets the units fit on, by randomised greedy construction (a plan search, no proofs).

    Each unit in turn takes every free slot if it fits on them (fitting is monotone, so if it does not, no subset
    does and the attempt fails) and then gives back, in random order, every slot it still fits without: an
    inclusion-minimal set. The first attempt places the units largest demand first; later ones shuffle the order.
    """
    rng = random.Random(seed)
    full = (1 << n) - 1
    order = sorted(range(len(checkers)), key=lambda u: (-checkers[u].sub.class_demand(0), u))
    while time.monotonic() < deadline:
        free, masks = full, [0] * len(checkers)
        for u in order:
            checker = checkers[u]
            try:
                if checker.fits_on(free, deadline) is None:
                    break
            except Timeout:
                return None
            mask = free
            slots = [r for r in range(n) if mask >> r & 1]
            rng.shuffle(slots)
            for r in slots:
                if time.monotonic() > deadline:
                    return None
                trial = mask & ~(1 << r)
                try:
                    if checker.fits_on(trial, deadline) is not None:
                        mask = trial
                except Timeout:
                    return None
            masks[u] = mask
            free &= ~mask
        else:
            return masks
        # The unit that failed goes first next time; the others keep a random order.
        failed = u
        rest = [k for k in order if k != failed]
        rng.shuffle(rest)
        order = [failed, *rest]
    return None
