"""The egress queues of the switches: when a frame may wait for its window, so that 802.1Qbv sends it there.

A bridge port keeps one FIFO queue per traffic class; the class's gate opens for the windows of the gate list, and
the frame at the head starts when the gate is open and it can finish before it closes (store-and-forward). The plan
gives every frame ``X`` of class ``c`` at port ``P`` a ready time ``r`` (its last bit in plus the forwarding delay)
and a start ``t ≥ r``; its window is ``[t, e)``, ``e = t + tx``, in the gate list rounded out to ``[lo, hi)``. The
queue sends each frame at its planned start iff, for every pair of frames of ``c`` at ``P`` (over the hyperperiod):

1. **FIFO order is window order.** A window that opens while ``X`` waits (its start in ``[r_X, t_X)``) belongs to a
   frame that was ready strictly before ``X`` (so it is ahead of ``X``); equivalently, a waiting frame's wait
   holds no window of a frame behind it. Ties in ready time are refused (their order would be the switch's choice).
2. **No idle open gate before a waiting frame's window.** The gate list gives a best-effort gap shorter than a
   minimum frame to the window before it, so after a window the gate of ``c`` can stay open until
   ``hi + gap``; a waiting frame (``t > r``) whose window starts in ``(e_Y, hi_Y + gap]`` after another window
   ``Y`` of its class would start in that idle open time, early. Back to back (``t = e_Y``) is fine.

:class:`ClassQueues` keeps, per (port, class), every window (exact start, length, rounded end, wait) and every wait
(ready, length), and answers whether a candidate frame keeps both rules with what is placed and the switch's
``max_queue_frames`` (the most frames waiting at once in one class queue), and if not how far its
start should move (or that no later start helps). The independent verifier checks the same by simulating the queues
(:mod:`.verify`).
"""

from __future__ import annotations

import bisect


class _Port:
    """One (port, class): windows sorted by exact start (mod H), waits sorted by ready time (mod H)."""

    def __init__(self) -> None:
        self.w_start: list[int] = []
        self.w_rec: list[tuple[int, int, int]] = []  # (tx, rounded end − start, wait before it)
        self.q_ready: list[int] = []
        self.q_len: list[int] = []
        self.max_wait = 0


def _in_range(keys: list[int], a: int, b: int, horizon: int):
    """(index, absolute key) of every key in ``[a, b)`` taken modulo ``horizon`` (``b − a ≤ horizon``)."""
    lo = a % horizon
    shift = a - lo
    n = b - a
    if lo + n <= horizon:
        for i in range(bisect.bisect_left(keys, lo), bisect.bisect_left(keys, lo + n)):
            yield i, keys[i] + shift
    else:
        for i in range(bisect.bisect_left(keys, lo), len(keys)):
            yield i, keys[i] + shift
        for i in range(0, bisect.bisect_left(keys, lo + n - horizon)):
            yield i, keys[i] + shift + horizon


class ClassQueues:
    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.ports: dict[tuple[str, str, int], _Port] = {}

    def check(self, key, ready: int, t: int, tx: int, hi: int, gap: int, depth: int) -> tuple[int, bool]:
        """(0, False) if the frame keeps both rules and, waiting, leaves at most ``depth`` frames waiting at once;
        else (shift of ``t`` worth trying, whether no later ``t`` can help; then, for rule 1, how far the ready time
        must move for the frame to arrive after the window that opened while it waited). ``hi``: its window's
        rounded end; ``gap``: a minimum frame's wire time on the link."""
        p = self.ports.get(key)
        if p is None:
            return 0, False
        h = self.horizon
        e = t + tx
        if t > ready:
            if self._most_waiting(p, ready, t) + 1 > depth:
                return 1, True
            for i, start in _in_range(p.w_start, ready, t, h):  # rule 1: windows opening while it waits
                if start - p.w_rec[i][2] >= ready:
                    return start - ready + 1, True
            i = bisect.bisect_left(p.w_start, t % h) - 1  # rule 2: the window before its own
            base = t - t % h
            if i < 0 and p.w_start:
                i, base = len(p.w_start) - 1, base - h
            if i >= 0:
                ys = p.w_start[i] + base
                y_tx, y_hi, _ = p.w_rec[i]
                if ys + y_tx < t <= ys + y_hi + gap:
                    return ys + y_hi + gap + 1 - t, False
        if p.q_ready:
            for i, rz in _in_range(p.q_ready, t - p.max_wait, t + 1, h):  # rule 1: its window in another's wait
                if rz + p.q_len[i] > t and not ready < rz:
                    return rz + p.q_len[i] - t, False
            for i, rz in _in_range(p.q_ready, e - p.max_wait + 1, hi + gap + 1, h):  # rule 2 for a waiting one
                tz = rz + p.q_len[i]
                if e < tz <= hi + gap:
                    return tz - t, False
        return 0, False

    def _most_waiting(self, p: _Port, a: int, b: int) -> int:
        """The most frames waiting at once during ``[a, b)``."""
        events = []
        for i, rz in _in_range(p.q_ready, a - p.max_wait, b, self.horizon):
            lo, hi = max(rz, a), min(rz + p.q_len[i], b)
            if lo < hi:
                events += [(lo, 1), (hi, -1)]
        events.sort()
        most = n = 0
        for _t, d in events:
            n += d
            most = max(most, n)
        return most

    def remove(self, key, ready: int, t: int) -> None:
        """Remove the frame :meth:`add` added with the same ``key``, ``ready`` and ``t`` (``max_wait`` stays: it is
        only a bound on how far back the searches look)."""
        p = self.ports[key]
        h = self.horizon
        i = bisect.bisect_left(p.w_start, t % h)
        while p.w_rec[i][2] != t - ready:
            i += 1
        del p.w_start[i], p.w_rec[i]
        if t > ready:
            i = bisect.bisect_left(p.q_ready, ready % h)
            while p.q_len[i] != t - ready:
                i += 1
            del p.q_ready[i], p.q_len[i]

    def add(self, key, ready: int, t: int, tx: int, hi: int) -> None:
        p = self.ports.get(key)
        if p is None:
            p = self.ports[key] = _Port()
        h = self.horizon
        i = bisect.bisect_left(p.w_start, t % h)
        p.w_start.insert(i, t % h)
        p.w_rec.insert(i, (tx, hi - t, t - ready))
        if t > ready:
            i = bisect.bisect_left(p.q_ready, ready % h)
            p.q_ready.insert(i, ready % h)
            p.q_len.insert(i, t - ready)
            p.max_wait = max(p.max_wait, t - ready)
