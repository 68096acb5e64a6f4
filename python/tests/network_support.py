"""Shared helpers of the network planner tests: small descriptions as text, and running the command."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from keepon_plan.cli import main

SMALL = Path(__file__).resolve().parents[1] / "examples" / "network" / "small.toml"


def run(*argv: str) -> tuple[int, str]:
    """Run ``keepon-plan ARGV``: (exit status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def write(tmp_path: Path, text: str, name: str = "net.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def line_network(
    streams: str, switches: int = 1, talkers: int = 2, rate: str = "1Gbps", sw_rate: str | None = None
) -> str:
    """Talkers t1.. on the first switch, listener l1 on the last, switches sw1.. in a line."""
    out = ["version = 1"]
    out += [f'[[station]]\nname = "t{i}"' for i in range(1, talkers + 1)]
    out += ['[[station]]\nname = "l1"']
    out += [f'[[switch]]\nname = "sw{i}"\nforwarding_delay = "1us"' for i in range(1, switches + 1)]
    out += [f'[[link]]\na = "t{i}"\nb = "sw1"\nrate = "{rate}"' for i in range(1, talkers + 1)]
    out += [
        f'[[link]]\na = "sw{i}"\nb = "sw{i + 1}"\nrate = "{sw_rate or rate}"\ndelay = "100ns"'
        for i in range(1, switches)
    ]
    out += [f'[[link]]\na = "sw{switches}"\nb = "l1"\nrate = "{sw_rate or rate}"']
    return "\n".join(out) + "\n" + streams
