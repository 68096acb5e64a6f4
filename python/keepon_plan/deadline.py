"""One time limit for a whole command: synthesis, verification and export.

A :class:`Deadline` is passed down to every stage that can take long; each checks it between units of work
(:meth:`Deadline.check`) and the stage that finds it passed raises :class:`TimeLimitExceeded`. Work that checks no
deadline (building a solver model, a stage's own bookkeeping) is still bounded by :func:`backstop`, which raises the
same exception from a timer signal once the deadline has passed.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class TimeLimitExceeded(Exception):
    """The command's time limit passed while ``stage`` was running."""

    def __init__(self, limit: float, stage: str) -> None:
        super().__init__(f"time limit {limit:g} s reached during {stage}")
        self.limit = limit
        self.stage = stage


class Deadline:
    """``limit`` seconds from ``start`` (``time.monotonic()``, default now); ``stage`` names the running stage."""

    def __init__(self, limit: float, start: float | None = None) -> None:
        self.limit = limit
        self.start = time.monotonic() if start is None else start
        self.at = self.start + limit
        self.stage = "start-up"

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def enter(self, stage: str) -> None:
        """Name the stage now running (for the message), and check the deadline."""
        self.stage = stage
        self.check()

    def check(self) -> None:
        if time.monotonic() >= self.at:
            raise TimeLimitExceeded(self.limit, self.stage)


def check(deadline: Deadline | None) -> None:
    """:meth:`Deadline.check` when there is a deadline."""
    if deadline is not None:
        deadline.check()


@contextmanager
def backstop(deadline: Deadline) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in the main thread once ``deadline`` passes, whatever runs then.

    Uses ``SIGALRM``; where that is unavailable (another thread, another OS) only the stages' own checks apply.
    The timer is cancelled and the previous handler restored on exit.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or not math.isfinite(deadline.at):
        yield
        return

    armed = True

    def fire(signum, frame) -> None:
        if armed:
            raise TimeLimitExceeded(deadline.limit, deadline.stage)

    previous = signal.signal(signal.SIGALRM, fire)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(deadline.remaining(), 1e-3))
        yield
    finally:
        try:
            armed = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
