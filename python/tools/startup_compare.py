"""Start-up cost of keepon-plan, another version of the package (``BEFORE``) against this one, side by side.

    mkdir -p /tmp/before && git archive 2706aae python | tar -x -C /tmp/before
    python/.venv/bin/python python/tools/startup_compare.py /tmp/before/python 11

Runs each command ``N`` times per version, interleaved so that both see the same machine load, and prints the
median wall time of each and the median cumulative ``-X importtime`` of ``import keepon_plan.cli`` as a Markdown
table. ``BEFORE`` is put on ``PYTHONPATH``, which takes precedence over the editable install of this worktree.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
EXAMPLE = str(HERE / "examples" / "example2.toml")


def main() -> int:
    before, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 11
    py = sys.executable
    envs = {"before": dict(os.environ, PYTHONPATH=before), "after": dict(os.environ, PYTHONPATH=str(HERE))}
    tmp = Path(tempfile.mkdtemp())
    plan, out = str(tmp / "plan.toml"), str(tmp / "out.toml")
    subprocess.run([py, "-m", "keepon_plan.cli", "solve", EXAMPLE, "--out", plan], capture_output=True, check=True)
    solve = ["-m", "keepon_plan.cli", "solve", EXAMPLE, "--out", out]
    commands = {
        "python -c pass": ["-c", "pass"],
        'python -c "import keepon_plan.cli"': ["-c", "import keepon_plan.cli"],
        "keepon-plan --help": ["-m", "keepon_plan.cli", "--help"],
        "keepon-plan params examples/example2.toml": ["-m", "keepon_plan.cli", "params", EXAMPLE],
        "keepon-plan verify examples/example2.toml PLAN": ["-m", "keepon_plan.cli", "verify", EXAMPLE, plan],
        "keepon-plan solve examples/example2.toml --out PLAN": solve,
    }
    wall: dict[tuple[str, str], list[float]] = {(v, c): [] for v in envs for c in commands}
    imports: dict[str, list[int]] = {v: [] for v in envs}
    for _ in range(runs):
        for version, env in envs.items():
            for name, argv in commands.items():
                began = time.monotonic()
                subprocess.run([py, *argv], env=env, capture_output=True)
                wall[version, name].append(time.monotonic() - began)
            err = subprocess.run(
                [py, "-X", "importtime", "-c", "import keepon_plan.cli"], env=env, capture_output=True, text=True
            ).stderr
            imports[version].append(int(err.strip().splitlines()[-1].split("|")[1]))
    print(f"median of {runs} runs; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| command | before s | after s |\n|---|---:|---:|")
    for name in commands:
        b, a = (statistics.median(wall[v, name]) for v in envs)
        print(f"| `{name}` | {b:.3f} | {a:.3f} |")
    b, a = (statistics.median(imports[v]) / 1e6 for v in envs)
    print(f'| `python -X importtime -c "import keepon_plan.cli"`, cumulative | {b:.3f} | {a:.3f} |')
    return 0


if __name__ == "__main__":
    sys.exit(main())
