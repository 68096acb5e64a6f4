"""The published YANG modules the exports are validated against: vendored beside this file, pinned by checksum.

They are copied unchanged from one commit of the YangModels/yang repository (``yang/README.md`` says which, and
under what terms: the IETF modules under the Simplified BSD licence, the IEEE ones under the repository's copyright
release for ``standard/ieee``). :func:`ensure_modules` checks each against its SHA-256 below; to fetch them again
(into ``$KEEPON_YANG_DIR`` if set, else the vendored directory):

    python -m keepon_plan.network.yang_modules --git-dir CLONE/.git   # from a local clone or mirror
    python -m keepon_plan.network.yang_modules                        # from raw.githubusercontent.com
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

COMMIT = "6795d9c680bc77fe706b3be9557d8adf12901dcc"
URL = "https://raw.githubusercontent.com/YangModels/yang/{commit}/{path}"

MODULES = {
    "ieee802-dot1q-sched-bridge.yang": (
        "standard/ieee/published/802.1/ieee802-dot1q-sched-bridge.yang",
        "63bba9b769ac514b2fd5144817eac930d4ff6de456364494a3cf4de5479af4d7",
    ),
    "ieee802-dot1q-sched.yang": (
        "standard/ieee/published/802.1/ieee802-dot1q-sched.yang",
        "ee1434658167e87ce705812628c346c64be22df79c1890a4a0ba4fc893e3ce3f",
    ),
    "ieee802-dot1q-bridge.yang": (
        "standard/ieee/published/802.1/ieee802-dot1q-bridge.yang",
        "8a974aa99688b870ae99efd9554db96f3fa5efc81468659b0fac00f3021cfc48",
    ),
    "ieee802-dot1q-types.yang": (
        "standard/ieee/published/802.1/ieee802-dot1q-types.yang",
        "019af9e03c5ac6e3e91eeb5a8ae76249cfd5f1d9435fb59c1514774a3dbf52d3",
    ),
    "ieee802-types.yang": (
        "standard/ieee/published/802/ieee802-types.yang",
        "c88ae16c9c9b2bd58d781f84de8252c7c866b3c65554aba195befd9c6c28d7de",
    ),
    "ietf-interfaces@2018-02-20.yang": (
        "standard/ietf/RFC/ietf-interfaces@2018-02-20.yang",
        "f6faea9938f0341ed48fda93dba9a69aa32ee7142c463342efec3d38f4eb3621",
    ),
    "ietf-yang-types@2013-07-15.yang": (
        "standard/ietf/RFC/ietf-yang-types@2013-07-15.yang",
        "a04cdcc875764a76e89b7a0200c6b9d800b10713978093acda7840c7c2907c3f",
    ),
    "iana-if-type@2014-05-08.yang": (
        "standard/ietf/RFC/iana-if-type@2014-05-08.yang",
        "e3b33c79dc9090ceb732155dc554e9975d1220a411c184cbe635216d9720820e",
    ),
}

TOP = (
    "ietf-interfaces@2018-02-20.yang",
    "iana-if-type@2014-05-08.yang",
    "ieee802-dot1q-sched.yang",
    "ieee802-dot1q-sched-bridge.yang",
)
"""The modules to load (implemented) for validation; their imports are found in the same directory."""


class ModulesUnavailable(Exception):
    """The modules are neither cached nor fetchable (the message says why)."""


def module_dir() -> Path:
    env = os.environ.get("KEEPON_YANG_DIR")
    return Path(env) if env else Path(__file__).resolve().parent / "yang"


def _good(path: Path, digest: str) -> bool:
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == digest


def ensure_modules(git_dir: str | None = None, timeout: float = 20.0) -> Path:
    """The directory holding every module with its pinned checksum, fetching what is missing."""
    target = module_dir()
    target.mkdir(parents=True, exist_ok=True)
    for name, (path, digest) in MODULES.items():
        dest = target / name
        if _good(dest, digest):
            continue
        try:
            if git_dir:
                data = subprocess.run(
                    ["git", "--git-dir", git_dir, "show", f"{COMMIT}:{path}"], capture_output=True, check=True
                ).stdout
            else:
                with urllib.request.urlopen(URL.format(commit=COMMIT, path=path), timeout=timeout) as resp:
                    data = resp.read()
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ModulesUnavailable(f"cannot fetch {path} of YangModels/yang@{COMMIT[:12]}: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise ModulesUnavailable(f"{path}: checksum mismatch (expected {digest})")
        dest.write_bytes(data)
    return target


def yanglint(files: list[Path], modules: Path) -> tuple[bool, str]:
    """Validate instance files as configuration data with ``yanglint``: (accepted, its messages)."""
    cmd = ["yanglint", "-t", "config", "-p", str(modules), *(str(modules / m) for m in TOP), *map(str, files)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="fetch the YANG modules keepon-plan's exports are validated against")
    p.add_argument("--git-dir", help="a local clone or mirror of YangModels/yang (its .git directory)")
    args = p.parse_args(argv)
    try:
        print(ensure_modules(args.git_dir))
    except ModulesUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
