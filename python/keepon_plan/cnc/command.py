"""``keepon-plan cnc``: the long-running CNC service (database, recovery, HTTP API), and ``cnc-bench``.

The first start gives the topology (a network description without streams), the cycle and the stations' MAC
addresses; they go into the database, and a restart needs only ``--db``. Before serving, every change left pending by
a CNC that stopped mid-change is finished or rolled back (:meth:`~keepon_plan.cnc.service.Cnc.recover`), and the
service says so on stderr. It prints ``keepon-plan: cnc: listening on http://HOST:PORT`` once it accepts requests
(with ``--listen 127.0.0.1:0`` the port the system chose) and runs until SIGTERM or SIGINT.

For tests of crash safety, the environment variable ``KEEPON_CNC_KILL_AT=WHERE`` makes the service kill itself
(SIGKILL) when a change reaches ``WHERE`` (``recorded``, ``applied:DEVICE``, ``finished``: the points of
:class:`~keepon_plan.cnc.service.Cnc`'s fault hook).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from ..model import InputError
from ..units import ValueError_, parse_duration


def _say(msg: str) -> None:
    print(f"keepon-plan: cnc: {msg}", file=sys.stderr, flush=True)


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise InputError(f"--{what} {v!r}: expected NAME=VALUE")
        out[name] = rest
    return out


def _duration(text: str, what: str) -> int:
    try:
        ns = parse_duration(text)
    except ValueError_ as exc:
        raise InputError(f"--{what} {text!r}: {exc}") from exc
    if ns <= 0:
        raise InputError(f"--{what} {text!r}: must be positive")
    return ns


def _kill_at(where: str | None):
    """The fault hook of ``KEEPON_CNC_KILL_AT``: SIGKILL this process at that point of a change."""
    if not where:
        return None

    def hook(at: str) -> None:
        if at == where:
            _say(f"KEEPON_CNC_KILL_AT={where}: killed")
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def open_cnc(args: argparse.Namespace, distribution_for):
    """The store (migrated), configured on a first start, and the CNC over it with its changes recovered. A first
    start that fails (no topology, a bad one) removes the database file it would have created."""
    from .store import SchemaError, Store

    existed = Path(args.db).exists()
    if not existed and args.network is None:
        raise InputError("a new database needs the topology: keepon-plan cnc NETWORK.toml --cycle C --db FILE", args.db)
    try:
        store = Store(args.db)
    except SchemaError as exc:
        raise InputError(str(exc), args.db) from exc
    except Exception as exc:  # sqlite3.DatabaseError: not a database, unreadable
        raise InputError(f"cannot open the database: {exc}", args.db) from exc
    try:
        return _configured(store, args, distribution_for)
    except BaseException:
        if not existed:  # a first start that failed leaves no database behind
            store.close()
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(args.db + suffix).unlink(missing_ok=True)
        raise


def _configured(store, args: argparse.Namespace, distribution_for):
    from .service import Cnc, configure
    from .tsn_types import _MAC

    if args.network is not None:
        if args.cycle is None:
            raise InputError("--cycle is needed with the topology (the network's gate and ring cycle)")
        macs = {}
        for station, mac in _pairs(args.station, "station").items():
            if not _MAC.match(mac):
                raise InputError(f"--station {station}={mac}: expected a MAC address like 02-00-00-00-00-01")
            macs[mac.upper()] = station
        try:
            text = Path(args.network).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read the topology: {exc.strerror}", args.network) from exc
        for line in configure(store, text, args.network, _duration(args.cycle, "cycle"), macs):
            _say(line)
    elif not store.config():
        raise InputError("a new database needs the topology: keepon-plan cnc NETWORK.toml --cycle C --db FILE", args.db)
    cnc = Cnc(store, None, _duration(args.lead, "lead"), _kill_at(os.environ.get("KEEPON_CNC_KILL_AT")))  # type: ignore[arg-type]
    cnc.distribution = distribution_for(cnc.net)
    for room in cnc.ptp.values():
        kept = f"windows {room.stored()} ns" if room.windows else f"ring slots {list(room.slots)}"
        _say(f"station {room.station}: PTP class {room.cls} keeps {kept} (no stream takes them)")
    for line in cnc.recover():
        _say(line)
    return cnc


def cmd_cnc(args: argparse.Namespace) -> int:
    from .distribute import NetconfOptions, RealDistribution
    from .http import serve

    def distribution(net):
        switches = {}
        for name, where in _pairs(args.switch, "switch").items():
            host, _, port = where.rpartition(":") if ":" in where else (where, "", "830")
            if name not in net.switches or not port.isdigit():
                raise InputError(f"--switch {name}={where}: expected a switch of the topology and HOST[:PORT]")
            switches[name] = (host, int(port))
        stations = _pairs(args.daemon, "daemon")
        for name in stations:
            if name not in net.stations:
                raise InputError(f"--daemon {name}=…: no station {name!r} in the topology")
        opts = NetconfOptions(args.username, args.key, args.known_hosts, args.timeout) if args.username else None
        return RealDistribution(net, switches, stations, opts)

    cnc = open_cnc(args, distribution)
    host, _, port = args.listen.rpartition(":")
    if not port.isdigit():
        raise InputError(f"--listen {args.listen!r}: expected HOST:PORT")
    _say(f"{len(cnc.requests)} streams in force, cycle {cnc.cycle_ns} ns, database {args.db}")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(cnc, host, int(port), lambda addr: _say(f"listening on http://{addr[0]}:{addr[1]}"), stop)

    asyncio.run(main())
    cnc.store.close()
    _say("stopped")
    return 0


def add_cnc_parsers(sub) -> None:
    p = sub.add_parser("cnc", help="the CNC service: streams join and leave over a RESTCONF-style API (issue 35)")
    p.add_argument("network", metavar="NETWORK.toml", nargs="?", help="the topology (first start; no [[stream]])")
    p.add_argument("--db", required=True, metavar="FILE", help="the SQLite database (created on the first start)")
    p.add_argument("--cycle", metavar="DURATION", help="the network cycle (first start): every interval divides it")
    p.add_argument("--station", action="append", metavar="NAME=MAC", help="a station's MAC address (repeatable)")
    p.add_argument("--listen", default="127.0.0.1:8830", metavar="HOST:PORT")
    p.add_argument("--lead", default="100ms", metavar="DURATION", help="how far ahead a change's base time lies")
    p.add_argument("--daemon", action="append", metavar="NAME=SOCKET", help="a keepon station's daemon socket")
    p.add_argument("--switch", action="append", metavar="NAME=HOST[:PORT]", help="a switch's NETCONF server")
    p.add_argument("--username", help="NETCONF user")
    p.add_argument("--key", metavar="FILE", help="SSH private key for NETCONF")
    p.add_argument("--known-hosts", metavar="FILE")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="NETCONF timeout")
    p.set_defaults(func=cmd_cnc)

    from . import bench

    p = sub.add_parser("cnc-bench", help="join latency and restart time of the CNC at N streams in force (benchmark)")
    bench.add_arguments(p)
    p.set_defaults(func=bench.run)
