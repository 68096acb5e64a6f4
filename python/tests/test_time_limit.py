"""`solve --time-limit` bounds the whole command: synthesis, export and verification, even a stage that does not
check the deadline itself; a large horizon (coprime periods) is planned, exported and verified well within it.

The programs run as a user runs them (a new process), and the wall time measured here, from before the process is
started to after it has been reaped, must be below the limit: start-up, the solver's overrun and exit are the
command's to budget, not the test's."""

import math
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import EXAMPLES

import keepon_plan.cli as cli
import keepon_plan.isolation as isolation
from keepon_plan.cli import main
from keepon_plan.deadline import interrupt_at, process_start
from keepon_plan.gen import flowset_text

# Periods of 32, 9, 7, 11 and 13 slots (δ = 10 µs): horizon lcm = 288 288 slots, 130 609 instances. Each flow has
# its own class and a jitter of a period less one slot, so the shapes stage finds a plan at once; the old verifier's
# all-pairs jitter loop then ran for minutes, past the limit (the whole solve took 4 min 23 s with --time-limit 5).
COPRIME = '[link]\nrate = "1Gbps"\n[ring]\nslot_bytes = 1230\nslots = 32\nbatch = 4\n' + "".join(
    f'[[flow]]\nname = "{name}"\nclass = "tc-{i}"\nperiod = "{p}us"\njitter = "{j}us"\nframe_bytes = 300\n'
    for i, (name, p, j) in enumerate([("a", 320, 0), ("b", 90, 80), ("c", 70, 60), ("d", 110, 100), ("e", 130, 120)])
)


# Non-harmonic 85 % set 22 of the generator: no stage decides it within a minute, so a short limit ends in
# "unknown" after CP-SAT has used its time.
UNDECIDED = flowset_text("nonharmonic", 85, 22)


def program(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
    """``keepon-plan ARGV`` in a new process, and its wall time from before the start to after the exit."""
    command = [sys.executable, "-m", "keepon_plan.cli", *argv]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - began


def busy(*args, **kwargs):
    """A stage that never checks the deadline (like the old verifier's loop); fails the test if not stopped."""
    end = time.monotonic() + 10
    while time.monotonic() < end:
        pass
    raise AssertionError("the command was not stopped at its time limit")


def test_large_horizon_is_planned_within_the_limit(tmp_path):
    flows, out = tmp_path / "coprime.toml", tmp_path / "plan.toml"
    flows.write_text(COPRIME)
    done, wall = program("solve", str(flows), "--out", str(out), "--time-limit", "5")
    assert wall < 5, f"{wall:.2f} s for a 5 s limit"
    assert "horizon 288288 slots" in done.stderr
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stderr and out.exists()
    assert main(["verify", str(flows), str(out)]) == 0


def test_a_stage_that_ignores_the_deadline_is_stopped(tmp_path, monkeypatch, capsys):
    out = tmp_path / "plan.toml"
    monkeypatch.setattr(cli, "verify_plan_text", busy)
    began = time.monotonic()
    code = main(["solve", str(EXAMPLES / "example2.toml"), "--out", str(out), "--time-limit", "2"])
    assert time.monotonic() - began < 6
    err = capsys.readouterr().err
    assert code == 2, err
    assert "time limit 2 s reached during verification of the plan found by closed form" in err
    assert "no plan written" in err and not out.exists()


def test_synthesis_that_overruns_is_stopped(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(isolation, "synthesize", busy)
    began = time.monotonic()
    code = main(["solve", str(EXAMPLES / "example2.toml"), "--out", str(tmp_path / "p.toml"), "--time-limit", "1.5"])
    assert time.monotonic() - began < 5
    assert code == 2 and "time limit 1.5 s reached during synthesis" in capsys.readouterr().err


def test_timer_is_disarmed_after_the_command(tmp_path):
    before = signal.getsignal(signal.SIGALRM)
    assert main(["solve", str(EXAMPLES / "station.toml"), "--out", str(tmp_path / "p.toml"), "--time-limit", "30"]) == 0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


@pytest.mark.parametrize("limit", ["0", "-1", "nan", "inf", "soon"])
def test_time_limit_must_be_positive_and_finite(limit, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["solve", str(EXAMPLES / "example2.toml"), "--out", str(tmp_path / "p.toml"), "--time-limit", limit])
    assert info.value.code == 3
    assert "not a positive number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize("limit", [3, 1])
def test_undecided_solve_exits_within_the_limit(tmp_path, limit):
    flows, out = tmp_path / "hard.toml", tmp_path / "plan.toml"
    flows.write_text(UNDECIDED)
    done, wall = program("solve", str(flows), "--out", str(out), "--time-limit", str(limit))
    assert done.returncode == 2, done.stderr
    assert wall < limit, f"{wall:.2f} s for a {limit} s limit"
    assert not out.exists()
    # Synthesis ran out of its share ("time limit 2.6 s reached", printed as a person would write it, not as a
    # float's every digit), or, with little time left after start-up, the command's own limit stopped it.
    said = re.search(r"unknown: time limit (\S+) s reached", done.stderr)
    assert said is not None, done.stderr
    assert re.fullmatch(r"\d+(\.\d)?", said.group(1)), said.group(1)
    assert 0 < float(said.group(1)) <= limit


def test_a_stage_that_ignores_the_deadline_is_stopped_within_the_limit(tmp_path):
    """The backstop in a new process: the verifier never ends; the program still exits within 2 s."""
    run_with_busy_verifier = (
        "import sys, time\n"
        "import keepon_plan.cli as cli\n"
        "def busy(*args, **kwargs):\n"
        "    while True:\n"
        "        pass\n"
        "cli.verify_plan_text = busy\n"
        "sys.argv[1:] = sys.argv[2:]\n"  # drop the script's "--" marker
        "cli.main()\n"
    )
    out = tmp_path / "plan.toml"
    command = [sys.executable, "-c", run_with_busy_verifier, "--", "solve", str(EXAMPLES / "example2.toml")]
    began = time.monotonic()
    done = subprocess.run([*command, "--out", str(out), "--time-limit", "2"], capture_output=True, text=True)
    wall = time.monotonic() - began
    assert done.returncode == 2, done.stderr
    assert "time limit 2 s reached during verification" in done.stderr
    assert wall < 2, f"{wall:.2f} s for a 2 s limit"
    assert not out.exists()


def test_the_limit_counts_from_the_process_start():
    """Start-up before ``main`` (the interpreter, imports) is part of the command's time."""
    code = "import time\nfrom keepon_plan.deadline import process_start\nprint(time.monotonic() - process_start())"
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.monotonic() - began
    counted = float(done.stdout)
    assert 0 < counted < wall + 0.02  # the start is read in clock ticks (10 ms), rounded down
    assert process_start() <= time.monotonic()


def test_interrupt_at_stops_a_solver_at_its_time_and_not_without_one():
    calls = []
    with interrupt_at(time.monotonic() + 0.05, lambda: calls.append(time.monotonic())):
        time.sleep(0.3)
    assert len(calls) == 1
    with (
        interrupt_at(math.inf, lambda: calls.append(0.0)),
        interrupt_at(time.monotonic() + 5, lambda: calls.append(0.0)),
    ):
        pass
    time.sleep(0.05)
    assert len(calls) == 1
