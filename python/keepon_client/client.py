"""A blocking client of ``keepon daemon`` over its UNIX socket (standard library only).

>>> with Client("/run/keepon.sock", timeout=5) as c:          # doctest: +SKIP
...     info = c.info()
...     tag = c.submit("tc-0", info.cycle_start, frame)
...     print(c.outcome())                                      # Outcome(tag=0, sent=True, slot=…, time=…)
"""

from __future__ import annotations

import os
import socket
from collections import deque

from .protocol import (
    ErrorReply,
    Info,
    KeeponError,
    Message,
    Outcome,
    ProtocolError,
    Released,
    Scheduled,
    Subscribed,
    Time,
    UnknownMessage,
    encode_info,
    encode_schedule,
    encode_schedule_windows,
    encode_submit,
    encode_subscribe,
    encode_time,
    frame_message,
    parse_response,
    split_messages,
)


class RequestError(KeeponError):
    """The daemon answered a request with an error (a malformed request; the connection stays open)."""


class ConnectionClosed(KeeponError):
    """The daemon closed the connection."""


class Client:
    """One connection to the daemon.

    ``timeout`` (seconds, ``None`` to wait forever) bounds every wait for a response; a wait that runs out raises
    :class:`TimeoutError`. Every :meth:`submit` gets exactly one :class:`Outcome`, read with :meth:`outcome` or
    :meth:`recv`; outcomes may arrive in any order (match them by tag).
    """

    def __init__(self, path: str | os.PathLike[str], timeout: float | None = 10.0):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(os.fspath(path))
        except BaseException:
            self._sock.close()
            raise
        self._rbuf = bytearray()
        self._pending: deque[Message] = deque()
        # Read while waiting for the other kind: outcomes while waiting for a release time, and the reverse.
        self._outcomes: deque[Outcome] = deque()
        self._released: deque[Released] = deque()
        self._next_tag = 0

    # -- context manager -------------------------------------------------------------------------------------------
    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (frames already submitted still leave in their slots)."""
        self._sock.close()

    def close_write(self) -> None:
        """Half-close: tell the daemon you will submit no more. It still sends the outcome of every frame already
        submitted, then closes the connection."""
        self._sock.shutdown(socket.SHUT_WR)

    def fileno(self) -> int:
        """The socket's descriptor (for ``select``)."""
        return self._sock.fileno()

    @property
    def timeout(self) -> float | None:
        return self._sock.gettimeout()

    @timeout.setter
    def timeout(self, t: float | None) -> None:
        self._sock.settimeout(t)

    # -- requests ------------------------------------------------------------------------------------------------
    def submit(self, cls: str, txtime: int | None, frame: bytes, tag: int | None = None) -> int:
        """Send a frame of class ``cls`` for ``txtime`` (TAI ns; ``None`` for best effort) and return its tag
        (``tag``, or the next of a per-connection counter). L2 bytes without FCS."""
        if tag is None:
            tag = self._next_tag
        self._next_tag = max(self._next_tag, tag + 1)
        self._sock.sendall(frame_message(encode_submit(cls, txtime, frame, tag)))
        return tag

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (to test a daemon's handling of malformed requests)."""
        self._sock.sendall(data)

    def info(self) -> Info:
        """The link's description. Outcomes that arrive first are kept for :meth:`recv`/:meth:`outcome`."""
        return self._ask(encode_info(), Info)

    def time(self) -> Time:
        """The station's network time and synchronisation state (like ``clock_gettime`` on a PHC). Outcomes that
        arrive first are kept for :meth:`recv`/:meth:`outcome`."""
        return self._ask(encode_time(), Time)

    def subscribe_release_times(self) -> bool:
        """Ask for a :class:`Released` after the outcome of every sent frame (read with :meth:`released`): on a
        host-paced link, when the host really handed it to the kernel. Returns whether the daemon does so."""
        return self._ask(encode_subscribe(True), Subscribed).release_times

    def change_schedule(self, base_time: int, classes: dict[str, list[int]]) -> Scheduled:
        """Change the daemon's schedule from network time ``base_time`` (TAI ns) on (IEEE 802.1Qbv admin → oper):
        each class named owns the ring slots given, the others keep theirs. Only root and the daemon's own user may.
        The reply says when it takes effect, or (``error``) why it was refused."""
        return self._ask(encode_schedule(base_time, classes), Scheduled)

    def change_windows(self, base_time: int, classes: dict[str, list[tuple[int, int]]]) -> Scheduled:
        """Change the daemon's schedule from the first cycle start at or after ``base_time`` (TAI ns) on, given as
        each named class's windows ``(offset, length)`` ns into the cycle — what a byte-clock daemon takes (a slot
        daemon takes them where their edges are its slot boundaries). The reply says when it takes effect, or
        (``error``) why it was refused."""
        return self._ask(encode_schedule_windows(base_time, classes), Scheduled)

    def _ask(self, request: bytes, reply: type):
        """Send ``request`` and return the first response of type ``reply``; an error reply raises
        :class:`RequestError`, and everything else that arrives first is kept, in order, for :meth:`recv`."""
        self._sock.sendall(frame_message(request))
        held: list[Message] = []
        try:
            while True:
                m = self._read()
                if isinstance(m, reply):
                    return m
                if isinstance(m, ErrorReply):
                    raise RequestError(m.text)
                held.append(m)
        finally:
            self._pending.extendleft(reversed(held))

    # -- responses -----------------------------------------------------------------------------------------------
    def recv(self) -> Message | None:
        """The next response (outcomes and release times kept while waiting for the other kind first), or
        ``None`` when the daemon has closed the connection."""
        for kept in (self._outcomes, self._released):
            if kept:
                return kept.popleft()
        try:
            return self._read()
        except ConnectionClosed:
            return None

    def outcome(self) -> Outcome:
        """The next outcome. Raises :class:`RequestError` if the daemon reports a malformed request first,
        :class:`ConnectionClosed` at end of stream, :class:`TimeoutError` after the timeout."""
        return self._next(Outcome, self._outcomes)

    def released(self) -> Released:
        """The next release time (after :meth:`subscribe_release_times`); errors as :meth:`outcome`."""
        return self._next(Released, self._released)

    def _next(self, kind: type, kept: deque):
        """The next message of ``kind`` (one kept earlier first); outcomes and release times read meanwhile are
        kept for :meth:`outcome` and :meth:`released`."""
        if kept:
            return kept.popleft()
        while True:
            m = self._read()
            if isinstance(m, kind):
                return m
            if isinstance(m, ErrorReply):
                raise RequestError(m.text)
            if isinstance(m, Outcome):
                self._outcomes.append(m)
            elif isinstance(m, Released):
                self._released.append(m)
            # Info replies nobody waits for and messages of a newer protocol are skipped.

    def outcomes(self, n: int) -> dict[int, Outcome]:
        """The next ``n`` outcomes by tag; a second outcome for one tag is a :class:`ProtocolError`."""
        got: dict[int, Outcome] = {}
        for _ in range(n):
            o = self.outcome()
            if o.tag in got:
                raise ProtocolError(f"two outcomes for frame {o.tag}")
            got[o.tag] = o
        return got

    def _read(self) -> Message:
        while not self._pending:
            chunk = self._sock.recv(65536)
            if not chunk:
                if self._rbuf:
                    raise ProtocolError(f"connection closed inside a message ({len(self._rbuf)} bytes pending)")
                raise ConnectionClosed("the daemon closed the connection")
            self._rbuf += chunk
            self._pending.extend(parse_response(m) for m in split_messages(self._rbuf))
        return self._pending.popleft()


__all__ = ["Client", "ConnectionClosed", "RequestError", "UnknownMessage"]
