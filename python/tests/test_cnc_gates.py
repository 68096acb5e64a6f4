"""The CNC's gate lists kept window by window equal the planner's lists built from every frame, through joins and
leaves (traffic classes, periods and a gate granularity that make a port's cycle shorter than the network's)."""

from __future__ import annotations

import random

from cnc_support import CYCLE, TOPOLOGY

from keepon_plan.cnc.incremental import Incremental, Refused
from keepon_plan.network.gcl import port_gcls
from keepon_plan.network.topology import Stream, parse_network

TALKERS, LISTENERS = ("t1", "t2"), ("l1", "l2")


def _lists(inc: Incremental) -> dict:
    ports = {(h.src, h.dst) for r in inc.routed.values() for h in r.hops if h.src in inc.net.switches}
    want = {(g.switch, g.neighbour): g for g in port_gcls(inc.net, list(inc.routed.values()), inc.starts)}
    got = inc.port_lists(ports | {("sw1", "sw2"), ("sw2", "l1"), ("sw2", "l2")})
    return {"want": want, "got": got}


def test_incremental_gate_lists_equal_the_planners(seed: int = 7):
    rng = random.Random(seed)
    net = parse_network(
        TOPOLOGY.replace('forwarding_delay = "1us"', 'forwarding_delay = "1us"\ngate_granularity = "40ns"'),
        None,
        streams_required=False,
    )
    inc = Incremental(net, CYCLE)
    joined, changes, short, mixed = [], 0, 0, 0
    for k in range(120):
        if joined and rng.random() < 0.35:
            inc.remove(joined.pop(rng.randrange(len(joined))))
        else:
            period = rng.choice((250_000, 500_000, 1_000_000)) if k % 10 else 250_000
            s = Stream(f"s{k}", rng.choice(TALKERS), (rng.choice(LISTENERS),), period, rng.randint(64, 200),
                       1_000_000, 0, rng.choice((5, 6, 7)), None, 0, None, None)  # fmt: skip
            r = inc.route(s)
            try:
                inc.add(r, inc.fit(r))
            except Refused:
                continue
            joined.append(s.name)
        changes += 1
        lists = _lists(inc)
        assert lists["got"] == lists["want"], k
        short += any(g.cycle_ns < CYCLE for g in lists["got"].values())
        mixed += any(len({e[0] for e in g.entries}) > 2 for g in lists["got"].values())
    # some port's cycle was shorter than the network's (only 250 µs streams on it), several classes met on one
    assert changes > 100 and len(joined) > 10 and short and mixed, (changes, len(joined), short, mixed)
    for name in list(joined):
        inc.remove(name)
    assert inc.port_lists({("sw1", "sw2")}) == {}
    assert all(not g.edges[1:] and not g.cover for g in inc.gates.values())
