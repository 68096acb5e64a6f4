"""A real NETCONF server for tests: Debian's netconfd (yuma123) with the IEEE scheduling modules, behind an OpenSSH
server on 127.0.0.1 of a network namespace the test made.

netconfd is loaded with the vendored ieee802-dot1q-sched-bridge and its imports, plus
tests/yang/keepon-netconfd-deviations.yang (which works around netconfd's evaluation of one must statement: see that
module); sshd's ``netconf`` subsystem is netconfd's ``netconf-subsystem``. Keys are made for the test: the client
logs in as root with ``DIR/client``, and ``DIR/known_hosts`` holds the server's host key. Needs root, netconfd, sshd
and ssh-keygen (Debian: netconfd, openssh-server); :data:`MISSING` says which are not installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from keepon_plan.network.yang_modules import module_dir

HERE = Path(__file__).resolve().parent
NEEDED = ("netconfd", "netconf-subsystem", "sshd", "ssh-keygen", "ip")


def which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


MISSING = [n for n in NEEDED if which(n) is None]
"""The programs the server needs that this host lacks."""


def wait_port(ns: str, port: int, timeout: float = 10.0) -> None:
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


@dataclass(frozen=True)
class Server:
    ns: str
    port: int
    key: Path
    """The client's private key (user root)."""
    known_hosts: Path


@contextlib.contextmanager
def netconf_server(ns: str, tmp: Path, port: int = 8830) -> Iterator[Server]:
    """netconfd and sshd in the existing namespace ``ns`` (its loopback up), files under ``tmp``; both stopped by
    their PIDs when the block ends."""
    home = tmp / "home"
    (home / ".yuma").mkdir(parents=True)
    sock = tmp / "ncx.sock"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "host")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "client")], check=True)
    (tmp / "authorized_keys").write_text((tmp / "client.pub").read_text())
    host_pub = (tmp / "host.pub").read_text().split()
    (tmp / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (tmp / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp / 'host'}\n"
        f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        f"PidFile {tmp / 'sshd.pid'}\n"
        f'Subsystem netconf "{which("netconf-subsystem")} --ncxserver-sockname={port}@{sock}"\n'
    )
    os.makedirs("/run/sshd", exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        yang = module_dir()
        modules = [
            f"--module={m}"
            for m in ("iana-if-type", "ietf-interfaces", "ieee802-dot1q-sched", "ieee802-dot1q-sched-bridge")
        ]
        netconfd = [
            "ip", "netns", "exec", ns, "env", f"HOME={home}", which("netconfd"), "--no-startup",
            f"--ncxserver-sockname={sock}", f"--port={port}",
            f"--modpath={yang}:{HERE / 'yang'}:/usr/share/yuma/modules", *modules,
            "--module=keepon-netconfd-deviations",  # after the modules it deviates: netconfd applies it then
            "--superuser=root", f"--log={tmp / 'netconfd.log'}", "--log-level=info",
        ]  # fmt: skip
        procs.append(subprocess.Popen(netconfd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        end = time.monotonic() + 15
        while not sock.exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert sock.exists(), (tmp / "netconfd.log").read_text() if (tmp / "netconfd.log").exists() else ""
        sshd = ["ip", "netns", "exec", ns, which("sshd"), "-D", "-e", "-f", str(tmp / "sshd_config")]
        with open(tmp / "sshd.log", "w") as log:
            procs.append(subprocess.Popen(sshd, stdout=subprocess.DEVNULL, stderr=log))
        wait_port(ns, port)
        yield Server(ns, port, tmp / "client", tmp / "known_hosts")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def read_back(server: Server) -> str:
    """The server's running interfaces (XML), by a NETCONF session of the test's own (in the namespace)."""
    code = (
        "from ncclient import manager\n"
        f"with manager.connect(host='127.0.0.1', port={server.port}, username='root', key_filename='{server.key}',"
        " hostkey_verify=False, allow_agent=False, look_for_keys=False, timeout=20) as m:\n"
        "    r = m.get_config(source='running', filter=('subtree',"
        " '<interfaces xmlns=\"urn:ietf:params:xml:ns:yang:ietf-interfaces\"/>'))\n"
        "    print(r.data_xml)\n"
    )
    done = subprocess.run(
        ["ip", "netns", "exec", server.ns, sys.executable, "-c", code], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
