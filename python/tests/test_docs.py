"""The docs do not go stale: every command in README.md and docs/*.md is run here or names the test that runs it.

A command is a line of a ```sh block (backslash continuations joined, comments dropped) or an inline code span that
starts with a program (`keepon …`, `cargo …`, `make …`, `tc …`). Each is accounted for in one of four ways, tried in
this order:

- :data:`COVERAGE` names it exactly: :class:`Run` runs it here (on the simulated NIC, in a scratch directory, or in
  a network namespace with a veth this test creates — skipped without root), :class:`Covered` names the test or
  Makefile target that runs it (which must exist and contain the command's key parts), :class:`NotRun` says why
  nothing can run it (a measurement of minutes, a nightly toolchain, a change to the host's users) and checks what
  it needs exists;
- `cargo test -p PKG --test T [FILTER] …`: `make test` runs `cargo test --workspace`, which runs T; the package, the
  test target and every filter word must exist;
- `keepon …` and `keepon-plan …` synopses (with placeholders such as FILE or `[--json]`) and inline mentions:
  `--help` of that subcommand must succeed and name every flag the docs use;
- printed output quoted in the text (`keepon daemon: …`) and a tool's bare name are not commands.

A command none of these accounts for fails :func:`test_every_command_is_accounted_for`; an entry of
:data:`COVERAGE` that no page uses any more fails too. The ```python and ```c examples of docs/clients.md are run
against a simulated daemon and compiled; every relative link must lead to a file, and an anchor to a heading of it;
every message the service page explains must still be in the source.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from daemon_support import REPO, eth_frame, keepon_binary, start_daemon

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: Fenced block languages: `sh` holds commands; the others are configuration, code examples or printed output.
LANGUAGES = {"sh", "toml", "python", "c", "text"}
#: Programs whose inline code spans are commands.
PROGRAMS = {
    "keepon",
    "keepon-plan",
    "cargo",
    "make",
    "sudo",
    "python",
    "tc",
    "ethtool",
    "ip",
    "bridge",
    "systemctl",
    "chrt",
    "tests/qemu/build.sh",
    "tests/qemu/run.sh",
}
#: Seconds any one command may take here.
TIMEOUT = 120


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    text: str  # whitespace-normalised
    block: bool  # from a ```sh block (else an inline code span)

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


# --- Reading the pages ---------------------------------------------------------------------------------------------

FENCE = re.compile(r"^\s*```(.*)$")


def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """(language, line of the first body line, body lines) of every fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start, body = m.group(1).strip(), i + 2, []
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        yield lang, start, body


def prose(text: str) -> str:
    """The page with every fenced block blanked, line for line."""
    out, inside = [], False
    for line in text.split("\n"):
        fence = FENCE.match(line) is not None
        out.append(line if not (inside or fence) else "")
        if fence:
            inside = not inside
    return "\n".join(out)


def code_spans(text: str) -> Iterator[tuple[int, str]]:
    """(offset, content) of every inline code span: a run of n backticks up to the next run of exactly n."""
    i = 0
    while (i := text.find("`", i)) >= 0:
        n = len(text[i:]) - len(text[i:].lstrip("`"))
        j = i + n
        while True:
            j = text.find("`" * n, j)
            if j < 0:
                return
            run = len(text[j:]) - len(text[j:].lstrip("`"))
            if run == n:
                break
            j += run
        yield i, text[i + n : j].strip()
        i = j + n


def strip_comment(line: str) -> str:
    """The line without a shell comment (a `#` at the start or after a space, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def program(text: str) -> str:
    """The program a command runs: its first word after environment assignments."""
    words = text.split()
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words.pop(0)
    return words[0] if words else ""


def commands() -> list[Command]:
    found = []
    for page in DOCS:
        text = page.read_text()
        for lang, start, body in fenced_blocks(text):
            if lang != "sh":
                continue
            pending, first = "", start
            for k, raw in enumerate(body):
                line = strip_comment(raw).rstrip()
                if not pending:
                    first = start + k
                if line.endswith("\\"):
                    pending += line[:-1] + " "
                    continue
                cmd = " ".join((pending + line).split())
                pending = ""
                if cmd:
                    found.append(Command(page, first, cmd, True))
        blanked = prose(text)
        for offset, span in code_spans(blanked):
            cmd = " ".join(span.split())
            if program(cmd) in PROGRAMS:
                found.append(Command(page, blanked.count("\n", 0, offset) + 1, cmd, False))
    return found


# Commands several entries of COVERAGE use, and the errors that only say a kernel or a link lacks a feature.
END_TO_END = (
    "keepon-plan solve python/examples/station.toml --out out/station.toml",
    "keepon run --config out/station.toml --records out/station.csv --pcap out/station.pcap",
    "keepon report out/station.csv",
)
PLOTS_SYNC = "python -m keepon_plan.plots_sync out/a9"
SYNC_SIM = "cargo run --release -p keepon-ptp --bin keepon-sync-sim -- --out out/a9"
NOT_ETF = r"qdisc kind is unknown|Operation not supported"
NOT_ON_VETH = r"Operation not supported|Could not change any device features"
MEASUREMENT = "a measurement of minutes, not a check; built by `cargo clippy --all-targets` in `make lint`"


# --- Ways a command is accounted for -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Run here: `how(command text)` runs it (or its scaled-down or relocated form) and checks the result."""

    how: Callable[[str], None]


@dataclass(frozen=True)
class Covered:
    """Run by a named test (or Makefile target a test or `make test` runs): the file must contain every part."""

    path: str
    parts: tuple[str, ...]

    def check(self) -> None:
        f = REPO / self.path
        assert f.is_file(), f"{self.path} does not exist"
        text = f.read_text()
        missing = [p for p in self.parts if p not in text]
        assert not missing, f"{self.path} no longer contains {missing}"


@dataclass(frozen=True)
class NotRun:
    """Nothing here can run it; `why` says so, and every path in `needs` must exist."""

    why: str
    needs: tuple[str, ...] = ()

    def check(self) -> None:
        missing = [p for p in self.needs if not (REPO / p).exists()]
        assert not missing, f"{missing} do not exist"


def keepon() -> Path:
    exe = keepon_binary()
    if exe is None:
        pytest.skip("keepon binary not built (make build, or cargo build --release -p keepon)")
    return exe


def keepon_plan() -> Path:
    exe = Path(sys.executable).parent / "keepon-plan"
    if not exe.is_file():
        found = shutil.which("keepon-plan")
        if not found:
            pytest.skip("keepon-plan not installed (make py-env)")
        exe = Path(found)
    return exe


def run(argv: list[str], cwd: Path | None = None, ok: bool = True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    if ok:
        assert p.returncode == 0, f"{shlex.join(argv)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def resolve(argv: list[str]) -> list[str]:
    """`keepon` and `keepon-plan` as built and installed here."""
    exe = {"keepon": keepon, "keepon-plan": keepon_plan}
    return [str(exe[a]()) if a in exe else a for a in argv]


def scratch() -> Path:
    """A scratch directory laid out like the repository (examples/, python/, target/ linked; out/ empty)."""
    d = Path(tempfile.mkdtemp(prefix="keepon-docs-"))
    for name in ("examples", "python", "target", "crates"):
        (d / name).symlink_to(REPO / name)
    (d / "out").mkdir()
    return d


# Runs.


def run_in_scratch(check: Callable[[str], None] | None = None) -> Callable[[str], None]:
    """Run the command as written, in a scratch copy of the repository's layout; `check` reads its stdout."""

    def how(text: str) -> None:
        d = scratch()
        try:
            p = run(resolve(shlex.split(text)), cwd=d)
            if check:
                check(p.stdout)
        finally:
            shutil.rmtree(d)

    return how


def run_make_run(_: str) -> None:
    """`make run`: the keepon lines `make -n run` prints (its build step is `make test`'s own prerequisite)."""
    lines = run(["make", "-n", "-C", str(REPO), "run"]).stdout.splitlines()
    steps = [shlex.split(line) for line in lines if line.strip() and not line.startswith(("make", "cargo"))]
    assert any(s[0].endswith("/keepon") for s in steps), lines
    d = scratch()
    try:
        out = ""
        for s in steps:
            out += run([str(keepon()), *s[1:]] if s[0].endswith("/keepon") else s, cwd=d).stdout
        # What the Quick start says `make run` shows.
        assert re.search(r"received all 320000 ns apart", out), out
        assert re.search(r"received all 160000 ns apart", out), out
        m = re.search(r"timing: (\d+)/(\d+) sent frames left at exactly their EPHC slot time", out)
        assert m and m.group(1) == m.group(2), out
        m = re.search(r"schedule: (\d+)/(\d+) real-time frames at the start of the slot that holds their txtime", out)
        assert m and m.group(1) == m.group(2), out
        assert (d / "out" / "example2.csv").is_file() and (d / "out" / "example2.pcap").is_file()
    finally:
        shutil.rmtree(d)


@functools.cache
def run_end_to_end(_: str = "") -> None:
    """The README's example end to end: each of its three commands in order, in one scratch directory (once)."""
    d = scratch()
    try:
        for cmd in END_TO_END:
            p = run(resolve(shlex.split(cmd)), cwd=d)
            if cmd.startswith("keepon run"):
                m = re.search(r"frames: (\d+) submitted, (\d+) sent, 0 rejected", p.stdout)
                assert m and m.group(1) == m.group(2), p.stdout
            if cmd.startswith("keepon report"):
                assert "axis-1" in p.stdout, p.stdout
        assert (d / "out" / "station.gcl").is_file()
    finally:
        shutil.rmtree(d)


def run_with_daemon(text: str) -> None:
    """A `keepon status` command against a daemon on the simulated NIC, its socket in place of the docs' path."""
    tmp = Path(tempfile.mkdtemp(prefix="keepon-docs-"))
    d = start_daemon(tmp, max_seconds=30)
    try:
        argv = resolve(shlex.split(text))
        argv[argv.index("--socket") + 1] = str(d.socket)
        out = run(argv).stdout
        if "--json" in argv:
            status = json.loads(out)
            assert status["link"]["ring"] == 32 and [c["name"] for c in status["classes"]] == ["tc-0", "tc-1", "tc-2"]
        else:
            # Line for line the sample docs/service.md shows, but for the numbers and what the host granted.
            (sample,) = [b for lang, _, b in fenced_blocks((REPO / "docs/service.md").read_text()) if lang == "text"]

            def shape(lines: list[str], socket: str) -> list[str]:
                lines = [re.sub(r"\d+", "N", line.replace(socket, "SOCKET")) for line in lines]
                # The longest iteration's phases and units vary from run to run.
                lines = [re.sub(r"longest iteration .*, N longer", "longest iteration T, N longer", x) for x in lines]
                return [line for line in lines if not line.lstrip().startswith("host:")]

            assert shape(out.splitlines(), str(d.socket)) == shape(sample, "/run/keepon/eth1.sock"), out
    finally:
        d.stop()
        shutil.rmtree(tmp)


def run_fails_at_once(text: str) -> None:
    """A command the docs say fails at once: it must fail, and quickly."""
    started = time.monotonic()
    p = run(resolve(shlex.split(text)), ok=False)
    assert p.returncode != 0, p.stdout
    assert time.monotonic() - started < 10


@functools.cache
def run_sync_sim(text: str = SYNC_SIM) -> None:
    """`keepon-sync-sim --out out/a9` (60 rounds, not 3000), then the plot command on what it wrote."""
    built = [p for p in (REPO / "target" / d / "keepon-sync-sim" for d in ("release", "debug")) if p.is_file()]
    exe = max(built, key=lambda p: p.stat().st_mtime, default=None)  # the newer build
    if exe is None:
        pytest.skip("keepon-sync-sim not built (cargo build -p keepon-ptp)")
    d = scratch()
    try:
        args = shlex.split(text.split(" -- ", 1)[1])
        run([str(exe), *args, "--rounds", "60"], cwd=d)
        plot = shlex.split(PLOTS_SYNC)
        run([sys.executable, *plot[1:]], cwd=d, env={**os.environ, "PYTHONPATH": str(REPO / "python")})
        assert list((d / "out" / "a9").glob("*.png")), "no plot written"
    finally:
        shutil.rmtree(d)


def in_netns(accept: str = "") -> Callable[[str], None]:
    """Run the shell command in a network namespace whose eth1 and eth2 are a veth pair; `accept` is a pattern of
    errors that only say this kernel or this link lacks the feature (the syntax was accepted)."""

    def how(text: str) -> None:
        if os.geteuid() != 0 or not shutil.which("ip"):
            pytest.skip("needs root and ip (a network namespace)")
        tool = program(text)
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed")
        ns = f"kpdoc{os.getpid()}"
        run(["ip", "netns", "add", ns])
        try:
            run(["ip", "-n", ns, "link", "add", "eth1", "type", "veth", "peer", "name", "eth2"])
            for dev in ("eth1", "eth2"):
                run(["ip", "-n", ns, "link", "set", dev, "up"])
            p = run(["ip", "netns", "exec", ns, "sh", "-c", text], ok=False)
            said = p.stdout + p.stderr
            assert p.returncode == 0 or (accept and re.search(accept, said)), f"{text}: exit {p.returncode}\n{said}"
        finally:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

    return how


def in_fake_root(text: str) -> None:
    """An install step with its absolute destinations under a scratch root (nothing on the host changes)."""
    d = scratch()
    try:
        rooted = re.sub(r"(?<=[\s>])/(?=(etc|usr)/)", f"{d}/root/", text)
        for dest in re.findall(rf"{re.escape(str(d))}/root/\S+", rooted):
            Path(dest if dest.endswith("/") else Path(dest).parent).mkdir(parents=True, exist_ok=True)
        run(["sh", "-c", rooted], cwd=REPO)
        env_file = d / "root" / "etc" / "keepon" / "eth1.env"
        if env_file.exists():
            # The unit's flags are flags `keepon daemon` knows.
            args = shlex.split(shlex.split(env_file.read_text())[0].split("=", 1)[1])
            flags = run([str(keepon()), "daemon", "--help"]).stdout
            assert all(a in flags for a in args if a.startswith("--")), args
    finally:
        shutil.rmtree(d)


# --- The commands, one by one --------------------------------------------------------------------------------------


COVERAGE: dict[str, Run | Covered | NotRun] = {
    # README.md
    "make run": Run(run_make_run),
    "make test": Covered("Makefile", ("test: lint rust-test py-test", 'pytest -q -m "not slow" python/tests')),
    "make test-all": Covered(
        "Makefile", ("test-all: lint rust-test-all py-test-all", "test --workspace --all-features")
    ),
    **{c: Run(lambda _: run_end_to_end()) for c in END_TO_END},
    "keepon table3": Run(run_in_scratch(lambda out: "batch" in out or pytest.fail(out))),
    "keepon --help": Run(run_in_scratch(lambda out: "insertion window" in out or pytest.fail(out))),
    "keepon status --json": Run(lambda _: run_with_daemon("keepon status --socket S --json")),
    "make qemu-test": Covered("Makefile", ("qemu-test:", "--test qemu_etf")),
    # docs/service.md
    "cargo build --release -p keepon": Covered("Makefile", ("build:", "$(CARGO) build --release -p keepon")),
    "install -m 0755 target/release/keepon /usr/local/bin/keepon": Run(in_fake_root),
    "install -m 0644 dist/keepon@.service /etc/systemd/system/": Run(in_fake_root),
    "install -D -m 0644 dist/keepon-net-admin.conf /etc/systemd/system/keepon@eth1.service.d/net-admin.conf": Run(
        in_fake_root
    ),
    "systemctl daemon-reload && systemctl restart keepon@eth1": Covered(
        "crates/keepon/tests/service.rs", ("keepon-net-admin.conf", "verify", "CAP_NET_ADMIN")
    ),
    "mkdir -p /etc/keepon": Run(in_fake_root),
    "echo 'KEEPON_ARGS=\"--backend afpacket --iface eth1 --filler bad-fcs\"' > /etc/keepon/eth1.env": Run(
        lambda t: in_fake_root("mkdir -p /etc/keepon && " + t)
    ),
    "cp site.toml /etc/keepon/eth1.toml": Covered(
        "crates/keepon/tests/service.rs", ("EnvironmentFile", "daemon_config", "ExecStart")
    ),
    "useradd --system --no-create-home --shell /usr/sbin/nologin keepon": NotRun(
        "adds a user to the host; crates/keepon/tests/service.rs runs the unit's ExecStart as nobody instead",
        ("crates/keepon/tests/service.rs",),
    ),
    "usermod -aG keepon alice": NotRun("changes a user of the host; the socket's mode is tested by daemon.rs"),
    "systemctl daemon-reload": Covered("crates/keepon/tests/service.rs", ("systemd-analyze", "verify")),
    "systemctl enable --now keepon@eth1": Covered("crates/keepon/tests/service.rs", ("ExecStart", "User", "%i")),
    "systemctl stop": Covered("crates/keepon/tests/service.rs", ("SIGTERM",)),
    "keepon status --socket /run/keepon/eth1.sock": Run(run_with_daemon),
    "keepon status --socket /run/keepon/eth1.sock --json": Run(run_with_daemon),
    "keepon schedule apply --socket /run/keepon/eth1.sock new.toml": Covered(
        "crates/keepon/tests/schedule.rs", ('"schedule"', '"apply"', '"--socket"', "new.toml")
    ),
    "keepon schedule apply --socket /run/keepon/eth1.sock --port to-sw1 plan/yang/t1.json": Covered(
        "crates/keepon/src/schedule.rs", ("gate-parameter-table", "fn from_yang", "--port", "to-sw1")
    ),
    # docs/real-interfaces.md
    "tc qdisc replace dev eth1 root etf clockid CLOCK_TAI delta 500000": Run(in_netns(NOT_ETF)),
    "tc qdisc replace dev eth1 root etf clockid CLOCK_TAI delta 200000 offload": Run(in_netns(NOT_ETF)),
    "keepon run --config site.toml --backend etf --iface eth1 --records etf.csv": Covered(
        "tests/qemu/etf_guest.sh", ("keepon run --config /etf.toml --backend etf --iface eth0", "--records")
    ),
    "ethtool -A eth1 rx off tx off autoneg off": Run(in_netns(NOT_ON_VETH)),
    "ethtool --set-eee eth1 eee off": Run(in_netns(NOT_ON_VETH)),
    "ethtool eth1 | grep Speed": Run(in_netns()),
    "ethtool -K eth1 rx-all on rx-fcs on": Run(in_netns(NOT_ON_VETH)),
    "chrt -f 50 keepon daemon …": Covered("crates/keepon/tests/netns_ptp_listen.rs", ("chrt", "daemon")),
    "keepon daemon --config site.toml --backend afpacket --iface eth1 --filler bad-fcs": Covered(
        "crates/keepon/tests/netns_cli.rs", ('"daemon"', '"--backend"', '"afpacket"', '"--iface"', '"--filler"')
    ),
    "keepon status --socket /run/keepon.sock": Run(run_with_daemon),
    "keepon talk --socket /run/keepon.sock --config site.toml --records T.csv": Covered(
        "crates/keepon/tests/netns_cli.rs", ('"talk"', '"--socket"', '"--config"', '"--records"')
    ),
    "keepon listen --iface eth2 --config site.toml --records L.csv --duration 30s": Covered(
        "crates/keepon/tests/netns_cli.rs", ('"listen"', '"--iface"', '"--records"', '"--duration"')
    ),
    "keepon report L.csv": Covered("crates/keepon/tests/netns_cli.rs", ('"report"',)),
    # docs/frer.md
    **{
        f"keepon run --config frer.toml --backend afpacket --iface {i} --pacing host": Covered(
            "crates/keepon/tests/netns_frer.rs", ('"run"', '"--backend"', '"afpacket"', '"--iface"', '"--pacing"')
        )
        for i in ("eth1", "eth2")
    },
    "keepon listen --iface eth3 --iface eth4 --config frer.toml --records L.csv --frer-history 32": Covered(
        "crates/keepon/tests/netns_frer.rs", ('"listen"', '"--iface", "kp1", "--iface", "kp3"', '"--frer-history"')
    ),
    "keepon run --config frer.toml --pcap frer.pcap": Covered("crates/keepon/tests/frer.rs", ('"run"', '"--pcap"')),
    "tshark -r frer.pcap -Y ieee8021cb -T fields -e ieee8021cb.seq": Covered(
        "crates/keepon/tests/frer.rs", ('"tshark"', '"ieee8021cb"', '"ieee8021cb.seq"', '"-T", "fields"')
    ),
    "sudo cargo run --release -p keepon-nic --example txbench -- 11 0.3": NotRun(
        MEASUREMENT, ("crates/nic/examples/txbench.rs",)
    ),
    # docs/clients.md
    'KEEPON_IFACE=eth1 KEEPON_SOCKET=/run/keepon.sock KEEPON_PRIO_CLASS="3=tc-0,2=tc-1,*=tc-2" '
    "LD_PRELOAD=target/c/libkeepon_txtime.so ./my-etf-program": Covered(
        "crates/keepon/tests/txtime_preload.rs",
        ('"KEEPON_IFACE"', '"KEEPON_SOCKET"', '"KEEPON_PRIO_CLASS"', '"LD_PRELOAD"', "libkeepon_txtime.so"),
    ),
    "make c-client": Covered("python/tests/test_c_client.py", ('"c-client"',)),
    "make txtime-preload": Covered("crates/keepon/tests/txtime_preload.rs", ('"txtime-preload"',)),
    "ip neigh add … nud permanent": Covered("crates/keepon/tests/txtime_preload.rs", ('"neigh"', '"permanent"')),
    # docs/guarantees.md
    "cargo install cargo-fuzz --version 0.12.0 --locked": NotRun(
        "installs a tool for the nightly toolchain; crates/keepon/tests/fuzz_corpus.rs replays every corpus input",
        ("fuzz/Cargo.toml", "crates/keepon/tests/fuzz_corpus.rs"),
    ),
    "cd fuzz && cargo +nightly fuzz run -O protocol -- -max_total_time=150": NotRun(
        "needs a nightly toolchain and minutes; crates/keepon/tests/fuzz_corpus.rs runs the targets' checks on "
        "every corpus input",
        ("fuzz/fuzz_targets/protocol.rs", "fuzz/corpus/protocol"),
    ),
    "cargo fuzz": NotRun("a tool's name", ("fuzz/Cargo.toml",)),
    "cargo fuzz cmin": NotRun("corpus maintenance, nightly", ("fuzz/corpus",)),
    "cargo test": Covered("Makefile", ("$(CARGO) test --workspace",)),
    "make soak": NotRun("a measurement of a 10^8-slot run (37 s and more)", ("crates/keepon/benches/soak/soak.toml",)),
    "keepon report /dev/zero": Run(run_fails_at_once),
    # docs/measured.md
    "keepon run --config examples/underrun.toml": Run(
        run_in_scratch(lambda out: re.search(r"underruns [1-9]", out) or pytest.fail(out))
    ),
    "make eval": Covered("crates/eval/tests/provenance.rs", ("EXPERIMENTS",)),
    # The example is compiled (and linted) by `make lint`'s clippy over every target.
    "cargo build --release -p keepon-core --example pace": Covered("Makefile", ("clippy --workspace --all-targets",)),
    "valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/pace 1 1000 1230 200000": NotRun(
        MEASUREMENT, ("crates/core/examples/pace.rs",)
    ),
    "make bench": NotRun(MEASUREMENT, ("crates/keepon/benches/core.rs", "crates/keepon/benches/daemon_idle.rs")),
    "cargo bench -p keepon --bench core": NotRun(MEASUREMENT, ("crates/keepon/benches/core.rs",)),
    "cargo bench -p keepon --bench daemon_idle": NotRun(MEASUREMENT, ("crates/keepon/benches/daemon_idle.rs",)),
    "KEEPON_COMPARE=/path/to/61a90c5/keepon cargo bench -p keepon --bench daemon_cost": NotRun(
        MEASUREMENT, ("crates/keepon/benches/daemon_cost.rs",)
    ),
    "cargo bench -p keepon --bench core --no-run": NotRun(MEASUREMENT, ("crates/keepon/benches/core.rs",)),
    "cargo bench -p keepon --bench daemon_cost": NotRun(MEASUREMENT, ("crates/keepon/benches/daemon_cost.rs",)),
    "cargo build --release -p keepon-core --example pace --example insert": Covered(
        "Makefile", ("clippy --workspace --all-targets",)
    ),
    "valgrind --tool=callgrind --callgrind-out-file=/dev/null "
    "target/release/examples/pace 1 100000 64 2000000 31": NotRun(MEASUREMENT, ("crates/core/examples/pace.rs",)),
    "valgrind --tool=callgrind --toggle-collect='*Station*submit*' --callgrind-out-file=/dev/null "
    "target/release/examples/insert 200000": NotRun(MEASUREMENT, ("crates/core/examples/insert.rs",)),
    "cargo run --release -p keepon-nic --example bytebench": NotRun(MEASUREMENT, ("crates/nic/examples/bytebench.rs",)),
    SYNC_SIM: Run(run_sync_sim),
    PLOTS_SYNC: Run(lambda _: run_sync_sim()),
    "cargo run --release -p keepon-nic --example gridsweep -- 600 600": NotRun(
        MEASUREMENT, ("crates/nic/examples/gridsweep.rs",)
    ),
    "bridge mdb show": Run(in_netns()),
    # docs/byte-clock.md
    "keepon run --config examples/windows.toml": Run(
        run_in_scratch(lambda out: "byte clock" in out or pytest.fail(out))
    ),
    "cargo run --release -p keepon-nic --example bytebench -- 1": NotRun(
        MEASUREMENT, ("crates/nic/examples/bytebench.rs",)
    ),
    # docs/qemu.md
    "tests/qemu/build.sh OUT SCRIPT [FILE…]": Covered("crates/keepon/tests/qemu_etf.rs", ("build.sh",)),
    "tests/qemu/run.sh OUT [TIMEOUT]": Covered("crates/keepon/tests/qemu_etf.rs", ("run.sh",)),
    "tc qdisc show": Covered("tests/qemu/etf_guest.sh", ("tc qdisc show",)),
}


# --- Generic rules -------------------------------------------------------------------------------------------------


def crate_dirs() -> dict[str, Path]:
    """Package name -> crate directory, for the workspace's crates."""
    out = {}
    for toml in (REPO / "crates").glob("*/Cargo.toml"):
        m = re.search(r'^name\s*=\s*"([^"]+)"', toml.read_text(), re.M)
        if m:
            out[m.group(1)] = toml.parent
    return out


CARGO_TEST = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S+ )*(?:sudo )?cargo test (?:--release )?(?:--features slow-tests )?"
    r"-p (?P<pkg>\S+) --test (?P<test>\S+)"
    r"(?P<filters>(?: [a-z0-9_]+)*)(?: -- (?P<args>.*))?$"
)


def cargo_test(text: str) -> Covered | None:
    """`cargo test -p PKG --test T [FILTER …] [-- ARGS]`: run by `make test`'s `cargo test --workspace`."""
    m = CARGO_TEST.match(text)
    if not m:
        return None
    crate = crate_dirs().get(m.group("pkg"))
    assert crate is not None, f"no workspace package {m.group('pkg')}"
    filters = m.group("filters").split()
    # Test-binary arguments that are filters too (`-- --nocapture dual`).
    filters += [a for a in (m.group("args") or "").split() if not a.startswith("-")]
    return Covered(str((crate / "tests" / f"{m.group('test')}.rs").relative_to(REPO)), tuple(filters))


PLACEHOLDER = re.compile(r"^\[|\]$|…|^[A-Z][A-Z0-9_]*(\.[a-z]+)?$|\|")


def help_check(text: str) -> Run | None:
    """A `keepon`/`keepon-plan` synopsis or mention: its subcommand's --help names every flag used."""
    words = text.split()
    if words[0] not in ("keepon", "keepon-plan"):
        return None
    sub = [w for w in words[1:2] if re.match(r"^[a-z][a-z0-9-]*$", w)]

    def how(_: str) -> None:
        out = run(resolve([words[0], *sub, "--help"])).stdout
        flags = {re.sub(r"[\[\]]", "", w) for w in words if w.lstrip("[").startswith("--")}
        missing = [f for f in flags if f not in out]
        assert not missing, f"{' '.join([words[0], *sub])} --help does not know {missing}"

    return Run(how)


def concrete(cmd: Command) -> bool:
    """A block command whose arguments are real values (not a synopsis with placeholders)."""
    return cmd.block and not any(PLACEHOLDER.search(w) for w in cmd.text.split()[1:])


#: What a command nothing accounts for gets.
UNACCOUNTED = NotRun("no test runs it: add it to COVERAGE in python/tests/test_docs.py")


def account(cmd: Command) -> Run | Covered | NotRun | None:
    """How a command is accounted for (None: not a command, but quoted output or a tool's bare name)."""
    text = cmd.text
    if text in COVERAGE:
        return COVERAGE[text]
    if (covered := cargo_test(text)) is not None:
        return covered
    words = text.split()
    if len(words) > 1 and words[1].endswith(":"):
        return None  # printed output: `keepon daemon: …`
    if len(words) == 1 and words[0] not in ("keepon", "keepon-plan"):
        return None  # a tool's name: `tc`, `ethtool`
    if concrete(cmd):
        return UNACCOUNTED  # a command to type needs its own entry
    return help_check(text) or UNACCOUNTED


ALL = commands()
UNIQUE = {c.text: c for c in ALL}


def test_the_pages_have_commands() -> None:
    assert "make run" in UNIQUE and "make test" in UNIQUE, "the README's Quick start lost its two commands"
    assert len(UNIQUE) > 50


def test_every_command_is_accounted_for() -> None:
    unaccounted = [f"{c.where()}: {c.text}" for c in ALL if account(c) is UNACCOUNTED]
    assert not unaccounted, "commands in the docs that no test runs (add them to COVERAGE in test_docs.py):\n" + (
        "\n".join(unaccounted)
    )


def test_a_new_command_without_a_test_is_caught() -> None:
    page = REPO / "docs" / "new.md"
    for text, block in [
        ("keepon run --config examples/new.toml --records new.csv", True),
        ("cargo run -p keepon --example new", False),
        ("make new-target", False),
    ]:
        assert account(Command(page, 1, text, block)) is UNACCOUNTED, text
    # A synopsis with a subcommand or a flag the program does not have fails its --help check.
    for text, why in [("keepon frobnicate --config FILE", "exit"), ("keepon run --config FILE [--no-such]", "no-such")]:
        check = account(Command(page, 1, text, True))
        assert isinstance(check, Run), text
        with pytest.raises(AssertionError, match=why):
            check.how(text)


def test_every_coverage_entry_is_still_in_the_docs() -> None:
    stale = sorted(set(COVERAGE) - set(UNIQUE))
    assert not stale, f"COVERAGE names commands no page has any more: {stale}"


# Commands that take tens of seconds (a simulation built and run, a sweep plotted): `make test-all` runs them.
SLOW_COMMANDS = ("cargo run --release -p keepon-ptp --bin keepon-sync-sim", "python -m keepon_plan.plots_sync out/a9")


def _command_params() -> list:
    texts = sorted(t for t, c in UNIQUE.items() if account(c) is not None)
    slow = pytest.mark.slow
    return [pytest.param(t, marks=slow) if t.startswith(SLOW_COMMANDS) else t for t in texts]


@pytest.mark.parametrize("text", _command_params(), ids=lambda t: t[:60])
def test_command(text: str) -> None:
    a = account(UNIQUE[text])
    if a is UNACCOUNTED:
        pytest.fail(f"{UNIQUE[text].where()}: {a.why}")
    if isinstance(a, Run):
        a.how(text)
    else:
        a.check()


# --- Code examples -------------------------------------------------------------------------------------------------


def examples(lang: str) -> list[str]:
    return ["\n".join(body) for page in DOCS for lg, _, body in fenced_blocks(page.read_text()) if lg == lang]


def test_every_fenced_block_says_its_language() -> None:
    bad = [
        f"{page.relative_to(REPO)}:{start - 1}: ```{lang}"
        for page in DOCS
        for lang, start, _ in fenced_blocks(page.read_text())
        if lang not in LANGUAGES
    ]
    assert not bad, f"fenced blocks need one of {sorted(LANGUAGES)}: {bad}"


def test_the_python_example_runs_against_a_daemon(tmp_path: Path) -> None:
    from keepon_client import FrameRejected, Reason

    (code,) = examples("python")
    d = start_daemon(tmp_path, max_seconds=30)
    try:
        code = code.replace('"/run/keepon.sock"', repr(str(d.socket)))
        # `cycle_start` is a ring (3.2 ms) ahead when the daemon answers; a client the host does not run for that
        # long (a loaded 2-core machine) submits late, and `o.check()` raises as documented. Any other rejection,
        # or an error before it, fails; a few tries give the example a chance to run to its end.
        for _ in range(5):
            try:
                exec(compile(code, "docs/clients.md", "exec"), {"frame": eth_frame(100)})
                break
            except FrameRejected as e:
                assert e.reason == Reason.LATE, e
    finally:
        d.stop()


def test_the_c_example_compiles(tmp_path: Path) -> None:
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    (code,) = examples("c")
    src = tmp_path / "example.c"
    src.write_text(
        f'#include <stdio.h>\n#include "keepon.h"\nvoid example(const void *frame, size_t len) {{\n{code}\n}}\n'
    )
    run(["cc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", f"-I{REPO / 'clients/c'}", str(src)])


# --- Links ---------------------------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", prose(page.read_text()), re.M)}


def broken_links(page: Path) -> list[str]:
    """Relative links of the page that lead to no file, or to no heading of a Markdown file."""
    broken = []
    text = prose(page.read_text())
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.name}:{text.count(chr(10), 0, m.start()) + 1}: {target}"
        if not dest.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where} (no such heading)")
    return broken


def test_every_relative_link_leads_somewhere() -> None:
    broken = [b for page in DOCS for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_readme_links_every_page() -> None:
    readme = (REPO / "README.md").read_text()
    missing = [p.name for p in DOCS[1:] if f"](docs/{p.name})" not in readme]
    assert not missing, f"README.md does not link {missing}"


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# B\n\n## A heading\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#a-heading) [file](c.md) [heading](b.md#no-heading) [web](https://example.org/x)\n")
    assert broken_links(page) == ["a.md:1: c.md (no such file)", "a.md:1: b.md#no-heading (no such heading)"]


# --- The service page's messages -----------------------------------------------------------------------------------


def source_text() -> str:
    """The Rust sources, with string continuations (`\\` at a line's end) joined as the compiler joins them."""
    text = "\n".join(p.read_text() for p in (REPO / "crates").glob("*/src/**/*.rs"))
    return re.sub(r"\\\n\s*", "", text)


def test_every_message_the_service_page_explains_is_still_printed() -> None:
    page = (REPO / "docs" / "service.md").read_text()
    section = page[page.index("## What the daemon prints") :]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 8, rows
    src = source_text()
    stale = []
    for row in rows:
        _, msg = next(code_spans(row.split(" | ")[0]))
        # The system's own error text is not keepon's, and example values (a rate, an interface) stand for what
        # the source formats in.
        msg = re.sub(r"[A-Z][a-z ]+ \(os error \d+\)|\d[\d.]* [MG]b/s|\bveth\b|\beth1\b", "…", msg)
        for part in re.split(r"…|\b\d[\d.]*\b|\b[A-Z][A-Z_]*\b(?![_\w])", msg):
            part = part.strip(" ;,:")
            if len(part.split()) >= 3 and part not in src:
                stale.append(part)
    assert not stale, f"docs/service.md explains messages the source no longer prints: {stale}"
