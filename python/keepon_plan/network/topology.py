"""The network description: stations, switches, full-duplex links and streams (TOML), read and checked.

Times are integer **picoseconds** inside the network planner (``*_ps``), not nanoseconds as elsewhere: the
verifier must see a schedule shifted by one byte time, and one byte lasts 0.8 ns at 10 Gb/s. Every link's byte time
must therefore be a whole number of picoseconds (true of every standard Ethernet rate); the files the planner writes
are in whole ns again, rounded as stated where they are written. The schema is documented in python/README.md
("Network description") and shown in full by ``examples/network/small.toml``.

Every error is an :class:`~keepon_plan.model.InputError` naming the file, the line and the element (station,
switch, link or stream) it is about.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field

from ..model import MAX_SLOT_BYTES, MIN_SLOT_BYTES, InputError, SourceMap, check_base_time, read_input
from ..ptpinput import PtpError, PtpInput, parse_ptp
from ..units import PREAMBLE_SFD_IFG_BYTES, ValueError_, parse_duration, parse_rate

PS_PER_NS = 1000
MAX_TRAFFIC_CLASS = 7
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

_TOP_KEYS = {
    "version",
    "base_time",
    "traffic_class",
    "guard",
    "timing",
    "queueing",
    "station",
    "switch",
    "link",
    "stream",
}
_STATION_KEYS = {"name", "slot_bytes", "slots", "batch", "timing", "max_data_age"}
_SWITCH_KEYS = {
    "name",
    "forwarding_delay",
    "supported_list_max",
    "supported_interval_max",
    "supported_cycle_max",
    "gate_granularity",
    "max_queue_frames",
}
TIMINGS = ("slots", "bytes")
_LINK_KEYS = {"a", "b", "rate", "delay", "a_port", "b_port"}
_STREAM_KEYS = {
    "name",
    "talker",
    "listeners",
    "period",
    "frame_bytes",
    "max_latency",
    "max_jitter",
    "traffic_class",
    "route",
    "routes",
    "earliest_offset",
    "latest_offset",
    "deadline",
    "replicate",
}
MEMBER_SEPARATOR = "."
"""Member stream ``i`` of a replicated stream ``NAME`` is planned as the stream ``NAME.i`` (i = 1, 2)."""


@dataclass(frozen=True)
class Station:
    """A keepon end station: one port; on ``timing = "slots"`` frames are padded to its slot size on the wire and
    leave at slot starts, on ``"bytes"`` (the byte clock) they keep their own length and leave on any byte."""

    name: str
    slot_bytes: int | None
    slots: int | None
    batch: int | None
    timing: str = "slots"
    max_data_age_ns: int | None = None
    """The longest a frame may be handed in before its txtime (the lead's bound; default the shortest period)."""
    ptp: PtpInput | None = None
    """The station runs PTP (its daemon's ``[ptp]``): the CNC's topology only (``[station.ptp]``), whose stations'
    PTP class keeps ring slots of its own (:mod:`keepon_plan.cnc.ptp`)."""


@dataclass(frozen=True)
class Switch:
    """An 802.1Qbv bridge; ``forwarding_delay_ps``: from the last bit received to the first bit sent (no-wait)."""

    name: str
    forwarding_delay_ps: int
    supported_list_max: int
    supported_interval_max: int
    supported_cycle_max_ns: int
    gate_granularity_ns: int = 1
    """Gate events happen on multiples of this (from the base time): every window is widened out to it."""
    max_queue_frames: int = 8
    """Frames a class's egress queue may hold waiting for its gate (0: no frame ever waits in this switch)."""


@dataclass(frozen=True)
class Link:
    """A full-duplex link: two directed links ``a→b`` and ``b→a`` with the same rate and propagation delay."""

    a: str
    b: str
    rate: int
    delay_ps: int
    a_port: str
    b_port: str

    def byte_ps(self) -> int:
        return 8 * 10**12 // self.rate


@dataclass(frozen=True)
class Stream:
    """A periodic stream: one frame per period from ``talker`` to every listener (a tree for several)."""

    name: str
    talker: str
    listeners: tuple[str, ...]
    period_ns: int
    frame_bytes: int
    max_latency_ns: int
    max_jitter_ns: int
    traffic_class: int
    routes: tuple[tuple[str, ...], ...] | None
    """Given routes (node names, talker first, one per listener), or ``None``: the planner routes."""
    earliest_offset_ns: int = 0
    """The first bit leaves the talker at least this long after a period start (802.1Q EarliestTransmitOffset)."""
    latest_offset_ns: int | None = None
    """... and at most this long after it (LatestTransmitOffset); ``None``: anywhere in the period."""
    deadline_ns: int | None = None
    """Absolute deadline: every listener has the last bit by period start + this; ``None``: none."""
    replica_of: str | None = None
    """IEEE 802.1CB FRER: the replicated stream this is member ``member`` of (``replicate = 2`` in the description:
    two member streams on maximally disjoint routes, :mod:`.frer`); ``None``: an ordinary stream."""
    member: int = 0


@dataclass(frozen=True)
class Network:
    base_time: int
    stations: dict[str, Station]
    switches: dict[str, Switch]
    links: tuple[Link, ...]
    streams: tuple[Stream, ...]
    path: str | None = None
    source: SourceMap | None = field(default=None, compare=False, repr=False)
    _where: dict = field(default_factory=dict, compare=False, repr=False)
    queueing: bool = True
    """Whether a frame may wait in a switch's egress queue for its window (``queueing``, default true)."""
    guard_ps: int = 0
    """Margin on both sides of every frame's window on a switch's egress port, for the devices' synchronisation error:
    the gate opens ``guard`` before the planned first bit and closes ``guard`` after the last, and the placement keeps
    these widened windows apart (``guard`` in the description, default 0)."""

    def error(self, message: str, where: tuple = ()) -> InputError:
        line = self.source.line(where) if self.source and where else None
        return InputError(message, self.path, line)

    def stream_error(self, name: str, message: str, key: str | None = None) -> InputError:
        index = self._where.get(("stream", name))
        where = (
            ("stream", index, key) if index is not None and key else (("stream", index) if index is not None else ())
        )
        return self.error(f"stream {name!r}: {message}", where)

    def link_error(self, a: str, b: str, message: str) -> InputError:
        index = self._where.get(("link", frozenset((a, b))))
        return self.error(f"link {a}–{b}: {message}", ("link", index) if index is not None else ())

    def links_of(self, node: str) -> list[Link]:
        """The links at ``node`` (indexed on first use)."""
        index = self._where.get("links of")
        if index is None:
            index = self._where["links of"] = {}
            for lk in self.links:
                index.setdefault(lk.a, []).append(lk)
                index.setdefault(lk.b, []).append(lk)
        return index.get(node, [])

    def link(self, a: str, b: str) -> Link | None:
        return self._where.get(("linkobj", frozenset((a, b))))

    def ports(self, station: str) -> int:
        """How many links (ports) a station has: 1, or 2 for replicated streams."""
        return self._where.get(("ports", station), 1)

    def sender(self, station: str, neighbour: str) -> str:
        """The name of a station's sending port: the station's own on a one-port station, ``station.port`` on a
        two-port one (its runtime config ``stations/NAME.toml`` and its YANG interface)."""
        return (
            station if self.ports(station) == 1 else f"{station}{MEMBER_SEPARATOR}{self.port_name(station, neighbour)}"
        )

    def port_name(self, node: str, neighbour: str) -> str:
        """The interface name of ``node``'s port towards ``neighbour``."""
        link = self.link(node, neighbour)
        assert link is not None
        return link.a_port if link.a == node else link.b_port


def load_network(path: str) -> Network:
    return parse_network(read_input(path, "the network description"), path)


def parse_network(
    text: str, path: str | None = None, streams_required: bool = True, station_ptp: bool = False
) -> Network:
    """Parse and check a network description; raises :class:`InputError` naming the element and line.
    ``streams_required``: a description without ``[[stream]]`` is an error (the CNC's topology has none).
    ``station_ptp``: a station may have ``[station.ptp]`` (the CNC's topology; the network planner keeps no room
    for PTP and refuses it)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        raise InputError(
            f"TOML syntax: {str(exc).split(' (at line')[0]}", path, int(m.group(1)) if m else None
        ) from exc
    src = SourceMap(text)

    def err(message: str, where: tuple = ()) -> InputError:
        return InputError(message, path, src.line(where) if where else None)

    def tables(name: str) -> list[dict]:
        value = doc.get(name, [])
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise err(f"{name} must be an array of tables: [[{name}]]", (name,))
        return value

    def unknown(keys: dict, allowed: set[str], where: tuple, what: str) -> None:
        for key in keys:
            if key not in allowed:
                raise err(f"{what}: unknown key {key!r} (allowed: {', '.join(sorted(allowed))})", (*where, key))

    def get(d: dict, key: str, where: tuple, what: str, conv, default=None, required: bool = False):
        if key not in d:
            if required:
                raise err(f"{what}: missing required key {key!r}", where)
            return default
        try:
            return conv(d[key])
        except ValueError_ as exc:
            raise err(f"{what}: {key}: {exc}", (*where, key)) from exc

    def integer(lo: int, hi: int):
        def conv(v):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError_(f"expected an integer, got {v!r}")
            if not lo <= v <= hi:
                raise ValueError_(f"must be in {lo}..={hi}, got {v}")
            return v

        return conv

    def name_of(d: dict, where: tuple, kind: str) -> str:
        value = d.get("name")
        if not isinstance(value, str) or not _NAME.match(value):
            raise err(f"{kind} #{where[1] + 1}: name must be a string of letters, digits, '_', '.', '-'", where)
        return value

    unknown(doc, _TOP_KEYS, (), "the network description")
    if doc.get("version", 1) != 1:
        raise err("version: only version 1 exists", ("version",))
    base_time = get(doc, "base_time", (), "the network", check_base_time, 0)
    default_tc = get(doc, "traffic_class", (), "the network", integer(0, MAX_TRAFFIC_CLASS), MAX_TRAFFIC_CLASS)
    guard = get(doc, "guard", (), "the network", parse_duration, 0)
    if guard < 0:
        raise err("the network: guard must not be negative", ("guard",))
    timing = get(doc, "timing", (), "the network", choice(TIMINGS), "slots")
    queueing = get(doc, "queueing", (), "the network", boolean, True)

    nodes: dict[str, tuple] = {}
    stations: dict[str, Station] = {}
    for i, t in enumerate(tables("station")):
        w = ("station", i)
        name = name_of(t, w, "station")
        what = f"station {name!r}"
        if "ptp" in t and not station_ptp:
            raise err(
                f"{what}: ptp: only the CNC's topology (keepon-plan cnc) keeps ring slots for a station's PTP",
                (*w, "ptp"),
            )
        unknown(t, _STATION_KEYS | {"ptp"}, w, what)
        if name in nodes:
            raise err(f"{what}: duplicate node name", w)
        nodes[name] = w
        stations[name] = Station(
            name,
            get(t, "slot_bytes", w, what, integer(MIN_SLOT_BYTES, MAX_SLOT_BYTES)),
            get(t, "slots", w, what, integer(2, 4096)),
            get(t, "batch", w, what, integer(1, 4095)),
            get(t, "timing", w, what, choice(TIMINGS), timing),
            get(t, "max_data_age", w, what, positive_duration),
            station_ptp_table(t, w, what, err),
        )
    switches: dict[str, Switch] = {}
    for i, t in enumerate(tables("switch")):
        w = ("switch", i)
        name = name_of(t, w, "switch")
        what = f"switch {name!r}"
        unknown(t, _SWITCH_KEYS, w, what)
        if name in nodes:
            raise err(f"{what}: duplicate node name", w)
        nodes[name] = w
        switches[name] = Switch(
            name,
            get(t, "forwarding_delay", w, what, parse_duration, 0) * PS_PER_NS,
            get(t, "supported_list_max", w, what, integer(1, 2**32 - 1), 4096),
            get(t, "supported_interval_max", w, what, integer(1, 2**32 - 1), 10**9),
            get(t, "supported_cycle_max", w, what, parse_duration, 10**9),
            get(t, "gate_granularity", w, what, positive_duration, 1),
            get(t, "max_queue_frames", w, what, integer(0, 2**16), 8),
        )

    where: dict = {}
    links: list[Link] = []
    for i, t in enumerate(tables("link")):
        w = ("link", i)
        unknown(t, _LINK_KEYS, w, f"link #{i + 1}")
        a, b = t.get("a"), t.get("b")
        for end in (a, b):
            if not isinstance(end, str):
                raise err(f"link #{i + 1}: a and b must be node names", w)
            if end not in nodes:
                raise err(f"link {a}–{b}: unknown node {end!r} (not a [[station]] or [[switch]])", w)
        what = f"link {a}–{b}"
        if a == b:
            raise err(f"{what}: a link must join two different nodes", w)
        key = frozenset((a, b))
        if ("link", key) in where:
            raise err(f"{what}: duplicate link (links are full duplex: one [[link]] per pair)", w)
        rate = get(t, "rate", w, what, parse_rate, required=True)
        if (8 * 10**12) % rate:
            raise err(f"{what}: rate {rate} bit/s has a byte time that is not a whole number of ps", (*w, "rate"))
        link = Link(
            a,
            b,
            rate,
            get(t, "delay", w, what, parse_duration, 0) * PS_PER_NS,
            get(t, "a_port", w, what, _port_name, f"to-{b}"),
            get(t, "b_port", w, what, _port_name, f"to-{a}"),
        )
        where[("link", key)] = i
        where[("linkobj", key)] = link
        links.append(link)
    degree = {n: 0 for n in nodes}
    for link in links:
        degree[link.a] += 1
        degree[link.b] += 1
    for name in stations:
        where[("ports", name)] = degree[name]
        if degree[name] not in (1, 2):
            raise err(
                f"station {name!r}: a keepon station has one port, or two for replicated streams (802.1CB), so one or "
                f"two links; it has {degree[name]}",
                nodes[name],
            )
    rates: dict[str, set[int]] = {}
    for link in links:
        for end in (link.a, link.b):
            if end in stations:
                rates.setdefault(end, set()).add(link.rate)
    for name in stations:
        if len(rates.get(name, ())) > 1:
            raise err(f"station {name!r}: its two links must have one rate (its ring serves both ports)", nodes[name])
    ports: set[tuple[str, str]] = set()
    for link in links:
        for name, port in ((link.a, link.a_port), (link.b, link.b_port)):
            if (name, port) in ports:
                raise err(f"node {name!r}: port name {port!r} used by two links", nodes[name])
            ports.add((name, port))

    streams: list[Stream] = []
    for i, t in enumerate(tables("stream")):
        w = ("stream", i)
        name = name_of(t, w, "stream")
        what = f"stream {name!r}"
        unknown(t, _STREAM_KEYS, w, what)
        if ("stream", name) in where:
            raise err(f"{what}: duplicate stream name", w)
        where[("stream", name)] = i
        talker = t.get("talker")
        if talker not in stations:
            raise err(f"{what}: talker {talker!r} is not a [[station]]", (*w, "talker"))
        listeners = t.get("listeners")
        if isinstance(listeners, str):
            listeners = [listeners]
        if not isinstance(listeners, list) or not listeners:
            raise err(f"{what}: listeners must be a non-empty list of station names", (*w, "listeners"))
        for listener in listeners:
            if listener not in stations:
                raise err(f"{what}: listener {listener!r} is not a [[station]]", (*w, "listeners"))
            if listener == talker:
                raise err(f"{what}: listener {listener!r} is the talker", (*w, "listeners"))
        if len(set(listeners)) != len(listeners):
            raise err(f"{what}: a listener is named twice", (*w, "listeners"))
        period = get(t, "period", w, what, parse_duration, required=True)
        if period <= 0:
            raise err(f"{what}: period must be positive", (*w, "period"))
        routes = None
        if "route" in t and "routes" in t:
            raise err(f"{what}: give route (one listener) or routes (one per listener), not both", w)
        if "route" in t:
            routes = [t["route"]]
        elif "routes" in t:
            routes = t["routes"]
        if routes is not None:
            key = "route" if "route" in t else "routes"
            if not isinstance(routes, list) or not all(
                isinstance(r, list) and all(isinstance(n, str) for n in r) for r in routes
            ):
                raise err(f"{what}: {key} must be a list of node names (routes: a list of such lists)", (*w, key))
            routes = tuple(tuple(r) for r in routes)
        earliest = get(t, "earliest_offset", w, what, parse_duration, 0)
        latest = get(t, "latest_offset", w, what, parse_duration)
        if not 0 <= earliest < period:
            raise err(f"{what}: earliest_offset must be in [0, period)", (*w, "earliest_offset"))
        if latest is not None and not earliest <= latest < period:
            raise err(f"{what}: latest_offset must be in [earliest_offset, period)", (*w, "latest_offset"))
        dl = get(t, "deadline", w, what, positive_duration)
        replicate = get(t, "replicate", w, what, integer(1, 2), 1)
        if replicate == 2:
            _check_replicated(err, w, what, talker, listeners, degree, routes)
        stream = Stream(
            name,
            talker,
            tuple(listeners),
            period,
            get(t, "frame_bytes", w, what, integer(MIN_SLOT_BYTES, MAX_SLOT_BYTES), required=True),
            get(t, "max_latency", w, what, parse_duration, required=True),
            get(t, "max_jitter", w, what, parse_duration, 0),
            get(t, "traffic_class", w, what, integer(0, MAX_TRAFFIC_CLASS), default_tc),
            routes,
            earliest,
            latest,
            dl,
        )
        if replicate == 1:
            streams.append(stream)
            continue
        for m in (1, 2):
            member = f"{name}{MEMBER_SEPARATOR}{m}"
            if ("stream", member) in where:
                raise err(f"{what}: its member stream {member!r} has the name of another stream", w)
            where[("stream", member)] = i
            given = None if routes is None else (routes[m - 1],)
            streams.append(dataclasses.replace(stream, name=member, routes=given, replica_of=name, member=m))
    if not streams and streams_required:
        raise err("the network has no [[stream]]")
    return Network(
        base_time,
        stations,
        switches,
        tuple(links),
        tuple(streams),
        path,
        src,
        where,
        queueing=queueing,
        guard_ps=guard * PS_PER_NS,
    )


def _check_replicated(err, w: tuple, what: str, talker: str, listeners: list, degree: dict, routes) -> None:
    """``replicate = 2`` (802.1CB FRER): one listener, two ports at both ends, and two routes if any are given."""
    if len(listeners) != 1:
        raise err(
            f"{what}: replicate = 2 needs exactly one listener (replicated multicast is not implemented), it has "
            f"{len(listeners)}",
            (*w, "replicate"),
        )
    for role, station in (("talker", talker), ("listener", listeners[0])):
        if degree[station] < 2:
            raise err(
                f"{what}: replicate = 2 needs two ports at its {role} {station!r} (one per member stream), it has "
                f"{degree[station]} link",
                (*w, "replicate"),
            )
    if routes is not None and len(routes) != 2:
        raise err(
            f"{what}: replicate = 2 takes two routes (routes = [[...], [...]], one per member stream), got "
            f"{len(routes)}",
            (*w, "routes" if len(routes) != 1 else "route"),
        )


def station_ptp_table(t: dict, where: tuple, what: str, err) -> PtpInput | None:
    """A station's ``[station.ptp]`` (the runtime's ``[ptp]`` keys), checked as the planner checks a flow set's:
    its class one of the traffic classes ``tc0`` … ``tc7`` the CNC gives the station's daemon."""
    if "ptp" not in t:
        return None
    from .stations import tc_class

    try:
        return parse_ptp(t["ptp"], tuple(tc_class(n) for n in range(MAX_TRAFFIC_CLASS + 1)))
    except PtpError as exc:
        raise err(f"{what}: {exc}", (*where, "ptp") + ((exc.key,) if exc.key else ())) from exc


def choice(allowed: tuple[str, ...]):
    def conv(v):
        if v not in allowed:
            raise ValueError_(f"expected one of {', '.join(repr(a) for a in allowed)}, got {v!r}")
        return v

    return conv


def boolean(v: object) -> bool:
    if not isinstance(v, bool):
        raise ValueError_(f"expected true or false, got {v!r}")
    return v


def positive_duration(v: object) -> int:
    ns = parse_duration(v)
    if ns <= 0:
        raise ValueError_(f"must be positive, got {ns} ns")
    return ns


def _port_name(value: object) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError_(f"expected an interface name, got {value!r}")
    return value


def wire_ps(frame_bytes: int, link: Link) -> int:
    """Transmission time of a frame of ``frame_bytes`` (L2 incl. FCS) plus preamble, SFD and gap on ``link``."""
    return (frame_bytes + PREAMBLE_SFD_IFG_BYTES) * link.byte_ps()
