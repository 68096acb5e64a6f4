"""The CNC's operations: join, leave, status; each change recorded, distributed at one base time, then in force.

A change, step by step (each step one database transaction, :mod:`.store`)::

    plan (in memory) ──► begin: change pending, each device's new and previous configuration ──► [fault "recorded"]
      ──► per device: apply(config, base time) ──► applied ──► [fault "applied:DEVICE"] ──► finish: in force

The base time is the first cycle start (``base_time + k·cycle`` of the network) at least ``lead`` after now, the
same for every device, so a re-plan that moves streams changes every device at one instant. A device that refuses
rolls the change back (the devices that took it get their previous configuration, at a new base time) and the
request fails naming the device. A CNC killed between the steps is finished by :meth:`Cnc.recover` when it starts
again: a pending change whose base time is still at least ``lead / 2`` ahead is finished (the devices not yet
applied get it, at the same base time); otherwise it is rolled back (the devices that applied it get their previous
configuration at a new base time; a change recorded without previous configurations, schema version 1, is finished
at a new base time instead). Requests are served one at a time (a lock): a change is in force or rolled back before
the next is planned.

A refused request changes nothing: planning happens in memory first and is undone on refusal before anything is
written.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable

from ..model import InputError
from ..network.topology import Network, Stream, parse_network
from .distribute import Distribution, DistributionError
from .incremental import Incremental, Refused
from .ptp import check_stored, rooms
from .store import Change, Store
from .tsn_types import Join, RequestError, check_stream_id, parse_join, parse_leave, stored_join

DEFAULT_LEAD_NS = 100_000_000
"""How far ahead of now a change's base time lies by default (100 ms)."""


class Killed(BaseException):
    """Raised by a test's fault hook to stop the CNC where it stands (nothing catches it)."""


class Cnc:
    def __init__(
        self,
        store: Store,
        distribution: Distribution,
        lead_ns: int = DEFAULT_LEAD_NS,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        """A CNC over a database already configured (:func:`configure`); :meth:`recover` before serving."""
        cfg = store.config()
        self.store = store
        self.distribution = distribution
        self.lead_ns = lead_ns
        self.fault = fault or (lambda _where: None)
        self.lock = threading.Lock()
        self.net: Network = parse_network(
            cfg["topology"], cfg.get("topology_path"), streams_required=False, station_ptp=True
        )
        self.cycle_ns = int(cfg["cycle_ns"])
        self.macs: dict[str, str] = json.loads(cfg["macs"])
        self.station_mac = {st: mac for mac, st in self.macs.items()}
        self.ptp = store.ptp()
        check_stored(self.net, self.ptp)
        self.inc = Incremental(self.net, self.cycle_ns, self.ptp)
        self.requests: dict[str, Join] = {}
        self.devices = store.devices()
        routed, starts = {}, {}
        for name, _talker, request, st, _state in store.streams():
            join = stored_join(request)
            self.requests[name] = join
            routed[name] = self.inc.route(self._stream(join))
            starts[name] = tuple(st)
        self.inc.adopt(starts, routed)
        self.settle()

    def settle(self) -> None:
        """Collect the young garbage and freeze every object alive (``gc.freeze``): Python's automatic full
        collections scan every object not frozen, and with 10 000 streams in force each took 120–210 ms, landing in
        whichever join allocated at that moment. Called after every request and on loading (0.1 ms); what is frozen
        is never scanned again (freed by reference counting as usual; a reference cycle dropped later stays)."""
        gc.collect(1)
        gc.freeze()

    # --- requests -------------------------------------------------------------------------------------------------

    def _station(self, mac: str, element: str) -> str:
        station = self.macs.get(mac)
        if station is None:
            raise RequestError(element, f"unknown end station {mac}: no station of the network has this address")
        return station

    def _stream(self, join: Join) -> Stream:
        talker = self._station(join.talker.mac, "talker/end-station-interfaces[0]/mac-address")
        listeners = tuple(
            self._station(x.mac, f"listeners[{i}]/end-station-interfaces[0]/mac-address")
            for i, x in enumerate(join.listeners)
        )
        if talker in listeners:
            raise RequestError("listeners", f"the talker {join.talker.mac} is also a listener")
        tc = join.traffic_class
        return Stream(
            join.stream_id,
            talker,
            listeners,
            join.interval_ns,
            join.max_frame_bytes,
            join.max_latency_ns,
            0,
            7 if tc is None else tc,
            None,
            join.earliest_offset_ns,
            join.latest_offset_ns,
            None,
        )

    def join(self, body: object) -> dict:
        """Admit a stream (its talker's answer) or raise :class:`RequestError` / :class:`Refused`; distribution
        failures raise :class:`DistributionError` after the change is rolled back."""
        join = parse_join(body)
        with self.lock:
            try:
                return self._join(join)
            finally:
                self.settle()

    def _join(self, join: Join) -> dict:
        if join.stream_id in self.requests:
            raise RequestError("stream-id", f"{join.stream_id} has joined already", tag="data-exists")
        r = self.inc.route(self._stream(join))
        before = dict(self.inc.starts)
        moved: dict[str, tuple[list[int], list[int]]] = {}
        try:
            starts = self.inc.fit(r)
            self.inc.add(r, starts)
        except Refused as refused:
            if not join.allow_replan:
                refused.certificate["reason"] += " (allow-replan is false: the streams in force were not moved)"
                raise
            new = self.inc.replan(r)
            if new is None:
                refused.certificate["reason"] += "; a re-plan of every stream did not place them all either"
                raise
            routed = {**self.inc.routed, r.stream.name: r}
            self.inc.adopt(new, routed)
            moved = {n: (list(before[n]), list(new[n])) for n in before if tuple(before[n]) != tuple(new[n])}
        names = [r.stream.name, *moved]
        try:
            lists = self.inc.fits_devices(self._ports(names))
        except Refused:
            self._undo_join(r.stream.name, before, moved)
            raise
        self.requests[join.stream_id] = join
        try:
            self._change("join", join.stream_id, names, moved, joining=(r.stream.talker, join.row()), lists=lists)
        except DistributionError:
            self.requests.pop(join.stream_id)
            self._undo_join(r.stream.name, before, moved)
            raise
        return self._answer(join.stream_id, moved=sorted(moved))

    def _undo_join(self, name: str, before: dict, moved: dict) -> None:
        if moved:
            self.inc.adopt(before, {n: self.inc.routed[n] for n in before})
        elif name in self.inc.routed:
            self.inc.remove(name)

    def leave(self, body: object) -> dict:
        sid = parse_leave(body)
        with self.lock:
            try:
                return self._leave(sid)
            finally:
                self.settle()

    def _leave(self, sid: str) -> dict:
        if sid not in self.requests:
            raise RequestError("stream-id", f"no stream {sid}", tag="data-missing")
        r = self.inc.routed[sid]
        ports = self._ports([sid])
        starts = self.inc.starts[sid]
        self.inc.remove(sid)
        try:
            self._change("leave", sid, [], {}, leaving=(r, ports))
        except DistributionError:
            self.inc.add(r, starts)
            raise
        self.requests.pop(sid)
        return {"keepon-cnc:output": {"stream-id": sid, "keepon-cnc:state": "left"}}

    def status(self, stream_id: str) -> dict:
        sid = check_stream_id(stream_id)
        with self.lock:
            if sid not in self.requests:
                raise RequestError("stream-id", f"no stream {sid}", tag="data-missing")
            return self._answer(sid)

    def streams(self) -> dict:
        with self.lock:
            return {"keepon-cnc:streams": {"stream": [self._answer(n)["keepon-cnc:output"] for n in self.requests]}}

    # --- a change -------------------------------------------------------------------------------------------------

    def _ports(self, names) -> set[tuple[str, str]]:
        return {(h.src, h.dst) for n in names for h in self.inc.routed[n].hops if h.src in self.net.switches}

    def _station_classes(self, talker: str, had: dict[str, list[int]]) -> dict[str, list[int]]:
        """The talker's classes and their ring slots after a change: its streams' slots; a class whose last stream
        left keeps one slot, idle — keepon's daemon has no real-time class without slots (one without is best
        effort) — one of its own that no stream uses where it can, else the first such slot of the ring."""
        new = self.inc.ring_slots(talker)
        used = {s for slots in new.values() for s in slots}
        ring = self.net.stations[talker].slots or 0
        out: dict[str, list[int]] = {}
        for c, slots in sorted(had.items()):
            if c in new:
                continue
            keep = next((s for s in slots if s not in used), None)
            if keep is None:
                keep = next((s for s in range(ring) if s not in used), None)
            if keep is None:
                raise Refused(
                    {
                        "kind": "station-ring-full",
                        "proven": True,
                        "reason": f"station {talker}: class {c} lost its last stream and must keep one ring slot, "
                        f"but the other classes' streams use all {ring}",
                    }
                )
            out[c] = [keep]
            used.add(keep)
        out.update(new)
        return dict(sorted(out.items()))

    def _station_windows(self, talker: str, had: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        """A byte-clock talker's classes and their windows after a change: its streams' windows; a class whose last
        stream left keeps one window of a minimum frame, idle (a real-time class keeps one), where it was if that is
        still free (:meth:`~.incremental.Incremental.idle_window`)."""
        from ..bytes import min_window

        new = self.inc.class_windows(talker)
        taken = [w for ws in new.values() for w in ws]
        length = min_window(self.net.links_of(talker)[0].rate)
        out: dict[str, list[list[int]]] = {}
        for c, windows in sorted(had.items()):
            if c not in new:
                out[c] = [self.inc.idle_window(talker, length, windows, taken)]
                taken.append(out[c][0])
        out.update(new)
        return dict(sorted(out.items()))

    def _station_config(self, talker: str, prev: dict) -> dict:
        """A station's new configuration: ``{"classes": ring slots}`` or, on the byte clock, ``{"windows": …}``."""
        if self.net.stations[talker].timing == "bytes":
            return {"windows": self._station_windows(talker, prev.get("windows", {}))}
        return {"classes": self._station_classes(talker, prev.get("classes", {}))}

    def _configs(
        self, talkers: set[str], ports: set[tuple[str, str]], lists=None
    ) -> list[tuple[str, str, dict, dict | None]]:
        """(device, kind, new configuration, previous) of every device the change touches; ``lists``: the ports'
        gate lists when they are known already."""
        out = []
        for t in sorted(talkers):
            empty = {"windows": {}} if self.net.stations[t].timing == "bytes" else {"classes": {}}
            prev = self.devices.get(t, ("station", empty))[1]
            out.append((t, "station", self._station_config(t, prev), prev))
        if lists is None:
            lists = self.inc.port_lists(ports)
        for sw in sorted({p[0] for p in ports}):
            prev = self.devices.get(sw, ("switch", {"ports": {}}))[1]
            new = {k: v for k, v in prev["ports"].items()}
            for nb in sorted(nb for s, nb in ports if s == sw):
                port = self.net.port_name(sw, nb)
                g = lists.get((sw, nb))
                if g is None:
                    # its last stream left: every gate open (a switch replaces the tables it is given and keeps
                    # the others, so the port is given one rather than left out)
                    new[port] = {"towards": nb, "cycle_ns": self.cycle_ns, "entries": [[0xFF, self.cycle_ns]]}
                else:
                    new[port] = {"towards": nb, "cycle_ns": g.cycle_ns, "entries": [list(e) for e in g.entries]}
            out.append((sw, "switch", {"ports": new}, prev))
        return out

    def next_base(self) -> int:
        """The first cycle start of the network at least ``lead`` from now."""
        at = self.distribution.now() + self.lead_ns
        k = -(-(at - self.net.base_time) // self.cycle_ns)
        return self.net.base_time + k * self.cycle_ns

    def _change(
        self, kind: str, sid: str, names: list[str], moved: dict, joining=None, leaving=None, lists=None
    ) -> None:
        talkers = {self.inc.routed[n].stream.talker for n in names}
        ports = self._ports(names)
        if leaving is not None:
            r, left_ports = leaving
            talkers.add(r.stream.talker)
            ports |= left_ports
        devices = self._configs(talkers, ports, lists)
        base = self.next_base()
        row = None
        if joining is not None:
            row = (sid, joining[0], joining[1], list(self.inc.starts[sid]))
        cid = self.store.begin(kind, sid, base, row, moved, devices)
        self.fault("recorded")
        done: list[tuple[str, str, dict | None]] = []
        for device, dkind, config, prev in devices:
            try:
                self.distribution.device(device, dkind).apply(config, base)
            except DistributionError:
                self._revert(done)
                self.store.rolled_back(cid)
                raise
            self.store.applied(cid, device)
            done.append((device, dkind, prev))
            self.fault(f"applied:{device}")
        self.store.finish(cid)
        for device, dkind, config, _prev in devices:
            self.devices[device] = (dkind, config)
        self.fault("finished")

    def _revert(self, done: list[tuple[str, str, dict | None]]) -> None:
        """The devices that took a change get their previous configuration back, at a new base time."""
        base = self.next_base()
        for device, dkind, prev in done:
            if prev is not None:
                self.distribution.device(device, dkind).apply(prev, base)

    # --- after a restart --------------------------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Finish or roll back every change left pending; what was done, one line each."""
        said = []
        with self.lock:
            for change in self.store.pending():
                said.append(self._recover(change))
            self.settle()
        return said

    def _recover(self, c: Change) -> str:
        ahead = c.base_time - self.distribution.now()
        can_roll_back = all(d.previous is not None or not d.applied for d in c.devices)
        if ahead >= self.lead_ns // 2 or not can_roll_back:
            base = c.base_time if ahead >= self.lead_ns // 2 else self.next_base()
            for d in c.devices:
                if not d.applied or base != c.base_time:
                    self.distribution.device(d.device, d.kind).apply(d.config, base)
                    self.store.applied(c.id, d.device)
            self.store.finish(c.id)
            for d in c.devices:
                self.devices[d.device] = (d.kind, d.config)
            if c.kind == "leave":
                self.inc.remove(c.stream)
                self.requests.pop(c.stream, None)
            return f"change {c.id} ({c.kind} {c.stream}) finished at base time {base}"
        self._revert([(d.device, d.kind, d.previous) for d in c.devices if d.applied])
        if c.kind in ("join", "replan"):
            if c.moved:
                starts = {n: tuple(c.moved.get(n, self.inc.starts[n])) for n in self.inc.starts if n != c.stream}
                self.inc.adopt(starts, {n: self.inc.routed[n] for n in starts})
            else:
                self.inc.remove(c.stream)
            self.requests.pop(c.stream, None)
        self.store.rolled_back(c.id)
        return f"change {c.id} ({c.kind} {c.stream}) rolled back: its base time {c.base_time} had passed"

    # --- the talker's answer --------------------------------------------------------------------------------------

    def _answer(self, sid: str, moved: list[str] | None = None) -> dict:
        join = self.requests[sid]
        r = self.inc.routed[sid]
        starts = self.inc.starts[sid]
        row = self.store.stream(sid)
        state = row[3] if row is not None else "in-force"
        offset_ns = -(-starts[0] // 1000)
        latency_ns = -(-max(r.latencies_ps(starts)) // 1000)
        out = {
            "stream-id": sid,
            "status-info": {"talker-status": "ready", "listener-status": "ready", "failure-code": 0},
            "accumulated-latency": latency_ns,
            "interface-configuration": {
                "interface-list": [
                    {
                        "mac-address": join.talker.mac,
                        **({"interface-name": join.talker.interface} if join.talker.interface else {}),
                        "config-list": [{"index": 0, "time-aware-offset": offset_ns}],
                    }
                ]
            },
            "failed-interfaces": [],
            "keepon-cnc:state": state,
            "keepon-cnc:talker": r.stream.talker,
            "keepon-cnc:routes": [list(p) for p in r.paths],
            "keepon-cnc:departure-ps": str(starts[0]),
            **(
                {"keepon-cnc:windows-ns": [list(w) for w in self.inc.windows_of(sid)]}
                if self.net.stations[r.stream.talker].timing == "bytes"
                else {"keepon-cnc:ring-slots": self.inc.ring_slots_of(sid)}
            ),
            "keepon-cnc:request": join.document(),
        }
        if row is not None and row[4] is not None:
            out["keepon-cnc:base-time"] = str(self.store.base_time(row[4]))
        if moved is not None:
            out["keepon-cnc:moved"] = moved
        return {"keepon-cnc:output": out}


def configure(store: Store, topology_text: str, path: str | None, cycle_ns: int, macs: dict[str, str]) -> list[str]:
    """Give a new database its topology, cycle, stations' MAC addresses and the ring slots each station's PTP keeps
    (:mod:`.ptp`; all checked first, nothing written on an error); a database that has them must be given the same
    or none. Returns a line per station with PTP: what it keeps and why."""
    net = parse_network(topology_text, path, streams_required=False, station_ptp=True)
    if net.streams:
        raise InputError("the CNC's topology has no [[stream]]: streams join through the API", path)
    two = sorted(n for n in net.stations if net.ports(n) > 1)
    if two:
        raise InputError(
            f"station {two[0]!r} has two ports: the CNC plans one-port stations only (replicated streams on two-port "
            "stations are planned by keepon-plan network)",
            path,
        )
    Incremental(net, cycle_ns)  # the checks of the topology against the cycle
    try:
        ptp, said = rooms(net, cycle_ns)
    except InputError as exc:
        raise InputError(exc.message, path) from exc
    for mac, station in macs.items():
        if station not in net.stations:
            raise InputError(f"--station {station}={mac}: no station {station!r} in the topology", path)
    values = {"topology": topology_text, "cycle_ns": str(cycle_ns), "macs": json.dumps(macs)}
    if path is not None:
        values["topology_path"] = path
    old = store.config()
    if old and (old["topology"] != topology_text or old["cycle_ns"] != str(cycle_ns)):
        raise InputError("the database holds another topology or cycle: start without them, or with a new --db")
    store.set_config(values, tuple(ptp.values()))
    return said
