"""The CNC's state in SQLite: topology, streams, the configuration each device has, and every change in flight.

Schema version 3 (``schema_version`` holds it; :data:`MIGRATIONS` brings an older file up, each step in one
transaction)::

    config(key, value)                      topology text, cycle, the stations' MAC addresses (JSON)
    streams(name, talker, request, starts,  a stream's request (a JSON row: Join.row), its hop starts (ps, JSON) and its
            state, change_id)               state: joining | in-force | leaving (joining/leaving: a change in flight)
    devices(name, kind, config)             the configuration in force on each device (JSON: a switch's gate lists
                                            per port, a station's ring slots per class, or a byte-clock
                                            station's windows per class)
    changes(id, kind, stream, base_time,    join | leave | replan of a stream, at one base time (TAI ns), pending →
            state, moved)                   in-force or rolled-back; v2: moved = {stream: old hop starts} of a re-plan
    device_changes(change_id, device, kind, per device of a change: its new configuration, the one before it (v2),
                   config, previous, state) and pending | applied
    ptp(station, class, slots, config)      v3: a station's PTP room (:mod:`.ptp`): its PTP class, the ring slots
                                            it keeps (JSON; a byte-clock station's windows, [offset, length] ns
                                            pairs), its [ptp] table (JSON); written with the topology

Every step of a change is one transaction, so a CNC killed anywhere finds, per device, whether the change reached
it; :mod:`.service` finishes or rolls back what it finds pending. The file is in WAL mode, checkpointed off the
request path: SQLite's automatic checkpoint (run by the commit that crosses 1 000 pages of log, which then waits
for it) is off, and a thread of the store's own (:class:`_Checkpointer`) checkpoints ``PASSIVE`` (never waiting for
the writer, never making it wait) every :data:`CHECKPOINT_S` seconds on a connection of its own. Recording a change
(:meth:`Store.begin`) is synced to disk (``synchronous = FULL``) before any device is given it; the later steps
(a device applied, the change in force) only with ``NORMAL``, which survives the process being killed but may lose
the last of them to a power failure: then the change is found pending and its devices are given the same
configuration again, which changes nothing.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass

from .ptp import PtpRoom

SCHEMA_VERSION = 3
CHECKPOINT_S = 0.5
"""How often the checkpoint thread copies the log into the database file."""

_V1 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE streams (
    name TEXT PRIMARY KEY, talker TEXT NOT NULL, request TEXT NOT NULL, starts TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('joining', 'in-force', 'leaving')), change_id INTEGER);
CREATE INDEX streams_state ON streams(state);
CREATE TABLE devices (name TEXT PRIMARY KEY, kind TEXT NOT NULL, config TEXT NOT NULL);
CREATE TABLE changes (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, stream TEXT NOT NULL, base_time INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'in-force', 'rolled-back')));
CREATE TABLE device_changes (
    change_id INTEGER NOT NULL REFERENCES changes(id), device TEXT NOT NULL, kind TEXT NOT NULL,
    config TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('pending', 'applied')),
    PRIMARY KEY (change_id, device));
INSERT INTO schema_version VALUES (1);
"""


def _v1_to_v2(db: sqlite3.Connection) -> None:
    """Version 2 records what a device had before a change (to roll it back) and what a re-plan moved."""
    db.execute("ALTER TABLE device_changes ADD COLUMN previous TEXT")
    db.execute("ALTER TABLE changes ADD COLUMN moved TEXT")


def _v2_to_v3(db: sqlite3.Connection) -> None:
    """Version 3 keeps the ring slots of each station's PTP (none in an older database: its topology had no PTP)."""
    db.execute(
        "CREATE TABLE ptp (station TEXT PRIMARY KEY, class TEXT NOT NULL, slots TEXT NOT NULL, config TEXT NOT NULL)"
    )


MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}
"""From version ``k`` to ``k + 1``."""


class SchemaError(Exception):
    """The database is of a newer schema than this CNC knows, or not a CNC database."""


@dataclass(frozen=True)
class DeviceChange:
    device: str
    kind: str
    config: dict
    previous: dict | None
    applied: bool


@dataclass(frozen=True)
class Change:
    id: int
    kind: str
    stream: str
    base_time: int
    moved: dict[str, list[int]]
    devices: tuple[DeviceChange, ...]


class Store:
    def __init__(self, path: str, create_version: int = SCHEMA_VERSION) -> None:
        """Open (or create) the database; an older schema is migrated. ``create_version``: for tests, the version a
        new file is created at."""
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("PRAGMA wal_autocheckpoint = 0")
        self.checkpointer = _Checkpointer(path)
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            self.db.executescript(_V1)
            self.migrate(create_version)
        elif "schema_version" not in tables:
            raise SchemaError(f"{path}: not a CNC database (no schema_version table)")
        else:
            self.migrate(SCHEMA_VERSION)

    def version(self) -> int:
        return self.db.execute("SELECT version FROM schema_version").fetchone()[0]

    def migrate(self, target: int) -> None:
        v = self.version()
        if v > SCHEMA_VERSION:
            raise SchemaError(f"the database has schema version {v}; this CNC knows up to {SCHEMA_VERSION}")
        while v < target:
            with self.tx():
                MIGRATIONS[v](self.db)
                self.db.execute("UPDATE schema_version SET version = ?", (v + 1,))
            v += 1

    def tx(self):
        """A transaction (``with store.tx(): ...``): committed at the end, rolled back on an exception."""
        return _Tx(self.db)

    def close(self) -> None:
        """Stop the checkpoint thread, then close (the last connection to close checkpoints the rest)."""
        self.checkpointer.stop()
        self.db.close()

    # --- configuration --------------------------------------------------------------------------------------------

    def config(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM config"))

    def set_config(self, values: dict[str, str], ptp: tuple[PtpRoom, ...] = ()) -> None:
        """The topology's values and its stations' PTP rooms, in one transaction (a room kept already stays)."""
        with self.tx():
            self.db.executemany("INSERT OR REPLACE INTO config VALUES (?, ?)", values.items())
            if ptp:  # (a test's database made at an older version has no table for it, and no PTP)
                self.db.executemany(
                    "INSERT OR IGNORE INTO ptp VALUES (?, ?, ?, ?)",
                    [(r.station, r.cls, json.dumps(r.stored()), json.dumps(r.table)) for r in ptp],
                )

    def ptp(self) -> dict[str, PtpRoom]:
        """Every station's PTP room."""
        rows = self.db.execute("SELECT station, class, slots, config FROM ptp ORDER BY station")
        return {st: PtpRoom.from_stored(st, cls, json.loads(kept), json.loads(cfg)) for st, cls, kept, cfg in rows}

    # --- streams and devices --------------------------------------------------------------------------------------

    def streams(self) -> list[tuple[str, str, dict, list[int], str]]:
        """(name, talker, request, hop starts, state) of every stream known."""
        rows = self.db.execute("SELECT name, talker, request, starts, state FROM streams ORDER BY name")
        return [(n, t, json.loads(req), json.loads(st), state) for n, t, req, st, state in rows]

    def stream(self, name: str) -> tuple[str, dict, list[int], str, int | None] | None:
        """(talker, request, hop starts, state, change id) of one stream, or None."""
        row = self.db.execute(
            "SELECT talker, request, starts, state, change_id FROM streams WHERE name = ?", (name,)
        ).fetchone()
        return None if row is None else (row[0], json.loads(row[1]), json.loads(row[2]), row[3], row[4])

    def devices(self) -> dict[str, tuple[str, dict]]:
        return {n: (k, json.loads(c)) for n, k, c in self.db.execute("SELECT name, kind, config FROM devices")}

    def base_time(self, change_id: int) -> int:
        return self.db.execute("SELECT base_time FROM changes WHERE id = ?", (change_id,)).fetchone()[0]

    def change_state(self, change_id: int) -> str | None:
        row = self.db.execute("SELECT state FROM changes WHERE id = ?", (change_id,)).fetchone()
        return None if row is None else row[0]

    # --- a change's steps, each one transaction -------------------------------------------------------------------

    def begin(
        self,
        kind: str,
        stream: str,
        base_time: int,
        joining: tuple[str, str, dict, list[int]] | None,
        moved: dict[str, tuple[list[int], list[int]]],
        devices: list[tuple[str, str, dict, dict | None]],
    ) -> int:
        """Record a change as pending: the joining stream (name, talker, request, starts), or the leaving one
        (``stream``, for a leave), the streams a re-plan moves (old and new starts) and each device's new and
        previous configuration."""
        self.db.execute("PRAGMA synchronous = FULL")  # on disk before any device is given the change
        with self.tx():
            cur = self.db.execute(
                "INSERT INTO changes (kind, stream, base_time, state, moved) VALUES (?, ?, ?, 'pending', ?)",
                (kind, stream, base_time, json.dumps({n: old for n, (old, _new) in moved.items()})),
            )
            cid = cur.lastrowid
            assert cid is not None
            if joining is not None:
                name, talker, request, starts = joining
                self.db.execute(
                    "INSERT INTO streams VALUES (?, ?, ?, ?, 'joining', ?)",
                    (name, talker, json.dumps(request), json.dumps(starts), cid),
                )
            if kind == "leave":
                self.db.execute("UPDATE streams SET state = 'leaving', change_id = ? WHERE name = ?", (cid, stream))
            for name, (_old, new) in moved.items():
                self.db.execute(
                    "UPDATE streams SET starts = ?, change_id = ? WHERE name = ?", (json.dumps(new), cid, name)
                )
            self.db.executemany(
                "INSERT INTO device_changes (change_id, device, kind, config, previous, state) "
                "VALUES (?, ?, ?, ?, ?, 'pending')",
                [(cid, d, k, json.dumps(c), None if p is None else json.dumps(p)) for d, k, c, p in devices],
            )
        self.db.execute("PRAGMA synchronous = NORMAL")
        return cid

    def applied(self, change_id: int, device: str) -> None:
        with self.tx():
            self.db.execute(
                "UPDATE device_changes SET state = 'applied' WHERE change_id = ? AND device = ?", (change_id, device)
            )

    def finish(self, change_id: int) -> None:
        """Every device has the change: it is in force."""
        with self.tx():
            for device, kind, config in self.db.execute(
                "SELECT device, kind, config FROM device_changes WHERE change_id = ?", (change_id,)
            ).fetchall():
                self.db.execute("INSERT OR REPLACE INTO devices VALUES (?, ?, ?)", (device, kind, config))
            self.db.execute(
                "UPDATE streams SET state = 'in-force' WHERE change_id = ? AND state = 'joining'", (change_id,)
            )
            self.db.execute("DELETE FROM streams WHERE change_id = ? AND state = 'leaving'", (change_id,))
            self.db.execute("UPDATE changes SET state = 'in-force' WHERE id = ?", (change_id,))

    def rolled_back(self, change_id: int) -> None:
        """Every device has its previous configuration again: the change never happened."""
        with self.tx():
            (moved,) = self.db.execute("SELECT moved FROM changes WHERE id = ?", (change_id,)).fetchone()
            for name, old in json.loads(moved or "{}").items():
                self.db.execute("UPDATE streams SET starts = ? WHERE name = ?", (json.dumps(old), name))
            self.db.execute("DELETE FROM streams WHERE change_id = ? AND state = 'joining'", (change_id,))
            self.db.execute(
                "UPDATE streams SET state = 'in-force' WHERE change_id = ? AND state = 'leaving'", (change_id,)
            )
            self.db.execute("UPDATE changes SET state = 'rolled-back' WHERE id = ?", (change_id,))

    def pending(self) -> list[Change]:
        out = []
        for cid, kind, stream, base, moved in self.db.execute(
            "SELECT id, kind, stream, base_time, moved FROM changes WHERE state = 'pending' ORDER BY id"
        ).fetchall():
            devs = tuple(
                DeviceChange(d, k, json.loads(c), None if p is None else json.loads(p), s == "applied")
                for d, k, c, p, s in self.db.execute(
                    "SELECT device, kind, config, previous, state FROM device_changes WHERE change_id = ? "
                    "ORDER BY device",
                    (cid,),
                )
            )
            out.append(Change(cid, kind, stream, base, json.loads(moved or "{}"), devs))
        return out


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, _value, _tb) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


class _Checkpointer(threading.Thread):
    """Checkpoints the log every :data:`CHECKPOINT_S` s (``PASSIVE``) on a connection of its own, until stopped."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True, name=f"checkpoint {path}")
        self.path = path
        self.done = threading.Event()
        self.checkpoints = 0
        """How many it ran (for tests)."""
        self.start()

    def run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            while not self.done.wait(CHECKPOINT_S):
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    continue  # busy, or the file is going away: the next round (or the close) does it
                self.checkpoints += 1
        finally:
            db.close()

    def stop(self) -> None:
        self.done.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
