"""The switches' gate control lists as Linux ``tc taprio`` commands, for Linux bridges acting as the switches.

One script per switch under ``taprio/NAME.sh``: per scheduled port a ``tc qdisc replace ... taprio`` with the
network's base time (CLOCK_TAI ns), the port's cycle and its entries (``sched-entry S <gate mask> <ns>``). Traffic
class ``i`` is gate ``i`` and hardware queue ``i`` (eight classes, one queue each, priority ``p`` to class ``p``),
so the port needs eight TX queues (``ip link add ... numtxqueues 8`` for a veth). Software taprio; add
``flags 0x1`` (txtime-assist) or ``flags 0x2`` (full offload) where the NIC supports it.
"""

from __future__ import annotations

from pathlib import Path

from .gcl import PortGcl
from .topology import Network


def taprio_command(port: str, base_time: int, cycle_ns: int, entries: tuple[tuple[int, int], ...]) -> str:
    lines = [
        f"tc qdisc replace dev {port} parent root handle 100 taprio \\",
        "    num_tc 8 map 0 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0 queues 1@0 1@1 1@2 1@3 1@4 1@5 1@6 1@7 \\",
        f"    base-time {base_time} cycle-time {cycle_ns} \\",
    ]
    lines += [f"    sched-entry S {states:02x} {interval} \\" for states, interval in entries]
    lines.append("    clockid CLOCK_TAI")
    return "\n".join(lines)


def write_taprio(out: Path, net: Network, gcls: list[PortGcl]) -> list[Path]:
    (out / "taprio").mkdir(parents=True, exist_ok=True)
    by_switch: dict[str, list[PortGcl]] = {}
    for g in gcls:
        by_switch.setdefault(g.switch, []).append(g)
    written = []
    for sw, ports in sorted(by_switch.items()):
        text = [
            "#!/bin/sh",
            f"# taprio gate control lists of switch {sw} (Linux bridge), written by keepon-plan network.",
            f"# base-time = the network's base_time {net.base_time} (TAI ns): every port's cycle starts there.",
            "set -e",
        ]
        for g in ports:
            text += ["", f"# port {g.port} towards {g.neighbour}: cycle {g.cycle_ns} ns, {len(g.entries)} entries"]
            text.append(taprio_command(g.port, net.base_time, g.cycle_ns, g.entries))
        path = out / "taprio" / f"{sw}.sh"
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
        path.chmod(0o755)
        written.append(path)
    return written
