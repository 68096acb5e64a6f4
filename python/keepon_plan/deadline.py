"""One time limit for a whole command: start-up, synthesis, export, verification, output and exit.

The limit is a promise about the process: ``keepon-plan solve --time-limit T`` has *exited* within ``T`` seconds of
its start. So the clock starts when the process does (:func:`process_start`: the interpreter's start-up and imports
count), and the time is split into phases from one end, back to front::

    process start                                                                           start + limit
    |-- start-up --|-- read --|------------- synthesis -------------|-- export, verify, write --|-- exit --|
                                                                    ^ synthesis ends here        ^ at
                                        (the solver's own limit ends earlier: its overrun margin)

- ``Deadline.at`` is ``start + limit − command_reserve(limit)``: every stage is done by then, and what is left is
  printing the outcome and leaving the process (the program leaves with ``os._exit``: no interpreter teardown).
- :meth:`Deadline.until` gives a phase its end, keeping a reserve for the phases after it (synthesis keeps what
  export, verification and writing are estimated to need).
- A stage checks its deadline between units of work (:meth:`Deadline.check`) and the stage that finds it passed
  raises :class:`TimeLimitExceeded`. Python work that checks no deadline is still bounded by :func:`backstop`, which
  raises the same exception from a timer signal at ``at``. A solver running in C++ holds the main thread, so a
  signal cannot stop it: :func:`interrupt_at` asks it to stop from a timer thread.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EXIT_RESERVE = 0.35
"""Seconds kept after the last stage for reporting the outcome and leaving the process (measured: a few ms on a
quiet machine; the rest is for a loaded one, where the process may wait that long for a core — a CI run on this
2-core VM once took 0.33 s from the synthesis' end to the exit of a 1 s solve, when 0.2 s were kept)."""
LOAD_SHARE = 0.02
"""And this share of the limit: on a loaded machine the process is not always running, and what overruns (a solver
that returns late, a stage between two checks) overruns by more the longer the command runs (measured: a
10 s solve stalled 1 s once with a load average of 4 on 2 cores)."""


def command_reserve(limit: float) -> float:
    """What a command keeps after :attr:`Deadline.at` for itself: :data:`EXIT_RESERVE` and :data:`LOAD_SHARE`."""
    return EXIT_RESERVE + LOAD_SHARE * limit


def process_start() -> float:
    """The ``time.monotonic()`` reading at which this process started, or now where that cannot be read.

    Linux gives the start in clock ticks since boot (``/proc/self/stat``, field 22); ``CLOCK_BOOTTIME`` is the
    clock it counts on. The tick (10 ms) rounds the start down, so the time counted is never less than the truth.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            stat = fh.read()
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])  # fields after "(comm)" start at field 3
        since = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()
    return time.monotonic() - max(0.0, since)


class TimeLimitExceeded(Exception):
    """The command's time limit passed while ``stage`` was running."""

    def __init__(self, limit: float, stage: str) -> None:
        super().__init__(f"time limit {limit:g} s reached during {stage}")
        self.limit = limit
        self.stage = stage


class Deadline:
    """``limit`` seconds from ``start`` (``time.monotonic()``, default now); work ends ``reserve`` s before.

    ``reserve`` (default 0) is what the caller keeps after :attr:`at` for itself; a command passes
    :func:`command_reserve`. ``stage`` names the running stage.
    """

    def __init__(self, limit: float, start: float | None = None, reserve: float = 0.0) -> None:
        self.limit = limit
        self.start = time.monotonic() if start is None else start
        self.at = self.start + limit - reserve
        self.stage = "start-up"

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def until(self, reserve: float, least: float = 0.5) -> float:
        """The seconds from now a phase may use, keeping ``reserve`` s for the phases after it.

        When the reserve does not fit, the phase still gets ``least`` of what remains (and the later phases
        are stopped by the deadline if they need more than the rest). Never negative.
        """
        left = max(0.0, self.remaining())
        return max(left - reserve, least * left)

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
    """Raise :class:`TimeLimitExceeded` in the main thread once ``deadline`` passes, whatever Python code runs then.

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


@contextmanager
def interrupt_at(at: float, stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` from a timer thread at ``time.monotonic()`` reading ``at``, unless the block ends first.

    For a solver that runs in C++ (CP-SAT's ``stop_search``): its own time limit is a target it overruns (by about
    0.1 s on a quiet machine, more under load), and the signal of :func:`backstop` waits until it returns.
    """
    if not math.isfinite(at):
        yield
        return
    timer = threading.Timer(max(0.0, at - time.monotonic()), stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
