"""Exact no-wait scheduling with CP-SAT: a plan, a proof that none exists, or unknown at the time limit.

One integer per stream, its departure on its talker's grid (``a = s·δ`` of its talker, within its transmit-offset
window and early enough for its deadline: :func:`~keepon_plan.network.schedule.departure_range`). Two streams
``i, j`` sharing a directed link with hop offsets ``d_i, d_j`` and transmission times ``tx_i, tx_j`` never overlap
on it iff, with ``g = gcd(p_i, p_j)`` and ``x = (a_j + d_j) − (a_i + d_i)``: ``x mod g ∈ [tx_i, g − tx_j]`` (all
instance pairs of the two periodic streams differ by exactly the multiples of ``g``). The model states it with one
integer ``k`` per pair: ``tx_i ≤ x − k·g ≤ g − tx_j``. This is exact for no-wait schedules on the given routes
and talker grids: "infeasible" means no such schedule exists (a schedule that buffers frames in switches might
still). The reason names a link when that link's streams alone are already infeasible. The greedy's departures are
given to CP-SAT as a hint. On a byte-clock talker's own link a frame keeps a minimum frame of free link after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..deadline import Deadline, interrupt_at
from .routing import RoutedStream

PLAN, INFEASIBLE, UNKNOWN, MODEL_INVALID = "plan", "infeasible", "unknown", "model-invalid"


@dataclass
class ExactOutcome:
    status: str
    departure_ps: dict[str, int]
    reason: str = ""


def _pairs(routed: list[RoutedStream], grids) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
    """Per directed link: (stream index, hop offset, tx) of every stream on it; on a switch's egress the guarded
    window (:meth:`~keepon_plan.network.routing.Hop.window`) widened by the gate granularity less 1 ps on both sides
    stands for the transmission."""
    users: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for i, r in enumerate(routed):
        for h in r.hops:
            start, length = h.window()
            g = grids.gate_ps.get(h.src, 0)
            if g > 1000:
                start, length = start - (g - 1), length + 2 * (g - 1)
            length += grids.tail_ps.get(h.src, 0)
            users.setdefault((h.src, h.dst), []).append((i, start, length))
    return users


def add_apart(m, s, routed, grids, a, b, enforce=()) -> None:
    """Frames ``a = (i, di, txi)`` and ``b = (j, dj, txj)`` (indices into ``routed`` and ``s``, the CP-SAT departure
    slots; hop offsets and transmission lengths, ps) never overlap on the link they share: with ``g`` the gcd of the
    two periods, ``j``'s frame starts at least ``txi`` after ``i``'s and ends at least ``txj`` before ``i``'s next,
    modulo ``g``. ``enforce``: literals that must all hold for the condition to apply."""
    (i, di, txi), (j, dj, txj) = a, b
    pi, pj = routed[i].stream.period_ns * 1000, routed[j].stream.period_ns * 1000
    g = math.gcd(pi, pj)
    gi, gj = grids.departure_ps[routed[i].stream.talker], grids.departure_ps[routed[j].stream.talker]
    k = m.new_int_var((-(pi + di) + dj - (g - txj)) // g - 1, (pj + dj - di - txi) // g + 1, "")
    diff = gj * s[j] + dj - gi * s[i] - di
    for c in (m.add(diff - g * k >= txi), m.add(diff - g * k <= g - txj)):
        if enforce:
            c.only_enforce_if(list(enforce))


def _solve(routed, grids, links, time_limit: float, seed: int, stop: float = math.inf, hint=None):
    """Solve for ``time_limit`` seconds and stop by ``stop`` (a ``time.monotonic()`` reading) in any case."""
    from ortools.sat.python import cp_model

    from .schedule import departure_range

    slot_ps = grids.departure_ps
    m = cp_model.CpModel()
    s = []
    for r in routed:
        lo, hi = departure_range(r, grids)
        grid = slot_ps[r.stream.talker]
        s.append(m.new_int_var(lo // grid, hi // grid, f"s_{r.stream.name}"))
        if hint and r.stream.name in hint:
            m.add_hint(s[-1], hint[r.stream.name] // grid)
    users = _pairs(routed, grids)
    for link in links:
        group = users[link]
        for x in range(len(group)):
            for y in range(x + 1, len(group)):
                (i, _, txi), (j, _, txj) = group[x], group[y]
                pi, pj = routed[i].stream.period_ns * 1000, routed[j].stream.period_ns * 1000
                g = math.gcd(pi, pj)
                if g < txi + txj:
                    return (
                        INFEASIBLE,
                        None,
                        (
                            f"streams {routed[i].stream.name!r} and {routed[j].stream.name!r} on link "
                            f"{link[0]}→{link[1]}: "
                            f"the gcd of their periods ({g} ps) is shorter than their two frames ({txi} + {txj} ps)"
                        ),
                    )
                add_apart(m, s, routed, grids, group[x], group[y])
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    with interrupt_at(stop, solver.stop_search):
        status = solver.solve(m)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        dep = {r.stream.name: solver.value(v) * slot_ps[r.stream.talker] for r, v in zip(routed, s, strict=True)}
        return PLAN, dep, ""
    if status == cp_model.INFEASIBLE:
        return INFEASIBLE, None, ""
    if status == cp_model.MODEL_INVALID:
        return MODEL_INVALID, None, "CP-SAT refused the model (MODEL_INVALID)"
    return UNKNOWN, None, ""


def solve_exact(
    routed: list[RoutedStream], net, grids, deadline: Deadline, seed: int = 0, hint: dict | None = None
) -> ExactOutcome:
    """Decide the whole instance; on a proof, find a link whose streams alone are infeasible for the reason."""
    links = _pairs(routed, grids)
    status, dep, why = _solve(routed, grids, list(links), deadline.remaining() * 0.8, seed, deadline.at, hint)
    if status == PLAN:
        return ExactOutcome(PLAN, dep or {})
    if status == UNKNOWN:
        return ExactOutcome(UNKNOWN, {}, "CP-SAT reached the time limit without a plan or a proof")
    if status == MODEL_INVALID:
        return ExactOutcome(UNKNOWN, {}, why)
    if why:
        return ExactOutcome(INFEASIBLE, {}, why)
    for link, group in sorted(links.items(), key=lambda kv: len(kv[1]), reverse=True):
        if len(group) < 2 or deadline.remaining() <= 0:
            continue
        sub = [routed[i] for i in sorted({i for i, _, _ in group})]
        st, _, _ = _solve(sub, grids, [link], deadline.remaining() * 0.5, seed, deadline.at)
        if st == INFEASIBLE:
            names = ", ".join(r.stream.name for r in sub)
            return ExactOutcome(
                INFEASIBLE,
                {},
                f"link {link[0]}→{link[1]}: its {len(sub)} streams ({names}) admit no conflict-free no-wait "
                "departures on their talkers' slot grids (CP-SAT proof on that link alone)",
            )
    names = ", ".join(r.stream.name for r in routed)
    return ExactOutcome(
        INFEASIBLE,
        {},
        f"no conflict-free no-wait departures exist for the streams {names} (CP-SAT proof; every link alone is "
        "feasible, their coupling along the routes is not)",
    )
