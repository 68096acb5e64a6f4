"""Redundant routes for replicated streams (IEEE 802.1CB FRER): two maximally disjoint routes.

A stream with ``replicate = 2`` is planned as two **member streams** ``NAME.1`` and ``NAME.2`` (the talker sends a
copy on each of its two ports, the listener takes the first of each sequence number on its two ports). Each member is
an ordinary stream on its own route: routed, scheduled and verified like every other, its talker's runtime config
written per port (:mod:`.stations`). What is particular to them is the pair of routes:

- **node-disjoint** when the topology allows: no switch and no link in common, so one failed switch or link loses one
  copy at most. Found as a min-cost flow of two units from talker to listener on the graph with every switch split
  into ``in → out`` of capacity 1 (Suurballe's problem; the cost of a link is the no-wait latency it adds, as in
  :class:`.routing.Router`), so the pair is the one of least total latency among node-disjoint pairs;
- otherwise **edge-disjoint**, the same flow without the split: the routes share the switches named in the output
  (each a cut vertex between talker and listener);
- otherwise none: some link is on every path from talker to listener (a bridge), and the stream is refused naming it.

Given routes (``routes = [[...], [...]]``) are kept; their shared links and switches are reported the same way, and
routes that share a link are refused as well (a copy that shares a link is not redundant on it).
"""

from __future__ import annotations

import itertools

from .topology import Network, Stream, wire_ps


class Shared:
    """What two routes have in common: directed links (either direction of one link counts once) and switches."""

    def __init__(self, a: tuple[str, ...], b: tuple[str, ...]) -> None:
        links_a = {frozenset(e) for e in itertools.pairwise(a)}
        self.links = sorted(tuple(sorted(e)) for e in links_a if e in {frozenset(x) for x in itertools.pairwise(b)})
        self.nodes = sorted(set(a[1:-1]) & set(b[1:-1]))

    def describe(self) -> str:
        if self.links:
            return "share link " + ", ".join(f"{u}–{v}" for u, v in self.links)
        if self.nodes:
            return (
                "edge-disjoint, sharing switch " + ", ".join(self.nodes) + " (the topology has no node-disjoint pair)"
            )
        return "node- and edge-disjoint"


def _cost(net: Network, u: str, v: str, wire_bytes: int) -> int:
    link = net.link(u, v)
    assert link is not None
    fwd = net.switches[v].forwarding_delay_ps if v in net.switches else 0
    return wire_ps(wire_bytes, link) + link.delay_ps + fwd


def _flow_pair(net: Network, s: Stream, wire_bytes: int, split: bool) -> list[tuple[str, ...]] | None:
    """Two routes from talker to listener carrying one unit each of a least-cost flow of two units, or None."""
    import networkx as nx

    talker, listener = s.talker, s.listeners[0]
    g = nx.DiGraph()

    def out(n: str) -> str:
        return f"{n}/out" if split and n in net.switches else n

    def inn(n: str) -> str:
        return f"{n}/in" if split and n in net.switches else n

    for sw in net.switches:
        if split:
            g.add_edge(inn(sw), out(sw), capacity=1, weight=0)
    for link in net.links:
        for u, v in ((link.a, link.b), (link.b, link.a)):
            if (u in net.stations and u != talker) or (v in net.stations and v != listener):
                continue  # only switches forward; routes start at the talker and end at the listener
            g.add_edge(out(u), inn(v), capacity=1, weight=_cost(net, u, v, wire_bytes))
    if talker not in g or listener not in g:
        return None
    g.nodes[talker]["demand"] = -2
    g.nodes[listener]["demand"] = 2
    try:
        flow = nx.min_cost_flow(g)
    except nx.NetworkXUnfeasible:
        return None
    paths = []
    for first in sorted(v for v, f in flow[talker].items() if f > 0):
        path, at = [talker], first
        flow[talker][first] -= 1
        while at != listener:
            node = at.split("/")[0]
            if path[-1] != node:
                path.append(node)
            nxt = next(v for v, f in sorted(flow[at].items()) if f > 0)
            flow[at][nxt] -= 1
            at = nxt
        path.append(listener)
        paths.append(tuple(path))
    return paths


def bridge(net: Network, s: Stream) -> tuple[str, str] | None:
    """A link on every path from the talker to the listener (through switches only), or None."""
    import networkx as nx

    g = nx.Graph()
    for link in net.links:
        if all(n in net.switches or n in (s.talker, s.listeners[0]) for n in (link.a, link.b)):
            g.add_edge(link.a, link.b)
    if s.talker not in g or s.listeners[0] not in g or not nx.has_path(g, s.talker, s.listeners[0]):
        return None
    cut = nx.minimum_edge_cut(g, s.talker, s.listeners[0])
    if len(cut) != 1:
        return None
    (u, v) = next(iter(cut))
    return (u, v) if (u, v) == tuple(sorted((u, v))) else (v, u)


def disjoint_pair(net: Network, s: Stream, wire_bytes: int) -> list[tuple[str, ...]]:
    """The two routes of a replicated stream ``s`` (its first member), node-disjoint if possible, else
    edge-disjoint; an error naming the shared link when there are not two edge-disjoint routes."""
    name = s.replica_of or s.name
    for split in (True, False):
        pair = _flow_pair(net, s, wire_bytes, split)
        if pair is not None and len(pair) == 2:
            return pair
    shared = bridge(net, s)
    if shared is None:
        raise net.stream_error(
            name, f"no path from talker {s.talker!r} to listener {s.listeners[0]!r} through switches", "replicate"
        )
    raise net.stream_error(
        name,
        f"replicate = 2: no two routes from {s.talker!r} to {s.listeners[0]!r} without a common link: link "
        f"{shared[0]}–{shared[1]} is on every path (a bridge of the topology); add a link around it or drop replicate",
        "replicate",
    )


def check_given_pair(net: Network, s: Stream, paths: list[tuple[str, ...]]) -> None:
    """Refuse given member routes that share a link (naming it)."""
    shared = Shared(*paths)
    if shared.links:
        u, v = shared.links[0]
        raise net.stream_error(
            s.replica_of or s.name,
            f"replicate = 2: its two routes share link {u}–{v}, so a failure there loses both copies; give routes "
            "without a common link",
            "routes",
        )


def members(routed: list) -> dict[str, list]:
    """Per replicated stream, its routed member streams in member order."""
    out: dict[str, list] = {}
    for r in routed:
        if r.stream.replica_of is not None:
            out.setdefault(r.stream.replica_of, []).append(r)
    return {k: sorted(v, key=lambda r: r.stream.member) for k, v in out.items()}


def check_routes(net: Network, routed: list) -> list[str]:
    """Refuse given member routes that share a link; one line per replicated stream saying how disjoint its routes
    are (for the command's report and ``plan.json``)."""
    lines = []
    for name, (a, b) in members(routed).items():
        if a.stream.routes is not None:
            check_given_pair(net, a.stream, [a.paths[0], b.paths[0]])
        shared = Shared(a.paths[0], b.paths[0])
        lines.append(
            f"stream {name!r} replicated (802.1CB): {' → '.join(a.paths[0])} and {' → '.join(b.paths[0])}: "
            + shared.describe()
        )
    return lines
