"""Does ``keepon-plan solve --time-limit T`` end within ``T``? Another version of the package (``BEFORE``) against
this one, side by side.

    mkdir -p /tmp/before && git archive 1a4784d python | tar -x -C /tmp/before
    python/.venv/bin/python python/tools/time_limit_compare.py /tmp/before/python 5 3,10

For each limit and flow set, runs ``solve`` ``N`` times per version (interleaved, so both see the same machine
load) as a user does, in a new process, and records the wall time from before the process starts to after it is
reaped, and the exit status. Prints, per row, the largest wall time and the largest overrun (wall − T; negative:
it ended that much before the limit) as a Markdown table, and the raw times. ``BEFORE`` is put on ``PYTHONPATH``,
which takes precedence over the editable install of this worktree.

Flow sets: ``undecided`` is the generator's non-harmonic 85 % set 22 (no stage decides it within a minute: the
command ends with "unknown" once synthesis has used its time, so this is the case that shows the overrun);
``coprime`` is the 288 288-slot horizon of ``tests/test_time_limit.py`` (a plan, exported and verified).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

from test_time_limit import COPRIME  # noqa: E402

from keepon_plan.gen import flowset_text  # noqa: E402


def main() -> int:
    before, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
    limits = [float(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "3,10").split(",")]
    py = sys.executable
    envs = {"before": dict(os.environ, PYTHONPATH=before), "after": dict(os.environ, PYTHONPATH=str(HERE))}
    tmp = Path(tempfile.mkdtemp())
    sets = {"undecided": flowset_text("nonharmonic", 85, 22), "coprime": COPRIME}
    for name, text in sets.items():
        (tmp / f"{name}.toml").write_text(text)
    wall: dict[tuple[str, str, float], list[tuple[float, int]]] = {}
    for _ in range(runs):
        for limit in limits:
            for name in sets:
                for version, env in envs.items():
                    argv = ["solve", str(tmp / f"{name}.toml"), "--out", str(tmp / "plan.toml"), "--time-limit"]
                    began = time.monotonic()
                    done = subprocess.run(
                        [py, "-m", "keepon_plan.cli", *argv, f"{limit:g}"], env=env, capture_output=True
                    )
                    wall.setdefault((version, name, limit), []).append((time.monotonic() - began, done.returncode))
    print(f"{runs} runs each; load average {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} cores\n")
    print(
        "| flow set | --time-limit s | exit | before max wall s | before max overrun s | after max wall s "
        "| after max overrun s |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for limit in limits:
        for name in sets:
            b, a = wall["before", name, limit], wall["after", name, limit]
            codes = "/".join(sorted({str(c) for _, c in b + a}))
            wb, wa = max(w for w, _ in b), max(w for w, _ in a)
            print(f"| {name} | {limit:g} | {codes} | {wb:.2f} | {wb - limit:+.2f} | {wa:.2f} | {wa - limit:+.2f} |")
    print("\nraw wall times (s, exit):")
    for key, values in wall.items():
        print(" ", *key, [f"{w:.2f}/{c}" for w, c in values])
    return 0


if __name__ == "__main__":
    sys.exit(main())
