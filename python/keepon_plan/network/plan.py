"""From a read description to a placement, a proof that none exists (with its certificate), or "unknown".

Stages, each under the command's deadline: choose every talker's ring (:mod:`.stations`); route
(:mod:`.routing`); the **checks that prove** (:mod:`.certificate`): a link whose streams exceed it at their own
lengths is bad input; one they exceed only padded to the talkers' slots is infeasible in the padded model (the
message names the byte clock as the way out); a latency bound or deadline no route meets, an empty transmit-offset
window, two streams that can never be apart on a link; then **placement**: the greedy (:mod:`.schedule`, no-wait
first and queueing where the network allows it) in the order by demand, by first fit and, while streams are left
out, by the **tight placement** (:mod:`.bestfit`: the free departure whose windows touch most placed windows on the
busiest links; :func:`greedy_variants`), each followed by the **ejection repair** (:mod:`.eject`: min-conflicts
moves that put a stream in and the few in its way out and in again); from the best, **repair rounds**
(:func:`_rounds`): the **neighbourhood repair** (:mod:`.neighbourhood`, CP-SAT on the streams near one left out,
every other stream fixed with its waits), and again from a greedy run with the demands drawn, its ejection repair
and neighbourhood repair; with queueing allowed, streams still out and time left, the same without waits (and
**repair passes**: the greedy again with the streams it left out first), the **LNS repair** (:mod:`.repair`,
CP-SAT on small neighbourhoods of a stream left out in a placement without waits), and the exact no-wait model
(:mod:`.exact`, CP-SAT with the greedy's departures as a hint) on instances of at most ``exact_limit`` streams. Its
"infeasible" is a proof for no-wait only: with queueing allowed it is reported as unknown with what was tried.
"""

from __future__ import annotations

import math

from ..deadline import Deadline
from . import certificate as cert

PLAN, INFEASIBLE, UNKNOWN = "plan", "infeasible", "unknown"
REPAIR_PASSES = 3
EJECT_SHARE = 0.25
"""Of the time left after a greedy run, the most the ejection repair (:mod:`.eject`) may take (it usually stops
before, after its moves per stream left out)."""
LATER_RUNS_MOST = 0.08
"""The tight greedy run follows first fit's only when first fit left at most this share of the streams out (with
more, as on the sweep's rings and lines with random frame sizes, it left about as many out, and the time went to it
rather than to the repair rounds' greedy runs with those left out first, which placed tens more)."""
NEIGHBOURHOOD_MOST = 30
"""The neighbourhood repair runs on a placement that left at most this many streams out (measured: with more, as on
the sweep's rings and lines with random frame sizes, it placed none in its time, and a greedy run with those left
out first placed tens)."""
MAX_ROUNDS = 12
"""Most repair rounds (:func:`_rounds`), each from a greedy run of its own."""
NOISE = 0.2
"""How far the demands of a later round's greedy are drawn from the streams' own: within ±``NOISE/2``."""
NEIGHBOURHOOD_SHARE = 0.5
"""Of the time left after a round's ejection repair, the share its neighbourhood repair (:mod:`.neighbourhood`) may
take."""


class Refutation(str):
    """The reason of an infeasibility claim (a ``str``), with its certificate (``.certificate``, a JSON dict)."""

    certificate: dict

    def __new__(cls, certificate: dict) -> Refutation:
        obj = super().__new__(cls, certificate["reason"])
        obj.certificate = certificate
        return obj


def _say(msg: str) -> None:
    import sys

    print(f"keepon-plan: {msg}", file=sys.stderr, flush=True)


def proofs(net, routed, grids, hops: str) -> Refutation | None:
    """The first claim the checks prove, or None."""
    from .schedule import departure_range

    padded_load = cert.load_per_link(routed, own=False)
    own_load = cert.load_per_link(routed, own=True)
    for link, load in sorted(own_load.items()):
        if load > 1:
            users = [r.stream.name for r in routed if any((h.src, h.dst) == link for h in r.hops)]
            shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
            raise net.link_error(
                link[0],
                link[1],
                f"direction {link[0]}→{link[1]} is slower than its streams: utilisation {float(load) * 100:.1f} % "
                f"> 100 % at the frames' own lengths ({len(users)} streams: {shown})",
            )
    for link, load in sorted(padded_load.items()):
        if load > 1:
            c = cert.capacity(net, routed, link, own=False)
            c["reason"] += (
                f"; at the frames' own lengths it is {float(own_load[link]) * 100:.1f} %: plan the talkers on the "
                'byte clock (timing = "bytes") to send them unpadded'
            )
            return Refutation(c)
    for r in routed:
        for listener, lat in zip(r.stream.listeners, r.latency_ps, strict=True):
            if lat > r.stream.max_latency_ns * 1000:
                scope = "its given route" if r.stream.routes else "its shortest route (so on any route)"
                return Refutation(cert.latency(net, r, listener, lat, scope))
        lo, hi = departure_range(r, grids)
        if lo > hi:
            if r.stream.deadline_ns is not None:
                k = max(range(len(r.latency_ps)), key=lambda i: r.latency_ps[i])
                return Refutation(cert.deadline(net, r, r.stream.listeners[k], lo, r.latency_ps[k]))
            return Refutation(
                {
                    "claim": "infeasible",
                    "kind": "offset",
                    "model": cert.model(net, [r], "strictly periodic", r.wire_bytes != r.stream.frame_bytes),
                    "stream": r.stream.name,
                    "reason": f"stream {r.stream.name!r}: no departure on its talker's grid "
                    f"({grids.departure_ps[r.stream.talker]} ps) lies in its transmit-offset window",
                }
            )
    return _pairs(net, routed, grids, hops)


def _pairs(net, routed, grids, hops: str) -> Refutation | None:
    """Two streams on one link that can never be apart: always when ``gcd < w_i + w_j``; with restricted departure
    windows in the no-wait model, when no difference of their departures separates them."""
    from .schedule import departure_range

    users: dict[tuple[str, str], list] = {}
    for r in routed:
        for h in r.hops:
            users.setdefault((h.src, h.dst), []).append((r, h))
    for link, group in sorted(users.items()):
        if len(group) > 400:
            continue
        widest = sorted((h.window()[1] for _r, h in group), reverse=True)[:2]
        least_gcd = math.gcd(*(r.stream.period_ns for r, _h in group)) * 1000
        restricted = any(r.stream.latest_offset_ns is not None or r.stream.deadline_ns is not None for r, _ in group)
        if len(widest) < 2 or (sum(widest) <= least_gcd and (hops != "no-wait" or not restricted)):
            continue  # no pair can be too long for its gcd, and no departure window is restricted
        for (ra, ha), (rb, hb) in _candidate_pairs(group, hops):
            g = math.gcd(ra.stream.period_ns, rb.stream.period_ns) * 1000
            wa, wb = ha.window()[1], hb.window()[1]
            if g < wa + wb:
                return Refutation(cert.pair(net, ra, rb, link, (None, None), "strictly periodic"))
            if hops != "no-wait":
                continue
            (la, ha_), (lb, hb_) = departure_range(ra, grids), departure_range(rb, grids)
            full_a = ha_ - la + grids.departure_ps[ra.stream.talker] >= ra.stream.period_ns * 1000
            full_b = hb_ - lb + grids.departure_ps[rb.stream.talker] >= rb.stream.period_ns * 1000
            if full_a and full_b:
                continue
            lo = lb + hb.window()[0] - ha_ - ha.window()[0]
            hi = hb_ + hb.window()[0] - la - ha.window()[0]
            if not _separable(lo, hi, g, wa, wb):
                return Refutation(cert.pair(net, ra, rb, link, ((la, ha_), (lb, hb_)), "no-wait"))
    return None


def _candidate_pairs(group, hops: str):
    """Pairs worth the check: frames long against their gcd, or (no-wait) both with restricted windows."""
    restricted = [x for x in group if x[0].stream.latest_offset_ns is not None or x[0].stream.deadline_ns is not None]
    big = sorted(group, key=lambda x: -x[1].window()[1])[:40]
    seen = set()
    for lst in (big, restricted if hops == "no-wait" else []):
        for i in range(len(lst)):
            for j in range(i + 1, len(lst)):
                key = (lst[i][0].stream.name, lst[j][0].stream.name)
                if key not in seen:
                    seen.add(key)
                    yield lst[i], lst[j]


def _separable(lo: int, hi: int, g: int, wa: int, wb: int) -> bool:
    """Whether some integer ``x ∈ [lo, hi]`` has ``x mod g ∈ [wa, g − wb]``."""
    if hi - lo >= g:
        return g >= wa + wb
    a, b = lo % g, lo % g + (hi - lo)
    for base in (0, g):
        if max(a, wa + base) <= min(b, g - wb + base):
            return True
    return False


def plan_network(
    net,
    deadline: Deadline,
    method: str = "auto",
    exact_limit: int = 60,
    seed: int = 0,
    say=_say,
    queueing: bool | None = None,
):
    """(status, payload): ("plan", (routed, hop starts, rings, method)), ("infeasible", :class:`Refutation`) or
    ("unknown", reason)."""
    from .routing import Router, route_stream
    from .schedule import grids_of
    from .stations import station_rings

    deadline.enter("choosing the talkers' rings")
    rings = station_rings(net)
    deadline.enter("routing")
    router = Router(net)
    routed = [route_stream(net, router, s, rings[s.talker].wire_bytes(s)) for s in net.streams]
    from .frer import check_routes

    for line in check_routes(net, routed):
        say(line)
    if method == "exact":
        queueing = False
    queueing = net.queueing if queueing is None else queueing
    grids = grids_of(net, rings, queueing)
    hops = "strictly periodic" if any(grids.wait_ok.values()) else "no-wait"
    deadline.enter("checking capacity, latency and offsets")
    refuted = proofs(net, routed, grids, hops)
    if refuted is not None:
        return INFEASIBLE, refuted
    tried = []
    best = None
    if method in ("auto", "heuristic"):
        best = _greedy_with_repair(net, routed, grids, deadline, say, tried, seed=seed)
        if not best.unplaced:
            how = "greedy first fit, " + _waiting(routed, best.starts_ps)
            return PLAN, (routed, best.starts_ps, rings, how + (f", {tried[-1]}" if len(tried) > 1 else ""))
        if method == "auto" and deadline.remaining() > 1.0:
            best = _lns(net, routed, grids, best, deadline, seed, say, tried)
            if not best.unplaced:
                return PLAN, (routed, best.starts_ps, rings, f"greedy first fit, then {tried[-1]}")
        if method == "heuristic" or len(routed) > exact_limit:
            from .schedule import NOT_TRIED

            first = next((u for u in best.unplaced if u[1] != NOT_TRIED), best.unplaced[0])
            return UNKNOWN, (
                f"{'; '.join(tried)}: {len(best.unplaced)} streams left out, e.g. {first[0]!r}: {first[1]} (the exact "
                f"model runs for at most --exact-limit {exact_limit} streams)"
            )
    deadline.enter("exact no-wait model (CP-SAT)")
    from .exact import INFEASIBLE as EX_INF
    from .exact import PLAN as EX_PLAN
    from .exact import solve_exact

    hint = best.departure_ps if best is not None else {}
    outcome = solve_exact(routed, net, grids, deadline, seed, hint)
    if outcome.status == EX_PLAN:
        return PLAN, (
            routed,
            {r.stream.name: r.nowait_starts(outcome.departure_ps[r.stream.name]) for r in routed},
            rings,
            "exact no-wait (CP-SAT)",
        )
    tried.append(f"exact no-wait CP-SAT: {outcome.reason or 'no plan'}")
    if outcome.status == EX_INF and hops == "no-wait":
        return INFEASIBLE, Refutation(cert.solver(net, routed, outcome.reason, "no-wait"))
    return UNKNOWN, "; ".join(tried) + (
        " (a frame may wait in a queue, so the no-wait proof does not decide the set)"
        if outcome.status == EX_INF
        else ""
    )


def _waiting(routed, starts) -> str:
    n = sum(1 for r in routed if starts[r.stream.name] != r.nowait_starts(starts[r.stream.name][0]))
    return f"{n} of {len(routed)} streams wait in a queue" if n else "no wait"


def _neighbourhoods(net, routed, grids, best, state, deadline, seed, say, tried: list):
    """CP-SAT around each stream left out (:mod:`.neighbourhood`) on ``state`` (which holds ``best``), for
    :data:`NEIGHBOURHOOD_SHARE` of the time left; (placement, ``state``, which holds it)."""
    import time

    from .neighbourhood import neighbourhood_repair

    deadline.enter("neighbourhood repair (CP-SAT)")
    until = time.monotonic() + NEIGHBOURHOOD_SHARE * deadline.remaining()
    fixed, how = neighbourhood_repair(state, routed, best, until, seed)
    tried.append(how)
    say(how)
    return fixed, state


def _lns(net, routed, grids, best, deadline, seed, say, tried: list):
    """Large-neighbourhood repair (:mod:`.repair`) of a placement without waits (the greedy's no-wait one when the
    best placement has frames that wait)."""
    import dataclasses

    from .repair import repair

    by_name = {r.stream.name: r for r in routed}
    if any(st != by_name[n].nowait_starts(st[0]) for n, st in best.starts_ps.items()):
        nowait = dataclasses.replace(grids, wait_ok=dict.fromkeys(grids.wait_ok, False))
        sub: list[str] = []
        base = _greedy_with_repair(net, routed, nowait, deadline, say, sub, "no-wait ")
        tried.append(", then ".join(sub))
        if not base.unplaced:
            return base
    else:
        base = best
    deadline.enter("LNS repair (CP-SAT neighbourhoods)")
    fixed, how = repair(routed, net, grids, base, deadline, seed, say)
    tried.append(how)
    return fixed if len(fixed.unplaced) < len(best.unplaced) else best


def greedy_orders(routed) -> list[tuple[str, list]]:
    """The greedy's orders, each with its name. First **by demand**: the streams that ask most of the links they use
    first — the sum over the stream's links of each link's load at the frames' own lengths, times the stream's own
    share of a link (``tx / period``), so a long route through busy links with a large frame goes in while its links
    are still empty. Then **by period**: shortest period first, then most hops. Ties by name."""
    load = {link: float(x) for link, x in cert.load_per_link(routed, own=True).items()}

    def demand(r):
        return sum(load[(h.src, h.dst)] for h in r.hops) * r.hops[0].tx_ps / r.stream.period_ns

    return [
        ("by demand", sorted(routed, key=lambda r: (-demand(r), r.stream.name))),
        ("by period", sorted(routed, key=lambda r: (r.stream.period_ns, -len(r.hops), r.stream.name))),
    ]


def greedy_variants(routed) -> list[tuple[str, list, object]]:
    """(name, order, placement) of the greedy runs, in the order they are tried: first fit and tight
    (:mod:`.bestfit`), both by demand (:func:`greedy_orders`; the order by period, measured, left more out than
    either at high load)."""
    from .bestfit import tight_placer
    from .schedule import place_one

    (demand, by_demand), _ = greedy_orders(routed)
    tight = tight_placer({link: float(x) for link, x in cert.load_per_link(routed, own=True).items()})
    return [
        (f"{demand}, first fit", by_demand, place_one),
        (f"{demand}, tight", by_demand, tight),
    ]


def _rounds(net, routed, grids, deadline, say, tried: list, best, greedy_s: float, seed: int):
    """Repair rounds until every stream is in, the time is out or :data:`MAX_ROUNDS` have run. A round: on its
    placement, the ejection repair (:mod:`.eject`, for at most :data:`EJECT_SHARE` of the time left; the first
    round's placement has had it), then, when it left at most :data:`NEIGHBOURHOOD_MOST` streams out, the
    neighbourhood repair (:mod:`.neighbourhood`, for :data:`NEIGHBOURHOOD_SHARE` of the time left). The first
    round's placement is the best greedy run's; every later round starts afresh from a greedy run with that run's
    placement, the streams the best placement so far left out first, each part in the order by demand with each
    stream's demand drawn within ±``NOISE/2`` of itself (seeded): the repairs end in different places from different
    starts. Returns the best placement."""
    import random
    import time

    from .eject import eject
    from .schedule import NOT_TRIED, _State, greedy, hyperperiod_ps

    rng = random.Random(seed)
    by_name = {r.stream.name: r for r in routed}
    placed, state, (label, order, place) = best
    top = placed
    load = {link: float(x) for link, x in cert.load_per_link(routed, own=True).items()}
    demand = {
        r.stream.name: sum(load[(h.src, h.dst)] for h in r.hops) * r.hops[0].tx_ps / r.stream.period_ns for r in routed
    }
    for n in range(MAX_ROUNDS):
        if not top.unplaced:
            break
        if n:
            if deadline.remaining() < greedy_s + 0.3:
                break
            deadline.enter(f"greedy placement (round {n + 1})")
            drawn = {k: v * (1 + NOISE * (rng.random() - 0.5)) for k, v in demand.items()}
            left = {name for name, _ in top.unplaced}
            order = sorted(routed, key=lambda r: (r.stream.name not in left, -drawn[r.stream.name], r.stream.name))
            state = _State(hyperperiod_ps(routed), net, grids)
            placed, _ = greedy(routed, net, grids, deadline, order, state, partial=True, place=place)
            stopped = " when the time limit stopped it" if any(w == NOT_TRIED for _, w in placed.unplaced) else ""
            tried.append(
                f"round {n + 1}: greedy ({label}, those left out first, demands drawn) placed "
                f"{len(placed.starts_ps)}{stopped}"
            )
            say(tried[-1])
        if n and placed.unplaced and deadline.remaining() > 0.2:
            deadline.enter(f"ejection repair (round {n + 1})")
            rank = {r.stream.name: k for k, r in enumerate(order)}
            until = time.monotonic() + EJECT_SHARE * deadline.remaining()
            placed, how = eject(state, by_name, placed, rank, until, seed + n)
            tried.append(how)
            say(how)
        if 0 < len(placed.unplaced) <= NEIGHBOURHOOD_MOST and deadline.remaining() > 0.2:
            placed, state = _neighbourhoods(net, routed, grids, placed, state, deadline, seed + n, say, tried)
        if len(placed.unplaced) < len(top.unplaced):
            top = placed
    return top


def _greedy_with_repair(net, routed, grids, deadline, say, tried: list, what: str = "", seed: int = 0):
    """The greedy runs of :func:`greedy_variants` (the next only while the best so far left streams out, at most
    :data:`LATER_RUNS_MOST` of them, and there is time for another), each followed by the ejection repair
    (:mod:`.eject`) on what it left out; then, from the best (the fewest left out), the repair rounds
    (:func:`_rounds`; without waits, ``what`` names it: the repair passes). Returns the best placement."""
    import time

    from .eject import eject
    from .schedule import NOT_TRIED, _State, greedy, hyperperiod_ps

    by_name = {r.stream.name: r for r in routed}
    variants = greedy_variants(routed)
    best = None
    greedy_s = 0.0
    for i, (label, this, place) in enumerate(variants):
        if best is not None and (
            not best[0].unplaced
            or deadline.remaining() < 2 * greedy_s
            or (not what and len(best[0].unplaced) > LATER_RUNS_MOST * len(routed))
        ):
            break
        deadline.enter(f"{what}greedy placement ({label})")
        t0 = time.monotonic()
        state = _State(hyperperiod_ps(routed), net, grids)
        placed, _ = greedy(routed, net, grids, deadline, this, state, partial=True, place=place)
        greedy_s = time.monotonic() - t0
        stopped = " when the time limit stopped it" if any(w == NOT_TRIED for _, w in placed.unplaced) else ""
        tried.append(f"{what}greedy ({label}) placed {len(placed.starts_ps)} of {len(routed)}{stopped}")
        say(f"{what}greedy ({label}): {len(placed.starts_ps)} of {len(routed)} streams placed in {greedy_s:.3f} s")
        if placed.unplaced and deadline.remaining() > 0:
            deadline.enter(f"{what}ejection repair ({label})")
            rank = {r.stream.name: k for k, r in enumerate(this)}
            until = time.monotonic() + EJECT_SHARE / (len(variants) - i) * deadline.remaining()
            placed, how = eject(state, by_name, placed, rank, until, seed)
            tried.append(what + how)
            say(tried[-1])
        if best is None or len(placed.unplaced) < len(best[0].unplaced):
            best = (placed, state, (label, this, place))
    assert best is not None
    if not what:
        return _rounds(net, routed, grids, deadline, say, tried, best, greedy_s, seed)
    placed, _state, (_label, order, place) = best
    for n in range(REPAIR_PASSES):
        if not placed.unplaced or deadline.remaining() < 0.5 * deadline.elapsed():
            break
        deadline.enter(f"repair pass {n + 1}")
        left = {name for name, _ in placed.unplaced}
        order = [r for r in order if r.stream.name in left] + [r for r in order if r.stream.name not in left]
        attempt, _ = greedy(routed, net, grids, deadline, order, partial=True, place=place)
        stopped = " when the time limit stopped it" if any(w == NOT_TRIED for _, w in attempt.unplaced) else ""
        tried.append(f"{what}repair pass {n + 1} (those left out first) placed {len(attempt.starts_ps)}{stopped}")
        say(tried[-1])
        if len(attempt.unplaced) < len(placed.unplaced):
            placed = attempt
    return placed
