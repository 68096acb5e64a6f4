"""keepon-plan push against a real NETCONF server: Debian's netconfd with the IEEE modules, over SSH, in a netns.

The test starts, inside a network namespace of its own, netconfd (yuma123) loaded with the vendored
ieee802-dot1q-sched-bridge and its imports (plus tests/yang/keepon-netconfd-deviations.yang, which works around
netconfd's evaluation of one must statement: see that module), and an OpenSSH server on 127.0.0.1 whose
``netconf`` subsystem is netconfd's ``netconf-subsystem``; keys are made for the test. ``keepon-plan push`` then
runs in the namespace; the test reads the server's running configuration back with its own NETCONF session and
compares it with the plan. Needs root (namespaces), netconfd, sshd and ssh-keygen (Debian: netconfd,
openssh-server); skips otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from netconf_support import MISSING, NEEDED, netconf_server, read_back
from network_support import SMALL, run

from keepon_plan.network.push import summary

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace"),
    pytest.mark.skipif(
        bool(MISSING), reason="needs " + ", ".join(NEEDED) + " (Debian packages netconfd, openssh-server, iproute2)"
    ),
]


@pytest.fixture
def server(tmp_path):
    ns = f"kp-nc-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        with netconf_server(ns, tmp_path) as srv:
            yield srv
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_push_round_trip_against_netconfd(server, tmp_path):
    ns, port, keys = server.ns, server.port, server.key.parent
    plan = tmp_path / "plan"
    code, err = run("network", str(SMALL), "--out", str(plan))
    assert code == 0, err

    def push(device: str, known_hosts: str) -> subprocess.CompletedProcess:
        cmd = [
            "ip", "netns", "exec", ns, sys.executable, "-m", "keepon_plan.cli", "push", str(plan),
            "--target", f"{device}=127.0.0.1:{port}", "--username", "root", "--key", str(keys / "client"),
            "--known-hosts", known_hosts,
        ]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, cwd=str(SMALL.parents[2]))

    # sw1 and sw2 share the one server here (both have a port swp3): push one, compare, then the other
    for device in ("sw1", "sw2"):
        done = push(device, str(keys / "known_hosts"))
        assert done.returncode == 0, done.stderr
        assert f"{device}: running configuration read back equals the plan" in done.stderr
        # netconfd offers :candidate (its default target): both edits go there, each under a lock, then commit
        assert f"{device}: gate lists written to candidate and committed" in done.stderr
        assert f"{device}: config-change written to candidate and committed" in done.stderr
        got = summary(ET.fromstring(read_back(server)))
        want = summary(ET.fromstring((plan / "yang" / f"{device}.xml").read_text()))
        assert want
        for itf, table in want.items():
            assert got[itf] == table, itf
            assert table["config-change"] == "true"
    # a host key other than the server's is refused, and nothing is sent
    (keys / "other").write_text(f"[127.0.0.1]:{port} ssh-ed25519 {_other_key(keys)}\n")
    done = push("sw1", str(keys / "other"))
    assert done.returncode == 1 and "push failed: sw1" in done.stderr


def _other_key(tmp) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "stranger")], check=True)
    return (tmp / "stranger.pub").read_text().split()[1]
