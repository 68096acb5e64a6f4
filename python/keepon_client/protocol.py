"""The byte protocol of ``keepon daemon`` (documented in ``crates/keepon/src/api/mod.rs``), without any I/O.

Messages are length-prefixed (``u32`` little-endian) over a UNIX stream socket. Requests are built by
:func:`encode_info` and :func:`encode_submit`; responses are parsed from untrusted bytes by :func:`parse_response`,
which raises :class:`ProtocolError` (never anything else) for bytes that are not a valid response.

Tolerance for newer daemons: an outcome whose ``status`` is 2 (sent, but off its schedule slot beyond the
configured tolerance, after an underrun) is reported as sent with ``off_schedule=True``; a reason code this
module does not know becomes :class:`UnknownReason` (``str()`` gives ``"unknown(n)"``); an outcome longer than
this version expects has its trailing bytes ignored; a response kind this module does not know is returned as
:class:`UnknownMessage`. ``Info`` and ``Time`` replies are parsed strictly: an info reply's classes must fill it
exactly, a time reply must be exactly :data:`TIME_REPLY_LEN` bytes with no unknown flag bits.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

VERSION = 1
#: Largest message the daemon accepts; a longer length prefix ends the connection.
MAX_MESSAGE = 16 * 1024
#: Largest reply the daemon sends (the largest Info of a legal configuration fits by construction).
MAX_REPLY = 96 * 1024

K_INFO = 1
K_SUBMIT = 2
K_INFO_REPLY = 0x81
K_OUTCOME = 0x82
K_ERROR = 0x83
K_TIME = 3
K_TIME_REPLY = 0x84
TIME_REPLY_LEN = 6 + 8 * 8
K_SUBSCRIBE = 4
K_RELEASED = 0x85
K_SUBSCRIBED = 0x86
K_SCHEDULE = 6
K_SCHEDULE_WINDOWS = 7
K_SCHEDULED = 0x88
RELEASED_LEN = 20

SUBMIT_HEADER = 4 + 8 + 8
OUTCOME_LEN = 32
INFO_FIXED = 2 + 8 + 4 * 3 + 8 * 5 + 4
#: ``Info.host``: the daemon's poll loop runs SCHED_FIFO.
HOST_FIFO = 1
#: ``Info.host``: the daemon's memory is locked.
HOST_MEMORY_LOCKED = 2
#: ``Info.host``: the daemon's poll loop is pinned to a CPU.
HOST_PINNED = 4
#: ``Info.host``: the host refused something the daemon's ``[realtime]`` section asked for.
HOST_REFUSED = 8

#: Outcome status bytes.
STATUS_SENT = 0
STATUS_REJECTED = 1
STATUS_SENT_OFF_SCHEDULE = 2


class KeeponError(Exception):
    """Base of every error this package raises."""


class ProtocolError(KeeponError):
    """Bytes from the daemon that are not a valid message (or a connection that ended mid-message)."""


class Reason(enum.Enum):
    """Why a frame was not sent: the values and order of ``keepon_core::outcome::Reason`` (index = wire code)."""

    LATE = "late"
    TOO_FAR_AHEAD = "too-far-ahead"
    SLOT_TAKEN = "slot-taken"
    NOT_OWNED = "not-owned"
    OVERSIZE = "oversize"
    RUNT = "runt"
    UNKNOWN_CLASS = "unknown-class"
    MISSING_TXTIME = "missing-txtime"
    UNEXPECTED_TXTIME = "unexpected-txtime"
    QUEUE_FULL = "queue-full"
    NO_CAPACITY = "no-capacity"
    FORBIDDEN = "forbidden"
    UNDERRUN = "underrun"
    LINK_FAULT = "link-fault"
    SHUTDOWN = "shutdown"
    CLOCK_STEP = "clock-step"
    NOT_SYNCHRONISED = "not-synchronised"
    SCHEDULE_CHANGE = "schedule-change"

    @property
    def code(self) -> int:
        """The reason's byte on the wire."""
        return _REASONS.index(self)

    def __str__(self) -> str:
        return self.value


_REASONS: list[Reason] = list(Reason)


@dataclass(frozen=True)
class UnknownReason:
    """A reason code this client does not know (a newer daemon); ``str()`` is ``"unknown(n)"``."""

    code: int

    @property
    def value(self) -> str:
        return f"unknown({self.code})"

    def __str__(self) -> str:
        return self.value


def reason_from_code(code: int) -> Reason | UnknownReason:
    """The reason of a wire code; codes beyond the known list map to :class:`UnknownReason`."""
    return _REASONS[code] if 0 <= code < len(_REASONS) else UnknownReason(code)


@dataclass(frozen=True)
class Info:
    """The link as the daemon describes it. Times are TAI nanoseconds (``int``).

    The schedule is on network time, the way an IEEE 802.1Qbv gate control list gives it: cycle ``n`` starts at
    ``base_time + n·cycle`` with ``cycle = cycle_num / cycle_den`` ns exactly (``ring`` slots), and
    ``windows[i]`` are class ``classes[i]``'s windows in the cycle as ``(offset, length)`` in whole ns: a txtime
    ``base_time + n·cycle + offset + x``, ``0 <= x < length``, is in the class's window. A best-effort class has
    no windows."""

    rate_bps: int
    slot_bytes: int
    ring: int
    batch: int
    #: The daemon's clock when it answered.
    now: int
    #: Start of a slot whose ring slot is 0, at least a ring ahead of the NIC.
    cycle_start: int
    #: A cycle starts at this time (and every cycle before and after).
    base_time: int
    #: The cycle time is ``cycle_num / cycle_den`` ns exactly (``cycle_den`` is never 0).
    cycle_num: int
    cycle_den: int
    classes: tuple[str, ...]
    #: Each class's windows, by class index: ``((offset, length), ...)`` ns; empty for best effort.
    windows: tuple[tuple[tuple[int, int], ...], ...]
    #: What the host granted the daemon: ``HOST_*`` flags.
    host: int = 0

    @property
    def slot_ns(self) -> tuple[int, int]:
        """The nominal slot period δ = (slot_bytes + 20)·8 / rate as an exact fraction ``(num, den)`` of ns."""
        return (self.slot_bytes + 20) * 8 * 1_000_000_000, self.rate_bps


@dataclass(frozen=True)
class Time:
    """The station's network time (the ``Time`` reply): ``ephc_now`` (TAI ns) and ``host_now`` (the daemon host's
    ``CLOCK_TAI``) at one instant; ``sync`` 0 free-running (no ``[ptp]``), 1 synchronised, 2 not synchronised;
    ``port`` 0 neither, 1 master, 2 slave; ``servo`` 0 unlocked, 1 stepping, 2 locked; the servo's last offset
    estimate (EPHC − master, ns), its frequency adjustment (parts per trillion) and mean path delay (ns);
    ``alignment``, how far the wire kept to the schedule: |wire slot start − schedule time| on the EPHC (ns) of the
    slots posted while the grid was locked, ``(median, p99, max)``, or ``None`` when the daemon has none."""

    sync: int
    port: int
    servo: int
    ephc_now: int
    host_now: int
    offset: int | None
    freq_ppt: int
    path_delay: int | None
    alignment: tuple[int, int, int] | None

    @property
    def synchronised(self) -> bool:
        """True when the EPHC is network time (PTP configured and synchronised)."""
        return self.sync == 1


class FrameRejected(KeeponError):
    """Raised by :meth:`Outcome.check` for a rejected frame; ``reason`` says why."""

    def __init__(self, tag: int, reason: Reason | UnknownReason):
        super().__init__(f"frame {tag} rejected: {reason}")
        self.tag = tag
        self.reason = reason


@dataclass(frozen=True)
class Outcome:
    """The one outcome of a submitted frame.

    Sent: ``sent`` is true and ``slot`` (EPHC slot count), ``time`` (wire time, TAI ns) and ``ring_slot`` say
    where; ``off_schedule`` is true when the daemon reports it left off its scheduled slot beyond the configured
    tolerance (after an underrun). Rejected: ``sent`` is false and ``reason`` says why.
    """

    tag: int
    sent: bool
    reason: Reason | UnknownReason | None = None
    slot: int | None = None
    time: int | None = None
    ring_slot: int | None = None
    off_schedule: bool = False

    def check(self) -> Outcome:
        """Return self if the frame was sent, else raise :class:`FrameRejected`."""
        if not self.sent:
            raise FrameRejected(self.tag, self.reason if self.reason is not None else UnknownReason(-1))
        return self


@dataclass(frozen=True)
class Released:
    """When a sent frame left the host (only after :meth:`Client.subscribe_release_times`; one per sent frame,
    after its outcome).

    ``time`` is the release time on the daemon's EPHC (TAI ns) on a host-paced link — the kernel's TX timestamp
    when ``stamped`` — and ``None`` where the NIC paces the link itself (the slot time is the wire time) or no
    report came in time.
    """

    tag: int
    time: int | None
    stamped: bool = False


@dataclass(frozen=True)
class Subscribed:
    """The daemon's reply to a subscription: what it now reports."""

    release_times: bool


@dataclass(frozen=True)
class Scheduled:
    """The daemon's answer to a schedule change: when it takes effect (TAI ns) and how many frames already submitted
    it left without a slot (rejected ``schedule-change``); or, refused, ``error`` says why."""

    time: int | None
    rejected: int
    error: str | None = None


@dataclass(frozen=True)
class ErrorReply:
    """The daemon's answer to a malformed request (the connection stays open)."""

    text: str


@dataclass(frozen=True)
class UnknownMessage:
    """A well-framed response of a kind this client does not know (a newer daemon); skipped by the client."""

    kind: int
    body: bytes


Message = Info | Outcome | ErrorReply | Time | Released | Subscribed | Scheduled | UnknownMessage


def frame_message(msg: bytes) -> bytes:
    """Prefix ``msg`` with its length."""
    return struct.pack("<I", len(msg)) + msg


def encode_info() -> bytes:
    """An ``Info`` request (without length prefix)."""
    return bytes([VERSION, K_INFO])


def encode_time() -> bytes:
    """A ``Time`` request (without length prefix)."""
    return bytes([VERSION, K_TIME])


def encode_subscribe(release_times: bool) -> bytes:
    """A ``Subscribe`` request (without length prefix): ``release_times`` asks for a :class:`Released` after the
    outcome of every sent frame."""
    return bytes([VERSION, K_SUBSCRIBE, int(bool(release_times))])


def encode_schedule(base_time: int, classes: dict[str, list[int]]) -> bytes:
    """A ``Schedule`` request (without length prefix): from network time ``base_time`` (TAI ns) on, each class named
    owns the ring slots given; classes left out keep theirs."""
    if not -(2**63) <= base_time < 2**63:
        raise ValueError(f"base time {base_time} does not fit in i64 nanoseconds")
    out = bytearray(struct.pack("<BBq", VERSION, K_SCHEDULE, base_time))
    for name, slots in classes.items():
        raw = name.encode("utf-8")
        if len(raw) > 255:
            raise ValueError(f"class name of {len(raw)} bytes is longer than 255")
        if any(not 0 <= s < 2**16 for s in slots):
            raise ValueError(f"class {name}: ring slots must be 0..65535")
        out += bytes([len(raw)]) + raw + struct.pack(f"<H{len(slots)}H", len(slots), *slots)
    return bytes(out)


def encode_schedule_windows(base_time: int, classes: dict[str, list[tuple[int, int]]]) -> bytes:
    """A ``ScheduleWindows`` request (without length prefix): from the first cycle start at or after network time
    ``base_time`` (TAI ns) on, each class named has the windows given, ``(offset, length)`` ns into the cycle (the
    byte clock's form; classes left out keep theirs)."""
    if not -(2**63) <= base_time < 2**63:
        raise ValueError(f"base time {base_time} does not fit in i64 nanoseconds")
    out = bytearray(struct.pack("<BBq", VERSION, K_SCHEDULE_WINDOWS, base_time))
    for name, windows in classes.items():
        raw = name.encode("utf-8")
        if len(raw) > 255:
            raise ValueError(f"class name of {len(raw)} bytes is longer than 255")
        if len(windows) >= 2**16:
            raise ValueError(f"class {name}: {len(windows)} windows, at most 65535")
        if any(not (0 <= o < 2**64 and 0 <= n < 2**64) for o, n in windows):
            raise ValueError(f"class {name}: window offsets and lengths must be 0..2^64-1 ns")
        flat = [x for w in windows for x in w]
        out += bytes([len(raw)]) + raw + struct.pack(f"<H{len(flat)}Q", len(windows), *flat)
    return bytes(out)


def encode_submit(cls: str, txtime: int | None, frame: bytes, tag: int) -> bytes:
    """A ``Submit`` request (without length prefix). Raises ``ValueError``/``TypeError`` for arguments the
    protocol cannot carry (the daemon judges everything else and answers with an outcome)."""
    name = cls.encode("utf-8")
    if len(name) > 255:
        raise ValueError(f"class name of {len(name)} bytes is longer than 255")
    if txtime is not None and (not isinstance(txtime, int) or isinstance(txtime, bool)):
        raise TypeError(f"txtime must be int nanoseconds or None, not {type(txtime).__name__}")
    if txtime is not None and not -(2**63) <= txtime < 2**63:
        raise ValueError(f"txtime {txtime} does not fit in i64 nanoseconds")
    if not isinstance(tag, int) or not 0 <= tag < 2**64:
        raise ValueError(f"tag {tag!r} is not a u64")
    frame = bytes(frame)
    size = SUBMIT_HEADER + len(name) + len(frame)
    if size > MAX_MESSAGE:
        raise ValueError(f"frame of {len(frame)} bytes makes a {size}-byte message; the daemon accepts {MAX_MESSAGE}")
    head = struct.pack("<BBBBQq", VERSION, K_SUBMIT, int(txtime is not None), len(name), tag, txtime or 0)
    return head + name + frame


def parse_response(b: bytes) -> Message:
    """Parse one response (without length prefix) from untrusted bytes."""
    if len(b) < 2:
        raise ProtocolError(f"message of {len(b)} bytes is shorter than its 2-byte header")
    if b[0] != VERSION:
        raise ProtocolError(f"protocol version {b[0]} is not {VERSION}")
    kind = b[1]
    if kind == K_OUTCOME:
        if len(b) < OUTCOME_LEN:
            raise ProtocolError(f"outcome of {len(b)} bytes, expected {OUTCOME_LEN}")
        status, code = b[2], b[3]
        tag, slot, time, ring_slot = struct.unpack_from("<QQqI", b, 4)
        if status in (STATUS_SENT, STATUS_SENT_OFF_SCHEDULE):
            return Outcome(
                tag, True, slot=slot, time=time, ring_slot=ring_slot, off_schedule=status == STATUS_SENT_OFF_SCHEDULE
            )
        if status == STATUS_REJECTED:
            return Outcome(tag, False, reason=reason_from_code(code))
        raise ProtocolError(f"outcome of frame {tag}: unknown status {status}")
    if kind == K_INFO_REPLY:
        if len(b) < INFO_FIXED:
            raise ProtocolError(f"info reply of {len(b)} bytes is shorter than {INFO_FIXED}")
        rate, slot_bytes, ring, batch, now, cycle_start, base_time, num, den, host = struct.unpack_from(
            "<QIIIqqqQQI", b, 2
        )
        if den == 0:
            raise ProtocolError("info reply: cycle denominator 0")
        classes, windows, at = [], [], INFO_FIXED
        while at < len(b):
            n = b[at]
            if at + 3 + n > len(b):
                raise ProtocolError("info reply: class cut short")
            try:
                classes.append(bytes(b[at + 1 : at + 1 + n]).decode("utf-8"))
            except UnicodeDecodeError:
                raise ProtocolError("info reply: class name is not UTF-8") from None
            (count,) = struct.unpack_from("<H", b, at + 1 + n)
            at += 3 + n
            if at + 16 * count > len(b):
                raise ProtocolError("info reply: class cut short")
            w = struct.unpack_from(f"<{2 * count}Q", b, at)
            windows.append(tuple(zip(w[::2], w[1::2], strict=True)))
            at += 16 * count
        return Info(
            rate, slot_bytes, ring, batch, now, cycle_start, base_time, num, den, tuple(classes), tuple(windows), host
        )
    if kind == K_ERROR:
        return ErrorReply(b[2:].decode("utf-8", errors="replace"))
    if kind == K_TIME_REPLY:
        if len(b) != TIME_REPLY_LEN:
            raise ProtocolError(f"time reply of {len(b)} bytes, expected {TIME_REPLY_LEN}")
        sync, port, servo, flags = b[2], b[3], b[4], b[5]
        if sync > 2 or port > 2 or servo > 2:
            raise ProtocolError(f"time reply: bad state bytes {bytes(b[2:5]).hex()}")
        if flags & ~7:
            raise ProtocolError(f"time reply flags {flags:#04x} has unknown bits")
        ephc, host, offset, freq, delay, a50, a99, amax = struct.unpack_from("<8q", b, 6)
        return Time(
            sync,
            port,
            servo,
            ephc,
            host,
            offset if flags & 1 else None,
            freq,
            delay if flags & 2 else None,
            (a50, a99, amax) if flags & 4 else None,
        )
    if kind == K_RELEASED:
        if len(b) != RELEASED_LEN:
            raise ProtocolError(f"released of {len(b)} bytes, expected {RELEASED_LEN}")
        flags = b[2]
        if flags & ~3:
            raise ProtocolError(f"released flags {flags:#04x} has unknown bits")
        tag, time = struct.unpack_from("<Qq", b, 4)
        return Released(tag, time if flags & 1 else None, bool(flags & 2))
    if kind == K_SUBSCRIBED:
        if len(b) != 3 or b[2] & ~1:
            raise ProtocolError("malformed subscribed reply")
        return Subscribed(bool(b[2] & 1))
    if kind == K_SCHEDULED:
        if len(b) < 20:
            raise ProtocolError(f"scheduled reply of {len(b)} bytes, expected at least 20")
        time, rejected = struct.unpack_from("<qQ", b, 4)
        if b[2] == 0:
            return Scheduled(time, rejected)
        if b[2] == 1:
            return Scheduled(None, 0, b[20:].decode("utf-8", errors="replace"))
        raise ProtocolError(f"scheduled reply: unknown status {b[2]}")
    return UnknownMessage(kind, bytes(b[2:]))


def split_messages(buf: bytearray) -> list[bytes]:
    """Remove and return the complete messages at the front of ``buf``."""
    out, at = [], 0
    while len(buf) - at >= 4:
        (n,) = struct.unpack_from("<I", buf, at)
        if n > MAX_REPLY:
            raise ProtocolError(f"message length {n} exceeds {MAX_REPLY}")
        if len(buf) - at - 4 < n:
            break
        out.append(bytes(buf[at + 4 : at + 4 + n]))
        at += 4 + n
    del buf[:at]
    return out
