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
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from network_support import SMALL, run

from keepon_plan.network.push import summary
from keepon_plan.network.yang_modules import module_dir

HERE = Path(__file__).resolve().parent
NEEDED = ("netconfd", "netconf-subsystem", "sshd", "ssh-keygen", "ip")


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace"),
    pytest.mark.skipif(
        any(_which(n) is None for n in NEEDED),
        reason="needs " + ", ".join(NEEDED) + " (Debian packages netconfd, openssh-server, iproute2)",
    ),
]


def _wait_port(ns: str, port: int, timeout: float = 10.0) -> None:
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 0.5).close()"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (
            subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", probe], capture_output=True).returncode
            == 0
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} in {ns}")


@pytest.fixture
def server(tmp_path):
    ns = f"kp-nc-{os.getpid()}"
    port = 8830
    home = tmp_path / "home"
    (home / ".yuma").mkdir(parents=True)
    sock = tmp_path / "ncx.sock"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "host")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "client")], check=True)
    (tmp_path / "authorized_keys").write_text((tmp_path / "client.pub").read_text())
    host_pub = (tmp_path / "host.pub").read_text().split()
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (tmp_path / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp_path / 'host'}\n"
        f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        f"PidFile {tmp_path / 'sshd.pid'}\n"
        f'Subsystem netconf "{_which("netconf-subsystem")} --ncxserver-sockname={port}@{sock}"\n'
    )
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        yang = module_dir()
        modules = [
            f"--module={m}"
            for m in ("iana-if-type", "ietf-interfaces", "ieee802-dot1q-sched", "ieee802-dot1q-sched-bridge")
        ]
        netconfd = [
            "ip", "netns", "exec", ns, "env", f"HOME={home}", _which("netconfd"), "--no-startup",
            f"--ncxserver-sockname={sock}", f"--port={port}",
            f"--modpath={yang}:{HERE / 'yang'}:/usr/share/yuma/modules", *modules,
            "--module=keepon-netconfd-deviations",  # after the modules it deviates: netconfd applies it then
            "--superuser=root", f"--log={tmp_path / 'netconfd.log'}", "--log-level=info",
        ]  # fmt: skip
        procs.append(subprocess.Popen(netconfd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        end = time.monotonic() + 15
        while not sock.exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert sock.exists(), (tmp_path / "netconfd.log").read_text() if (tmp_path / "netconfd.log").exists() else ""
        sshd = ["ip", "netns", "exec", ns, _which("sshd"), "-D", "-e", "-f", str(tmp_path / "sshd_config")]
        procs.append(subprocess.Popen(sshd, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sshd.log", "w")))
        _wait_port(ns, port)
        yield ns, port, tmp_path
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["ip", "netns", "del", ns], check=False)


def _read_back(ns: str, port: int, tmp) -> str:
    """The server's running interfaces, by a NETCONF session of the test's own (in the namespace)."""
    code = (
        "from ncclient import manager\n"
        f"with manager.connect(host='127.0.0.1', port={port}, username='root', key_filename='{tmp / 'client'}',"
        " hostkey_verify=False, allow_agent=False, look_for_keys=False, timeout=20) as m:\n"
        "    r = m.get_config(source='running', filter=('subtree',"
        " '<interfaces xmlns=\"urn:ietf:params:xml:ns:yang:ietf-interfaces\"/>'))\n"
        "    print(r.data_xml)\n"
    )
    done = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_push_round_trip_against_netconfd(server, tmp_path):
    ns, port, keys = server
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
        got = summary(ET.fromstring(_read_back(ns, port, keys)))
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
