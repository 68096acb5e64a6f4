"""The departures of one stream whose every hop misses every frame already placed, in one vectorised sweep.

A stream of period ``P`` whose hop ``k`` keeps the window ``[a + d_k, a + d_k + w_k)`` to itself on its link (its
departure ``a``; the window as :meth:`~keepon_plan.network.schedule._State.window` widens it) collides with a busy
interval ``[b0, b1)`` of that link (over the hyperperiod ``H``, a multiple of ``P``) iff
``a + d_k + m·P ∈ (b0 − w_k, b1)`` for some whole ``m``: ``a`` lies in the open arc
``(b0 − w_k − d_k, b1 − d_k)`` modulo ``P``. The departures left on the talker's grid once every arc of every hop is
cut out of ``[lo, hi]`` are exactly the ones where the stream fits without a wait around what is placed (numpy: the
arcs unrolled over the periods ``[lo, hi]`` meets, sorted by start, a running maximum of their ends, the gaps).

On a switch's egress whose gate granularity ``g`` does not divide the grid, the hop offset and the window, the window
rounds out to the gate grid wherever it lands, so it is widened by ``g − 1`` ps on both sides: the set is then a
subset of the free departures, never a superset. The class queues' rules are not part of it (the caller checks each
candidate it takes). The greedy (:mod:`.schedule`) takes its no-wait candidates from here once a few first-fit jumps
have failed; the LNS repair (:mod:`.repair`) cuts its free streams' domains with it.
"""

from __future__ import annotations

import numpy as np


def _arcs(state, r, lo: int, hi: int, grid: int):
    """(f0, f1, s_lo, s_hi): the closed ranges ``[f0, f1]`` of departure indices each busy window rules out (those
    that meet ``[s_lo, s_hi]``), or None when nothing is placed on the stream's links."""
    period = r.stream.period_ns * 1000
    s_lo, s_hi = -(-lo // grid), hi // grid
    starts, lengths = [], []
    for k, h in enumerate(r.hops):
        occ = state.busy.get((h.src, h.dst))
        if occ is None or not occ.starts:
            continue
        off, w = state.window(r, k, h.offset_ps)
        if h.src in state.net.switches:
            g = state.grids.gate_ps[h.src]
            if grid % g or off % g or w % g:
                off, w = off - (g - 1), w + 2 * (g - 1)
        b0, b1 = occ.arrays()
        starts.append((b0 - w - off) % period)
        lengths.append(b1 - b0 + w)
    if not starts:
        return None
    x0 = np.concatenate(starts)
    x1 = x0 + np.concatenate(lengths)
    first = (lo - int(x1.max())) // period
    last = -(-hi // period)
    shifts = np.arange(first, last + 1, dtype=np.int64) * period
    a0 = (x0[None, :] + shifts[:, None]).ravel()
    a1 = (x1[None, :] + shifts[:, None]).ravel()
    # a departure a = s·grid is out iff a0 < a < a1 for some arc: s in [a0 // grid + 1, ⌈a1 / grid⌉ − 1]
    f0 = a0 // grid + 1
    f1 = -(-a1 // grid) - 1
    keep = (f0 <= f1) & (f1 >= s_lo) & (f0 <= s_hi)
    return f0[keep], f1[keep], s_lo, s_hi


def free_ranges(state, r, lo: int, hi: int, grid: int) -> list[tuple[int, int]]:
    """Departure indices ``[s0, s1]`` (``a = s·grid``, closed, ascending, disjoint) in ``[lo, hi]`` whose every hop
    misses every busy interval of ``state``."""
    s_lo, s_hi = -(-lo // grid), hi // grid
    if s_lo > s_hi:
        return []
    arcs = _arcs(state, r, lo, hi, grid)
    if arcs is None or not len(arcs[0]):
        return [(s_lo, s_hi)]
    f0, f1, _, _ = arcs
    order = np.argsort(f0, kind="stable")
    f0, f1 = f0[order], f1[order]
    reach = np.maximum.accumulate(f1)
    prev = np.concatenate(([s_lo - 1], reach[:-1]))
    gap_lo = np.maximum(prev + 1, s_lo)
    gap_hi = np.minimum(f0 - 1, s_hi)
    ok = gap_lo <= gap_hi
    out = [(int(x), int(y)) for x, y in zip(gap_lo[ok], gap_hi[ok], strict=True)]
    tail = max(int(reach[-1]) + 1, s_lo)
    if tail <= s_hi:
        out.append((tail, s_hi))
    return out


def least_covered(state, r, lo: int, hi: int, grid: int, rng) -> int | None:
    """A departure in ``[lo, hi]`` (ps, on the grid) whose windows meet the fewest busy windows of ``state`` (one of
    the least, drawn with ``rng``), or None when the range is empty."""
    s_lo, s_hi = -(-lo // grid), hi // grid
    if s_lo > s_hi:
        return None
    arcs = _arcs(state, r, lo, hi, grid)
    if arcs is None or not len(arcs[0]):
        return s_lo * grid
    f0, f1, _, _ = arcs
    pos = np.concatenate(([s_lo], f0, f1 + 1))
    delta = np.concatenate(([0], np.ones(len(f0), np.int64), -np.ones(len(f1), np.int64)))
    order = np.argsort(pos, kind="stable")
    pos, cover = pos[order], np.cumsum(delta[order])
    last = np.r_[pos[1:] != pos[:-1], True]  # the coverage from a position on, once all its events are in
    pos, cover = pos[last], cover[last]
    inside = (pos >= s_lo) & (pos <= s_hi)
    pos, cover = pos[inside], cover[inside]
    best = np.flatnonzero(cover == cover.min())
    return int(pos[best[rng.randrange(len(best))]]) * grid
