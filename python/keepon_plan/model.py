"""Flow sets (the planner's input) and the slot-level problem derived from them.

A flow-set file is TOML (see README.md). Times are integer nanoseconds; values use the same forms as the runtime
config (docs/config.md). Every input error is an :class:`InputError` naming the file and line of the offending key.

The slot-level :class:`Problem` is where all the planning happens: once the slot period ``δ`` is fixed, a frame
sent at time ``t`` occupies slot ``⌊t/δ⌋`` and starts at that slot's start, so only slot indices matter. A flow
of period ``p`` and jitter ``j < p`` becomes ``P = p/δ`` (must be an integer) and ``J = ⌊j/δ⌋ ≤ P − 1``.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction

from .ptpinput import PtpError, PtpInput, parse_ptp
from .units import (
    ValueError_,
    ceil_frac,
    floor_frac,
    lcm_all,
    parse_duration,
    parse_rate,
    slot_period,
)

MIN_SLOT_BYTES = 64
MAX_SLOT_BYTES = 9018
MAX_RING_SLOTS = 4096
MAX_BASE_TIME = 2**62
"""``base_time`` (TAI ns) must be below this, as in the runtime config's ``[schedule]``."""


class InputError(Exception):
    """Bad input: the message names the file and line when they are known."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(where + message)


def read_input(path: str, what: str) -> str:
    """The text of input file ``path``, or :class:`InputError` naming it and ``what`` it was to be."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", path) from exc


class SourceMap:
    """Line numbers of tables and keys in a TOML source (``[t]``, ``[[t]]``, ``key = ...``).

    ``line(("flow", 2, "period"))`` is the line of ``period`` in the third ``[[flow]]`` table. Only the shapes a
    flow set uses are understood; anything else falls back to the table's header line or to no line at all.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines: dict[tuple, int] | None = None

    def _index(self, text: str) -> dict[tuple, int]:
        """Every table and key's line (read on the first :meth:`line`: most descriptions never need it)."""
        self._lines = {}
        counts: dict[str, int] = {}
        table: tuple = ()
        in_multiline = False
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.count('"""') % 2 == 1 or raw.count("'''") % 2 == 1:
                in_multiline = not in_multiline
                if not in_multiline:
                    continue
            if in_multiline:
                continue
            header = self._HEADER.match(raw)
            if header:
                name = header.group(2)
                if header.group(1) == "[[":
                    index = counts.get(name, 0)
                    counts[name] = index + 1
                    table = (name, index)
                else:
                    table = (name,)
                self._lines.setdefault(table, number)
                continue
            key = self._KEY.match(raw)
            if key:
                self._lines.setdefault((*table, key.group(1).strip('"')), number)
        return self._lines

    def line(self, where: tuple) -> int | None:
        if self._lines is None:
            self._lines = self._index(self._text)
        while where:
            if where in self._lines:
                return self._lines[where]
            where = where[:-1]
        return None


@dataclass(frozen=True)
class Flow:
    """One periodic real-time flow. Times in ns; ``phase`` fixes the release of instance 0 if given."""

    name: str
    cls: str
    period: int
    jitter: int
    frame_bytes: int
    phase: int | None = None
    count: int | None = None


@dataclass(frozen=True)
class ParamInputs:
    """Inputs of parameter selection (paper A.10); every field is optional in the file."""

    sync_budget: int | None = None
    """Largest tolerable PTP offset error bound δ_TS (Eq. 4)."""
    master_granularity: int = 8
    """g_M: timestamp granularity of the PTP master (8 ns: i210-class hardware timestamps)."""
    master_jitter: int = 0
    """j_M^in + j_M^out of the master."""
    station_jitter: int = 0
    """j_S^in + j_S^out of this station (software RX timestamps: a few µs)."""
    max_data_age: int | None = None
    """Longest time a frame may wait between submission and transmission; bounds the lead (batch·δ)."""
    poll_budget: int = 20_000
    """Smallest batch·δ the poll loop needs (one iteration's cost plus its sleep; paper Table 3)."""
    lead: int | None = None
    """Lead written into the runtime config; default ⌈(batch+1)·δ⌉."""


@dataclass(frozen=True)
class FlowSet:
    rate: int
    slot_bytes: int | None
    slots: int | None
    batch: int | None
    policy: str
    classes: tuple[str, ...]
    flows: tuple[Flow, ...]
    params: ParamInputs = field(default_factory=ParamInputs)
    base_time: int = 0
    """TAI ns at which ring cycle 0 starts (802.1Qbv AdminBaseTime); written to ``[schedule]`` and the gate list."""
    path: str | None = None
    source: SourceMap | None = field(default=None, compare=False, repr=False)
    ptp: PtpInput | None = None
    """The ``[ptp]`` table (:mod:`keepon_plan.ptpinput`): the planner keeps room for PTP in its class."""

    def error(self, message: str, where: tuple = ()) -> InputError:
        line = self.source.line(where) if self.source and where else None
        return InputError(message, self.path, line)

    def flow_where(self, name: str, key: str | None = None) -> tuple:
        index = next(i for i, f in enumerate(self.flows) if f.name == name)
        return ("flow", index, key) if key else ("flow", index)

    @property
    def max_frame(self) -> int:
        return max(f.frame_bytes for f in self.flows)

    @property
    def period_gcd(self) -> int:
        return math.gcd(*(f.period for f in self.flows))


_TOP_KEYS = {"link", "ring", "params", "class", "flow", "version", "base_time", "ptp"}
_RING_KEYS = {"slot_bytes", "slots", "batch", "policy"}
_PARAM_KEYS = {
    "sync_budget",
    "master_granularity",
    "master_jitter",
    "station_jitter",
    "max_data_age",
    "poll_budget",
    "lead",
}
_FLOW_KEYS = {"name", "class", "period", "jitter", "frame_bytes", "phase", "count"}


def check_base_time(value: object) -> int:
    """A base time: an integer number of TAI ns with ``0 ≤ value < 2^62`` (raises :class:`ValueError_`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError_(f"expected an integer number of TAI ns, got {value!r}")
    if not 0 <= value < MAX_BASE_TIME:
        raise ValueError_(f"must be in 0 ≤ base_time < 2^62 ns, got {value}")
    return value


def _or(value, default):
    return default if value is None else value


def load_flowset(path: str) -> FlowSet:
    return parse_flowset(read_input(path, "flow set"), path)


def parse_flowset(text: str, path: str | None = None) -> FlowSet:
    """Parse and check a flow set; raises :class:`InputError` naming the offending line."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(m.group(1)) if m else None
        raise InputError(f"TOML syntax: {str(exc).split(' (at line')[0]}", path, line) from exc
    src = SourceMap(text)

    def err(message: str, where: tuple = ()) -> InputError:
        return InputError(message, path, src.line(where) if where else None)

    def table(name: str) -> dict:
        value = doc.get(name, {})
        if not isinstance(value, dict):
            raise err(f"[{name}] must be a table", (name,))
        return value

    def unknown(keys: dict, allowed: set[str], where: tuple, what: str) -> None:
        for key in keys:
            if key not in allowed:
                raise err(f"unknown key {key!r} in {what} (allowed: {', '.join(sorted(allowed))})", (*where, key))

    def get(d: dict, key: str, where: tuple, conv, required: bool = False):
        if key not in d:
            if required:
                raise err(f"missing required key {key!r}", where)
            return None
        try:
            return conv(d[key])
        except ValueError_ as exc:
            raise err(f"{key}: {exc}", (*where, key)) from exc

    def integer(lo: int, hi: int):
        def conv(v):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError_(f"expected an integer, got {v!r}")
            if not lo <= v <= hi:
                raise ValueError_(f"must be in {lo}..={hi}, got {v}")
            return v

        return conv

    unknown(doc, _TOP_KEYS, (), "the flow set")
    if doc.get("version", 1) != 1:
        raise err("version: only version 1 exists", ("version",))
    base_time = _or(get(doc, "base_time", (), check_base_time), 0)
    link = table("link")
    unknown(link, {"rate"}, ("link",), "[link]")
    rate = get(link, "rate", ("link",), parse_rate, required=True)
    ring = table("ring")
    unknown(ring, _RING_KEYS, ("ring",), "[ring]")
    slot_bytes = get(ring, "slot_bytes", ("ring",), integer(MIN_SLOT_BYTES, MAX_SLOT_BYTES))
    slots = get(ring, "slots", ("ring",), integer(2, MAX_RING_SLOTS))
    batch = get(ring, "batch", ("ring",), integer(1, MAX_RING_SLOTS - 1))
    if batch is not None and slots is not None and batch >= slots:
        raise err(f"batch: must be below the ring size {slots}, got {batch}", ("ring", "batch"))
    policy = ring.get("policy", "strict")
    if policy not in ("strict", "relaxed"):
        raise err(f'policy: expected "strict" or "relaxed", got {policy!r}', ("ring", "policy"))

    p = table("params")
    unknown(p, _PARAM_KEYS, ("params",), "[params]")
    dur = parse_duration
    params = ParamInputs(
        sync_budget=get(p, "sync_budget", ("params",), dur),
        master_granularity=_or(get(p, "master_granularity", ("params",), dur), ParamInputs.master_granularity),
        master_jitter=_or(get(p, "master_jitter", ("params",), dur), 0),
        station_jitter=_or(get(p, "station_jitter", ("params",), dur), 0),
        max_data_age=get(p, "max_data_age", ("params",), dur),
        poll_budget=_or(get(p, "poll_budget", ("params",), dur), ParamInputs.poll_budget),
        lead=get(p, "lead", ("params",), dur),
    )

    raw_classes = doc.get("class", [])
    if not isinstance(raw_classes, list):
        raise err("class must be an array of tables: [[class]]", ("class",))
    classes: list[str] = []
    for i, c in enumerate(raw_classes):
        unknown(c, {"name"}, ("class", i), "[[class]]")
        name = c.get("name")
        if not isinstance(name, str) or not name:
            raise err("[[class]] needs a non-empty string name", ("class", i, "name"))
        if name in classes:
            raise err(f"duplicate class name {name!r}", ("class", i, "name"))
        classes.append(name)

    raw_flows = doc.get("flow", [])
    if not isinstance(raw_flows, list) or not raw_flows:
        raise err("the flow set needs at least one [[flow]] table", ("flow",))
    flows: list[Flow] = []
    names: set[str] = set()
    max_frame = slot_bytes if slot_bytes is not None else MAX_SLOT_BYTES
    for i, f in enumerate(raw_flows):
        w = ("flow", i)
        unknown(f, _FLOW_KEYS, w, "[[flow]]")
        name = f.get("name")
        if not isinstance(name, str) or not name:
            raise err("[[flow]] needs a non-empty string name", (*w, "name"))
        if name in names:
            raise err(f"duplicate flow name {name!r}", (*w, "name"))
        names.add(name)
        cls = f.get("class")
        if not isinstance(cls, str):
            raise err(f"flow {name!r} needs a class name", (*w, "class"))
        if cls not in classes:
            if raw_classes:
                raise err(f"flow {name!r}: unknown class {cls!r} (classes: {', '.join(classes)})", (*w, "class"))
            classes.append(cls)  # classes may be implied by the flows, in order of first use
        period = get(f, "period", w, dur, required=True)
        if period <= 0:
            raise err(f"flow {name!r}: period must be positive", (*w, "period"))
        jitter = _or(get(f, "jitter", w, dur), 0)
        if jitter >= period:
            raise err(
                f"flow {name!r}: jitter {jitter} ns must be below the period {period} ns (so that every instance "
                "leaves within its own period; for 'anywhere in the period' use the period less 1ns)",
                (*w, "jitter"),
            )
        frame = get(f, "frame_bytes", w, integer(MIN_SLOT_BYTES, max_frame), required=True)
        phase = get(f, "phase", w, dur)
        if phase is not None and phase >= period:
            raise err(
                f"flow {name!r}: phase {phase} ns must be below the period {period} ns "
                "(it is the release of the first instance after the start of a ring cycle)",
                (*w, "phase"),
            )
        count = get(f, "count", w, integer(1, 2**62))
        flows.append(Flow(name, cls, period, jitter, frame, phase, count))
    ptp = None
    if "ptp" in doc:
        try:
            ptp = parse_ptp(doc["ptp"], tuple(classes))
        except PtpError as exc:
            raise err(str(exc), ("ptp", exc.key) if exc.key else ("ptp",)) from exc
    return FlowSet(
        rate, slot_bytes, slots, batch, policy, tuple(classes), tuple(flows), params, base_time, path, src, ptp
    )


# --------------------------------------------------------------------------------------------------------------
# Slot-level problem


@dataclass(frozen=True)
class SlotFlow:
    """A flow in slot units. Instance ``l`` must go in a slot of its class, and:

    - free phase (``window is None``): slot ``o + l·period + e_l`` with one offset ``o`` and ``0 ≤ e_l ≤ jitter``;
    - fixed phase (``window = (lo, hi)``): slot in ``[lo + l·period, hi + l·period]``.
    """

    name: str
    cls: int
    period: int
    jitter: int
    window: tuple[int, int] | None = None


@dataclass(frozen=True)
class Problem:
    slots: int
    classes: tuple[str, ...]
    flows: tuple[SlotFlow, ...]

    @property
    def hyperperiod(self) -> int:
        return lcm_all([f.period for f in self.flows])

    @property
    def horizon(self) -> int:
        """The schedule repeats every ``lcm(H, N)`` slots: the ring ownership repeats every N."""
        return math.lcm(self.hyperperiod, self.slots)

    def instances(self, f: SlotFlow) -> int:
        return self.horizon // f.period

    def class_demand(self, c: int) -> Fraction:
        """Instances of class ``c`` per ring cycle: ``N·U_c``."""
        return sum((Fraction(self.slots, f.period) for f in self.flows if f.cls == c), Fraction(0))

    @property
    def utilisation(self) -> Fraction:
        return sum((Fraction(1, f.period) for f in self.flows), Fraction(0))

    @property
    def fixed_phase(self) -> bool:
        return any(f.window is not None for f in self.flows)


def to_problem(fs: FlowSet, slot_bytes: int, slots: int) -> Problem:
    """The slot-level problem for a chosen ring; periods must be whole numbers of slots."""
    delta = slot_period(slot_bytes, fs.rate)
    out = []
    for i, f in enumerate(fs.flows):
        if f.frame_bytes > slot_bytes:
            raise fs.error(
                f"flow {f.name!r}: frame_bytes {f.frame_bytes} exceeds slot_bytes {slot_bytes}",
                ("flow", i, "frame_bytes"),
            )
        period = Fraction(f.period) / delta
        if period.denominator != 1:
            raise fs.error(
                f"flow {f.name!r}: period {f.period} ns is not a whole number of slots of δ = {delta} ns "
                f"(slot_bytes {slot_bytes} at {fs.rate} bit/s)",
                ("flow", i, "period"),
            )
        jitter = floor_frac(Fraction(f.jitter) / delta)
        window = None
        if f.phase is not None:
            lo = ceil_frac(Fraction(f.phase) / delta)
            hi = floor_frac(Fraction(f.phase + f.jitter) / delta)
            window = (lo, hi)
        out.append(SlotFlow(f.name, fs.classes.index(f.cls), int(period), jitter, window))
    return Problem(slots, fs.classes, tuple(out))
