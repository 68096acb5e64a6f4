"""Stream-to-core allocation: which poll core sends which stream, so that no two streams on one core contend.

The DPDK end station of Xue, Zhang and Han (DAC 2024, §4; ``/work/shared/papers/002_*``) gives every TX queue its
own core and, to keep a frame's preparation deterministic, lets a core have **one frame in hand at a time**: the
core is busy with an instance from the moment it must start preparing it until the frame's launch time (the
paper's ``t_1 … t_3``, Fig. 5). Two streams **conflict** when some instance of one is in hand while some instance
of the other is, at any point of the repeating schedule (Definition 1, constraint (1)); the streams of one core
must be pairwise conflict-free, so an allocation to ``k`` cores is a ``k``-colouring of the conflict graph
(Theorem 1).

Timing of one instance on its core (integer ns, relative to a period start; ``t`` is the launch time, the frame's
first bit)::

    |<------------------------------- before ------------------------------->|
    | host worst-case delay | prefetch | per frame | descriptors·per descriptor |
    t − before                                                                  t (first bit on the wire)

``before = host_delay + prefetch + per_frame + descriptors·per_descriptor`` is what the core is busy with: the
paper's ``T`` (worst-case CPU delay) and ``Δ`` (NIC pre-fetch time), and keepon's own poll-loop costs (the paper folds
its command execution time into ``T``). A stream with a fixed offset ``o`` is busy during ``[o − before, o)`` of
each period; one whose offset the network schedule has not fixed yet (a window ``[earliest, latest]``) during
some such interval with ``o`` in the window, so it conflicts with another when *some* choice of both offsets does
(the allocation then holds for whatever the schedule picks).

**Exact pairwise test.** All instance pairs of two periodic streams differ by exactly the multiples of
``g = gcd(p_i, p_j)``. Busy intervals ``[x, x + b_i)`` and ``[y, y + b_j)`` overlap iff ``−b_j < y − x < b_i``; so
``i`` and ``j`` are conflict-free iff every difference ``d`` of their interval starts the windows allow lies, modulo
``g``, in ``[b_i, g − b_j]``. With windows that is an interval of ``d`` tested in O(1) (:func:`conflict`).

**Colouring.** DSatur (greedy by saturation) gives an allocation and an upper bound; a clique found greedily is a
lower bound (its streams pairwise conflict, so need that many cores). When they meet, the allocation uses the
fewest cores possible, and that is said. Asked for ``k`` cores: a clique larger than ``k`` is the refusal's proof
(its streams named); with ``k = 2`` an odd cycle of conflicts is (found by a breadth-first 2-colouring); otherwise
CP-SAT decides ``k``-colourability, and its "infeasible" is reduced to a minimal set of streams that alone need
more than ``k`` cores (every stream of it is needed: without any one the rest fit), which names them.

Every allocation is checked by :func:`verify_allocation`, which shares nothing with the colouring: it lays out
every instance of every stream of a core over the hyperperiod and looks for two that overlap.
"""

from __future__ import annotations

import math
import time
import tomllib
from collections import deque
from dataclasses import dataclass, field

from .model import InputError, SourceMap, read_input
from .units import ValueError_, format_duration, parse_duration

__all__ = [
    "DEFAULT_BUDGET",
    "Allocation",
    "CoreBudget",
    "CoreStream",
    "allocate",
    "conflict",
    "conflict_graph",
    "load_cores",
    "min_cores",
    "verify_allocation",
]

FOUND, INFEASIBLE, UNKNOWN = "found", "infeasible", "unknown"

MAX_VERIFY_INSTANCES = 2_000_000
"""The verifier lays out every instance of a hyperperiod; beyond this many it refuses rather than run for minutes."""


@dataclass(frozen=True)
class CoreBudget:
    """What one core spends on one frame before its launch time (ns). Defaults: :data:`DEFAULT_BUDGET`."""

    per_descriptor_ns: int
    per_frame_ns: int
    host_delay_ns: int
    prefetch_ns: int = 0

    def before(self, s: CoreStream) -> int:
        """How long before its launch time the core holds an instance of ``s``."""
        return self.host_delay_ns + self.prefetch_ns + self.per_frame_ns + s.descriptors * self.per_descriptor_ns


DEFAULT_BUDGET = CoreBudget(per_descriptor_ns=172, per_frame_ns=201, host_delay_ns=10_900, prefetch_ns=0)
"""Per descriptor 172 ns: the byte clock's whole poll loop per descriptor posted at 1 Gb/s, the upper end of
136–172 ns (docs/measured.md, "bytebench alone", *measured* on the 2-core development VM). Per frame 201 ns: the
p99 of a scheduled insertion of a 64 B frame, upper end of 141–201 ns (docs/measured.md, core benchmark,
*measured*, same machine under load). Host worst-case delay 10.9 µs: the paper's worst HPET wake-up (Table 1, 1 ms
cycle; *paper*) — keepon has no worst-case host delay measured on real hardware (the VM's 1–3 ms stalls are the
VM's), so this one is borrowed and should be replaced by the target host's. Prefetch 0: keepon posts descriptors
itself, there is no NIC pre-fetch lead (the paper's is 50 µs)."""


@dataclass(frozen=True)
class CoreStream:
    """A periodic stream as its core sees it: launch time of instance ``l`` at ``offset + l·period`` (ns from a
    period start), ``offset`` fixed (``earliest == latest``) or anywhere in ``[earliest, latest]``."""

    name: str
    period_ns: int
    frame_bytes: int
    earliest_ns: int
    latest_ns: int
    descriptors: int = 1

    def fixed(self) -> bool:
        return self.earliest_ns == self.latest_ns


def conflict(a: CoreStream, b: CoreStream, budget: CoreBudget) -> bool:
    """Whether ``a`` and ``b`` could have instances in hand at once on one core (the module docstring's test)."""
    ba, bb = budget.before(a), budget.before(b)
    g = math.gcd(a.period_ns, b.period_ns)
    # d = start of b's interval − start of a's, over every offset pair the windows allow
    lo = (b.earliest_ns - bb) - (a.latest_ns - ba)
    hi = (b.latest_ns - bb) - (a.earliest_ns - ba)
    free = g - ba - bb  # the conflict-free residues are [ba, g − bb]: free + 1 of them
    if free < 0 or hi - lo > free:
        return True
    r = lo % g
    return not (ba <= r and r + (hi - lo) <= g - bb)


def alone_fits(s: CoreStream, budget: CoreBudget) -> bool:
    """A stream whose own instances overlap (busy longer than its period) fits no core."""
    return budget.before(s) <= s.period_ns


def conflict_graph(streams: list[CoreStream], budget: CoreBudget) -> list[set[int]]:
    """Adjacency sets of the conflict graph (Definition 2), vertices in the order of ``streams``."""
    adj: list[set[int]] = [set() for _ in streams]
    for i in range(len(streams)):
        for j in range(i + 1, len(streams)):
            if conflict(streams[i], streams[j], budget):
                adj[i].add(j)
                adj[j].add(i)
    return adj


def dsatur(adj: list[set[int]]) -> list[int]:
    """Brélaz's DSatur: colour next the vertex with the most distinct colours among its neighbours (ties: most
    uncoloured neighbours, then lowest index), with the smallest colour none of its neighbours has."""
    n = len(adj)
    colour = [-1] * n
    seen: list[set[int]] = [set() for _ in range(n)]
    for _ in range(n):
        v = max(
            (u for u in range(n) if colour[u] < 0),
            key=lambda u: (len(seen[u]), sum(1 for w in adj[u] if colour[w] < 0), -u),
        )
        c = 0
        while c in seen[v]:
            c += 1
        colour[v] = c
        for w in adj[v]:
            seen[w].add(c)
    return colour


def greedy_clique(adj: list[set[int]]) -> list[int]:
    """A large clique: from every vertex, add neighbours by falling degree while they meet all chosen ones."""
    best: list[int] = []
    order = sorted(range(len(adj)), key=lambda v: (-len(adj[v]), v))
    for v in order:
        if len(adj[v]) + 1 <= len(best):
            break
        clique = [v]
        candidates = adj[v]
        for w in sorted(adj[v], key=lambda u: (-len(adj[u] & candidates), u)):
            if w in candidates:
                clique.append(w)
                candidates = candidates & adj[w]
        if len(clique) > len(best):
            best = clique
    return sorted(best)


def odd_cycle(adj: list[set[int]]) -> list[int] | None:
    """An odd cycle (vertices in cycle order) if the graph is not bipartite, else None (breadth-first search)."""
    return _bipartition(adj)[1]


def _bipartition(adj: list[set[int]]) -> tuple[list[int], list[int] | None]:
    """Each vertex's side of a breadth-first two-colouring, and the odd cycle that breaks it (None: bipartite)."""
    n = len(adj)
    side = [-1] * n
    parent = [-1] * n
    for root in range(n):
        if side[root] >= 0:
            continue
        side[root] = 0
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for w in sorted(adj[u]):
                if side[w] < 0:
                    side[w], parent[w] = 1 - side[u], u
                    queue.append(w)
                elif side[w] == side[u]:
                    return side, _cycle_through(parent, u, w)
    return side, None


def _cycle_through(parent: list[int], u: int, w: int) -> list[int]:
    """The cycle closed by edge ``u–w`` in a breadth-first tree: both paths up to their lowest common ancestor."""
    up_u = [u]
    while parent[up_u[-1]] >= 0:
        up_u.append(parent[up_u[-1]])
    up_w = [w]
    while parent[up_w[-1]] >= 0:
        up_w.append(parent[up_w[-1]])
    on_u = set(up_u)
    meet = next(x for x in up_w if x in on_u)
    return up_u[: up_u.index(meet) + 1] + up_w[: up_w.index(meet)][::-1]


def _cpsat_colour(adj: list[set[int]], k: int, fixed: list[int], seconds: float, seed: int = 0):
    """(status, colouring or None): CP-SAT on ``x[v, c]``; ``fixed`` (a clique) is pinned to colours 0, 1, … to
    break the symmetry of renaming cores."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{v}_{c}") for c in range(k)] for v in range(len(adj))]
    for v in range(len(adj)):
        m.add_exactly_one(x[v])
    for u in range(len(adj)):
        for w in adj[u]:
            if u < w:
                for c in range(k):
                    m.add_bool_or([x[u][c].Not(), x[w][c].Not()])
    for c, v in enumerate(fixed[:k]):
        m.add(x[v][c] == 1)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    status = solver.solve(m)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return FOUND, [next(c for c in range(k) if solver.value(x[v][c])) for v in range(len(adj))]
    if status == cp_model.INFEASIBLE:
        return INFEASIBLE, None
    return UNKNOWN, None


def _subgraph(adj: list[set[int]], keep: list[int]) -> list[set[int]]:
    index = {v: i for i, v in enumerate(keep)}
    return [{index[w] for w in adj[v] if w in index} for v in keep]


def _colourable(adj: list[set[int]], k: int, stop: float) -> bool | None:
    """Whether ``adj`` is ``k``-colourable (None: undecided by ``stop``)."""
    if not adj:
        return True
    if max(dsatur(adj)) + 1 <= k:
        return True
    clique = greedy_clique(adj)
    if len(clique) > k:
        return False
    if k == 2:
        return odd_cycle(adj) is None
    status, _ = _cpsat_colour(adj, k, clique, stop - time.monotonic())
    return {FOUND: True, INFEASIBLE: False}.get(status)


def minimal_witness(adj: list[set[int]], k: int, stop: float) -> tuple[list[int], bool]:
    """A set of vertices that alone is not ``k``-colourable, and whether it is minimal (deletion filter: a vertex
    is dropped when the rest still needs more than ``k`` colours; stops shrinking at ``stop``)."""
    keep = list(range(len(adj)))
    # only the component(s) that need more than k matter: start from the first such connected component
    for comp in _components(adj):
        if _colourable(_subgraph(adj, comp), k, stop) is False:
            keep = comp
            break
    minimal = True
    for v in list(keep):
        if time.monotonic() >= stop:
            minimal = False
            break
        trial = [u for u in keep if u != v]
        if _colourable(_subgraph(adj, trial), k, stop) is False:
            keep = trial
    return keep, minimal


def _components(adj: list[set[int]]) -> list[list[int]]:
    seen: set[int] = set()
    out = []
    for root in range(len(adj)):
        if root in seen:
            continue
        comp, stack = [], [root]
        seen.add(root)
        while stack:
            u = stack.pop()
            comp.append(u)
            for w in adj[u]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        out.append(sorted(comp))
    return out


@dataclass
class Allocation:
    """The outcome for ``k`` cores: ``status`` one of found / infeasible / unknown."""

    status: str
    cores: list[list[str]] = field(default_factory=list)
    """Found: per core, the names of its streams (cores numbered from 0; unused cores are empty)."""
    used: int = 0
    """Cores the allocation uses."""
    lower_bound: int = 0
    """Cores any allocation needs (the largest clique found, or more when proven)."""
    bound: str = ""
    """How ``lower_bound`` is proven: a clique (its streams), an odd cycle, or CP-SAT."""
    method: str = ""
    conflicting: list[str] = field(default_factory=list)
    """Infeasible: streams that alone need more than ``k`` cores (a clique, an odd cycle or a minimal set)."""
    reason: str = ""

    @property
    def optimal(self) -> bool:
        return self.status == FOUND and self.used == self.lower_bound


def _check_alone(streams: list[CoreStream], budget: CoreBudget) -> Allocation | None:
    for s in streams:
        if not alone_fits(s, budget):
            return Allocation(
                INFEASIBLE,
                conflicting=[s.name],
                method="period",
                reason=f"stream {s.name!r} alone: a core holds each instance {budget.before(s)} ns before its "
                f"launch, longer than its period {s.period_ns} ns, so its own instances overlap on any core",
            )
    return None


def allocate(
    streams: list[CoreStream], budget: CoreBudget, k: int, time_limit: float = 10.0, seed: int = 0
) -> Allocation:
    """Allocate ``streams`` to ``k`` cores, or refuse naming streams that need more, or ``unknown``."""
    stop = time.monotonic() + time_limit
    refused = _check_alone(streams, budget)
    if refused is not None:
        return refused
    adj = conflict_graph(streams, budget)
    names = [s.name for s in streams]
    colour = dsatur(adj)
    clique = greedy_clique(adj)
    used = max(colour, default=-1) + 1
    lower = len(clique)
    if used <= k:
        found = _found(names, colour, k, lower, "DSatur")
        found.lower_bound, found.bound = _lower_bound(adj, names, clique, found.used, stop)
        return found
    if lower > k:
        return Allocation(
            INFEASIBLE,
            lower_bound=lower,
            method="clique",
            conflicting=[names[v] for v in clique],
            reason=f"{lower} streams pairwise conflict (a clique of the conflict graph), so they need {lower} cores "
            f"and {k} do not suffice: {', '.join(names[v] for v in clique)}",
        )
    if k == 2:
        cycle = odd_cycle(adj)
        if cycle is not None:
            shown = " – ".join(names[v] for v in cycle)
            return Allocation(
                INFEASIBLE,
                lower_bound=3,
                method="odd cycle",
                conflicting=[names[v] for v in cycle],
                reason=f"{len(cycle)} streams conflict in a cycle of odd length ({shown} – {names[cycle[0]]}): two "
                "cores cannot alternate around it, so 2 do not suffice",
            )
        found = _found(names, _two_colouring(adj), k, lower, "2-colouring (bipartite)")
        found.lower_bound, found.bound = _lower_bound(adj, names, clique, found.used, stop)
        return found
    status, cp_colour = _cpsat_colour(adj, k, clique, stop - time.monotonic(), seed)
    if status == FOUND:
        assert cp_colour is not None
        found = _found(names, cp_colour, k, lower, "CP-SAT")
        found.lower_bound, found.bound = _lower_bound(adj, names, clique, found.used, stop)
        return found
    if status == UNKNOWN:
        return Allocation(
            UNKNOWN,
            lower_bound=lower,
            method="CP-SAT",
            reason=f"DSatur needs {used} cores, the largest clique found {lower}; CP-SAT did not decide {k} cores "
            f"within {time_limit:g} s",
        )
    witness, minimal = minimal_witness(adj, k, stop)
    shown = ", ".join(names[v] for v in witness)
    how = "every one is needed: without any of them the rest fit" if minimal else "not reduced to a minimal set"
    return Allocation(
        INFEASIBLE,
        lower_bound=k + 1,
        method="CP-SAT",
        conflicting=[names[v] for v in witness],
        reason=f"CP-SAT proved that these {len(witness)} streams need more than {k} cores although no {k + 1} of "
        f"them pairwise conflict ({how}): {shown}",
    )


def _lower_bound(adj: list[set[int]], names: list[str], clique: list[int], used: int, stop: float) -> tuple[int, str]:
    """The best lower bound on the cores needed that can be shown cheaply, and how: the clique when it meets
    ``used``; else whether ``used − 1`` cores are refuted (odd cycle for 2, CP-SAT above) before ``stop``."""
    shown = ", ".join(names[v] for v in clique)
    if used <= 1:
        return used, "no allocation uses fewer than one core"
    if len(clique) >= used:
        return len(clique), f"{len(clique)} streams pairwise conflict ({shown})"
    if used - 1 == 2:
        cycle = odd_cycle(adj)
        if cycle is not None:
            return 3, "an odd cycle of conflicts (" + " – ".join(names[v] for v in cycle) + ") needs 3"
    elif time.monotonic() < stop and _colourable(adj, used - 1, stop) is False:
        return used, f"CP-SAT proved {used - 1} cores too few"
    return len(clique), f"{len(clique)} streams pairwise conflict ({shown}); fewer than {used} not ruled out"


def _two_colouring(adj: list[set[int]]) -> list[int]:
    """The two-colouring of a bipartite graph."""
    return _bipartition(adj)[0]


def _found(names: list[str], colour: list[int], k: int, lower: int, method: str) -> Allocation:
    cores: list[list[str]] = [[] for _ in range(k)]
    for name, c in zip(names, colour, strict=True):
        cores[c].append(name)
    used = sum(1 for c in cores if c)
    return Allocation(FOUND, cores=cores, used=used, lower_bound=lower, method=method)


def min_cores(streams: list[CoreStream], budget: CoreBudget, time_limit: float = 10.0, seed: int = 0):
    """(fewest cores, exact?) — DSatur's count lowered by CP-SAT until a count is refused or the clique bound met;
    ``None`` when a stream fits no core."""
    if _check_alone(streams, budget) is not None:
        return None, True
    stop = time.monotonic() + time_limit
    adj = conflict_graph(streams, budget)
    best = max(dsatur(adj), default=-1) + 1
    lower = len(greedy_clique(adj))
    while best > lower:
        if best - 1 == 2:
            if odd_cycle(adj) is None:
                best = 2
            break
        status, _ = _cpsat_colour(adj, best - 1, greedy_clique(adj), stop - time.monotonic(), seed)
        if status == FOUND:
            best -= 1
        elif status == INFEASIBLE:
            break
        else:
            return best, False
    return best, True


def verify_allocation(streams: list[CoreStream], budget: CoreBudget, cores: list[list[str]]) -> list[str]:
    """Violations of an allocation, found by laying out instances (no conflict formula, no colouring).

    Every stream is on exactly one core; no stream is busy longer than its period; for two streams of one core,
    every instance's busy span over the hyperperiod of the two (``[earliest − before, latest)`` of each period: every
    span a choice of offset in the window can occupy) is disjoint from every instance of the other, wrapping at the
    hyperperiod's end.
    """
    by_name = {s.name: s for s in streams}
    bad: list[str] = []
    placed: dict[str, int] = {}
    for c, names in enumerate(cores):
        for n in names:
            if n not in by_name:
                bad.append(f"core {c}: unknown stream {n!r}")
            elif n in placed:
                bad.append(f"stream {n!r} on cores {placed[n]} and {c}")
            else:
                placed[n] = c
    bad += [f"stream {n!r} on no core" for n in by_name if n not in placed]
    for c, names in enumerate(cores):
        members = [by_name[n] for n in names if n in by_name]
        for s in members:
            if budget.before(s) > s.period_ns:
                bad.append(f"core {c}: stream {s.name!r} is busy {budget.before(s)} ns per {s.period_ns} ns period")
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                clash = _first_overlap(members[i], members[j], budget)
                if clash is not None:
                    bad.append(f"core {c}: streams {members[i].name!r} and {members[j].name!r} {clash}")
    return bad


def _spans(s: CoreStream, budget: CoreBudget, horizon: int) -> list[tuple[int, int]]:
    """Busy spans of ``s`` over ``[0, horizon)``, a span crossing the end split in two."""
    out = []
    for k in range(horizon // s.period_ns):
        start = (s.earliest_ns - budget.before(s) + k * s.period_ns) % horizon
        end = start + s.latest_ns - s.earliest_ns + budget.before(s)
        if end > horizon:
            out += [(start, horizon), (0, end - horizon)]
        else:
            out.append((start, end))
    return sorted(out)


def _first_overlap(a: CoreStream, b: CoreStream, budget: CoreBudget) -> str | None:
    horizon = math.lcm(a.period_ns, b.period_ns)
    if horizon // a.period_ns + horizon // b.period_ns > MAX_VERIFY_INSTANCES:
        return f"not verified: {horizon // a.period_ns + horizon // b.period_ns} instances in their hyperperiod"
    sa, sb = _spans(a, budget, horizon), _spans(b, budget, horizon)
    i = j = 0
    while i < len(sa) and j < len(sb):
        (a0, a1), (b0, b1) = sa[i], sb[j]
        if a0 < b1 and b0 < a1:
            return f"are both in hand during [{max(a0, b0)}, {min(a1, b1)}) ns of their {horizon} ns hyperperiod"
        if a1 <= b1:
            i += 1
        else:
            j += 1
    return None


# ---------------------------------------------------------------------------------------------------------------
# Reading a stream list

_TOP_KEYS = {"version", "core", "stream"}
_CORE_KEYS = {"cores", "per_descriptor", "per_frame", "host_delay", "prefetch"}
_STREAM_KEYS = {"name", "period", "frame_bytes", "offset", "earliest_offset", "latest_offset", "descriptors"}


def load_cores(path: str) -> tuple[list[CoreStream], CoreBudget, int | None]:
    """Read a stream list (TOML, ``python/README.md`` "Stream-to-core allocation"): streams, the budget, ``cores``."""
    return parse_cores(read_input(path, "the stream list"), path)


def parse_cores(text: str, path: str | None = None) -> tuple[list[CoreStream], CoreBudget, int | None]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"TOML syntax: {exc}", path) from exc
    src = SourceMap(text)

    def err(message: str, where: tuple = ()) -> InputError:
        return InputError(message, path, src.line(where) if where else None)

    def unknown(d: dict, allowed: set[str], where: tuple, what: str) -> None:
        for key in d:
            if key not in allowed:
                raise err(f"{what}: unknown key {key!r} (allowed: {', '.join(sorted(allowed))})", (*where, key))

    def duration(d: dict, key: str, where: tuple, what: str, default: int | None) -> int | None:
        if key not in d:
            return default
        try:
            return parse_duration(d[key])
        except ValueError_ as exc:
            raise err(f"{what}: {key}: {exc}", (*where, key)) from exc

    def integer(d: dict, key: str, where: tuple, what: str, lo: int, hi: int, default: int | None) -> int | None:
        if key not in d:
            return default
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise err(f"{what}: {key} must be an integer in {lo}..={hi}, got {v!r}", (*where, key))
        return v

    unknown(doc, _TOP_KEYS, (), "the stream list")
    if doc.get("version", 1) != 1:
        raise err("version: only version 1 exists", ("version",))
    core = doc.get("core", {})
    if not isinstance(core, dict):
        raise err("core must be a table: [core]", ("core",))
    unknown(core, _CORE_KEYS, ("core",), "[core]")
    w = ("core",)
    d = DEFAULT_BUDGET
    budget = CoreBudget(
        duration(core, "per_descriptor", w, "[core]", d.per_descriptor_ns) or 0,
        duration(core, "per_frame", w, "[core]", d.per_frame_ns) or 0,
        duration(core, "host_delay", w, "[core]", d.host_delay_ns) or 0,
        duration(core, "prefetch", w, "[core]", d.prefetch_ns) or 0,
    )
    cores = integer(core, "cores", w, "[core]", 1, 1024, None)
    tables = doc.get("stream", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise err("stream must be an array of tables: [[stream]]", ("stream",))
    if not tables:
        raise err("the stream list has no [[stream]]")
    streams: list[CoreStream] = []
    seen: set[str] = set()
    for i, t in enumerate(tables):
        w = ("stream", i)
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise err(f"stream #{i + 1}: name must be a non-empty string", w)
        what = f"stream {name!r}"
        unknown(t, _STREAM_KEYS, w, what)
        if name in seen:
            raise err(f"{what}: duplicate stream name", (*w, "name"))
        seen.add(name)
        if "period" not in t:
            raise err(f"{what}: missing required key 'period'", w)
        if "frame_bytes" not in t:
            raise err(f"{what}: missing required key 'frame_bytes'", w)
        period = duration(t, "period", w, what, None)
        assert period is not None
        if period <= 0:
            raise err(f"{what}: period must be positive", (*w, "period"))
        frame = integer(t, "frame_bytes", w, what, 1, 65535, None)
        assert frame is not None
        if "offset" in t and ("earliest_offset" in t or "latest_offset" in t):
            raise err(f"{what}: give offset (fixed) or earliest_offset/latest_offset (a window), not both", w)
        if "offset" in t:
            earliest = latest = duration(t, "offset", w, what, 0)
            key = "offset"
        else:
            earliest = duration(t, "earliest_offset", w, what, 0)
            latest = duration(t, "latest_offset", w, what, period - 1)
            key = "latest_offset" if "latest_offset" in t else "earliest_offset"
        assert earliest is not None and latest is not None
        if not 0 <= earliest <= latest < period:
            raise err(
                f"{what}: offsets must satisfy 0 ≤ earliest_offset ≤ latest_offset < period "
                f"({format_duration(period)}), got [{earliest}, {latest}] ns",
                (*w, key),
            )
        descriptors = integer(t, "descriptors", w, what, 1, 4096, 1)
        assert descriptors is not None
        streams.append(CoreStream(name, period, frame, earliest, latest, descriptors))
    return streams, budget, cores
