"""Exact depth-first search over per-flow offsets: the zero-jitter model's question without CP-SAT.

Flow ``f`` sends instance ``l`` in slot ``o_f + l·P_f``. Offsets matter modulo ``P_f`` only, so a domain is a bit
mask over ``Z_{P_f}`` (bit ``k``: offsets ``≡ k``). Two flows of one class collide iff their offsets are congruent
modulo ``gcd(P_i, P_j)``; flow ``f`` uses the ring slots ``≡ o_f (mod gcd(P_f, N))``, which its class then owns
(ownership is a bit mask over ``Z_N`` per class).

The search assigns the flow with the fewest candidates left (ties: shorter period, then index), tries first the
offsets that add the fewest ring slots to its class, and after each assignment removes from the other flows'
domains every offset that collides with it or lies on a ring slot now owned by another class. A node also fails
when the classes' counting bounds ``⌈N·U_c⌉`` no longer fit in the ring next to what they already own. Every
pruning rule is a necessary condition, so a search that ends without a plan and within its node limit is a proof
that no zero-jitter schedule exists.
"""

from __future__ import annotations

import math
from functools import cache

from .model import Problem
from .units import ceil_frac

PLAN = "plan"
EXHAUSTED = "exhausted"
LIMIT = "limit"


@cache
def _every(step: int, length: int) -> int:
    """The bit mask of ``0, step, 2·step, …`` below ``length``."""
    return sum(1 << k for k in range(0, length, step))


def _fold(mask: int, g: int, n: int) -> int:
    """Residues mod ``g`` (a divisor of ``n``) of the set bits of an ``n``-bit mask, as a ``g``-bit mask."""
    low = (1 << g) - 1
    out = 0
    for shift in range(0, n, g):
        out |= (mask >> shift) & low
    return out


def search_offsets(problem: Problem, node_limit: int = 20000) -> tuple[str, dict[int, int] | None]:
    """``('plan', {flow index: offset})``, ``('exhausted', None)`` (proven: no zero-jitter offsets exist), or
    ``('limit', None)`` when more than ``node_limit`` assignments were tried. Deterministic.

    Free-phase offsets are ``0 … P−1``; with free phases only, the longest-period flow (lowest index on ties) is
    fixed at 0, since rotating the whole schedule keeps it valid. Fixed-phase offsets lie in ``window``.
    """
    n = problem.slots
    flows = problem.flows
    count = len(flows)
    classes = len(problem.classes)
    period = [f.period for f in flows]
    cls = [f.cls for f in flows]
    ring_g = [math.gcd(p, n) for p in period]
    ring_base = [_every(g, n) for g in ring_g]  # ring slots of residue 0; residue k: shifted left by k
    need = [ceil_frac(problem.class_demand(c)) for c in range(classes)]
    if sum(need) > n:
        return EXHAUSTED, None

    anchor = None
    if not problem.fixed_phase and flows:
        anchor = max(range(count), key=lambda i: (period[i], -i))
    domain: list[int] = []
    actual: list[dict[int, int] | None] = []  # fixed phase: residue -> an offset in the window
    for i, f in enumerate(flows):
        if f.window is None:
            domain.append(1 if i == anchor else (1 << f.period) - 1)
            actual.append(None)
            continue
        lo, hi = f.window
        if hi < lo:
            return EXHAUSTED, None
        values = {o % f.period: o for o in range(lo, min(hi, lo + f.period - 1) + 1)}
        domain.append(sum(1 << r for r in values))
        actual.append(values)

    # Same-class partners (j, gcd modulus mask in Z_{P_j}); other-class flows (j, g_j, residue-0 mask in Z_{P_j}).
    same: list[list[tuple[int, int, int]]] = [[] for _ in flows]
    other: list[list[tuple[int, int, int]]] = [[] for _ in flows]
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            if cls[i] == cls[j]:
                d = math.gcd(period[i], period[j])
                same[i].append((j, d, _every(d, period[j])))
            else:
                other[i].append((j, ring_g[j], _every(ring_g[j], period[j])))

    assigned = [-1] * count

    def pick(dom: list[int]) -> int:
        best, key = -1, None
        for j in range(count):
            if assigned[j] < 0:
                k = (dom[j].bit_count(), period[j])
                if key is None or k < key:
                    best, key = j, k
        return best

    def ordered(i: int, mask: int, owned: list[int]) -> list[int]:
        """Residues of ``mask``, those adding the fewest new ring slots to the class first, then ascending."""
        g, base, free = ring_g[i], ring_base[i], ~owned[cls[i]]
        cost: dict[int, int] = {}
        out = []
        while mask:
            low = mask & -mask
            r = low.bit_length() - 1
            mask ^= low
            k = r % g
            if k not in cost:
                cost[k] = ((base << k) & free).bit_count()
            out.append((cost[k], r))
        out.sort()
        return [r for _, r in out]

    def assign(i: int, r: int, dom0: list[int], owned0: list[int]) -> tuple[list[int], list[int]] | None:
        """The domains and ownership after ``o_i ≡ r``, or ``None`` if some flow is left without candidates."""
        c = cls[i]
        new = (ring_base[i] << (r % ring_g[i])) & ~owned0[c]
        owned = owned0
        if new:
            owned = list(owned0)
            owned[c] |= new
            if sum(max(need[k], owned[k].bit_count()) for k in range(classes)) > n:
                return None
        dom = list(dom0)
        dom[i] = 1 << r
        for j, d, rep in same[i]:
            if assigned[j] < 0:
                left = dom[j] & ~(rep << (r % d))
                if not left:
                    return None
                dom[j] = left
        if new:
            folded: dict[int, int] = {}
            for j, g, rep in other[i]:
                if assigned[j] < 0:
                    bad = folded.get(g)
                    if bad is None:
                        bad = folded[g] = _fold(new, g, n)
                    left = dom[j] & ~(bad * rep)
                    if not left:
                        return None
                    dom[j] = left
        return dom, owned

    if any(not m for m in domain):
        return EXHAUSTED, None
    owned_start = [0] * classes
    first = pick(domain)
    if first < 0:
        return PLAN, {}
    stack = [[first, ordered(first, domain[first], owned_start), 0, domain, owned_start]]
    nodes = 0
    while stack:
        frame = stack[-1]
        i, values, k, dom0, owned0 = frame
        if k == len(values):
            stack.pop()
            assigned[i] = -1
            continue
        frame[2] = k + 1
        nodes += 1
        if nodes > node_limit:
            return LIMIT, None
        r = values[k]
        assigned[i] = r
        state = assign(i, r, dom0, owned0)
        if state is None:
            continue
        dom, owned = state
        j = pick(dom)
        if j < 0:
            return PLAN, {f: o if (a := actual[f]) is None else a[o] for f, o in enumerate(assigned)}
        stack.append([j, ordered(j, dom[j], owned), 0, dom, owned])
    return EXHAUSTED, None
