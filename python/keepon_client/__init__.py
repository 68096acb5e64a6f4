"""keepon-client: talk to ``keepon daemon`` from Python (standard library only; usable in notebooks).

Every submitted frame gets exactly one :class:`Outcome`: sent (slot, wire time, ring slot; ``off_schedule`` when a
newer daemon reports it left off its slot after an underrun) or rejected with a :class:`Reason`. Times are ``int``
TAI nanoseconds. ``protocol`` is the sans-IO byte protocol, ``client`` the blocking socket client.
"""

from .client import Client, ConnectionClosed, RequestError
from .protocol import (
    ErrorReply,
    FrameRejected,
    Info,
    KeeponError,
    Outcome,
    ProtocolError,
    Reason,
    Released,
    Scheduled,
    Subscribed,
    Time,
    UnknownMessage,
    UnknownReason,
    reason_from_code,
)

__all__ = [
    "Client",
    "ConnectionClosed",
    "ErrorReply",
    "FrameRejected",
    "Info",
    "KeeponError",
    "Outcome",
    "ProtocolError",
    "Reason",
    "Released",
    "RequestError",
    "Scheduled",
    "Subscribed",
    "Time",
    "UnknownMessage",
    "UnknownReason",
    "reason_from_code",
]
