"""Routes: each stream's tree of directed links, and the no-wait timing of every hop along it.

A stream's frame leaves its talker at its departure time ``a`` (a slot start of the talker's ring) and is forwarded
store-and-forward without waiting: on hop ``k`` (directed link ``u→v``) it is on the wire during
``[a + d_k, a + d_k + tx_k)``, where ``d_0 = 0`` and, entering switch ``v`` and leaving it on the next hop,
``d_{k+1} = d_k + tx_k + prop_k + fwd_v``. Its latency to a listener is ``d + tx + prop`` of the last hop: the last
bit received, counted from the first bit sent. These are fixed by the route, whatever ``a`` is.

Routes not given are shortest paths by that latency (networkx Dijkstra), so a latency bound below it is a proof that
no route meets it. In a topology with a loop, two equally short paths make the route a guess: that is an error asking
for ``route``/``routes``, naming the stream and both paths.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from .topology import Network, Stream, wire_ps


@dataclass(frozen=True)
class Hop:
    """One directed link of a stream's tree: on the wire during ``[a + offset_ps, a + offset_ps + tx_ps)``."""

    src: str
    dst: str
    offset_ps: int
    tx_ps: int
    guard_ps: int = 0
    """Margin on both sides of the transmission on a switch's egress (the network's ``guard``; 0 from a talker)."""

    def window(self) -> tuple[int, int]:
        """(start offset, length) of the guarded window: what the placement keeps apart and the gate opens."""
        return self.offset_ps - self.guard_ps, self.tx_ps + 2 * self.guard_ps


@dataclass(frozen=True)
class RoutedStream:
    stream: Stream
    wire_bytes: int
    """Bytes on the wire (L2 incl. FCS): the talker's slot size, since keepon pads every frame to it."""
    paths: tuple[tuple[str, ...], ...]
    """One path per listener, in the order of ``stream.listeners``."""
    hops: tuple[Hop, ...]
    """The tree's directed links, each once, parents before children."""
    latency_ps: tuple[int, ...]
    """Per listener: last bit received − first bit sent, when no frame waits (the least the route allows)."""
    parents: tuple[int, ...] = ()
    """Per hop: the index of the hop before it in the tree (−1 for the talker's own link)."""
    last_hop: tuple[int, ...] = ()
    """Per listener: the index of the hop that reaches it."""

    def waits_ps(self, starts: tuple[int, ...]) -> tuple[int, ...]:
        """Per hop: how long the frame has waited in queues up to that hop, with hop starts ``starts``."""
        a = starts[0]
        return tuple(t - a - h.offset_ps for t, h in zip(starts, self.hops, strict=True))

    def latencies_ps(self, starts: tuple[int, ...]) -> tuple[int, ...]:
        """Per listener: last bit received − first bit sent, with hop starts ``starts``."""
        waits = self.waits_ps(starts)
        return tuple(lat + waits[k] for lat, k in zip(self.latency_ps, self.last_hop, strict=True))

    def nowait_starts(self, a: int) -> tuple[int, ...]:
        return tuple(a + h.offset_ps for h in self.hops)


def _check_route(net: Network, s: Stream, route: tuple[str, ...]) -> None:
    key = "route" if len(s.listeners) == 1 else "routes"
    if len(route) < 2 or route[0] != s.talker:
        raise net.stream_error(s.name, f"route {list(route)} must start at the talker {s.talker!r}", key)
    for n in route:
        if n not in net.stations and n not in net.switches:
            raise net.stream_error(s.name, f"route names unknown node {n!r}", key)
    for u, v in itertools.pairwise(route):
        if net.link(u, v) is None:
            raise net.stream_error(s.name, f"route {' → '.join(route)} does not exist: no link {u}–{v}", key)
    for n in route[1:-1]:
        if n not in net.switches:
            raise net.stream_error(s.name, f"route passes through station {n!r}: only switches forward", key)
    if len(set(route)) != len(route):
        raise net.stream_error(s.name, f"route {' → '.join(route)} visits a node twice", key)


def _given_paths(net: Network, s: Stream) -> list[tuple[str, ...]]:
    assert s.routes is not None
    for r in s.routes:
        _check_route(net, s, r)
    ends = [r[-1] for r in s.routes]
    key = "route" if len(s.listeners) == 1 else "routes"
    if sorted(ends) != sorted(s.listeners):
        raise net.stream_error(s.name, f"routes end at {ends}, but the listeners are {list(s.listeners)}", key)
    by_end = {r[-1]: r for r in s.routes}
    return [by_end[listener] for listener in s.listeners]


class Router:
    """Shortest paths by no-wait latency, one Dijkstra per (talker, frame size)."""

    def __init__(self, net: Network) -> None:
        import networkx as nx

        self._nx = nx
        self.net = net
        self._cache: dict[tuple[str, int], tuple[dict, dict]] = {}
        self._graphs: dict[int, object] = {}
        self._pairs: dict[str, list[tuple[str, ...]]] = {}

    def member_path(self, s: Stream, wire_bytes: int) -> tuple[str, ...]:
        """The route of member ``s.member`` of a replicated stream: one of a maximally disjoint pair (:mod:`.frer`)."""
        from .frer import disjoint_pair

        assert s.replica_of is not None
        if s.replica_of not in self._pairs:
            self._pairs[s.replica_of] = disjoint_pair(self.net, s, wire_bytes)
        return self._pairs[s.replica_of][s.member - 1]

    def _graph(self, wire_bytes: int):
        g = self._graphs.get(wire_bytes)
        if g is None:
            g = self._nx.DiGraph()
            for link in self.net.links:
                for u, v in ((link.a, link.b), (link.b, link.a)):
                    fwd = self.net.switches[v].forwarding_delay_ps if v in self.net.switches else 0
                    g.add_edge(u, v, weight=wire_ps(wire_bytes, link) + link.delay_ps + fwd)
            self._graphs[wire_bytes] = g
        return g

    def paths(self, s: Stream, wire_bytes: int) -> list[tuple[str, ...]]:
        key = (s.talker, wire_bytes)
        if key not in self._cache:
            self._cache[key] = self._nx.dijkstra_predecessor_and_distance(self._graph(wire_bytes), s.talker)
        pred, _dist = self._cache[key]
        out = []
        for listener in s.listeners:
            if listener not in pred:
                raise self.net.stream_error(s.name, f"no path from talker {s.talker!r} to listener {listener!r}")
            path = [listener]
            while path[-1] != s.talker:
                before = pred[path[-1]]
                if len(before) > 1:
                    a, b = ([*self._walk(pred, p, s.talker), *path[::-1]] for p in before[:2])
                    raise self.net.stream_error(
                        s.name,
                        f"the topology has a loop and equally short paths to {listener!r}: "
                        f"{' → '.join(a)} and {' → '.join(b)}; give the route (route = [...] or routes = [[...]])",
                    )
                path.append(before[0])
            path.reverse()
            for n in path[1:-1]:
                if n not in self.net.switches:
                    raise self.net.stream_error(s.name, f"the only path to {listener!r} passes through station {n!r}")
            out.append(tuple(path))
        return out

    @staticmethod
    def _walk(pred: dict, node: str, root: str) -> list[str]:
        path = [node]
        while path[-1] != root:
            path.append(pred[path[-1]][0])
        return path[::-1]


def route_stream(net: Network, router: Router, s: Stream, wire_bytes: int) -> RoutedStream:
    """The stream's tree with every hop's no-wait offset; checks that the paths form a tree."""
    if s.routes is not None:
        paths = _given_paths(net, s)
    elif s.replica_of is not None:
        paths = [router.member_path(s, wire_bytes)]
    else:
        paths = router.paths(s, wire_bytes)
    if len({p[1] for p in paths}) > 1:
        raise net.stream_error(
            s.name,
            f"its routes leave the talker {s.talker!r} on two ports; a frame leaves on one (replicate = 2 sends a copy "
            "on each)",
            "routes",
        )
    parent: dict[str, str] = {}
    hops: dict[tuple[str, str], Hop] = {}
    latency = []
    for path in paths:
        d = 0
        for k, (u, v) in enumerate(itertools.pairwise(path)):
            if parent.setdefault(v, u) != u:
                raise net.stream_error(
                    s.name, f"its routes reach {v!r} from both {parent[v]!r} and {u!r}: they must form a tree", "routes"
                )
            link = net.link(u, v)
            assert link is not None
            tx = wire_ps(wire_bytes, link)
            hops.setdefault((u, v), Hop(u, v, d, tx, net.guard_ps if u in net.switches else 0))
            d += tx + link.delay_ps
            if k + 2 < len(path):
                d += net.switches[v].forwarding_delay_ps
        latency.append(d)
    order = list(hops)
    index = {k: i for i, k in enumerate(order)}
    parents = tuple(index.get((parent.get(u, ""), u), -1) for u, _v in order)
    last = tuple(index[(p[-2], p[-1])] for p in paths)
    return RoutedStream(s, wire_bytes, tuple(paths), tuple(hops.values()), tuple(latency), parents, last)


def check_utilisation(net: Network, routed: list[RoutedStream]) -> None:
    """Bad input when a directed link carries more than its rate: ``Σ tx/period > 1``."""
    load: dict[tuple[str, str], Fraction] = {}
    users: dict[tuple[str, str], list[str]] = {}
    for r in routed:
        for h in r.hops:
            key = (h.src, h.dst)
            load[key] = load.get(key, Fraction(0)) + Fraction(h.tx_ps, r.stream.period_ns * 1000)
            users.setdefault(key, []).append(r.stream.name)
    for (u, v), u_load in load.items():
        if u_load > 1:
            names = users[(u, v)]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise net.link_error(
                u,
                v,
                f"direction {u}→{v} is slower than its streams: utilisation {float(u_load) * 100:.1f} % > 100 % "
                f"({len(names)} streams: {shown})",
            )
