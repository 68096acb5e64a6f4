"""Distribution: each device of a change gets its whole new configuration, to take effect at the change's base time.

A :class:`Distribution` is the plug-in point: it tells network time and gives a :class:`Device` by name; a device
``apply(config, base_time)`` or raises :class:`DistributionError`. Configurations are JSON values (stored as such):

- a switch: ``{"ports": {PORT: {"towards": NODE, "cycle_ns": C, "entries": [[gate states, ns], ...]}}}``, every
  egress port that ever had a stream (a port never scheduled is absent; one whose streams all left has every gate
  open, ``[[255, C]]``: a switch replaces the tables it is given and keeps the others);
- a keepon station: ``{"classes": {"tc7": [ring slots], ...}}``, every class it ever had (one that lost its last
  stream keeps one idle slot); a byte-clock station (``timing = "bytes"``): ``{"windows": {"tc7": [[offset, length],
  ...], ...}}``, ns in the cycle, likewise.

The real path (:class:`RealDistribution`): a switch over NETCONF as ``keepon-plan push`` does it
(:func:`keepon_plan.network.push.push_xml`: ``ieee802-dot1q-sched`` gate tables with ``admin-base-time`` = the base
time, ``config-change``, read back and compared); a keepon station through its daemon's socket
(:meth:`keepon_client.Client.change_schedule`, or on the byte clock :meth:`~keepon_client.Client.change_windows`,
``ScheduleWindows``: live, admin → oper at the base time). Network time is
``CLOCK_TAI``. Tests use :class:`FakeNetwork`, whose devices remember every configuration they were given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..network.export_yang import gate_table, interfaces_document, to_xml
from ..network.topology import Network


class DistributionError(Exception):
    def __init__(self, device: str, message: str) -> None:
        self.device = device
        self.message = message
        super().__init__(f"{device}: {message}")


class Device(Protocol):
    def apply(self, config: dict, base_time: int) -> None: ...


class Distribution(Protocol):
    def now(self) -> int:
        """Network time, TAI ns."""
        ...

    def device(self, name: str, kind: str) -> Device:
        """``kind``: ``"switch"`` or ``"station"``."""
        ...


def switch_xml(net: Network, switch: str, config: dict, base_time: int) -> str:
    """A switch's configuration as ``ieee802-dot1q-sched`` instance data (XML), every port at ``base_time``."""
    sw = net.switches[switch]
    limits = (sw.supported_list_max, sw.supported_interval_max, sw.supported_cycle_max_ns)
    ports = [
        (port, gate_table(base_time, p["cycle_ns"], [tuple(e) for e in p["entries"]], limits))
        for port, p in sorted(config["ports"].items())
    ]
    return to_xml(interfaces_document(ports))


# --- the real path -----------------------------------------------------------------------------------------------


@dataclass
class NetconfOptions:
    username: str
    key: str | None = None
    known_hosts: str | None = None
    timeout: float = 30.0


@dataclass
class _NetconfSwitch:
    net: Network
    name: str
    host: str
    port: int
    options: NetconfOptions

    def apply(self, config: dict, base_time: int) -> None:
        from ..network.push import push_xml

        xml = switch_xml(self.net, self.name, config, base_time)
        try:
            diff = push_xml(self.name, xml, self.host, self.port, self.options, lambda _msg: None)
        except Exception as exc:  # ncclient's transport errors share no base class beyond Exception
            raise DistributionError(self.name, f"NETCONF session failed: {type(exc).__name__}: {exc}") from exc
        if diff:
            raise DistributionError(self.name, "; ".join(diff))


@dataclass
class _KeeponStation:
    name: str
    socket: str
    timeout: float = 10.0

    def apply(self, config: dict, base_time: int) -> None:
        from keepon_client import Client, KeeponError

        try:
            with Client(self.socket, timeout=self.timeout) as c:
                if "windows" in config:
                    windows = {k: [(o, n) for o, n in ws] for k, ws in config["windows"].items()}
                    reply = c.change_windows(base_time, windows)
                else:
                    reply = c.change_schedule(base_time, config["classes"])
        except (OSError, KeeponError) as exc:
            raise DistributionError(self.name, f"daemon at {self.socket}: {exc}") from exc
        if reply.error is not None:
            raise DistributionError(self.name, f"the daemon refused the schedule: {reply.error}")


@dataclass
class RealDistribution:
    """Switches over NETCONF (``switches``: name → (host, port)), stations through their daemons (``stations``:
    name → socket path). A device named in neither is left alone (a switch or station the CNC does not manage)."""

    net: Network
    switches: dict[str, tuple[str, int]]
    stations: dict[str, str]
    netconf: NetconfOptions | None

    def now(self) -> int:
        import time

        return time.clock_gettime_ns(time.CLOCK_TAI)

    def device(self, name: str, kind: str) -> Device:
        if kind == "switch" and name in self.switches:
            if self.netconf is None:
                raise DistributionError(name, "no NETCONF user given (--username)")
            host, port = self.switches[name]
            return _NetconfSwitch(self.net, name, host, port, self.netconf)
        if kind == "station" and name in self.stations:
            return _KeeponStation(name, self.stations[name])
        return _Unmanaged()


class _Unmanaged:
    def apply(self, config: dict, base_time: int) -> None:
        return None


# --- fakes for tests -----------------------------------------------------------------------------------------------


@dataclass
class FakeDevice:
    name: str
    kind: str
    history: list[tuple[int, dict]] = field(default_factory=list)
    """(base time, configuration) of every apply, in order."""
    fail: str | None = None
    """When set, every apply raises :class:`DistributionError` with this message."""

    def apply(self, config: dict, base_time: int) -> None:
        if self.fail is not None:
            raise DistributionError(self.name, self.fail)
        self.history.append((base_time, config))

    def config(self) -> dict | None:
        """The configuration in force after every base time given (the last one applied)."""
        return self.history[-1][1] if self.history else None


@dataclass
class FakeNetwork:
    """Devices that outlive a CNC (a test kills the CNC, not the network) and a network time the test sets."""

    time: int = 0
    devices: dict[str, FakeDevice] = field(default_factory=dict)

    def now(self) -> int:
        return self.time

    def device(self, name: str, kind: str) -> FakeDevice:
        if name not in self.devices:
            self.devices[name] = FakeDevice(name, kind)
        return self.devices[name]
