"""Flow sets that stayed undecided at the default time limit (issue 23, item 10), decided now, the same way every
run.

Non-harmonic 85 % set 7 of the generator (16 flows, 3 classes, horizon 960 slots): every stage gave up at 60 s
(CP-SAT's complete model with 2 workers too, at 90 s). Its flow group tc-0 alone needs 14 ring slots, far above its
counting bound of 10; Hall's condition on the whole group takes 63 s to show it, but four of its six flows alone
need 14 too, shown in under a second. With the other groups' sizes that is more than the ring (Σ = 33 > 32).
"""

import subprocess
import sys
import time

from keepon_plan.bench import SLOT_BYTES, SLOTS
from keepon_plan.gen import flowset_text, generate
from keepon_plan.isolation import INFEASIBLE, synthesize
from keepon_plan.model import to_problem

PROOF = (
    "tc-0: f3+f6+f9+f10+f12+f15 ≥ 14 (its flows f3+f9+f10+f12 alone), tc-1: f2 ≥ 2, tc-1: f0+f1+f5+f14 ≥ 6, "
    "tc-2: f4+f7+f8+f11+f13 ≥ 11): Σ = 33 > N = 32"
)


def test_85_percent_set_7_is_proven_infeasible_the_same_way_whatever_the_limit():
    problem = to_problem(generate("nonharmonic", 85, 7), SLOT_BYTES, SLOTS)
    for limit in (60, 20):
        began = time.monotonic()
        outcome = synthesize(problem, time_limit=limit)
        assert outcome.status == INFEASIBLE, outcome.reason
        assert outcome.stages[-1][0] == "shapes"
        assert outcome.reason.endswith(PROOF), outcome.reason
        assert time.monotonic() - began < 30  # 4 s on the development machine; the default limit is 60 s


def test_85_percent_set_7_is_decided_by_the_program(tmp_path):
    flows = tmp_path / "flows.toml"
    flows.write_text(flowset_text("nonharmonic", 85, 7))
    command = [sys.executable, "-m", "keepon_plan.cli", "solve", str(flows), "--out", str(tmp_path / "p.toml")]
    done = subprocess.run([*command, "--time-limit", "20"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "infeasible (proven): shapes: by Hall's condition" in done.stderr and PROOF in done.stderr
