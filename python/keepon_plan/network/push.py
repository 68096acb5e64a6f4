"""``keepon-plan push``: send each device its ``ieee802-dot1q-sched`` configuration over NETCONF, and read it back.

For each ``--target DEVICE=HOST[:PORT]`` the plan's ``yang/DEVICE.xml`` is sent with ncclient over SSH:

1. ``edit-config`` of every port's ``gate-parameter-table`` (``operation="replace"``, without ``config-change``) to
   the candidate datastore when the server offers ``:candidate`` (under a lock, then ``commit``), else to running
   when it offers ``:writable-running``;
2. a second ``edit-config`` (and ``commit``) setting ``config-change`` to true on every port: 802.1Qbv copies the
   administrative values into the operational ones only when all of them are in place;
3. ``get-config`` of running, compared leaf by leaf with the plan: every port's gate list, cycle, base time,
   ``gate-enabled``, ``config-change`` and limits. Any difference is reported naming the device, port and leaf.

Host keys are checked against ``--known-hosts`` (OpenSSH format, ``[host]:port`` entries as ssh writes them) or the
user's ``~/.ssh/known_hosts``.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from ..model import InputError
from .export_yang import NS_IF, NS_SCHED_BRIDGE

NS_NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
_LEAVES = ("gate-enabled", "admin-gate-states", "config-change", "supported-list-max", "supported-interval-max")


def _q(ns: str, name: str) -> str:
    return f"{{{ns}}}{name}"


def _text(el: ET.Element | None, ns: str, path: str) -> str | None:
    if el is None:
        return None
    node = el.find("/".join(_q(ns, p) for p in path.split("/")))
    return None if node is None or node.text is None else node.text.strip()


def summary(root: ET.Element) -> dict[str, dict]:
    """Per interface: the gate parameters that matter, as strings (the same from the plan and from a device)."""
    out = {}
    for itf in root.iter(_q(NS_IF, "interface")):
        name = _text(itf, NS_IF, "name")
        table = itf.find(f".//{_q(NS_SCHED_BRIDGE, 'gate-parameter-table')}")
        if table is None:
            continue
        s = {leaf: _text(table, NS_SCHED_BRIDGE, leaf) for leaf in _LEAVES}
        for c in ("admin-cycle-time", "supported-cycle-max"):
            s[c] = (_text(table, NS_SCHED_BRIDGE, f"{c}/numerator"), _text(table, NS_SCHED_BRIDGE, f"{c}/denominator"))
        s["admin-base-time"] = (
            _text(table, NS_SCHED_BRIDGE, "admin-base-time/seconds"),
            _text(table, NS_SCHED_BRIDGE, "admin-base-time/nanoseconds"),
        )
        entries = []
        for e in table.iter(_q(NS_SCHED_BRIDGE, "gate-control-entry")):
            op = _text(e, NS_SCHED_BRIDGE, "operation-name") or ""
            entries.append(
                (
                    int(_text(e, NS_SCHED_BRIDGE, "index") or -1),
                    op.split(":")[-1],
                    _text(e, NS_SCHED_BRIDGE, "time-interval-value"),
                    _text(e, NS_SCHED_BRIDGE, "gate-states-value"),
                )
            )
        s["admin-control-list"] = sorted(entries)
        out[name] = s
    return out


def differences(device: str, want: dict[str, dict], got: dict[str, dict]) -> list[str]:
    bad = []
    for port, w in want.items():
        g = got.get(port)
        if g is None:
            bad.append(f"{device}: port {port!r}: no gate-parameter-table in the device's running configuration")
            continue
        for leaf, value in w.items():
            if g.get(leaf) != value:
                if leaf == "admin-control-list":
                    bad.append(
                        f"{device}: port {port!r}: admin-control-list differs ({len(g[leaf])} entries read back)"
                    )
                else:
                    bad.append(f"{device}: port {port!r}: {leaf} is {g.get(leaf)!r}, the plan says {value!r}")
    return bad


def edit_documents(xml_text: str) -> tuple[str, str]:
    """(the gate lists without config-change, replacing each port's table; config-change = true on every port)."""
    root = ET.fromstring(xml_text)
    ET.register_namespace("", NS_IF)
    lists = ET.Element(_q(NS_NC, "config"))
    change = ET.Element(_q(NS_NC, "config"))
    lists.append(root)
    change_root = ET.SubElement(change, root.tag)
    for itf in root.iter(_q(NS_IF, "interface")):
        table = itf.find(f".//{_q(NS_SCHED_BRIDGE, 'gate-parameter-table')}")
        if table is None:
            continue
        flag = table.find(_q(NS_SCHED_BRIDGE, "config-change"))
        if flag is not None:
            table.remove(flag)
        table.set(_q(NS_NC, "operation"), "replace")
        c_itf = ET.SubElement(change_root, itf.tag)
        ET.SubElement(c_itf, _q(NS_IF, "name")).text = _text(itf, NS_IF, "name")
        bridge_port = itf.find(f"./{{{'urn:ieee:std:802.1Q:yang:ieee802-dot1q-bridge'}}}bridge-port")
        assert bridge_port is not None
        c_port = ET.SubElement(c_itf, bridge_port.tag)
        c_table = ET.SubElement(c_port, table.tag)
        ET.SubElement(c_table, _q(NS_SCHED_BRIDGE, "config-change")).text = "true"
    return ET.tostring(lists, encoding="unicode"), ET.tostring(change, encoding="unicode")


def _host_key(known_hosts: str | None, host: str, port: int) -> str | None:
    """The base64 host key recorded for ``[host]:port`` (or ``host`` on port 22), or None to let ncclient look."""
    if known_hosts is None:
        return None
    import paramiko

    keys = paramiko.HostKeys(known_hosts)
    for name in (f"[{host}]:{port}", host):
        entry = keys.lookup(name)
        if entry:
            return next(iter(entry.values())).get_base64()
    raise InputError(f"no host key for {host}:{port}", known_hosts)


def push_device(device: str, xml_path: Path, host: str, port: int, args: argparse.Namespace, say) -> list[str]:
    return push_xml(device, xml_path.read_text(encoding="utf-8"), host, port, args, say)


def push_xml(device: str, xml_text: str, host: str, port: int, args, say) -> list[str]:
    """Send one device its ``ieee802-dot1q-sched`` instance data (XML), read it back; the differences, if any.
    ``args``: ``username``, ``key``, ``known_hosts`` and ``timeout`` (as ``push``'s options)."""
    from ncclient import manager
    from ncclient.operations import RPCError

    want = summary(ET.fromstring(xml_text))
    lists, change = edit_documents(xml_text)
    hostkey = _host_key(args.known_hosts, host, port)
    with manager.connect(
        host=host,
        port=port,
        username=args.username,
        key_filename=args.key,
        hostkey_verify=True,
        hostkey_b64=hostkey,
        allow_agent=False,
        look_for_keys=args.key is None,
        timeout=args.timeout,
    ) as m:
        caps = set(m.server_capabilities)
        candidate = any(c.startswith("urn:ietf:params:netconf:capability:candidate:") for c in caps)
        writable = any(c.startswith("urn:ietf:params:netconf:capability:writable-running:") for c in caps)
        if not candidate and not writable:
            return [f"{device}: the server offers neither :candidate nor :writable-running"]
        target = "candidate" if candidate else "running"
        try:
            for what, doc in (("gate lists", lists), ("config-change", change)):
                if candidate:
                    with m.locked("candidate"):
                        m.edit_config(target="candidate", config=doc)
                        m.commit()
                else:
                    m.edit_config(target="running", config=doc)
                say(f"{device}: {what} written to {target}" + (" and committed" if candidate else ""))
        except RPCError as exc:
            errors = getattr(exc, "errors", None) or [exc]
            return [f"{device}: the server refused the configuration: {e.message} at {e.path}" for e in errors]
        reply = m.get_config(source="running", filter=("subtree", f'<interfaces xmlns="{NS_IF}"/>'))
        got = summary(ET.fromstring(reply.data_xml.encode()))
    return differences(device, want, got)


def cmd_push(args: argparse.Namespace) -> int:
    plan = Path(args.plan)
    bad: list[str] = []
    targets = []
    for t in args.target:
        device, sep, where = t.partition("=")
        host, _, port = where.rpartition(":") if ":" in where else (where, "", "830")
        if not sep or not host or not port.isdigit():
            raise InputError(f"--target {t!r}: expected DEVICE=HOST[:PORT]")
        xml_path = plan / "yang" / f"{device}.xml"
        if not xml_path.is_file():
            raise InputError(f"--target {t!r}: the plan has no yang/{device}.xml", str(plan))
        targets.append((device, xml_path, host, int(port)))
    for device, xml_path, host, port in targets:
        try:
            diff = push_device(device, xml_path, host, port, args, _say)
        except (OSError, ET.ParseError) as exc:
            diff = [f"{device}: {exc}"]
        except Exception as exc:  # ncclient's transport errors share no base class beyond Exception
            diff = [f"{device}: NETCONF session failed: {type(exc).__name__}: {exc}"]
        for d in diff:
            _say(f"push failed: {d}")
        if not diff:
            _say(f"{device}: running configuration read back equals the plan")
        bad += diff
    return 1 if bad else 0


def _say(msg: str) -> None:
    print(f"keepon-plan: {msg}", file=sys.stderr, flush=True)


def add_push_parser(sub) -> None:
    p = sub.add_parser("push", help="send each device its ieee802-dot1q-sched configuration over NETCONF, read back")
    p.add_argument("plan", metavar="DIR", help="a plan directory written by keepon-plan network")
    p.add_argument("--target", action="append", required=True, metavar="DEVICE=HOST[:PORT]", help="repeatable")
    p.add_argument("--username", required=True)
    p.add_argument("--key", metavar="FILE", help="SSH private key (default: the user's keys)")
    p.add_argument("--known-hosts", metavar="FILE", help="OpenSSH known_hosts (default: ~/.ssh/known_hosts)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S")
    p.set_defaults(func=cmd_push)
