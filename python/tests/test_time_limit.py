"""`solve --time-limit` bounds the whole command: synthesis, export and verification, even a stage that does not
check the deadline itself; a large horizon (coprime periods) is planned, exported and verified well within it."""

import signal
import subprocess
import sys
import time

import pytest
from conftest import EXAMPLES

import keepon_plan.cli as cli
import keepon_plan.isolation as isolation
from keepon_plan.cli import main

# Periods of 32, 9, 7, 11 and 13 slots (δ = 10 µs): horizon lcm = 288 288 slots, 130 609 instances. Each flow has
# its own class and a jitter of a period less one slot, so the shapes stage finds a plan at once; the old verifier's
# all-pairs jitter loop then ran for minutes, past the limit (the whole solve took 4 min 23 s with --time-limit 5).
COPRIME = '[link]\nrate = "1Gbps"\n[ring]\nslot_bytes = 1230\nslots = 32\nbatch = 4\n' + "".join(
    f'[[flow]]\nname = "{name}"\nclass = "tc-{i}"\nperiod = "{p}us"\njitter = "{j}us"\nframe_bytes = 300\n'
    for i, (name, p, j) in enumerate([("a", 320, 0), ("b", 90, 80), ("c", 70, 60), ("d", 110, 100), ("e", 130, 120)])
)


def busy(*args, **kwargs):
    """A stage that never checks the deadline (like the old verifier's loop); fails the test if not stopped."""
    end = time.monotonic() + 10
    while time.monotonic() < end:
        pass
    raise AssertionError("the command was not stopped at its time limit")


def test_large_horizon_is_planned_within_the_limit(tmp_path):
    flows, out = tmp_path / "coprime.toml", tmp_path / "plan.toml"
    flows.write_text(COPRIME)
    command = [sys.executable, "-m", "keepon_plan.cli", "solve", str(flows), "--out", str(out), "--time-limit", "5"]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - began
    assert wall < 20, f"{wall:.1f} s for a 5 s limit"
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
