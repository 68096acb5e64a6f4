"""The IEEE 802.1Q ``ieee802-dot1q-tsn-types`` talker and listener groups in YANG JSON (RFC 7951), read and written.

A join's input (``keepon-cnc:join``) carries what a CUC sends a CNC in the fully centralised model of 802.1Qcc::

    {"keepon-cnc:input": {
       "stream-id": "02-00-00-00-00-01:00-01",          tsn-types stream-id-type: talker MAC and a unique id
       "allow-replan": false,                           keepon: may the CNC move streams in force to admit it?
       "traffic-class": 7,                              keepon: the gate its windows open (default: the network's)
       "talker": {                                      tsn-types group-talker
         "end-station-interfaces": [{"mac-address": "02-00-00-00-00-01", "interface-name": "eth0"}],
         "traffic-specification": {
           "interval": {"numerator": 1, "denominator": 4000},    seconds, rational
           "max-frames-per-interval": 1, "max-frame-size": 128,  bytes, L2 incl. FCS
           "time-aware": {"earliest-transmit-offset": 0, "latest-transmit-offset": 200000, "jitter": 0}},   ns
         "user-to-network-requirements": {"num-seamless-trees": 1, "max-latency": 50000}},                  ns
       "listeners": [{"end-station-interfaces": [{"mac-address": "02-00-00-00-00-03"}],   group-listener, one each
                      "user-to-network-requirements": {"max-latency": 40000}}]}}

Every error is a :class:`RequestError` naming the element by its path in the document
(``talker/traffic-specification/interval``). Values are YANG JSON: integers as JSON numbers (uint8 to uint32),
strings as strings; a boolean or a string where a number belongs is an error, as is an unknown member. keepon sends
one frame per interval on one tree: ``max-frames-per-interval`` must be 1 and ``num-seamless-trees`` 1 (no FRER).
The talker's ``jitter`` is accepted and recorded: a keepon station hands its frame in early and sends it at its
slot, so the talker's own jitter does not widen a window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MODULE = "keepon-cnc"
_STREAM_ID = re.compile(r"^[0-9A-Fa-f]{2}(-[0-9A-Fa-f]{2}){5}:[0-9A-Fa-f]{2}-[0-9A-Fa-f]{2}$")
_MAC = re.compile(r"^[0-9A-Fa-f]{2}(-[0-9A-Fa-f]{2}){5}$")
UINT16, UINT32 = 2**16 - 1, 2**32 - 1


class RequestError(Exception):
    """A request the CNC cannot take: ``element`` is the path of the member at fault, ``message`` says why;
    ``certificate`` (a dict) when the refusal is a proof (a latency bound no route meets)."""

    def __init__(self, element: str, message: str, certificate: dict | None = None, tag: str = "invalid-value"):
        self.element = element
        self.message = message
        self.certificate = certificate
        self.tag = tag
        super().__init__(f"{element}: {message}" if element else message)


@dataclass(frozen=True)
class EndStation:
    mac: str
    """Upper case, dashes: ``02-00-00-00-00-01``."""
    interface: str | None


@dataclass(frozen=True)
class Join:
    stream_id: str
    talker: EndStation
    listeners: tuple[EndStation, ...]
    interval_ns: int
    max_frame_bytes: int
    earliest_offset_ns: int
    latest_offset_ns: int | None
    jitter_ns: int
    max_latency_ns: int
    """The least of the talker's and the listeners' ``max-latency``."""
    traffic_class: int | None
    allow_replan: bool

    def row(self) -> list:
        """The request as the database keeps it (compact: read back by :func:`stored_join` on every restart)."""
        return [
            self.stream_id,
            [self.talker.mac, self.talker.interface],
            [[x.mac, x.interface] for x in self.listeners],
            self.interval_ns,
            self.max_frame_bytes,
            self.earliest_offset_ns,
            self.latest_offset_ns,
            self.jitter_ns,
            self.max_latency_ns,
            self.traffic_class,
            self.allow_replan,
        ]

    def document(self) -> dict:
        """The request as it is stored and shown (the normalised input)."""
        return {
            "stream-id": self.stream_id,
            "allow-replan": self.allow_replan,
            **({"traffic-class": self.traffic_class} if self.traffic_class is not None else {}),
            "talker": {
                "end-station-interfaces": [_station_doc(self.talker)],
                "traffic-specification": {
                    "interval": {"numerator": self.interval_ns, "denominator": 10**9},
                    "max-frames-per-interval": 1,
                    "max-frame-size": self.max_frame_bytes,
                    "time-aware": {
                        "earliest-transmit-offset": self.earliest_offset_ns,
                        **(
                            {"latest-transmit-offset": self.latest_offset_ns}
                            if self.latest_offset_ns is not None
                            else {}
                        ),
                        "jitter": self.jitter_ns,
                    },
                },
                "user-to-network-requirements": {"num-seamless-trees": 1, "max-latency": self.max_latency_ns},
            },
            "listeners": [{"end-station-interfaces": [_station_doc(x)]} for x in self.listeners],
        }


def stored_join(row: list) -> Join:
    """A join from the row :meth:`Join.row` wrote (the database's copy: checked when it came in, read directly)."""
    sid, (mac, iface), listeners, *rest = row
    return Join(sid, EndStation(mac, iface), tuple(EndStation(m, i) for m, i in listeners), *rest)


def _station_doc(e: EndStation) -> dict:
    return {"mac-address": e.mac, **({"interface-name": e.interface} if e.interface else {})}


class _Reader:
    """Typed access to one JSON object, with the path of every member for the errors."""

    def __init__(self, doc: object, path: str) -> None:
        if not isinstance(doc, dict):
            raise RequestError(path, f"expected an object, got {_kind(doc)}")
        self.doc = doc
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}/{key}" if self.path else key

    def only(self, allowed: set[str]) -> None:
        for key in self.doc:
            if key not in allowed:
                raise RequestError(self.at(key), f"unknown member (allowed here: {', '.join(sorted(allowed))})")

    def obj(self, key: str, required: bool = True) -> _Reader | None:
        if key not in self.doc:
            if required:
                raise RequestError(self.at(key), "missing")
            return None
        return _Reader(self.doc[key], self.at(key))

    def uint(self, key: str, hi: int, default: int | None = None, required: bool = False) -> int | None:
        if key not in self.doc:
            if required:
                raise RequestError(self.at(key), "missing")
            return default
        v = self.doc[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise RequestError(self.at(key), f"expected an unsigned integer (a JSON number), got {_kind(v)}")
        if not 0 <= v <= hi:
            raise RequestError(self.at(key), f"{v} is out of range 0..{hi}")
        return v

    def string(self, key: str, pattern: re.Pattern | None = None, required: bool = True) -> str | None:
        if key not in self.doc:
            if required:
                raise RequestError(self.at(key), "missing")
            return None
        v = self.doc[key]
        if not isinstance(v, str):
            raise RequestError(self.at(key), f"expected a string, got {_kind(v)}")
        if pattern is not None and not pattern.match(v):
            raise RequestError(self.at(key), f"{v!r} does not match the pattern {pattern.pattern}")
        return v

    def items(self, key: str) -> list[_Reader]:
        v = self.doc.get(key)
        if not isinstance(v, list) or not v:
            raise RequestError(self.at(key), "expected a non-empty list" + ("" if key in self.doc else " (missing)"))
        return [_Reader(x, f"{self.at(key)}[{i}]") for i, x in enumerate(v)]


def _kind(v: object) -> str:
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object", type(None): "null"}.get(
        type(v), f"{v!r}"
    )


def _end_station(r: _Reader, key: str) -> EndStation:
    items = r.items(key)
    if len(items) != 1:
        raise RequestError(r.at(key), f"a keepon station has one port: give one interface, not {len(items)}")
    e = items[0]
    e.only({"mac-address", "interface-name"})
    mac = e.string("mac-address", _MAC)
    assert mac is not None
    return EndStation(mac.upper(), e.string("interface-name", required=False))


def _latency(r: _Reader | None) -> int | None:
    if r is None:
        return None
    r.only({"num-seamless-trees", "max-latency"})
    trees = r.uint("num-seamless-trees", UINT16, 1)
    if trees != 1:
        raise RequestError(r.at("num-seamless-trees"), f"{trees} seamless trees: keepon plans one tree (no FRER)")
    return r.uint("max-latency", UINT32)


def _input(top: _Reader) -> _Reader:
    """The operation's input; paths inside it are relative to it (``talker/…``)."""
    if f"{MODULE}:input" not in top.doc:
        raise RequestError(f"{MODULE}:input", 'missing: the body is {"keepon-cnc:input": {...}}')
    return _Reader(top.doc[f"{MODULE}:input"], "")


def parse_join(body: object) -> Join:
    """A join's input from a request body (already decoded JSON)."""
    top = _Reader(body, "")
    top.only({f"{MODULE}:input"})
    r = _input(top)
    r.only({"stream-id", "allow-replan", "traffic-class", "talker", "listeners"})
    stream_id = r.string("stream-id", _STREAM_ID)
    assert stream_id is not None
    allow = r.doc.get("allow-replan", False)
    if not isinstance(allow, bool):
        raise RequestError(r.at("allow-replan"), f"expected true or false, got {_kind(allow)}")
    tc = r.uint("traffic-class", 7)
    talker = r.obj("talker")
    assert talker is not None
    talker.only(
        {
            "stream-rank",
            "end-station-interfaces",
            "data-frame-specification",
            "traffic-specification",
            "user-to-network-requirements",
            "interface-capabilities",
        }
    )
    station = _end_station(talker, "end-station-interfaces")
    spec = talker.obj("traffic-specification")
    assert spec is not None
    spec.only({"interval", "max-frames-per-interval", "max-frame-size", "transmission-selection", "time-aware"})
    iv = spec.obj("interval")
    assert iv is not None
    iv.only({"numerator", "denominator"})
    num, den = iv.uint("numerator", UINT32, required=True), iv.uint("denominator", UINT32, required=True)
    assert num is not None and den is not None
    if num == 0 or den == 0:
        raise RequestError(iv.path, f"{num}/{den} s is not a positive interval")
    interval_ns, rest = divmod(num * 10**9, den)
    if rest:
        raise RequestError(iv.path, f"{num}/{den} s is not a whole number of nanoseconds")
    frames = spec.uint("max-frames-per-interval", UINT16, required=True)
    if frames != 1:
        raise RequestError(spec.at("max-frames-per-interval"), f"{frames}: keepon plans one frame per interval")
    size = spec.uint("max-frame-size", UINT16, required=True)
    assert size is not None
    ta = spec.obj("time-aware", required=False)
    earliest, latest, jitter = 0, None, 0
    if ta is not None:
        ta.only({"earliest-transmit-offset", "latest-transmit-offset", "jitter"})
        earliest = ta.uint("earliest-transmit-offset", UINT32, 0)
        latest = ta.uint("latest-transmit-offset", UINT32)
        jitter = ta.uint("jitter", UINT32, 0)
        assert earliest is not None and jitter is not None
        if earliest >= interval_ns:
            raise RequestError(ta.at("earliest-transmit-offset"), f"{earliest} ns is not within the interval")
        if latest is not None and not earliest <= latest < interval_ns:
            raise RequestError(
                ta.at("latest-transmit-offset"), f"{latest} ns is not in [earliest-transmit-offset, interval)"
            )
    bounds = [_latency(talker.obj("user-to-network-requirements", required=False))]
    listeners = []
    for item in r.items("listeners"):
        item.only({"end-station-interfaces", "user-to-network-requirements", "interface-capabilities"})
        listeners.append(_end_station(item, "end-station-interfaces"))
        bounds.append(_latency(item.obj("user-to-network-requirements", required=False)))
    given = [b for b in bounds if b is not None]
    if not given:
        raise RequestError("talker/user-to-network-requirements/max-latency", "missing (here or in a listener)")
    if len({x.mac for x in listeners}) != len(listeners):
        raise RequestError(r.at("listeners"), "a listener is named twice")
    return Join(
        stream_id.upper(),
        station,
        tuple(listeners),
        interval_ns,
        size,
        earliest,
        latest,
        jitter,
        min(given),
        tc,
        allow,
    )


def parse_leave(body: object) -> str:
    """The stream-id of a leave's input."""
    top = _Reader(body, "")
    top.only({f"{MODULE}:input"})
    r = _input(top)
    r.only({"stream-id"})
    sid = r.string("stream-id", _STREAM_ID)
    assert sid is not None
    return sid.upper()


def check_stream_id(text: str) -> str:
    if not _STREAM_ID.match(text):
        raise RequestError("stream-id", f"{text!r} does not match the pattern {_STREAM_ID.pattern}")
    return text.upper()
