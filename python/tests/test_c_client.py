"""The C client (`clients/c`): its test program against a `keepon daemon --backend sim` (no root), and the
example program. Built by `make c-client` (`cc -Wall -Wextra -Werror`; the test program with ASan/UBSan where
available), which `make test` runs first; built here too when missing."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from daemon_support import BYTE, REPO, SLOT, start_daemon

C_OUT = REPO / "target" / "c"


def c_binary(name: str):
    exe = C_OUT / name
    if not exe.exists():
        if shutil.which("cc") is None or shutil.which("make") is None:
            pytest.skip("no C compiler or make")
        subprocess.run(["make", "-C", str(REPO), "c-client"], check=True, capture_output=True, timeout=120)
    return exe


def test_c_codec_without_a_daemon():
    run = subprocess.run([str(c_binary("keepon-test"))], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "all checks passed" in run.stderr


@pytest.mark.parametrize("timing", ["slots", "bytes"])
def test_c_client_every_submit_one_typed_outcome(tmp_path, timing):
    exe = c_binary("keepon-test")
    d = start_daemon(tmp_path, timing=timing)
    try:
        run = subprocess.run([str(exe), str(d.socket)], capture_output=True, text=True, timeout=60)
    finally:
        out = d.stop()
    assert run.returncode == 0, run.stderr + run.stdout
    good = [line.split() for line in run.stdout.splitlines() if line.startswith("good ")]
    assert len(good) == 20, run.stdout
    underruns = d.underruns()
    for _, tag, txtime, status, *rest in good:
        if status == "sent":
            time, ring_slot = int(rest[0]), int(rest[1])
            assert ring_slot == 0, (tag, rest)
            if underruns == 0 and timing == "bytes":
                # The byte clock: on the byte nearest the txtime — or the next one, where the nearest would start
                # before the window (these txtimes are the window's opening).
                assert -BYTE // 2 <= time - int(txtime) <= BYTE, (tag, time, txtime, out)
            elif underruns == 0:
                # On the schedule to the byte: the slot starts on the first byte at or after its schedule time.
                assert 0 <= time - int(txtime) < BYTE, (tag, time, txtime, out)
            else:
                assert abs(time - int(txtime)) < SLOT, (tag, time, txtime, underruns)
        else:
            assert underruns > 0 and rest[0] in ("underrun", "late"), (tag, rest, out)


def test_c_example_program(tmp_path):
    exe = c_binary("keepon-example")
    d = start_daemon(tmp_path)
    try:
        run = subprocess.run([str(exe), str(d.socket), "tc-0", "5"], capture_output=True, text=True, timeout=60)
    finally:
        d.stop()
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    head = "link 100000000 b/s, 1230-byte slots, ring 32, cycle 3200000 ns, classes: tc-0 tc-1 tc-2"
    assert lines[0] == head, run.stdout
    # No [ptp] in the test configuration: the EPHC runs free, next to the host's CLOCK_TAI.
    m = re.fullmatch(r"network time (\d+) ns \(EPHC - host CLOCK_TAI ([+-]\d+) ns\), free-running", lines[1])
    assert m and abs(int(m.group(2))) < 10_000_000, run.stdout
    frames = [line for line in lines[1:] if line.startswith("frame ")]
    assert sorted(int(line.split()[1].rstrip(":")) for line in frames) == list(range(5)), run.stdout
    if d.underruns() == 0:
        assert all("sent in slot" in line and "(ring slot 0)" in line for line in frames), run.stdout
