"""Planner → runtime: every plan keepon-plan writes runs on the keepon runtime (simulated NIC) with every frame
sent in a ring slot its class owns, exactly at its scheduled time.

Needs the `keepon` binary (built by `make test` before the Python tests); skipped when it is absent.
"""

import csv
import os
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

from keepon_plan.cli import main

REPO = ROOT.parent


def keepon_binary() -> Path | None:
    for profile in ("debug", "release"):
        p = REPO / "target" / profile / "keepon"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def owned_slots(plan_text: str) -> dict[str, set[int]]:
    """Class name → owned ring slots, from the plan's `mask = "0x…"` lines."""
    owned, name = {}, None
    for line in plan_text.splitlines():
        line = line.strip()
        if line.startswith("name = ") and name is None:
            name = line.split("=", 1)[1].strip().strip('"')
        elif line.startswith("mask = ") and name is not None:
            mask = int(line.split("=", 1)[1].strip().strip('"'), 16)
            owned[name] = {i for i in range(mask.bit_length()) if mask >> i & 1}
        elif line == "[[class]]":
            name = None
        elif line.startswith("[[flow]]"):
            name = "(flow)"
    return owned


@pytest.mark.parametrize("example", ["example2.toml", "nonharmonic.toml", "fixed-phase.toml"])
def test_plan_runs_on_the_runtime(example, tmp_path, capsys):
    exe = keepon_binary()
    if exe is None:
        pytest.skip("keepon binary not built (cargo build -p keepon)")
    plan = tmp_path / "plan.toml"
    assert main(["solve", str(EXAMPLES / example), "--out", str(plan), "--time-limit", "30"]) == 0, capsys.readouterr()
    records = tmp_path / "records.csv"
    run = subprocess.run(
        [str(exe), "run", "--config", str(plan), "--records", str(records)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(line for line in records.read_text().splitlines() if not line.startswith("#")))
    assert rows, "no frames recorded"
    owned = owned_slots(plan.read_text())
    for r in rows:
        assert r["outcome"] == "sent", r
        # Exactly at its scheduled time, in a slot its class owns.
        assert r["tx_ns"] == r["txtime_ns"] == r["ephc_ns"], r
        assert int(r["ring_slot"]) in owned[r["class"]], r
