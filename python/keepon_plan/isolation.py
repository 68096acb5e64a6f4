"""Ring partitioning and schedule synthesis (paper A.7/A.8), staged and exact.

Everything here is in slot units (see :mod:`keepon_plan.model`). A schedule gives each class a set of ring slots
(``0..N-1``) and each flow instance ``l`` a slot ``s_l``; slot ``s`` is ring slot ``s mod N``. The schedule
repeats every ``T = lcm(H, N)`` slots, so "two packets never at the same time" means distinct ``s mod T``.

The paper's pairwise jitter constraint ``||s_a − s_b| − |a − b|·P| ≤ J`` for all instance pairs is implied by a
window: ``s_l = o + l·P + e_l`` with ``0 ≤ e_l ≤ J`` (take ``o = min_l(s_l − l·P)``). That is O(M) per flow, and
it is exactly the constraint across repetitions of the schedule as well (``e_{l+M} = e_l``).

Stages, cheapest first; each either decides or hands over:

1. **Capacity bound.** Class ``c`` uses ``T·U_c`` slot occurrences in ``T/N`` ring cycles, so it owns at least
   ``⌈N·U_c⌉`` ring slots; ``Σ_c ⌈N·U_c⌉ > N`` proves infeasibility. Empty fixed-phase windows do too.
2. **Closed form.** If the periods and ``N`` form a divisibility chain and phases are free, the bound is also
   sufficient: buddy allocation of residue classes gives a zero-jitter schedule (:func:`buddy_schedule`).
3. **Offset search** (:mod:`keepon_plan.offsets`): an exact depth-first search over one offset per flow, the
   question of stage 4 without CP-SAT's set-up cost. A plan, a proof that no zero-jitter schedule exists (which
   decides the problem when no flow has jitter freedom, and otherwise skips stage 4), or a node limit.
4. **Compact zero-jitter CP-SAT model**: one offset per flow; two flows of a class collide iff their offsets are
   congruent modulo ``gcd`` of their periods. Exact when no flow has jitter freedom.
5. **Shapes** (free phases, :mod:`keepon_plan.shapes`): the exact number of ring slots each flow group needs, by
   Hall's condition on time arcs (:mod:`keepon_plan.hall`; proof when they sum beyond ``N``, plan when the sets it
   finds can be rotated apart); then solver-free enumeration of fitting ring-slot sets up to rotation and
   reflection and packing of the inclusion-minimal ones (plan, or proof when the enumeration is complete);
   otherwise a greedy packing (plan only) and an exact CP-SAT search over ring-slot sets refined by cuts from the
   exact check (plan or proof).
6. **Per-class footprints**, packed by rotation when they fit (plan) or summed beyond ``N`` (proof).
7. **Complete CP-SAT model**: one Boolean per (instance, candidate slot); exact.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from . import shapes
from .deadline import interrupt_at
from .model import Problem
from .offsets import EXHAUSTED as OFFSETS_EXHAUSTED
from .offsets import PLAN as OFFSETS_PLAN
from .offsets import search_offsets
from .units import ceil_frac

if TYPE_CHECKING:  # both are imported only by the stages that use them (CP-SAT takes about half a second)
    from ortools.sat.python import cp_model

    from . import hall

PLAN = "plan"
INFEASIBLE = "infeasible"
UNKNOWN = "unknown"

Progress = Callable[[str], None]
STAGES = ("capacity", "closed-form", "offset-search", "zero-jitter", "shapes", "footprint", "complete")


def load_solver():
    """The CP-SAT module, imported on first use: only the stages that build a model pay for it.

    The import takes about a second on a cold start, so the time limit's signal can land inside it; the
    extension then fails with an ImportError caused by :class:`TimeLimitExceeded`, which is what is raised."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as e:
        from .deadline import TimeLimitExceeded

        if isinstance(e.__cause__, TimeLimitExceeded):
            raise e.__cause__ from None
        raise
    return cp_model


@dataclass(frozen=True)
class Schedule:
    """Owned ring slots per class and the slot of every instance of every flow over one horizon."""

    owned: tuple[frozenset[int], ...]
    slots: tuple[tuple[int, ...], ...]
    method: str


@dataclass
class Outcome:
    status: str
    schedule: Schedule | None = None
    reason: str = ""
    stages: list[tuple[str, str, float]] = field(default_factory=list)
    """(stage, result, seconds) for every stage that ran."""


# --------------------------------------------------------------------------------------------------------------
# Stage 1: necessary conditions


def class_slots_needed(problem: Problem) -> list[int]:
    """``⌈N·U_c⌉`` per class: the fewest ring slots that can carry the class's instances."""
    return [ceil_frac(problem.class_demand(c)) for c in range(len(problem.classes))]


def capacity_bound(problem: Problem) -> str | None:
    """A reason the problem is infeasible by counting alone, or ``None``."""
    for f in problem.flows:
        if f.window is not None and f.window[1] < f.window[0]:
            return f"flow {f.name!r}: no slot starts within [phase, phase + jitter]"
    need = class_slots_needed(problem)
    if sum(need) > problem.slots:
        detail = ", ".join(f"{name} ⌈{problem.class_demand(c)}⌉ = {need[c]}" for c, name in enumerate(problem.classes))
        return (
            f"capacity: the classes need Σ⌈N·U_c⌉ = {sum(need)} ring slots ({detail}) "
            f"but the ring has N = {problem.slots}"
        )
    return None


# --------------------------------------------------------------------------------------------------------------
# Stage 2: closed form for divisibility chains


def is_chain(values: list[int]) -> bool:
    """Whether the distinct values, sorted, each divide the next."""
    v = sorted(set(values))
    return all(b % a == 0 for a, b in itertools.pairwise(v))


class _Buddy:
    """Free residue classes ``r (mod m)`` of the integers; moduli must form a divisibility chain.

    Taking a class of modulus ``m`` splits the smallest free block whose modulus divides ``m``. With requests in
    ascending modulus, a request fails only if the free measure ``Σ 1/m`` is below ``1/m``.
    """

    def __init__(self) -> None:
        self.free: list[tuple[int, int]] = [(0, 1)]

    def measure(self) -> Fraction:
        return sum((Fraction(1, k) for _, k in self.free), Fraction(0))

    def take(self, m: int) -> int | None:
        fitting = [b for b in self.free if m % b[1] == 0]
        if not fitting:
            return None
        r, k = max(fitting, key=lambda b: (b[1], -b[0]))
        self.free.remove((r, k))
        self.free.extend((r + i * k, m) for i in range(1, m // k))
        return r


def buddy_schedule(problem: Problem) -> Schedule | None:
    """A zero-jitter schedule when the periods and ``N`` form a divisibility chain and the capacity bound holds.

    Level A (the ring, ``Z_N``): a flow with ``P | N`` takes a residue class mod ``P`` (ring slots
    ``o, o+P, …``); each class also takes ``⌈q_c⌉`` single ring slots ("bins") for its flows with ``P > N``,
    where ``q_c = Σ N/P`` over those flows. Level B: each bin is a timeline of its own (occurrences
    ``a + kN``); a flow with ``N | P`` takes a residue class mod ``P/N`` in the first bin with room (first fit
    decreasing; with divisible sizes each bin fills completely before the next opens). Returns ``None`` if the
    preconditions fail.
    """
    n = problem.slots
    if problem.fixed_phase or not is_chain([f.period for f in problem.flows] + [n]):
        return None
    if capacity_bound(problem) is not None:
        return None
    offsets: dict[int, int] = {}
    requests: list[tuple[int, int, int, int]] = []  # (modulus, class, kind 0=flow 1=bin, index)
    long_flows: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(problem.flows):
        if f.period <= n:
            requests.append((f.period, f.cls, 0, i))
        else:
            long_flows[f.cls].append(i)
    for c, idxs in long_flows.items():
        q = sum((Fraction(n, problem.flows[i].period) for i in idxs), Fraction(0))
        requests.extend((n, c, 1, b) for b in range(ceil_frac(q)))
    ring = _Buddy()
    bins: dict[int, list[tuple[int, _Buddy]]] = defaultdict(list)
    for modulus, c, kind, index in sorted(requests):
        r = ring.take(modulus)
        if r is None:
            return None
        if kind == 0:
            offsets[index] = r
        else:
            bins[c].append((r, _Buddy()))
    for c, idxs in long_flows.items():
        for i in sorted(idxs, key=lambda i: (problem.flows[i].period, i)):
            p = problem.flows[i].period
            for a, sub in bins[c]:
                k = sub.take(p // n)
                if k is not None:
                    offsets[i] = a + k * n
                    break
            else:
                return None
    slots = tuple(
        tuple(offsets[i] + l * f.period for l in range(problem.instances(f))) for i, f in enumerate(problem.flows)
    )
    return _trim(problem, slots, "closed form (divisibility chain, buddy allocation)")


def _trim(problem: Problem, slots: tuple[tuple[int, ...], ...], method: str) -> Schedule:
    """Each class owns exactly the ring slots its instances use; the rest stay best effort."""
    owned: list[set[int]] = [set() for _ in problem.classes]
    for f, ss in zip(problem.flows, slots, strict=True):
        owned[f.cls].update(s % problem.slots for s in ss)
    return Schedule(tuple(frozenset(o) for o in owned), slots, method)


# --------------------------------------------------------------------------------------------------------------
# Stages 4 to 6: CP-SAT (stage 3, the offset search, is in keepon_plan.offsets)


def _anchor(problem: Problem) -> int | None:
    """With free phases the whole schedule can be rotated: fix the offset of the longest-period flow to 0."""
    if problem.fixed_phase:
        return None
    return max(range(len(problem.flows)), key=lambda i: (problem.flows[i].period, -i))


def _ownership(model: cp_model.CpModel, problem: Problem, lower: list[int] | None) -> list[list[cp_model.IntVar]]:
    """Ownership Booleans: at most one class per ring slot, and each class at least its lower bound of slots."""
    n = problem.slots
    own = [[model.new_bool_var(f"own_{c}_{r}") for r in range(n)] for c in range(len(problem.classes))]
    for r in range(n):
        model.add_at_most_one(own[c][r] for c in range(len(problem.classes)))
    for c, need in enumerate(class_slots_needed(problem)):
        model.add(sum(own[c]) >= max(need, lower[c] if lower else 0))
    return own


def _zero_jitter_model(problem: Problem, lower: list[int] | None = None):
    """Offsets only: flow ``f`` sends at ``o_f + l·P_f``; exact when every flow's jitter freedom is 0."""
    cp_model = load_solver()
    model = cp_model.CpModel()
    n = problem.slots
    own = _ownership(model, problem, lower)
    anchor = _anchor(problem)
    choice: list[list[tuple[int, cp_model.IntVar]]] = []
    for i, f in enumerate(problem.flows):
        domain = range(f.period) if f.window is None else range(f.window[0], f.window[1] + 1)
        if i == anchor:
            domain = range(1)
        lits = [(v, model.new_bool_var(f"o_{i}_{v}")) for v in domain]
        model.add_exactly_one(lit for _, lit in lits)
        g = math.gcd(f.period, n)
        residue = [model.new_bool_var(f"rho_{i}_{k}") for k in range(g)]
        for v, lit in lits:
            model.add_implication(lit, residue[v % g])
        for k in range(g):
            for r in range(k, n, g):
                model.add_implication(residue[k], own[f.cls][r])
        choice.append(lits)
    for i, f in enumerate(problem.flows):
        for j in range(i + 1, len(problem.flows)):
            g = problem.flows[j]
            if g.cls != f.cls:
                continue  # different classes never share a ring slot, so never a slot occurrence
            d = math.gcd(f.period, g.period)
            by_residue: dict[int, list[cp_model.IntVar]] = defaultdict(list)
            for v, lit in choice[i] + choice[j]:
                by_residue[v % d].append(lit)
            for lits in by_residue.values():
                model.add_at_most_one(lits)

    def extract(solver: cp_model.CpSolver) -> tuple[tuple[int, ...], ...]:
        out = []
        for f, lits in zip(problem.flows, choice, strict=True):
            o = next(v for v, lit in lits if solver.boolean_value(lit))
            out.append(tuple(o + l * f.period for l in range(problem.instances(f))))
        return tuple(out)

    return model, extract, own


MAX_COMPLETE_BOOLEANS = 3_000_000
BRANCH_OFFSETS_FIRST = True
OFFSET_ORDER = "long-first"
JOINT_FIXED = False


def complete_model_size(problem: Problem) -> int:
    """Number of (instance, candidate slot) Booleans of the complete model."""
    total = 0
    for f in problem.flows:
        width = f.period + f.jitter if f.window is None else max(0, f.window[1] - f.window[0] + 1)
        total += problem.instances(f) * width
    return total


class _OutOfTime(Exception):
    """Synthesis passed its end while building a model (the stages' solver runs stop by themselves)."""


def _complete_model(problem: Problem, lower: list[int] | None = None, stop: float = math.inf):
    """One Boolean per (flow, instance, candidate slot); offsets as one-hot Booleans for free-phase flows.

    Building takes seconds for millions of Booleans: raises :class:`_OutOfTime` once ``stop`` has passed."""
    cp_model = load_solver()
    model = cp_model.CpModel()
    n, horizon = problem.slots, problem.horizon
    own = _ownership(model, problem, lower)
    anchor = _anchor(problem)
    occurrence: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    at_ring: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
    offsets_all: list[list[cp_model.IntVar]] = []
    chosen: list[list[list[tuple[int, cp_model.IntVar]]]] = []
    for i, f in enumerate(problem.flows):
        p, jit = f.period, f.jitter
        offset = None
        if f.window is None:
            offset = [model.new_bool_var(f"o_{i}_{o}") for o in range(p)]
            model.add_exactly_one(offset)
            offsets_all.append(offset)
            if i == anchor:
                model.add(offset[0] == 1)
        per_instance = []
        for l in range(problem.instances(f)):
            if time.monotonic() >= stop:
                raise _OutOfTime
            base = l * p
            lo, hi = (base, base + p - 1 + jit) if f.window is None else (base + f.window[0], base + f.window[1])
            cands = []
            for t in range(lo, hi + 1):
                x = model.new_bool_var(f"x_{i}_{l}_{t}")
                occurrence[t % horizon].append(x)
                at_ring[f.cls, t % n].append(x)
                model.add_implication(x, own[f.cls][t % n])
                if offset is not None:
                    first, last = max(0, t - base - jit), min(p - 1, t - base)
                    model.add_bool_or([x.Not(), *offset[first : last + 1]])
                cands.append((t, x))
            model.add_exactly_one(x for _, x in cands)
            per_instance.append(cands)
        chosen.append(per_instance)
    for lits in occurrence.values():
        if len(lits) > 1:
            model.add_at_most_one(lits)
    if BRANCH_OFFSETS_FIRST and offsets_all:
        # Decide the offsets first: once they are fixed, every instance has a fixed window and propagation plus
        # the LP are strong (the fixed-phase case, which solves fast). Longest period first (the measured
        # default; "short-first" was tried and was no better on the hard sets).
        sign = 1 if OFFSET_ORDER == "short-first" else -1
        order = sorted(range(len(offsets_all)), key=lambda k: sign * len(offsets_all[k]))
        model.add_decision_strategy(
            [v for k in order for v in offsets_all[k]], cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
        )
    # Redundant, for the LP: a ring slot carries at most T/N instances of its class, and none unless owned.
    for (c, r), xs in at_ring.items():
        model.add(sum(xs) <= (horizon // n) * own[c][r])

    def extract(solver: cp_model.CpSolver) -> tuple[tuple[int, ...], ...]:
        return tuple(
            tuple(next(t for t, x in cands if solver.boolean_value(x)) for cands in per_instance)
            for per_instance in chosen
        )

    hinted: set[tuple[int, int]] = set()

    def hint(flow: int, slots: tuple[int, ...]) -> None:
        """Suggest a schedule of one flow (a solution hint; CP-SAT may ignore it)."""
        for cands, s in zip(chosen[flow], slots, strict=True):
            for t, x in cands:
                model.add_hint(x, t == s)
        for r in {s % n for s in slots}:
            if (problem.flows[flow].cls, r) not in hinted:
                hinted.add((problem.flows[flow].cls, r))
                model.add_hint(own[problem.flows[flow].cls][r], True)

    model.hint_flow = hint  # type: ignore[attr-defined]
    return model, extract, own


CP_SAT_OVERRUN = 0.25
"""Seconds by which CP-SAT may overrun its own time limit: 0.09 s on a 1 s limit on a quiet machine, 0.2–0.35 s for
the complete model of an 8 500-Boolean set on the loaded development machine (loading and presolve do not look at
the clock). A run's limit ends this much before the stop it is given; a timer thread stops it at the stop itself,
which is as soon as CP-SAT looks at its stop flag, not sooner (the caller keeps :data:`cli.SOLVER_OVERRUN`)."""


def _run(
    model,
    seconds: float,
    seed: int,
    workers: int,
    progress: Progress | None,
    fixed_search: bool = False,
    stop: float = math.inf,
) -> tuple[int, cp_model.CpSolver]:
    """Solve for at most ``seconds``, and in any case stop by ``stop`` (a ``time.monotonic()`` reading)."""
    cp_model = load_solver()
    solver = cp_model.CpSolver()
    if fixed_search:
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
    seconds = min(seconds, stop - time.monotonic() - CP_SAT_OVERRUN)
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    if progress is not None:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False

        def log(line: str) -> None:
            if line.startswith("#"):
                progress("  cp-sat " + line.strip())

        solver.log_callback = log
    with interrupt_at(stop, solver.stop_search):
        status = solver.solve(model)
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"internal error: invalid CP-SAT model: {model.validate()}")
    return status, solver


def class_subproblem(problem: Problem, c: int) -> tuple[Problem, list[int]]:
    """The flows of class ``c`` alone (as class 0), and their indices in ``problem``."""
    idx = [i for i, f in enumerate(problem.flows) if f.cls == c]
    flows = tuple(replace(problem.flows[i], cls=0) for i in idx)
    return Problem(problem.slots, (problem.classes[c],), flows), idx


@dataclass
class Footprint:
    """Fewest ring slots class ``c`` can live on, alone: ``lower`` is proven; ``slots`` is a schedule of it."""

    lower: int
    slots: tuple[tuple[int, ...], ...] | None
    owned: frozenset[int]
    optimal: bool
    infeasible: bool = False


def class_footprint(
    problem: Problem, c: int, seconds: float, seed: int, workers: int, stop: float = math.inf
) -> Footprint:
    """Minimise the ring slots class ``c`` needs on its own (complete model, objective Σ own), by ``stop`` at the
    latest (:class:`_OutOfTime` if that passes while the model is built)."""
    cp_model = load_solver()
    sub, _ = class_subproblem(problem, c)
    if not sub.flows:
        return Footprint(0, (), frozenset(), True)
    closed = buddy_schedule(sub)
    if closed is not None:  # meets the counting bound ⌈N·U_c⌉, so it is optimal
        return Footprint(len(closed.owned[0]), closed.slots, closed.owned[0], True)
    if complete_model_size(sub) > MAX_COMPLETE_BOOLEANS:
        return Footprint(class_slots_needed(sub)[0], None, frozenset(), False)
    began = time.monotonic()
    floor = _full_flow_bound(sub, seconds / 2, seed, workers, stop)
    if floor is None:
        return Footprint(problem.slots + 1, None, frozenset(), True, infeasible=True)
    model, extract, own = _complete_model(sub, [floor], stop)
    model.minimize(sum(own[0]))
    left = max(0.05, seconds - (time.monotonic() - began))
    status, solver = _run(model, left, seed, workers, None, fixed_search=True, stop=stop)
    if status == cp_model.INFEASIBLE:
        return Footprint(problem.slots + 1, None, frozenset(), True, infeasible=True)
    bound = max(floor, class_slots_needed(sub)[0], ceil_frac(Fraction(round(solver.best_objective_bound * 1000), 1000)))
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        trimmed = _trim(sub, extract(solver), "")
        return Footprint(bound, trimmed.slots, trimmed.owned[0], status == cp_model.OPTIMAL)
    return Footprint(bound, None, frozenset(), False)


def _full_flow_bound(sub: Problem, seconds: float, seed: int, workers: int, stop: float = math.inf) -> int | None:
    """A lower bound on a one-class problem's footprint from its *full* flows (``None``: proven infeasible).

    A flow with ``P | N`` and no jitter freedom uses every occurrence of its ``N/P`` ring slots, so no other flow
    can share them: footprint ≥ ``Σ_full N/P`` + footprint of the other flows alone (computed recursively).
    """
    n = sub.slots
    full = [
        f
        for f in sub.flows
        if n % f.period == 0 and (f.jitter == 0 if f.window is None else f.window[0] == f.window[1])
    ]
    rest = tuple(f for f in sub.flows if f not in full)
    if not full or not rest:
        return class_slots_needed(sub)[0]
    rest_foot = class_footprint(Problem(n, sub.classes, rest), 0, seconds, seed, workers, stop)
    if rest_foot.infeasible:
        return None
    return max(class_slots_needed(sub)[0], sum(n // f.period for f in full) + rest_foot.lower)


def pack_rotations(
    problem: Problem, owned_sets: list[frozenset[int] | None], seconds: float, seed: int, stop: float = math.inf
) -> tuple[list[int | None], bool]:
    """Rotations ``k_c`` making the classes' ring-slot sets ``owned_sets[c] + k_c`` pairwise disjoint.

    Places as many classes as it can (``None``: not placed; classes without a shape are never placed) and says
    whether all were. A class whose flows all have free phases can be rotated as a whole (every constraint inside
    a class is invariant under a shift of all its slots); a class with a fixed-phase flow stays at rotation 0.
    """
    cp_model = load_solver()
    n = problem.slots
    model = cp_model.CpModel()
    choice: list[list[tuple[int, cp_model.IntVar]]] = []
    placed = []
    sized = [c for c, shape in enumerate(owned_sets) if shape]
    biggest = max(sized, key=lambda c: (len(owned_sets[c] or ()), -c)) if sized else None
    for c, shape in enumerate(owned_sets):
        fixed = any(f.window is not None for f in problem.flows if f.cls == c)
        ks = [] if shape is None else [0] if fixed or c == biggest or not shape else list(range(n))
        lits = [(k, model.new_bool_var(f"k_{c}_{k}")) for k in ks]
        used = model.new_bool_var(f"placed_{c}")
        model.add(sum(lit for _, lit in lits) == used)
        placed.append(used)
        choice.append(lits)
    users: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    for c, shape in enumerate(owned_sets):
        for k, lit in choice[c]:
            for r in shape or ():
                users[(r + k) % n].append(lit)
    for lits in users.values():
        if len(lits) > 1:
            model.add_at_most_one(lits)
    weights = [len(shape) if shape else 0 for shape in owned_sets]
    model.maximize(sum(w * p for w, p in zip(weights, placed, strict=True)))
    status, solver = _run(model, seconds, seed, 1, None, stop=stop)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return [None] * len(owned_sets), False
    out = [next((k for k, lit in lits if solver.boolean_value(lit)), None) for lits in choice]
    return out, all(k is not None for k, shape in zip(out, owned_sets, strict=True) if shape is not None) and all(
        shape is not None for shape in owned_sets
    )


def normalise(slots: tuple[int, ...], period: int, horizon: int) -> tuple[int, ...]:
    """Relabel a periodic instance sequence so that ``min_l (s_l − l·P)`` lies in ``[0, P)``."""
    seq = list(slots)
    base = min(s - l * period for l, s in enumerate(seq))
    while base >= period:
        seq = [seq[-1] - horizon, *seq[:-1]]
        base -= period
    while base < 0:
        seq = [*seq[1:], seq[0] + horizon]
        base += period
    return tuple(seq)


def _class_slots(problem: Problem, c: int, foot: Footprint, rotation: int) -> dict[int, tuple[int, ...]]:
    """Whole-horizon slots of the flows of class ``c`` from its own schedule, shifted by ``rotation``."""
    sub, idx = class_subproblem(problem, c)
    assert foot.slots is not None
    return _extend(problem, idx, sub.horizon, foot.slots, rotation)


def _extend(
    problem: Problem, idx: list[int], sub_horizon: int, sub_slots: tuple[tuple[int, ...], ...], rotation: int = 0
) -> dict[int, tuple[int, ...]]:
    """Whole-horizon slots of flows ``idx`` from a schedule of them alone (which repeats every ``sub_horizon``)."""
    out = {}
    for j, i in enumerate(idx):
        own, f = sub_slots[j], problem.flows[i]
        m = len(own)
        seq = tuple(own[l % m] + (l // m) * sub_horizon + rotation for l in range(problem.instances(f)))
        out[i] = normalise(seq, f.period, problem.horizon) if f.window is None else seq
    return out


SHAPES_SHARE = 0.4
"""The shapes stage ends by this fraction of the time limit."""
FOOTPRINT_SHARE = 0.55
FOOTPRINT_MIN = 0.1
"""The footprint stage ends by this fraction of the time limit, and runs for at least ``FOOTPRINT_MIN`` of it."""
HALL_SHARE = 0.5
"""Hall's condition may use this fraction of the shapes stage's time for the groups' exact sizes."""
HALL_WORK = 1e9
"""…and at most this much work (:class:`hall.Work`, array cells: 6–7 s on the development machine), shared
by the groups in order: the bound a group reaches then does not depend on the machine's speed or load, as long as
the time share is not what stops it."""
MAX_SHAPE_SETS = 400_000
"""The shapes stage gives up on a unit whose sets of one size (containing ring slot 0) exceed this."""


GREEDY_SECONDS = 2.0
"""Time for the greedy packing before the cut search takes over."""


def _cut_search(
    parts: list[tuple[list[int], Problem]],
    checkers: list[shapes.ShapeChecker],
    minimum: list[int],
    n: int,
    deadline: float,
    seed: int,
    progress: Progress | None = None,
) -> tuple[str, list[int] | None, int]:
    """Disjoint ring-slot sets for the flow groups by CP-SAT over the sets alone, refined by exact checks.

    The master model only chooses a set per group: every ring slot goes to exactly one group (fitting is
    monotone, so leftover slots may as well be given away), each group gets at least its proven size, and each
    flow's instance windows must all meet its group's set for some offset residue (one flow's residue is 0: the
    whole ring may be rotated). A proposal is checked with :meth:`shapes.ShapeChecker.fits_on`; for a group that
    does not fit, the set is first grown to a maximal set it still does not fit, and then every rotation and
    reflection of that set is excluded as a superset of the group's set. Both are exact, so the master becoming
    infeasible is a proof. Returns ``(status, masks, cuts)``.
    """
    cp_model = load_solver()
    model = cp_model.CpModel()
    own = [[model.new_bool_var(f"own_{u}_{r}") for r in range(n)] for u in range(len(parts))]
    for r in range(n):
        model.add_exactly_one(own[u][r] for u in range(len(parts)))
    anchored = False
    widest = max(math.gcd(f.period, n) for _, sub in parts for f in sub.flows)
    for u, (_, sub) in enumerate(parts):
        model.add(sum(own[u]) >= minimum[u])
        for j, f in enumerate(sub.flows):
            g = math.gcd(f.period, n)
            rho = [model.new_bool_var(f"rho_{u}_{j}_{r}") for r in range(g)]
            model.add_exactly_one(rho)
            if not anchored and g == widest:
                model.add(rho[0] == 1)
                anchored = True
            for r in range(g):
                for i in range(n // g):
                    window = {(r + g * i + d) % n for d in range(f.jitter + 1)}
                    model.add_bool_or([rho[r].Not(), *(own[u][w] for w in sorted(window))])
    cuts = 0
    full = (1 << n) - 1
    while time.monotonic() < deadline:
        status, solver = _run(model, deadline - time.monotonic(), seed, 1, None, stop=deadline)
        if status == cp_model.INFEASIBLE:
            return INFEASIBLE, None, cuts
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        masks = [sum(1 << r for r in range(n) if solver.boolean_value(own[u][r])) for u in range(len(parts))]
        refuted = False
        for u, checker in enumerate(checkers):
            try:
                if checker.fits_on(masks[u], deadline) is not None:
                    continue
            except shapes.Timeout:
                return UNKNOWN, None, cuts
            refuted = True
            grown = masks[u]
            for r in range(n):
                try:
                    if not grown >> r & 1 and checker.fits_on(grown | 1 << r, deadline) is None:
                        grown |= 1 << r
                except shapes.Timeout:
                    break  # a smaller refuted set still gives valid cuts
            for o in shapes.orientations(grown, n):
                model.add_bool_or([own[u][r] for r in range(n) if (full & ~o) >> r & 1])
            cuts += 1
            if progress is not None and cuts % 20 == 0:
                progress(f"  shapes: cut search, {cuts} sets refuted")
        if not refuted:
            return PLAN, masks, cuts
    return UNKNOWN, None, cuts


def _serving_sets(footprint: hall.GroupFootprint, k: int, deadline: float) -> list[int]:
    """Canonical sets of size ``k`` from Hall's condition, one per offset class, until the deadline."""
    found: set[int] = set()
    try:
        for mask in footprint.serving_sets(k, deadline):
            found.add(shapes.canonical(mask, footprint.n))
    except shapes.Timeout:
        pass
    return sorted(found)


def decide_by_shapes(
    problem: Problem, deadline: float, seed: int = 0, progress: Progress | None = None
) -> tuple[str, tuple[tuple[int, ...], ...] | None, str]:
    """Exact decision for free phases by enumerating each unit's inclusion-minimal ring-slot sets and packing them.

    Each unit's exact minimum size comes first, from Hall's condition on time arcs (:mod:`keepon_plan.hall`).

    The problem is feasible iff the units (:func:`shapes.units`) fit on pairwise disjoint ring-slot sets, and then
    on disjoint inclusion-minimal ones (fitting is monotone). A unit of minimum size ``m_u`` can only use minimal
    sets of size ``≤ m_u + (N − Σ m)``, so enumerating those (up to rotation and reflection) and packing them is
    complete. When a group has too many sets to enumerate, only a plan can be found (:func:`shapes.greedy_pack`).
    Returns ``(status, slots, reason)``; ``UNKNOWN`` when neither works before the deadline.
    """
    from . import hall  # numpy, only for this stage

    n = problem.slots
    parts = shapes.units(problem)
    checkers = [shapes.ShapeChecker(sub) for _, sub in parts]

    def label(k: int) -> str:
        idx = parts[k][0]
        return f"{problem.classes[problem.flows[idx[0]].cls]}: {'+'.join(problem.flows[i].name for i in idx)}"

    def packed(options: list[list[int]]) -> tuple[str, list[int] | None]:
        # The whole ring can be rotated and reflected: the group with the most shapes keeps only canonical ones.
        anchor = max(range(len(parts)), key=lambda k: (len(options[k]), -k))
        concrete = [
            opts if k == anchor else sorted({o for m in opts for o in shapes.orientations(m, n)})
            for k, opts in enumerate(options)
        ]
        return shapes.pack(concrete, n, deadline)

    def too_many_slots(how: str) -> tuple[str, None, str]:
        names = ", ".join(f"{label(k)} ≥ {m}{because[k]}" for k, m in enumerate(minimum))
        reason = f"shapes: {how}each flow group alone needs at least this many ring slots ({names})"
        return INFEASIBLE, None, f"{reason}: Σ = {sum(minimum)} > N = {n}"

    def plan_on(masks: list[int]) -> tuple[str, tuple[tuple[int, ...], ...], str]:
        slots: dict[int, tuple[int, ...]] = {}
        for (idx, sub), checker, mask in zip(parts, checkers, masks, strict=True):
            sub_slots = checker.fits_on(mask)
            assert sub_slots is not None, "a rotation or reflection of a fitting set fits"
            slots.update(_extend(problem, idx, sub.horizon, sub_slots))
        return PLAN, tuple(slots[i] for i in range(len(problem.flows))), ""

    # Each group's exact size by Hall's condition on time arcs (fast unless a group has very many offset
    # classes; then it keeps the bound it reached). First bounds from small subsets of each group's flows, in a
    # fixed budget of work (cheap, and often the whole group's size: then the group's own search starts there
    # and only has to find a set, not refute every smaller size).
    minimum = [class_slots_needed(sub)[0] for _, sub in parts]
    because = [""] * len(parts)
    witness: list[int | None] = [None] * len(parts)
    footprints = [hall.GroupFootprint(sub) for _, sub in parts]
    hall_deadline = min(deadline, time.monotonic() + HALL_SHARE * max(0.0, deadline - time.monotonic()))
    for k, (idx, sub) in enumerate(parts):
        try:
            bound, which = hall.subset_bound(sub, minimum[k], hall_deadline)
        except shapes.Timeout:
            break
        if which:
            minimum[k] = bound
            because[k] = f" (its flows {'+'.join(problem.flows[idx[i]].name for i in which)} alone)"
            if progress is not None:
                progress(f"  shapes: {label(k)} ≥ {bound}{because[k]} by Hall's condition; Σ ≥ {sum(minimum)} of {n}")
        if sum(minimum) > n:
            return too_many_slots("by Hall's condition on time arcs, ")
    work = hall.Work(HALL_WORK)
    for k, footprint in enumerate(footprints):
        bound, witness[k], _ = footprint.minimum(minimum[k], hall_deadline, work)
        if bound > minimum[k]:
            minimum[k], because[k] = bound, ""
        if progress is not None:
            exact = "=" if witness[k] is not None else "≥"
            progress(f"  shapes: {label(k)} {exact} {minimum[k]} by Hall's condition; Σ ≥ {sum(minimum)} of {n}")
        if sum(minimum) > n:
            break
    if sum(minimum) > n:
        return too_many_slots("by Hall's condition on time arcs, ")
    if all(w is not None for w in witness):
        # Sets from Hall's condition, first one per group and then, when they must tile the ring exactly, one per
        # offset class (as many as its time share allows): disjoint orientations of them are a plan.
        status, masks = packed([[w] for w in witness if w is not None])
        if status != "plan" and sum(minimum) == n:
            options = [_serving_sets(f, m, hall_deadline) for f, m in zip(footprints, minimum, strict=True)]
            status, masks = packed(options)
        if status == "plan" and masks is not None:
            return plan_on(masks)
    # Raise the groups' proven sizes cheapest level first, until their sum exceeds the ring (a proof) or every
    # group has fitting sets at its size (or has too many sets to enumerate: then it keeps its bound).
    first: list[list[int] | None] = [None] * len(parts)
    too_many: set[int] = set()
    while sum(minimum) <= n:
        open_units = [k for k in range(len(parts)) if first[k] is None and k not in too_many]
        if not open_units:
            break
        k = min(open_units, key=lambda k: (shapes.combinations_count(n, minimum[k]), k))
        if shapes.combinations_count(n, minimum[k]) > MAX_SHAPE_SETS:
            too_many.add(k)
            continue
        found = shapes.feasible_shapes(checkers[k], minimum[k], deadline)
        if found is None:
            return UNKNOWN, None, "time limit reached while enumerating ring-slot sets"
        if found:
            first[k] = found
        else:
            minimum[k] += 1
        if progress is not None:
            size = f"= {minimum[k]} ({len(found)} shape{'s' * (len(found) > 1)})" if found else f"≥ {minimum[k]}"
            progress(f"  shapes: {label(k)} {size}; Σ ≥ {sum(minimum)} of {n}")
    if sum(minimum) > n:
        return too_many_slots("")
    slack = n - sum(minimum)

    status, masks, why = "limit", None, "a flow group's ring-slot sets are too many to enumerate"
    if not too_many:
        # Smallest sets first: a packing of them is a plan, and with no slack their absence is a proof.
        options = [found or [] for found in first]
        status, masks = packed(options)
        if status == "infeasible" and slack:
            tops = [minimum[k] + slack for k in range(len(parts))]
            if any(shapes.combinations_count(n, top) > MAX_SHAPE_SETS for top in tops):
                status, why = "limit", "a flow group's larger ring-slot sets are too many to enumerate"
            else:
                for k, checker in enumerate(checkers):
                    more = shapes.minimal_shapes(checker, minimum[k] + 1, tops[k], deadline, options[k])
                    if more is None:
                        return UNKNOWN, None, "time limit reached while enumerating ring-slot sets"
                    options[k] = options[k] + more
                status, masks = packed(options)
        if status == "limit" and time.monotonic() > deadline:
            return UNKNOWN, None, "time limit reached while packing ring-slot sets"
    if status == "infeasible":
        return (
            INFEASIBLE,
            None,
            f"shapes: no choice of inclusion-minimal ring-slot sets of the {len(parts)} flow groups is disjoint "
            f"(all enumerated up to the slack of {slack} slots)",
        )
    if masks is None:  # the enumeration cannot be complete: greedy packing, then cuts on ring-slot sets
        masks = shapes.greedy_pack(checkers, n, min(deadline, time.monotonic() + GREEDY_SECONDS), seed)
    if masks is None:
        status, masks, cuts = _cut_search(parts, checkers, minimum, n, deadline, seed, progress)
        if status == INFEASIBLE:
            return (
                INFEASIBLE,
                None,
                f"shapes: no disjoint ring-slot sets fit the {len(parts)} flow groups "
                f"(CP-SAT over ring-slot sets with {cuts} sets refuted by the exact check)",
            )
        if masks is None:
            return UNKNOWN, None, f"{why}; neither greedy packing nor {cuts} cuts decided it"
    return plan_on(masks)


def synthesize(
    problem: Problem,
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    progress: Progress | None = None,
    stages: tuple[str, ...] = STAGES,
) -> Outcome:
    """Decide the problem: a plan, a proof of infeasibility, or unknown when ``time_limit`` runs out.

    Returns by about ``time_limit`` seconds: every solver run's own limit ends :data:`CP_SAT_OVERRUN` before that
    end and it is asked to stop at the end itself (it may still return a little later), and a model still being
    built then is abandoned. Deterministic for a given ``seed`` with ``workers = 1`` (CP-SAT's single-worker search is
    deterministic) as long as no stage is cut short by the time limit.
    """
    out = Outcome(UNKNOWN, reason=f"time limit {time_limit:.1f} s reached")
    try:
        return _staged(problem, time_limit, seed, workers, progress, stages, out)
    except _OutOfTime:
        out.reason = f"time limit {time_limit:.1f} s reached while building a solver model"
        return out


def _staged(
    problem: Problem,
    time_limit: float,
    seed: int,
    workers: int,
    progress: Progress | None,
    stages: tuple[str, ...],
    out: Outcome,
) -> Outcome:
    """The stages of :func:`synthesize`, cheapest first, filling in ``out``."""
    start = time.monotonic()
    stop = start + time_limit

    def note(stage: str, result: str, since: float) -> None:
        out.stages.append((stage, result, time.monotonic() - since))
        if progress is not None:
            progress(f"{stage}: {result} ({time.monotonic() - since:.3f} s)")

    def remaining() -> float:
        return time_limit - (time.monotonic() - start)

    def plan(stage: str, slots: tuple[tuple[int, ...], ...], method: str, since: float) -> Outcome:
        note(stage, "plan", since)
        out.status, out.schedule, out.reason = PLAN, _trim(problem, slots, method), ""
        return out

    def infeasible(stage: str, reason: str, since: float) -> Outcome:
        note(stage, "infeasible", since)
        out.status, out.reason = INFEASIBLE, reason
        return out

    t = time.monotonic()
    if "capacity" in stages:
        reason = capacity_bound(problem)
        if reason is not None:
            return infeasible("capacity", reason, t)
        note("capacity", "passed", t)

    t = time.monotonic()
    if "closed-form" in stages and not problem.fixed_phase:
        schedule = buddy_schedule(problem)
        if schedule is not None:
            return plan("closed-form", schedule.slots, "closed form (divisibility chain, buddy allocation)", t)
        note("closed-form", "not applicable", t)

    no_freedom = all((f.jitter == 0 if f.window is None else f.window[0] == f.window[1]) for f in problem.flows)
    no_offsets = False  # proven: no zero-jitter schedule exists
    if "offset-search" in stages:
        t = time.monotonic()
        result, offsets = search_offsets(problem)
        if result == OFFSETS_PLAN and offsets is not None:
            slots = tuple(
                tuple(offsets[i] + l * f.period for l in range(problem.instances(f)))
                for i, f in enumerate(problem.flows)
            )
            return plan("offset-search", slots, "offset search (zero-jitter)", t)
        if result == OFFSETS_EXHAUSTED and no_freedom:
            return infeasible(
                "offset-search",
                "exhaustive offset search proved that no partition and schedule exist (zero-jitter, exact here)",
                t,
            )
        no_offsets = result == OFFSETS_EXHAUSTED
        note("offset-search", "no zero-jitter offsets" if no_offsets else "node limit", t)
    if "zero-jitter" in stages and not no_offsets:
        t = time.monotonic()
        cp_model = load_solver()
        exact_here = no_freedom or "complete" not in stages
        budget = remaining() if exact_here else min(remaining(), max(0.2, remaining() * 0.05))
        model, extract, _ = _zero_jitter_model(problem)
        status, solver = _run(model, budget, seed, workers, progress, stop=stop)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return plan("zero-jitter", extract(solver), "CP-SAT zero-jitter model", t)
        if status == cp_model.INFEASIBLE and no_freedom:
            return infeasible(
                "zero-jitter", "CP-SAT proved that no partition and schedule exist (zero-jitter model, exact here)", t
            )
        note("zero-jitter", "infeasible" if status == cp_model.INFEASIBLE else "unknown", t)
        if no_freedom:
            return out

    if "shapes" in stages and not problem.fixed_phase and remaining() > 0:
        t = time.monotonic()
        status, slots, reason = decide_by_shapes(problem, start + time_limit * SHAPES_SHARE, seed, progress)
        if status == PLAN:
            assert slots is not None
            return plan("shapes", slots, "minimal ring-slot sets per flow group, packed", t)
        if status == INFEASIBLE:
            return infeasible("shapes", reason, t)
        note("shapes", f"unknown: {reason}", t)

    lower: list[int] | None = None
    hints: dict[int, tuple[int, ...]] = {}
    if "footprint" in stages and remaining() > 0:
        t = time.monotonic()
        classes = range(len(problem.classes))
        feet: list[Footprint | None] = [None] * len(problem.classes)
        budget = 0.25
        ends = max(FOOTPRINT_SHARE * time_limit, time.monotonic() - start + FOOTPRINT_MIN * time_limit)
        # Rounds with growing budgets: cheap classes finish at once, and the sum of the proven bounds may
        # exceed the ring before the hard classes are done.
        while time.monotonic() - start < ends:
            todo = [c for c in classes if feet[c] is None or not feet[c].optimal]
            if not todo:
                break
            for c in todo:
                seconds = min(budget, max(0.05, ends - (time.monotonic() - start)))
                foot = class_footprint(problem, c, seconds, seed, workers, stop)
                old = feet[c]
                if old is not None and foot.slots is None:
                    foot = replace(foot, slots=old.slots, owned=old.owned)
                feet[c] = replace(foot, lower=max(foot.lower, old.lower if old else 0))
                if foot.infeasible:
                    return infeasible(
                        "footprint", f"class {problem.classes[c]!r} cannot be scheduled even with the whole ring", t
                    )
                lower = [f.lower if f else 0 for f in feet]
                if sum(lower) > problem.slots:
                    detail = ", ".join(f"{name} ≥ {lower[k]}" for k, name in enumerate(problem.classes))
                    return infeasible(
                        "footprint",
                        f"footprint: each class alone needs at least this many ring slots ({detail}): "
                        f"Σ = {sum(lower)} > N = {problem.slots}",
                        t,
                    )
                if time.monotonic() - start >= ends:
                    break
            budget *= 4
        lower = [f.lower if f else 0 for f in feet]
        note("footprint", f"bounds {lower} (Σ {sum(lower)} ≤ {problem.slots})", t)
        t = time.monotonic()
        owned_sets = [f.owned if f is not None and f.slots is not None else None for f in feet]
        rotation, complete = pack_rotations(problem, owned_sets, min(remaining(), 5.0), seed, stop)
        for c, k in enumerate(rotation):
            foot = feet[c]
            if k is not None and foot is not None:
                hints.update(_class_slots(problem, c, foot, k))
        if complete:
            slots = tuple(hints[i] for i in range(len(problem.flows)))
            return plan("packing", slots, "per-class schedules packed by rotation", t)
        note("packing", f"placed {sum(k is not None for k in rotation)} of {len(rotation)} classes", t)

    if "complete" in stages:
        t = time.monotonic()
        if remaining() <= 0:
            return out
        cp_model = load_solver()
        size = complete_model_size(problem)
        if size > MAX_COMPLETE_BOOLEANS:
            note("complete", "skipped", t)
            out.reason = f"the complete model would need {size} Booleans (limit {MAX_COMPLETE_BOOLEANS})"
            return out
        model, extract, _ = _complete_model(problem, lower, stop)
        for i, slots in hints.items():
            model.hint_flow(i, slots)
        status, solver = _run(model, remaining(), seed, workers, progress, fixed_search=JOINT_FIXED, stop=stop)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return plan("complete", extract(solver), "CP-SAT complete model", t)
        if status == cp_model.INFEASIBLE:
            return infeasible("complete", "CP-SAT proved that no partition and schedule exist (complete model)", t)
        note("complete", "unknown", t)
    return out
