"""The CLI starts without the heavy modules: the solver is imported only by a synthesis stage that needs it."""

import json
import subprocess
import sys

from conftest import EXAMPLES

HEAVY = ("ortools", "numpy", "pandas", "matplotlib", "z3", "networkx")
EXAMPLE2 = str(EXAMPLES / "example2.toml")


def loaded_after(code: str) -> list[str]:
    """The heavy top-level packages in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def cli(*argv: str, code: int = 0) -> str:
    return f"from keepon_plan.cli import main\nassert main({list(argv)!r}) == {code}"


def test_importing_the_cli_imports_no_solver():
    assert loaded_after("import keepon_plan.cli") == []


def test_params_solve_and_verify_import_no_solver_when_no_stage_needs_it(tmp_path):
    plan = str(tmp_path / "plan.toml")
    assert loaded_after(cli("params", EXAMPLE2)) == []
    assert loaded_after(cli("solve", EXAMPLE2, "--out", plan)) == []  # decided by the closed form
    assert loaded_after(cli("verify", EXAMPLE2, plan)) == []


def test_a_cp_sat_stage_imports_the_solver():
    code = (
        "from keepon_plan.isolation import PLAN, synthesize\n"
        "from keepon_plan.model import load_flowset, to_problem\n"
        f"problem = to_problem(load_flowset({str(EXAMPLES / 'nonharmonic.toml')!r}), 1230, 32)\n"
        "assert synthesize(problem, 30, stages=('capacity', 'zero-jitter')).status == PLAN"
    )
    assert "ortools" in loaded_after(code)
