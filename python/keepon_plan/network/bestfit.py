"""Tight placement: a frame goes where it touches the frames already on its busiest links, not where it fits first.

The greedy's first fit (:func:`~.schedule.place_one`) takes the earliest departure whose every hop is free. On a
link loaded to 85 % at the frames' own lengths the free time is only 15 %, and first fit leaves it in gaps between
frames that are often shorter than any frame still to come: the link is full long before its load says so. Here the
candidates are the ends of the free departure ranges (:func:`~.departures.free_ranges`): a departure at either end
of a range puts one of the stream's windows back to back with a window already placed, on some link. Each candidate
is scored by how many of its windows (every hop, every instance in the hyperperiod) touch a placed window on the
left or on the right, each touch weighted by its link's load at the frames' own lengths (so the touches on the
busiest links count most); the best few are tried in order (ties: the earlier departure), each checked like a first
fit candidate (links and class queues). When none fits without a wait, the frame is placed with waits like the
greedy does (first fit over departures, each hop as early as the queue rules allow: back to back behind the frames
ahead).

A placement, not a proof: like first fit it only changes which of the free departures is taken.
"""

from __future__ import annotations

import functools

import numpy as np

from .departures import free_ranges
from .routing import RoutedStream
from .schedule import MAX_QUEUED_TRIES, _first_fit, _nowait_starts, _queued, _State, departure_range

CANDIDATES = 24
"""Best-scored departures tried without a wait before the frame is tried with waits."""


def touches(state: _State, r: RoutedStream, cands: np.ndarray, load: dict) -> np.ndarray:
    """Per departure in ``cands`` (ps): the load-weighted count of the stream's windows (no wait) that start where a
    placed window ends or end where one starts, on their links. One sorted array for all the stream's links (link
    ``k``'s intervals shifted by ``4·k·H``), so one search for every hop and instance at once."""
    period = r.stream.period_ns * 1000
    horizon = state.horizon
    big = 4 * horizon
    b0s, b1s, rows = [], [], []
    n = 0
    for k, h in enumerate(r.hops):
        occ = state.busy.get((h.src, h.dst))
        if occ is None or not occ.starts:
            continue
        off, w = state.window(r, k, h.offset_ps)
        b0, b1 = occ.arrays()
        shift = len(b0s) * big
        b0s.append(b0 + shift)
        b1s.append(b1 + shift)
        weight = load.get((h.src, h.dst), 0.0)
        for base in range(0, horizon, period):
            rows.append((off + base, w, shift, n, n + len(b0) - 1, weight))
        n += len(b0)
    if not rows:
        return np.zeros(len(cands))
    b0, b1 = np.concatenate(b0s), np.concatenate(b1s)
    off, w, shift, first, last, weight = (np.array(col)[:, None] for col in zip(*rows, strict=True))
    x = (cands[None, :] + off) % horizon + shift
    j = np.searchsorted(b0, x, side="right") - 1
    before = np.where(j >= first, b1[np.maximum(j, first)], b1[last] - horizon)
    after = np.where(j < last, b0[np.minimum(j + 1, last)], b0[first] + horizon)
    return (weight * ((x == before).astype(float) + (x + w == after))).sum(axis=0)


def place_tight(state: _State, r: RoutedStream, load: dict) -> tuple[tuple[int, ...] | None, str]:
    """(hop starts, "") or (None, why not), ``state`` unchanged; the interface of :func:`~.schedule.place_one`."""
    period = r.stream.period_ns * 1000
    grid = state.grids.departure_ps[r.stream.talker]
    lo, hi = departure_range(r, state.grids)
    ranges = free_ranges(state, r, lo, hi, grid) if lo <= hi else []
    why = "no free departure in its window without a wait"
    blocker = ""
    if ranges:
        ends = np.array(ranges, dtype=np.int64)
        cands = np.unique(ends.ravel()) * grid
        score = touches(state, r, cands, load)
        for i in np.lexsort((cands, -score))[:CANDIDATES]:
            found, _, blocker = _nowait_starts(state, r, int(cands[i]), period)
            if found is not None:
                return found, ""
        why = f"{min(CANDIDATES, len(cands))} best departures tried without a wait"
    if state.queueing:
        found, blocker, a = _first_fit(
            lo, hi, grid, functools.partial(_queued, state, r, period=period), MAX_QUEUED_TRIES
        )
        if found is not None:
            return found, ""
        why += ", " + ("none with waits" if a > hi else f"{MAX_QUEUED_TRIES} tried with waits")
    return None, f"{why} (last blocked on {blocker})" if blocker else why


def tight_placer(load: dict):
    """:func:`place_tight` with the links' loads bound: a ``place(state, r)`` for :func:`~.schedule.greedy`."""
    return functools.partial(place_tight, load=load)
