"""``solve --timing bytes``: windows sized to the frames for the byte clock, verified, refused when infeasible, and
run on the keepon runtime's simulated NIC (each real-time frame sent within half a byte of its txtime)."""

import csv
import itertools
import math
import re
import subprocess
import tomllib
from fractions import Fraction

import pytest
from test_runtime_roundtrip import keepon_binary

from keepon_plan.cli import main

# 1 Gb/s: two classes, a 1518-byte frame (longer than a 1230-byte slot), a flow with jitter freedom.
ONE_G = """
[link]
rate = "1Gbps"

[[class]]
name = "ctrl"
[[class]]
name = "video"

[[flow]]
name = "ctrl-a"
class = "ctrl"
period = "125us"
frame_bytes = 200
count = 40

[[flow]]
name = "ctrl-b"
class = "ctrl"
period = "250us"
jitter = "2us"
frame_bytes = 300
count = 20

[[flow]]
name = "video"
class = "video"
period = "250us"
frame_bytes = 1518
count = 20
"""

# 10 Gb/s (0.8 ns a byte: wire times are fractions of a ns), fixed phases that collide unless b uses its jitter, and
# differently in its two instances: instance 0 fits only in [176, 532] ns (between a and d), instance 1 only after c
# (from 51 216 + 68 ns, the free link after a 1500-byte frame), so b needs instance_offsets.
TEN_G = """
[link]
rate = "10Gbps"

[[flow]]
name = "a"
class = "ctrl"
period = "100us"
phase = "0ns"
frame_bytes = 200
count = 30

[[flow]]
name = "b"
class = "ctrl"
period = "50us"
phase = "0ns"
jitter = "1500ns"
frame_bytes = 64
count = 60

[[flow]]
name = "c"
class = "video"
period = "100us"
phase = "50us"
frame_bytes = 1500
count = 30

[[flow]]
name = "d"
class = "video"
period = "100us"
phase = "600ns"
frame_bytes = 1500
count = 30
"""


def solve(tmp_path, text, *extra):
    flows = tmp_path / "flows.toml"
    flows.write_text(text)
    plan = tmp_path / "plan.toml"
    code = main(["solve", str(flows), "--out", str(plan), "--timing", "bytes", "--time-limit", "30", *extra])
    return code, flows, plan


def wire_ns(frame: int, rate: int) -> Fraction:
    return Fraction((max(frame, 64) + 20) * 8 * 10**9, rate)


@pytest.mark.parametrize("text", [ONE_G, TEN_G], ids=["1g", "10g"])
def test_plan_verifies_and_windows_fit_the_frames(text, tmp_path, capsys):
    code, flows, plan = solve(tmp_path, text)
    assert code == 0, capsys.readouterr().err
    assert main(["verify", str(flows), str(plan)]) == 0
    assert "(byte clock)" in capsys.readouterr().err
    doc = tomllib.loads(plan.read_text())
    assert doc["link"]["timing"] == "bytes"
    rate = 10**9 if "1Gbps" in text else 10**10
    cycle = int(re.match(r"(\d+)", str(doc["schedule"]["cycle_time"])).group(1)) * 1000
    # Windows hold exactly the frames: their total length is the frames' wire times rounded up to whole ns.
    wanted = {f["name"]: f for f in tomllib.loads(text)["flow"]}
    total = sum(
        cycle // (int(wanted[f["name"]]["period"][:-2]) * 1000) * math.ceil(wire_ns(f["frame_bytes"], rate))
        for f in doc["flow"]
    )
    gcl = plan.with_suffix(".gcl").read_text()
    entries = [tuple(line.split()[2:]) for line in gcl.splitlines() if line.startswith("sched-entry")]
    assert sum(int(n) for _, n in entries) == cycle == int(re.search(r"cycle-time (\d+)", gcl).group(1))
    best_effort = 1 << len(doc["class"])
    assert sum(int(n) for g, n in entries if int(g, 16) != best_effort) == total
    # Consecutive entries with the same gate are merged windows; best effort lies between the classes' windows.
    assert all(a[0] != b[0] for a, b in itertools.pairwise(entries))
    assert "lead" in doc["flow"][0]


def corrupt(plan, old, new):
    text = plan.read_text()
    assert old in text, (old, text)
    plan.write_text(text.replace(old, new, 1))


def test_verifier_names_a_corrupted_plan(tmp_path, capsys):
    code, flows, plan = solve(tmp_path, ONE_G)
    assert code == 0
    good = plan.read_text()
    doc = tomllib.loads(good)
    video = next(f for f in doc["flow"] if f["name"] == "video")
    windows = next(c for c in doc["class"] if c["name"] == "video")["windows"]
    capsys.readouterr()

    # A frame moved by one byte time (8 ns): it leaves its window (or runs into another frame).
    corrupt(plan, f'offset = "{video["offset"]}"', f'offset = "{_ns(video["offset"]) + 8}ns"')
    assert main(["verify", str(flows), str(plan)]) == 1
    err = capsys.readouterr().err
    assert "(1) window" in err and "'video'" in err

    # A window shortened by a byte: the frame no longer fits in it.
    plan.write_text(good)
    s, n = windows[0]
    corrupt(plan, f'["{s}", "{n}"]', f'["{s}", "{_ns(n) - 8}ns"]')
    assert main(["verify", str(flows), str(plan)]) == 1
    assert "(1) window: flow 'video' instance 0" in capsys.readouterr().err

    # The video window widened back over the start of the next window: windows overlap.
    plan.write_text(good)
    corrupt(plan, f'["{s}", "{n}"]', f'["{s}", "{_ns(n) + 250_000}ns"]')
    assert main(["verify", str(flows), str(plan)]) == 1
    err = capsys.readouterr().err
    assert "windows: " in err and "exceeds the cycle" in err

    # Two frames at the same time: ctrl-a onto the video frame.
    plan.write_text(good)
    ctrl = next(f for f in doc["flow"] if f["name"] == "ctrl-a")
    corrupt(plan, f'offset = "{ctrl["offset"]}"', f'offset = "{video["offset"]}"')
    assert main(["verify", str(flows), str(plan)]) == 1
    err = capsys.readouterr().err
    assert "(3) collision" in err and "(1) window: flow 'ctrl-a'" in err


def _ns(text: str) -> int:
    value, unit = re.fullmatch(r"(\d+)(ns|us|ms)", text).groups()
    return int(value) * {"ns": 1, "us": 1000, "ms": 10**6}[unit]


@pytest.mark.parametrize(
    ("period", "proof"),
    [
        # 1400-byte frames every 12 µs take 94.7 % of the link, ctrl-b and video 5.9 %: the count proves it.
        ("12us", "capacity: the frames' windows need"),
        # Every 15 µs (75.7 %) they leave 3.6 µs gaps, too short for the 12.3 µs video frame: CP-SAT proves it.
        ("15us", "no placement of the 56 frame windows in the 750000 ns cycle"),
    ],
)
def test_more_traffic_than_the_cycle_holds_is_refused(period, proof, tmp_path, capsys):
    text = ONE_G.replace('period = "125us"\nframe_bytes = 200', f'period = "{period}"\nframe_bytes = 1400')
    text = text.replace("[[class]]", '[params]\nmax_data_age = "200us"\n\n[[class]]', 1)
    code, _, plan = solve(tmp_path, text)
    err = capsys.readouterr().err
    assert code == 1 and f"infeasible (proven): {proof}" in err and not plan.exists(), err


def test_fixed_phases_that_collide_are_refused_by_the_exact_model(tmp_path, capsys):
    # Both flows must send at 0 ns of every 100 µs: their frames would overlap; the capacity count cannot see it.
    text = TEN_G.replace('jitter = "1500ns"\n', "").replace('period = "50us"', 'period = "100us"')
    code, _, plan = solve(tmp_path, text)
    err = capsys.readouterr().err
    assert code == 1 and "infeasible (proven): no placement" in err and not plan.exists()
    # With its jitter b moves off a's frame.
    code, _, plan = solve(tmp_path, TEN_G)
    assert code == 0
    b = next(f for f in tomllib.loads(plan.read_text())["flow"] if f["name"] == "b")
    assert b["repeat"] == "100us" and 176 <= _ns(b["instance_offsets"][0]) <= 532, b


def test_guard_widens_every_window(tmp_path, capsys):
    code, flows, plan = solve(tmp_path, TEN_G, "--guard", "100ns")
    assert code == 0, capsys.readouterr().err
    assert main(["verify", str(flows), str(plan)]) == 0
    doc = tomllib.loads(plan.read_text())
    video = next(c for c in doc["class"] if c["name"] == "video")["windows"]
    assert video == [["600ns", "1316ns"], ["50us", f"{math.ceil(wire_ns(1500, 10**10)) + 100}ns"]]


@pytest.mark.parametrize("text", [ONE_G, TEN_G], ids=["1g", "10g"])
def test_plan_runs_on_the_byte_clock(text, tmp_path, capsys):
    exe = keepon_binary()
    if exe is None:
        pytest.skip("keepon binary not built (cargo build -p keepon)")
    code, _, plan = solve(tmp_path, text)
    assert code == 0, capsys.readouterr().err
    records = tmp_path / "records.csv"
    run = subprocess.run(
        [str(exe), "run", "--config", str(plan), "--records", str(records)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(line for line in records.read_text().splitlines() if not line.startswith("#")))
    counts = {f["name"]: f["count"] for f in tomllib.loads(text)["flow"]}
    assert len(rows) == sum(counts.values())
    rate = 10**9 if "1Gbps" in text else 10**10
    half_byte = math.ceil(Fraction(8 * 10**9, rate) / 2)
    for r in rows:
        assert r["outcome"] == "sent", r
        assert abs(int(r["tx_ns"]) - int(r["txtime_ns"])) <= half_byte, r
