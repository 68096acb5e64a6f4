"""Room for a station's PTP in the CNC's plans: ring slots its PTP class owns and no stream is ever placed in.

A station of the CNC's topology that runs PTP says so with ``[station.ptp]``: its daemon's ``[ptp]`` table (the
runtime's keys, checked by :func:`keepon_plan.ptpinput.parse_ptp` as the planner checks a flow set's), its
``class`` one of the traffic classes ``tc0`` … ``tc7`` the CNC gives the daemon. The room is the planner's
(:mod:`keepon_plan.ptproom`): ``k = ⌈rate × cycle⌉`` ring slots a cycle, ``rate`` PTP's frames a second at its
intervals, chosen once when the topology is first given — spread over the ring (:func:`keepon_plan.ptproom.spread`)
— and kept in the database (:mod:`.store`, table ``ptp``), so a restarted CNC keeps the same slots.

What the CNC does with them (:class:`~keepon_plan.cnc.incremental.Incremental`): each slot is a busy window of the
station's link to its first hop, owned by PTP, in every placement state — the streams in force, a join's first fit,
a re-plan's fresh state — so no stream of the station is ever placed in it; the station's daemon is given its PTP
class owning exactly those slots in every ``Schedule`` change (the daemon refuses a change that leaves PTP too
little room, ``crates/keepon/src/ptproom.rs``); and a stream of the station may not ask for the PTP class
(``traffic-class``): PTP's frames and a stream's would share the class's slots, and either could take the other's.

A byte-clock station (``timing = "bytes"``) keeps no ring slots: its PTP class gets ``k = ⌈rate × cycle⌉``
**windows** a cycle instead, as the planner sizes them (:func:`keepon_plan.ptproom.bytes_room`): each one PTP frame
of its longest length on the wire and one byte more (:func:`~keepon_plan.network.stations.byte_window_ns`, as a
stream's), spread evenly over the cycle on the station's byte grid (``⌊i·C/k⌋`` rounded down), each followed by the
minimum frame of free link every byte-clock frame keeps. They are busy windows of the station's link like the slots
(and the daemon's ``ScheduleWindows`` change gives them to the PTP class every time); the database keeps them as
``[offset, length]`` ns pairs in the same column.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import InputError
from ..network.stations import byte_grid_ps, byte_tail_ps, byte_window_ns, tc_class
from ..network.topology import MAX_TRAFFIC_CLASS, Network
from ..ptpinput import PTP_LONGEST_FRAME, describe
from ..ptproom import bytes_room, note, room_of, slot_problem, spread

CLASSES = tuple(tc_class(n) for n in range(MAX_TRAFFIC_CLASS + 1))
"""The classes the CNC gives a station's daemon (a stream's traffic class ``n`` is class ``tcN``)."""


@dataclass(frozen=True)
class PtpRoom:
    """A station's PTP: its class owns ``slots`` (ring slots, every cycle), which no stream takes."""

    station: str
    cls: str
    slots: tuple[int, ...]
    table: dict
    """The station's ``[ptp]`` as written."""
    windows: tuple[tuple[int, int], ...] = ()
    """On a byte-clock station (``slots`` empty): the PTP class's windows, ``(offset, length)`` ns in the cycle."""

    def stored(self) -> list:
        """What the database keeps: the ring slots, or the windows as ``[offset, length]`` pairs."""
        return [list(w) for w in self.windows] if self.windows else list(self.slots)

    @staticmethod
    def from_stored(station: str, cls: str, kept: list, table: dict) -> PtpRoom:
        if kept and isinstance(kept[0], list):
            return PtpRoom(station, cls, (), table, tuple((o, n) for o, n in kept))
        return PtpRoom(station, cls, tuple(kept), table)


def rooms(net: Network, cycle_ns: int) -> tuple[dict[str, PtpRoom], list[str]]:
    """The PTP room of every station with ``[station.ptp]`` (its ring already checked against the cycle), and one
    line per station saying what is kept and why; :class:`InputError` naming the station where it cannot be."""
    out: dict[str, PtpRoom] = {}
    said: list[str] = []
    for name, st in sorted(net.stations.items()):
        if st.ptp is None:
            continue
        if st.timing == "bytes":
            room = bytes_windows(net, name, cycle_ns)
            out[name] = room
            k, length = len(room.windows), room.windows[0][1]
            said.append(
                f"station {name}: ptp: class {room.cls!r} keeps {k} window{'s' * (k != 1)} of {length} ns a cycle "
                f"(one {PTP_LONGEST_FRAME} B PTP frame each) that no stream takes ({describe(st.ptp)}): "
                f"{[list(w) for w in room.windows]} ns"
            )
            continue
        assert st.slot_bytes is not None and st.slots is not None
        problem = slot_problem(st.slot_bytes)
        if problem is not None:
            raise InputError(f"station {name!r}: ptp: {problem}")
        r = room_of(st.ptp, CLASSES, st.slot_bytes, st.slots, net.links_of(name)[0].rate)
        if r.slots >= st.slots:
            raise InputError(
                f"station {name!r}: ptp: PTP needs {r.slots} of its {st.slots} ring slots a cycle "
                f"({float(r.rate):g} frames/s), which leaves no slot for a stream: lengthen the PTP intervals "
                "(ptp.log_sync_interval, …)"
            )
        chosen = spread(list(range(st.slots)), r.slots, st.slots, set(range(r.slots)))
        out[name] = PtpRoom(name, r.name, tuple(sorted(chosen)), dict(st.ptp.table))
        said.append(f"station {name}: {note(r, 'that no stream takes')}: ring slots {sorted(chosen)}")
    return out, said


def bytes_windows(net: Network, name: str, cycle_ns: int) -> PtpRoom:
    """A byte-clock station's PTP room: ``k`` windows spread over the cycle, or :class:`InputError` naming the
    station when they leave no room between them."""
    st = net.stations[name]
    assert st.ptp is not None
    rate = net.links_of(name)[0].rate
    k, _wire = bytes_room(st.ptp, cycle_ns, rate)
    length = byte_window_ns(PTP_LONGEST_FRAME, rate)
    grid = byte_grid_ps(rate) // 1000
    busy = length + -(-byte_tail_ps(rate) // 1000)
    if k * (busy + grid) > cycle_ns:
        raise InputError(
            f"station {name!r}: ptp: PTP needs {k} windows of {length} ns (and {busy - length} ns of free link after "
            f"each) in the {cycle_ns} ns cycle ({describe(st.ptp)}), which leaves no room for a stream: lengthen the "
            "PTP intervals (ptp.log_sync_interval, …)"
        )
    offsets = [i * cycle_ns // k // grid * grid for i in range(k)]
    return PtpRoom(name, st.ptp.cls, (), dict(st.ptp.table), tuple((o, length) for o in offsets))


def check_stored(net: Network, stored: dict[str, PtpRoom]) -> None:
    """The database's PTP rooms are those of the topology's stations (the same stations, classes and tables)."""
    want = {n: st.ptp for n, st in net.stations.items() if st.ptp is not None}
    if set(want) != set(stored):
        raise InputError(
            f"the database keeps PTP room for {sorted(stored)}, the topology asks it for {sorted(want)}: the database "
            "is not this topology's"
        )
    for name, room in stored.items():
        p = want[name]
        if room.cls != p.cls or room.table != p.table:
            raise InputError(f"station {name!r}: the database's [ptp] differs from the topology's")


def reserve(state, net: Network, room: PtpRoom, delta_ps: int) -> None:
    """Make each of ``room``'s ring slots a busy window (owned by PTP) of the station's link to its first hop in
    the placement ``state`` (:class:`keepon_plan.network.schedule._State`)."""
    link = net.links_of(room.station)[0]
    nb = link.b if link.a == room.station else link.a
    busy = state.occ((room.station, nb))
    for s in room.slots:
        busy.add(s * delta_ps, delta_ps, owner(room.station))
    for offset, length in room.windows:  # a byte-clock station's: the window and the free link after it
        busy.add(offset * 1000, length * 1000 + byte_tail_ps(link.rate), owner(room.station))


def owner(station: str) -> str:
    """The name a PTP busy window is kept under (where a refusal says what it met)."""
    return f"PTP of {station}"


def stream_class_problem(room: PtpRoom | None, traffic_class: int) -> str | None:
    """Why a stream of ``room``'s station may not have ``traffic_class``, or ``None``."""
    if room is None or tc_class(traffic_class) != room.cls:
        return None
    kept = f"windows {[list(w) for w in room.windows]} ns" if room.windows else f"ring slots {list(room.slots)}"
    return (
        f"{traffic_class}: class {room.cls} of station {room.station} carries its PTP messages ({kept}): choose "
        "another traffic class"
    )
