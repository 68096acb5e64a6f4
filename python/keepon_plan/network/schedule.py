"""Fast placement: first fit over the hyperperiod with per-link occupancy intervals, no-wait first, then queueing.

Each stream gets one departure ``a`` on its talker's grid (a slot start on slots, any whole-ns byte time on the byte
clock) within its transmit-offset window ``[earliest_offset, latest_offset]``, and one start per hop, the same in
every period (strictly periodic hops). Streams are placed one at a time in the order the caller gives
(:func:`keepon_plan.network.plan.greedy_orders`; default shortest period first, then most hops). For a candidate
``a``:

1. **No wait**: every hop at ``a + d_k`` (:mod:`keepon_plan.network.routing`). Every instance of every hop is looked
   up in that directed link's occupancy over the hyperperiod ``H`` (sorted, disjoint intervals, bisect; a collision
   jumps past the whole busy run and every gap too short for the window). After :data:`QUICK_TRIES` jumps the
   departures that miss every placed window are computed at once (:mod:`.departures`), so the search goes from one
   free range to the next, and a stream with none is known at once to need a wait.
2. **Queueing** (when no wait fails and the network allows it): hop by hop, parents first, the frame is ready at a
   switch's egress when its last bit is in and the forwarding delay has passed; it starts at the first time from then
   that is free on the link, on the switch's gate grid, within the latency and deadline budget, and keeps the class
   queue's rules (:mod:`.queues`: FIFO order is window order, no idle open gate before a waiting frame's window),
   so 802.1Qbv sends it there. Every frame, waiting or not, keeps those rules with the frames already waiting. When
   a window of a frame that arrived later would open while it waits, ``a`` moves so that the frame arrives after
   that window has started (it then waits behind it).

On a collision ``a`` jumps past the blocker (rounded up to the grid); a stream whose window is exhausted (or that
tried :data:`MAX_TRIES` departures without a wait and :data:`MAX_QUEUED_TRIES` with waits) is left out with the
reason. Windows on a switch's egress are its guarded window (:meth:`~keepon_plan.network.routing.Hop.window`) widened
out to the switch's gate granularity; on a byte-clock talker's own link a frame is followed by a minimum frame of
free link. Every interval remembers its stream (the ejection repair, :mod:`.eject`, asks who is in the way). Plans
only: a stream left out proves nothing.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from ..deadline import Deadline, check
from .routing import RoutedStream
from .topology import Network

MAX_TRIES = 4000
"""Departures a stream tries without waiting before it is left out (or tried with waiting)."""
QUICK_TRIES = 8
"""First-fit jumps a stream takes from its earliest departure before its free departures are computed."""
MAX_QUEUED_TRIES = 100
"""Departures a stream tries with waiting (each costs a scan of the class queues on every hop)."""
MIN_FRAME_WIRE_BYTES = 64 + 20


class Occupancy:
    """Disjoint busy intervals ``[start, end)`` of one directed link within ``[0, H)``, sorted by start."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.who: list[str] = []
        """The stream each interval is of."""
        self._arrays = None

    def arrays(self):
        """(starts, ends) as numpy arrays (kept until the next change)."""
        if self._arrays is None:
            import numpy as np

            self._arrays = (np.array(self.starts, dtype=np.int64), np.array(self.ends, dtype=np.int64))
        return self._arrays

    def _blocked(self, t: int, length: int) -> int:
        """0 if ``[t, t + length)`` (``t + length ≤ H``) is free, else how far ``t`` must move to pass a blocker."""
        i = bisect.bisect_right(self.starts, t) - 1
        if i >= 0 and self.ends[i] > t:
            return self.ends[i] - t
        if i + 1 < len(self.starts) and self.starts[i + 1] < t + length:
            return self.ends[i + 1] - t
        return 0

    def _first_free(self, t: int, length: int) -> int:
        """How far ``t`` (``t + length ≤ H``) must move for ``[t, t + length)`` to be free of every interval that
        starts before ``H``: every start in between meets one (the busy run and the gaps too short are passed at
        once, so a talker's back-to-back frames cost one try, not one each)."""
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(starts, t) - 1
        pos = t
        if i >= 0 and ends[i] > pos:
            pos = ends[i]
        i += 1
        n = len(starts)
        while i < n and starts[i] < pos + length:
            pos = max(pos, ends[i])
            i += 1
        return pos - t

    def shift_needed(self, t: int, length: int) -> int:
        """0 if ``[t, t + length)`` (mod H) is free, else a positive shift that passes the first blocker found (and
        every later one the window would meet on this link before a gap long enough)."""
        if not self.starts or length <= 0:
            return 0
        t %= self.horizon
        if t + length <= self.horizon:
            return self._first_free(t, length)
        head = self._blocked(t, self.horizon - t)
        if head:
            return head
        tail = self._blocked(0, t + length - self.horizon)
        return tail + (self.horizon - t) if tail else 0

    def _pieces(self, t: int, length: int) -> list[tuple[int, int]]:
        t %= self.horizon
        if t + length <= self.horizon:
            return [(t, length)]
        return [(t, self.horizon - t), (0, t + length - self.horizon)]

    def owners(self, t: int, length: int) -> set[str]:
        """The streams whose intervals meet ``[t, t + length)`` (mod H)."""
        out = set()
        for start, n in self._pieces(t, length):
            i = max(bisect.bisect_right(self.starts, start) - 1, 0)
            while i < len(self.starts) and self.starts[i] < start + n:
                if self.ends[i] > start:
                    out.add(self.who[i])
                i += 1
        return out

    def add(self, t: int, length: int, who: str = "") -> None:
        """Add ``[t, t + length)`` (mod H) of stream ``who``; it may touch but not overlap what is there (merged
        intervals stay separate entries, which :meth:`shift_needed` handles)."""
        if length <= 0:
            return
        self._arrays = None
        for start, n in self._pieces(t, length):
            i = bisect.bisect_left(self.starts, start)
            self.starts.insert(i, start)
            self.ends.insert(i, start + n)
            self.who.insert(i, who)

    def remove(self, t: int, length: int) -> None:
        """Remove what :meth:`add` added for ``[t, t + length)`` (the same arguments)."""
        if length <= 0:
            return
        self._arrays = None
        for start, n in self._pieces(t, length):
            i = bisect.bisect_left(self.starts, start)
            while self.ends[i] != start + n:  # only a zero-length neighbour can share a start; none is added
                i += 1
            assert self.starts[i] == start
            del self.starts[i], self.ends[i], self.who[i]


@dataclass
class Placement:
    starts_ps: dict[str, tuple[int, ...]]
    """Per placed stream: the first bit of instance 0 on each hop (``RoutedStream.hops`` order; hop 0's is the
    departure), ps after the base time."""
    unplaced: list[tuple[str, str]]
    """(stream, why) for every stream that did not fit."""

    @property
    def departure_ps(self) -> dict[str, int]:
        return {name: starts[0] for name, starts in self.starts_ps.items()}


def hyperperiod_ps(routed: list[RoutedStream]) -> int:
    h = 1
    for r in routed:
        h = math.lcm(h, r.stream.period_ns)
    return h * 1000


@dataclass(frozen=True)
class Grids:
    """What the placement needs to know of the talkers and switches."""

    departure_ps: dict[str, int]
    """Per talker: its departure grid."""
    latest_ps: dict[str, int]
    """Per stream: the latest departure its talker can take (the period's end, or before a byte-clock window wraps)."""
    tail_ps: dict[str, int]
    """Per talker: free link after each of its frames on its own link."""
    gate_ps: dict[str, int]
    """Per switch: its gate granularity."""
    wait_ok: dict[str, bool]
    """Per switch: whether a frame may wait in its egress queues."""


def grids_of(net: Network, rings, queueing: bool) -> Grids:
    latest = {}
    for s in net.streams:
        latest[s.name] = rings[s.talker].latest_ps(s, s.period_ns * 1000)
    return Grids(
        {n: ring.slot_ps for n, ring in rings.items()},
        latest,
        {n: ring.tail_ps() for n, ring in rings.items()},
        {n: sw.gate_granularity_ns * 1000 for n, sw in net.switches.items()},
        {n: queueing and net.guard_ps == 0 and sw.max_queue_frames > 0 for n, sw in net.switches.items()},
    )


def departure_range(r: RoutedStream, grids: Grids) -> tuple[int, int]:
    """(lo, hi) of the departure in ps, on the talker's grid; lo > hi when empty."""
    s = r.stream
    grid = grids.departure_ps[s.talker]
    lo = -(-s.earliest_offset_ns * 1000 // grid) * grid
    hi = grids.latest_ps[s.name]
    if s.latest_offset_ns is not None:
        hi = min(hi, s.latest_offset_ns * 1000)
    if s.deadline_ns is not None:
        hi = min(hi, s.deadline_ns * 1000 - max(r.latency_ps))
    return lo, hi // grid * grid


class _State:
    """Every directed link's occupancy, and the switches' class queues (:mod:`.queues`)."""

    def __init__(self, horizon: int, net: Network, grids: Grids) -> None:
        from .queues import ClassQueues

        self.horizon = horizon
        self.net = net
        self.grids = grids
        self.busy: dict[tuple[str, str], Occupancy] = {}
        self.queues = ClassQueues(horizon)
        self.queueing = any(grids.wait_ok.values())
        self.min_frame: dict[tuple[str, str], int] = {}
        self.depth = {n: sw.max_queue_frames for n, sw in net.switches.items()}

    def occ(self, key) -> Occupancy:
        o = self.busy.get(key)
        if o is None:
            o = self.busy[key] = Occupancy(self.horizon)
        return o

    def window(self, r: RoutedStream, k: int, t: int) -> tuple[int, int]:
        """(start, length) ps that hop ``k`` starting at ``t`` keeps to itself on its link."""
        h = r.hops[k]
        if h.src in self.net.switches:
            g = self.grids.gate_ps[h.src]
            lo = (t - h.guard_ps) // g * g
            hi = -(-(t + h.tx_ps + h.guard_ps) // g) * g
            return lo, hi - lo
        return t, h.tx_ps + self.grids.tail_ps.get(h.src, 0)

    def gap_ps(self, h) -> int:
        key = (h.src, h.dst)
        if key not in self.min_frame:
            link = self.net.link(h.src, h.dst)
            self.min_frame[key] = MIN_FRAME_WIRE_BYTES * link.byte_ps()
        return self.min_frame[key]

    def shift(self, r: RoutedStream, k: int, ready: int, t: int, period: int) -> tuple[int, bool]:
        """(0, False) if hop ``k`` ready at ``ready`` and starting at ``t`` is free on its link and keeps the queue
        rules in every instance; else (a shift of ``t``, whether no later ``t`` can help)."""
        h = r.hops[k]
        busy = self.busy.get((h.src, h.dst))
        lo, n = self.window(r, k, t)
        if busy is not None and busy.starts:
            for base in range(0, self.horizon, period):
                shift = busy.shift_needed(lo + base, n)
                if shift:
                    return shift, False
        if not self.queueing or h.src not in self.net.switches:
            return 0, False
        key = (h.src, h.dst, r.stream.traffic_class)
        port = self.queues.ports.get(key)
        if port is None or (t == ready and not port.q_ready):
            return 0, False  # a frame that does not wait keeps the rules with a queue where nothing waits
        gap, depth = self.gap_ps(h), self.depth[h.src]
        for base in range(0, self.horizon, period):
            shift, hard = self.queues.check(key, ready + base, t + base, h.tx_ps, lo + n + base, gap, depth)
            if shift:
                return shift, hard
        return 0, False

    def add(self, r: RoutedStream, starts: tuple[int, ...]) -> None:
        self._apply(r, starts, True)

    def remove(self, r: RoutedStream, starts: tuple[int, ...]) -> None:
        """Free what :meth:`add` took for ``r`` at ``starts`` (its windows, and its frames in the class queues)."""
        self._apply(r, starts, False)

    def _apply(self, r: RoutedStream, starts: tuple[int, ...], add: bool) -> None:
        period = r.stream.period_ns * 1000
        for k, (h, t) in enumerate(zip(r.hops, starts, strict=True)):
            lo, n = self.window(r, k, t)
            busy = self.occ((h.src, h.dst))
            queue = self.queueing and h.src in self.net.switches
            key = (h.src, h.dst, r.stream.traffic_class)
            ready = starts[r.parents[k]] + h.offset_ps - r.hops[r.parents[k]].offset_ps if k else t
            for base in range(0, self.horizon, period):
                if add:
                    busy.add(lo + base, n, r.stream.name)
                    if queue:
                        self.queues.add(key, ready + base, t + base, h.tx_ps, lo + n + base)
                else:
                    busy.remove(lo + base, n)
                    if queue:
                        self.queues.remove(key, ready + base, t + base)


def _budgets(r: RoutedStream, a: int) -> list[int]:
    """Per hop: the most the frame may have waited in total when it starts on that hop (latency and deadline)."""
    s = r.stream
    per_listener = []
    for lat in r.latency_ps:
        b = s.max_latency_ns * 1000 - lat
        if s.deadline_ns is not None:
            b = min(b, s.deadline_ns * 1000 - a - lat)
        per_listener.append(b)
    budget = [math.inf] * len(r.hops)
    for li, k in enumerate(r.last_hop):
        while k >= 0:
            budget[k] = min(budget[k], per_listener[li])
            k = r.parents[k]
    return budget


def _nowait(state: _State, r: RoutedStream, a: int, period: int) -> tuple[int, str]:
    for k, h in enumerate(r.hops):
        t = a + h.offset_ps
        shift, _ = state.shift(r, k, t, t, period)
        if shift:
            return shift, f"{h.src}→{h.dst}"
    return 0, ""


def _queued(state: _State, r: RoutedStream, a: int, period: int = 0) -> tuple[tuple[int, ...] | None, int, str]:
    """(hop starts, 0, "") or (None, how far ``a`` should move, the hop that failed)."""
    budget = _budgets(r, a)
    starts = [0] * len(r.hops)
    for k, h in enumerate(r.hops):
        where = f"{h.src}→{h.dst}"
        if k == 0:
            shift, _ = state.shift(r, 0, a, a, period)
            if shift:
                return None, shift, where
            starts[0] = a
            continue
        p = r.parents[k]
        ready = starts[p] + h.offset_ps - r.hops[p].offset_ps
        left = budget[k] - (ready - a - h.offset_ps) if state.grids.wait_ok.get(h.src, False) else 0
        g = state.grids.gate_ps.get(h.src, 1000)
        t = ready
        while True:
            if t - ready > left:
                return None, t - ready - max(0, left), where
            shift, hard = state.shift(r, k, ready, t, period)
            if hard:  # arrive later: after the start of the window that opened while it waited
                return None, shift, where
            if shift:
                t = -(-(t + shift) // g) * g
                continue
            break
        starts[k] = t
    return tuple(starts), 0, ""


def _nowait_starts(state: _State, r: RoutedStream, a: int, period: int = 0):
    shift, where = _nowait(state, r, a, period)
    return (None, shift, where) if shift else (r.nowait_starts(a), 0, "")


def _first_fit(a: int, hi: int, grid: int, attempt, tries: int = MAX_TRIES):
    """(hop starts or None, the last blocker, the last departure tried): departures from ``a`` on, each blocked one
    moving on by what ``attempt`` says (rounded up to the grid), at most :data:`MAX_TRIES`."""
    blocker = ""
    for _ in range(tries):
        if a > hi:
            break
        starts, shift, blocker = attempt(a)
        if starts is not None:
            return starts, "", a
        a = -(-(a + max(shift, 1)) // grid) * grid
    return None, blocker, a


NOT_TRIED = "not tried: the time limit came first"


def greedy(
    routed: list[RoutedStream],
    net: Network,
    grids: Grids,
    deadline: Deadline | None = None,
    order: list[RoutedStream] | None = None,
    state: _State | None = None,
    partial: bool = False,
    place=None,
) -> tuple[Placement, int]:
    """Place every stream it can (in ``order``, default shortest period first, then most hops) with ``place``
    (default :func:`place_one`, first fit; :func:`~.bestfit.place_tight` the tight placement); returns the
    placement and the hyperperiod (ps). At the deadline it raises, or with ``partial`` returns what it placed so far
    (the rest left out as :data:`NOT_TRIED`)."""
    horizon = hyperperiod_ps(routed)
    state = state or _State(horizon, net, grids)
    if order is None:
        order = sorted(routed, key=lambda r: (r.stream.period_ns, -len(r.hops), r.stream.name))
    place = place or place_one
    placed: dict[str, tuple[int, ...]] = {}
    unplaced: list[tuple[str, str]] = []
    for n, r in enumerate(order):
        if n % 64 == 0:
            if partial and deadline is not None and deadline.remaining() <= 0:
                unplaced += [(x.stream.name, NOT_TRIED) for x in order[n:]]
                break
            check(deadline)
        found, why = place(state, r)
        if found is None:
            unplaced.append((r.stream.name, why))
            continue
        state.add(r, found)
        placed[r.stream.name] = found
    return Placement(placed, unplaced), horizon


def _fit_in_ranges(ranges, grid: int, attempt, tries: int):
    """:func:`_first_fit` over the departure ranges of :func:`~.departures.free_ranges` (grid indices): a jump that
    leaves a range goes on at the next one."""
    blocker = ""
    i = 0
    a = ranges[0][0] * grid if ranges else 0
    for _ in range(tries):
        while i < len(ranges) and a > ranges[i][1] * grid:
            i += 1
        if i == len(ranges):
            break
        a = max(a, ranges[i][0] * grid)
        starts, shift, blocker = attempt(a)
        if starts is not None:
            return starts, "", a
        a = -(-(a + max(shift, 1)) // grid) * grid
    return None, blocker, a if i < len(ranges) else math.inf


def place_one(state: _State, r: RoutedStream) -> tuple[tuple[int, ...] | None, str]:
    """(hop starts of the first fit around what ``state`` holds, "") or (None, why not); ``state`` is unchanged.

    No wait first: a few first-fit jumps from the earliest departure, then the departures that miss every placed
    window (:func:`~.departures.free_ranges`, so a stream with none is left out at once); then, with queueing, the
    departures again with waits."""
    from .departures import free_ranges

    period = r.stream.period_ns * 1000
    grid = state.grids.departure_ps[r.stream.talker]
    lo, hi = departure_range(r, state.grids)
    nowait = functools.partial(_nowait_starts, state, r, period=period)
    found, blocker, a = _first_fit(lo, hi, grid, nowait, QUICK_TRIES)
    if found is None and a <= hi:
        ranges = free_ranges(state, r, a, hi, grid)
        if ranges:
            found, blocker, a = _fit_in_ranges(ranges, grid, nowait, MAX_TRIES)
        else:
            a = math.inf
    if found is not None:
        return found, ""
    why = "no free departure in its window" if a > hi else f"{MAX_TRIES} departures tried"
    if state.queueing:
        found, blocker, a = _first_fit(
            lo, hi, grid, functools.partial(_queued, state, r, period=period), MAX_QUEUED_TRIES
        )
        if found is not None:
            return found, ""
        why += " without a wait, " + ("none with waits" if a > hi else f"{MAX_QUEUED_TRIES} tried with waits")
    return None, f"{why} (last blocked on {blocker})"
