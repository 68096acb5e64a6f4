"""A `keepon daemon --backend sim` for client tests: the simulated NIC held to the wall clock (no root needed).

The daemon is the release binary `make build` writes (`target/release/keepon`; `KEEPON_BIN` overrides, the debug
binary is the fallback); tests skip with a message when none is built. It is stopped by its PID (SIGTERM, then
SIGKILL after a bound) and its summary line is parsed for the underrun count.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

REPO = ROOT.parent
#: Slot period (100 Mb/s, 1230-byte slots) and ring cycle (32 slots), ns.
SLOT = 100_000
CYCLE = 32 * SLOT
#: One byte time at 100 Mb/s, ns: a slot starts on the first byte at or after its schedule time.
BYTE = 80


def keepon_binary() -> Path | None:
    env = os.environ.get("KEEPON_BIN")
    if env:
        return Path(env)
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "keepon"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def config_text(socket: Path, uid: int, timing: str = "slots") -> str:
    """tc-0 owns ring slot 0, tc-1 ring slots 1 and 17, tc-2 is best effort; this uid may use tc-0 and tc-2 only.
    ``timing = "bytes"``: the byte clock, the same slots as time windows."""
    return f"""# keepon client tests
[link]
rate = "100Mbps"
timing = "{timing}"
[ring]
slot_bytes = 1230      # δ = 100 µs
slots = 32             # cycle 3.2 ms
batch = 8
slot_masks = "0x01,0x20002,0"
[run]
poll_period = "20us"
[daemon]
socket = "{socket}"
max_in_flight = 64
[[daemon.allow]]
uid = {uid}
classes = ["tc-0", "tc-2"]
"""


@dataclass
class Daemon:
    proc: subprocess.Popen
    socket: Path
    log: Path

    def stop(self, timeout: float = 10.0) -> str:
        """SIGTERM by PID, wait (bounded), SIGKILL if it does not exit; return its output."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        return self.log.read_text()

    def underruns(self) -> int:
        """Underruns from the daemon's exit summary (call after :meth:`stop`)."""
        m = re.search(r"(\d+) underruns", self.log.read_text())
        assert m, f"no summary line in the daemon's output:\n{self.log.read_text()}"
        return int(m.group(1))


def start_daemon(tmp: Path, max_seconds: int = 60, timing: str = "slots") -> Daemon:
    exe = keepon_binary()
    if exe is None:
        pytest.skip("keepon binary not built (make build, or cargo build --release -p keepon)")
    sock = tmp / "keepon.sock"
    cfg = tmp / "daemon.toml"
    cfg.write_text(config_text(sock, os.geteuid(), timing))
    log = tmp / "daemon.log"
    with log.open("w") as out:
        # --duration bounds the daemon even if this process dies before stopping it.
        proc = subprocess.Popen(
            [str(exe), "daemon", "--config", str(cfg), "--backend", "sim", "--duration", f"{max_seconds}s"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    d = Daemon(proc, sock, log)
    deadline = time.monotonic() + 10
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            d.stop()
            pytest.fail(f"daemon did not come up:\n{log.read_text()}")
        time.sleep(0.01)
    return d


def eth_frame(length: int, seq: int = 0) -> bytes:
    """A frame of ``length`` bytes: locally administered addresses, a local experimental EtherType, ``seq``."""
    head = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xB5]) + seq.to_bytes(8, "little")
    return (head + bytes(max(0, length - len(head))))[:length]
