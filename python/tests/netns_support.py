"""Network namespaces for tests that run real keepon stations: made and deleted by the test, entered by one thread.

:func:`namespaces` makes the namespaces (loopback up) and deletes them when its block ends; :func:`veth` joins two
of them; :func:`bridge` makes a Linux bridge (STP off) over ports; :func:`wait_up` waits until carrier and bridge
ports forward. :func:`enter` moves the calling thread (only it: ``setns`` with ``CLONE_NEWNET`` is per thread) into
a namespace, so that the sockets it opens live there: an AF_PACKET capture (:class:`Capture`) or an HTTP client
reaching 127.0.0.1 of that namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
ETH_P_KEEPON_TEST = 0x88B5
"""A local experimental EtherType: the test streams' frames."""
PACKET_OUTGOING = 4
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
SOL_PACKET = 263
PACKET_STATISTICS = 6
_libc = ctypes.CDLL(None, use_errno=True)


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


@contextlib.contextmanager
def namespaces(*names: str) -> Iterator[None]:
    """Make the namespaces (loopback up); delete every one of them when the block ends, also on failure."""
    try:
        for n in names:
            ip("netns", "add", n)
            ip("-n", n, "link", "set", "dev", "lo", "up")
        yield
    finally:
        for n in names:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def veth(ns_a: str, name_a: str, ns_b: str, name_b: str, mac_a: str | None = None) -> None:
    """A veth pair ``ns_a/name_a`` ─ ``ns_b/name_b``, no IPv6 autoconfiguration, both up."""
    ip("-n", ns_a, "link", "add", "name", name_a, "type", "veth", "peer", "name", name_b, "netns", ns_b)
    if mac_a is not None:
        ip("-n", ns_a, "link", "set", "dev", name_a, "address", mac_a)
    for ns, dev in ((ns_a, name_a), (ns_b, name_b)):
        ip("-n", ns, "link", "set", "dev", dev, "addrgenmode", "none")
        ip("-n", ns, "link", "set", "dev", dev, "up")


def bridge(ns: str, ports: list[str]) -> None:
    """``br0`` in ``ns`` (STP off, no IPv6 autoconfiguration) over ``ports``."""
    ip("-n", ns, "link", "add", "name", "br0", "type", "bridge", "stp_state", "0")
    ip("-n", ns, "link", "set", "dev", "br0", "addrgenmode", "none")
    for p in ports:
        ip("-n", ns, "link", "set", "dev", p, "master", "br0")
    ip("-n", ns, "link", "set", "dev", "br0", "up")


def _shows(args: list[str], want: str) -> bool:
    return want in subprocess.run(args, capture_output=True, text=True).stdout


def wait_up(links: list[tuple[str, str]], bridge_ports: list[tuple[str, str]], timeout: float = 10.0) -> None:
    """Until every ``(ns, dev)`` of ``links`` is up and every bridge port forwards (carrier comes up
    asynchronously, and a bridge drops what its ports receive until then)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if all(_shows(["ip", "-n", ns, "link", "show", "dev", d], "state UP") for ns, d in links) and all(
            _shows(["bridge", "-n", ns, "link", "show", "dev", p], "state forwarding") for ns, p in bridge_ports
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"links did not come up within {timeout} s")


def enter(ns: str) -> None:
    """Move the calling thread into the namespace ``ns``."""
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def tai_minus_realtime_ns() -> int:
    """CLOCK_TAI − CLOCK_REALTIME now (the kernel's TAI offset, 0 when never set), to the nearest µs."""
    a = time.clock_gettime_ns(time.CLOCK_REALTIME)
    t = time.clock_gettime_ns(time.CLOCK_TAI)
    b = time.clock_gettime_ns(time.CLOCK_REALTIME)
    return round((t - (a + b) // 2) / 1000) * 1000


class Capture(threading.Thread):
    """Every frame of EtherType ``ethertype`` (default :data:`ETH_P_KEEPON_TEST`) that ``ns/dev`` receives for
    ``mac`` (not the ones it sends), with the kernel's receive time (TAI ns): ``heard`` is a list of
    ``(frame, time)``."""

    def __init__(self, ns: str, dev: str, mac: bytes, ethertype: int = ETH_P_KEEPON_TEST) -> None:
        super().__init__(daemon=True, name=f"capture {ns}")
        self.ns, self.dev, self.mac, self.ethertype = ns, dev, mac, ethertype
        self.heard: list[tuple[bytes, int]] = []
        self.ready = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.drops = 0
        """Frames the kernel dropped because this capture's buffer was full (not lost on the network)."""

    def run(self) -> None:
        try:
            enter(self.ns)
            offset = tai_minus_realtime_ns()
            with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(self.ethertype)) as s:
                s.bind((self.dev, self.ethertype))
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)  # a stalled test must not drop frames
                s.settimeout(0.1)
                self.ready.set()
                while not self.done.is_set():
                    try:
                        data, anc, _flags, addr = s.recvmsg(2048, 64)
                    except TimeoutError:
                        continue
                    if addr[2] == PACKET_OUTGOING or data[:6] != self.mac:
                        continue
                    stamp = next((d for lvl, typ, d in anc if typ == SO_TIMESTAMPNS), None)
                    assert stamp is not None, "no receive time stamp"
                    sec, nsec = struct.unpack("qq", stamp[:16])
                    self.heard.append((data, sec * 10**9 + nsec + offset))
                    self._count(s)
                self._count(s)
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.ready.set()

    def _count(self, s: socket.socket) -> None:
        _packets, drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))  # reset on read
        self.drops += drops

    def stop(self) -> list[tuple[bytes, int]]:
        self.done.set()
        self.join(5)
        if self.error is not None:
            raise self.error
        return self.heard
