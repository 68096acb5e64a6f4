"""Each keepon talker's ring, chosen and written by the station planner's own machinery.

A talker's streams become a station flow set (one class per traffic class, strictly periodic flows).

- **Slots** (``timing = "slots"``): slot size, ring and batch as :func:`keepon_plan.params.choose` picks them for
  ``keepon-plan solve``; the network schedule fixes each flow's slot, :func:`keepon_plan.emit.runtime_config` writes
  the runtime config. keepon pads every frame to the slot size, so that is the frame's length on every link, and
  departures are slot starts.
- **Byte clock** (``timing = "bytes"``): the ring only sets the posting lead (:func:`keepon_plan.bytes.choose_ring`);
  frames keep their own length; a departure is any whole ns that is a whole number of byte times (8 ns at 1 Gb/s,
  4 ns at 10 Gb/s); each instance's window is exactly its wire time, and :func:`keepon_plan.bytes.runtime_config`
  writes the config. On the talker's own link each frame is followed by a minimum frame's wire time of free link, so
  the runtime never pads a real-time frame to close a gap (a padded frame would be longer on every hop).

Either way the station verifier (:mod:`keepon_plan.verify`) checks every config written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..model import MAX_SLOT_BYTES, MIN_SLOT_BYTES, FlowSet, InputError, parse_flowset, to_problem
from ..params import RingChoice, choose
from ..units import PREAMBLE_SFD_IFG_BYTES, format_duration, format_rate
from .topology import PS_PER_NS, Network, Stream


@dataclass(frozen=True)
class StationRing:
    name: str
    flowset: FlowSet
    choice: RingChoice
    slot_ps: int
    """The departure grid in ps: δ on slots, the whole-ns byte grid on the byte clock."""
    timing: str = "slots"
    rate: int = 0

    def wire_bytes(self, s: Stream) -> int:
        """The frame's length on every link (L2 incl. FCS): the slot size on slots, its own on the byte clock."""
        return max(s.frame_bytes, 64) if self.timing == "bytes" else self.choice.slot_bytes

    def tail_ps(self) -> int:
        """Free link after each frame on the talker's own link (byte clock: a minimum frame's wire time)."""
        return byte_tail_ps(self.rate) if self.timing == "bytes" else 0

    def latest_ps(self, s: Stream, period_ps: int) -> int:
        """The latest departure in the period whose window does not cross the talker's cycle end."""
        if self.timing != "bytes":
            return period_ps - 1
        return period_ps - -(-(max(s.frame_bytes, 64) + 20) * 8 * 10**12 // self.rate // 1000) * 1000


def byte_tail_ps(rate: int) -> int:
    """Free link a byte-clock talker keeps after each of its frames on its own link: a minimum frame's wire time."""
    return 84 * 8 * 10**12 // rate


def byte_window_ns(frame_bytes: int, rate: int) -> int:
    """A byte-clock frame's window in its class, whole ns: its wire time and one byte more (:func:`byte_windows`)."""
    from ..bytes import byte_time, wire_time
    from ..units import ceil_frac

    return ceil_frac(wire_time(frame_bytes, rate) + byte_time(rate))


def tc_class(tc: int) -> str:
    return f"tc{tc}"


def flowset_text(net: Network, station: str, streams: list[Stream]) -> str:
    st = net.stations[station]
    link = net.links_of(station)[0]
    lines = [
        f"# station flow set of {station}, derived from the network description by keepon-plan network",
        f"base_time = {net.base_time}",
        "[link]",
        f'rate = "{format_rate(link.rate)}"',
        "[ring]",
    ]
    slot_bytes = st.slot_bytes
    if slot_bytes is None and st.timing == "slots":
        slot_bytes = smallest_slot(link.rate, streams)
    for key, value in (("slot_bytes", slot_bytes), ("slots", st.slots), ("batch", st.batch)):
        if value is not None:
            lines.append(f"{key} = {value}")
    if st.max_data_age_ns is not None:
        lines += ["[params]", f"max_data_age = {st.max_data_age_ns}"]
    for tc in sorted({s.traffic_class for s in streams}):
        lines += ["[[class]]", f'name = "{tc_class(tc)}"']
    for s in streams:
        lines += [
            "[[flow]]",
            f'name = "{s.name}"',
            f'class = "{tc_class(s.traffic_class)}"',
            f'period = "{format_duration(s.period_ns)}"',
            f"frame_bytes = {s.frame_bytes}",
        ]
    return "\n".join(lines) + "\n"


def smallest_slot(rate: int, streams: list[Stream]) -> int | None:
    """The slot size :func:`keepon_plan.params.choose_slot_bytes` picks, in integer arithmetic (it is on every
    talker's path, and the station planner's search divides 9000 fractions); ``None`` lets it explain a failure.

    A slot of ``w`` bytes on the wire divides every period iff ``w`` divides the bytes the gcd of the periods
    carries, ``gcd·rate/8e9``; the smallest such ``w`` holding the largest frame (and 20 bytes of overhead) wins.
    """
    per_gcd, rest = divmod(math.gcd(*(s.period_ns for s in streams)) * rate, 8 * 10**9)
    if rest:
        return None
    lo = max(s.frame_bytes for s in streams) + PREAMBLE_SFD_IFG_BYTES
    for wire in range(max(lo, MIN_SLOT_BYTES + PREAMBLE_SFD_IFG_BYTES), MAX_SLOT_BYTES + PREAMBLE_SFD_IFG_BYTES + 1):
        if per_gcd % wire == 0:
            return wire - PREAMBLE_SFD_IFG_BYTES
    return None


def station_rings(net: Network) -> dict[str, StationRing]:
    """The ring of every station that talks; errors name the station."""
    by_talker: dict[str, list[Stream]] = {}
    for s in net.streams:
        by_talker.setdefault(s.talker, []).append(s)
    out = {}
    for name, streams in by_talker.items():
        timing = net.stations[name].timing
        try:
            fs = parse_flowset(flowset_text(net, name, streams), f"<station {name}>")
            if timing == "bytes":
                from ..bytes import choose_ring

                choice = choose_ring(fs)
            else:
                choice = choose(fs)
                to_problem(fs, choice.slot_bytes, choice.slots)  # periods in whole slots, frames within a slot
        except InputError as exc:
            raise net.error(f"station {name!r}: its streams do not fit a keepon ring: {exc.message}") from exc
        grid = fs_delta_ps(fs.rate, choice.slot_bytes) if timing == "slots" else byte_grid_ps(fs.rate)
        out[name] = StationRing(name, fs, choice, grid, timing, fs.rate)
    return out


def byte_grid_ps(rate: int) -> int:
    """The shortest whole number of ns that is a whole number of byte times, in ps (8000 at 1 Gb/s)."""
    return math.lcm(8 * 10**12 // rate, 1000)


def fs_delta_ps(rate: int, slot_bytes: int) -> int:
    delta = Fraction((slot_bytes + 20) * 8 * 10**12, rate)
    assert delta.denominator == 1  # byte times are whole ps (checked with the link)
    return int(delta)


def departure_slot(ring: StationRing, departure_ps: int) -> int:
    assert departure_ps % ring.slot_ps == 0
    return departure_ps // ring.slot_ps


def port_rings(
    net: Network, rings: dict[str, StationRing], egress: dict[str, str] | None
) -> dict[str, tuple[str, str, StationRing]]:
    """Per sending port (:meth:`~.topology.Network.sender`: the station's name, or ``station.port`` on a two-port
    station): its station, its interface name and its ring — the station's ring choice with the flows that leave on
    that port. ``egress``: per stream, the neighbour its route leaves the talker for (None: one port everywhere)."""
    import dataclasses

    out: dict[str, tuple[str, str, StationRing]] = {}
    for name, ring in rings.items():
        by_port: dict[str, list] = {}
        for f in ring.flowset.flows:
            neighbour = egress[f.name] if egress is not None else _only_neighbour(net, name)
            by_port.setdefault(neighbour, []).append(f)
        for neighbour, flows in by_port.items():
            sender = net.sender(name, neighbour)
            port = net.port_name(name, neighbour)
            if sender == name:
                out[name] = (name, port, ring)
                continue
            classes = tuple(c for c in ring.flowset.classes if any(f.cls == c for f in flows))
            fs = dataclasses.replace(ring.flowset, flows=tuple(flows), classes=classes)
            out[sender] = (name, port, dataclasses.replace(ring, name=sender, flowset=fs))
    return out


def _only_neighbour(net: Network, station: str) -> str:
    link = net.links_of(station)[0]
    return link.b if link.a == station else link.a


def runtime_configs(
    net: Network,
    rings: dict[str, StationRing],
    departures: dict[str, int],
    station_check: bool = True,
    egress: dict[str, str] | None = None,
) -> dict[str, str]:
    """Per sending port (:func:`port_rings`), its runtime config with every flow in the slot of its planned
    departure; checked by the station verifier when ``station_check`` (the network verifier checks the same frames
    independently)."""
    from ..emit import runtime_config
    from ..isolation import Schedule
    from ..verify import verify_plan_text

    out = {}
    for name, (_station, _port, ring) in port_rings(net, rings, egress).items():
        if ring.timing == "bytes":
            out[name] = _bytes_config(net, ring, departures, station_check)
            continue
        fs, choice = ring.flowset, ring.choice
        problem = to_problem(fs, choice.slot_bytes, choice.slots)
        slots = []
        owned: list[set[int]] = [set() for _ in fs.classes]
        for f, sf in zip(fs.flows, problem.flows, strict=True):
            first = departures[f.name] // ring.slot_ps
            instances = tuple(first + lp for lp in range(0, problem.horizon, sf.period))
            slots.append(instances)
            owned[sf.cls].update(x % choice.slots for x in instances)
        schedule = Schedule(tuple(frozenset(o) for o in owned), tuple(slots), "network no-wait schedule")
        text = runtime_config(fs, choice, problem, schedule, f"station {name} of {net.path or 'the network'}")
        violations = verify_plan_text(fs, text) if station_check else []
        if violations:
            raise AssertionError(f"station {name}: the runtime config fails the station verifier: {violations[0]}")
        out[name] = text
    return out


def byte_windows(ring: StationRing, departures: dict[str, int]):
    """The byte-clock plan of a talker: its cycle, per class its frames' merged windows, per flow its txtimes."""
    from ..bytes import DEFAULT_MAX_FRAME, BytesPlan, merge
    from ..units import lcm_all

    fs = ring.flowset
    cycle = lcm_all([f.period for f in fs.flows])
    per_class: list[list[tuple[int, int]]] = [[] for _ in fs.classes]
    times = []
    for f in fs.flows:
        first = departures[f.name]
        assert first % 1000 == 0
        row = tuple(first // 1000 + lp for lp in range(0, cycle, f.period))
        times.append(row)
        # One byte beyond the frame's wire time: the runtime starts a frame on the byte nearest its txtime, and a
        # talker's byte grid drifts against network time with its oscillator, so a window exactly as long as the
        # frame admits it only while the grid happens to sit on the window (docs/byte-clock.md; the station's
        # post check). The 84 B kept free after every frame on the talker's link holds that byte.
        w = byte_window_ns(f.frame_bytes, fs.rate)
        per_class[fs.classes.index(f.cls)].extend((t, w) for t in row)
    windows = tuple(tuple(merge(ws)) for ws in per_class)
    grid = ring.slot_ps // 1000
    plan = BytesPlan(cycle, windows, tuple(times), grid, max(DEFAULT_MAX_FRAME, fs.max_frame), "network schedule")
    return plan


def _bytes_config(net: Network, ring: StationRing, departures: dict[str, int], station_check: bool = True) -> str:
    from ..bytes import runtime_config
    from ..verify import verify_plan_text

    plan = byte_windows(ring, departures)
    text = runtime_config(ring.flowset, ring.choice, plan, f"station {ring.name} of {net.path or 'the network'}")
    violations = verify_plan_text(ring.flowset, text) if station_check else []
    if violations:
        raise AssertionError(f"station {ring.name}: the runtime config fails the station verifier: {violations[0]}")
    return text


def ns_of(ps: int) -> str:
    """An exact decimal number of ns for a report."""
    whole, frac = divmod(ps, PS_PER_NS)
    return f"{whole}" if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")
