"""Standard export: ieee802-dot1q-sched instance data accepted by yanglint, corruptions refused; taprio scripts."""

from __future__ import annotations

import json
import shutil

import pytest
from network_support import SMALL, run

from keepon_plan.network.yang_modules import ModulesUnavailable, ensure_modules, yanglint


@pytest.fixture(scope="module")
def modules():
    if shutil.which("yanglint") is None:
        pytest.skip("yanglint not installed (Debian package libyang2-tools); CI installs it")
    try:
        return ensure_modules()
    except ModulesUnavailable as exc:
        pytest.fail(f"the vendored YANG modules are not the pinned ones: {exc}")


def test_vendored_modules_are_the_pinned_ones():
    from keepon_plan.network.yang_modules import MODULES, module_dir

    assert sorted(p.name for p in module_dir().glob("*.yang")) == sorted(MODULES)
    ensure_modules()  # raises on a checksum mismatch (and would fetch a missing file)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("net") / "plan"
    code, err = run("network", str(SMALL), "--out", str(out))
    assert code == 0, err
    return out


def test_every_exported_file_is_accepted(modules, plan):
    files = sorted((plan / "yang").iterdir())
    names = {f.name for f in files}
    # the switches and the keepon talkers (a keepon port is a scheduled port), each in JSON and XML
    assert names == {f"{d}.{e}" for d in ("sw1", "sw2", "t1", "t2") for e in ("json", "xml")}
    for f in files:
        ok, msg = yanglint([f], modules)
        assert ok, f"{f.name}: {msg}"


def test_export_carries_the_plan(plan):
    doc = json.loads((plan / "yang" / "sw2.json").read_text())
    ports = {i["name"]: i for i in doc["ietf-interfaces:interfaces"]["interface"]}
    table = ports["swp1"]["ieee802-dot1q-bridge:bridge-port"]["ieee802-dot1q-sched-bridge:gate-parameter-table"]
    gcl = json.loads((plan / "switches" / "sw2.json").read_text())
    mine = next(p for p in gcl["ports"] if p["port"] == "swp1")
    entries = table["admin-control-list"]["gate-control-entry"]
    assert [(e["gate-states-value"], e["time-interval-value"]) for e in entries] == [
        (e["gate_states"], e["interval_ns"]) for e in mine["entries"]
    ]
    assert table["admin-base-time"] == {"seconds": "1", "nanoseconds": 0}
    cycle = table["admin-cycle-time"]
    assert cycle["numerator"] * 10**9 == mine["cycle_ns"] * cycle["denominator"]
    assert table["config-change"] is True


def _corrupt(plan, tmp_path, edit) -> str:
    doc = json.loads((plan / "yang" / "sw1.json").read_text())
    table = doc["ietf-interfaces:interfaces"]["interface"][0]["ieee802-dot1q-bridge:bridge-port"][
        "ieee802-dot1q-sched-bridge:gate-parameter-table"
    ]
    edit(table)
    path = tmp_path / "sw1.json"
    path.write_text(json.dumps(doc))
    return path


def test_interval_beyond_supported_interval_max_is_refused(modules, plan, tmp_path):
    def edit(table):
        table["admin-control-list"]["gate-control-entry"][0]["time-interval-value"] = (
            table["supported-interval-max"] + 1
        )

    ok, msg = yanglint([_corrupt(plan, tmp_path, edit)], modules)
    assert not ok and "supported-interval-max" in msg


def test_unknown_leaf_is_refused(modules, plan, tmp_path):
    def edit(table):
        table["admin-gate-colour"] = "blue"

    ok, msg = yanglint([_corrupt(plan, tmp_path, edit)], modules)
    assert not ok and "admin-gate-colour" in msg


def test_list_longer_than_supported_list_max_is_refused(modules, plan, tmp_path):
    def edit(table):
        table["supported-list-max"] = len(table["admin-control-list"]["gate-control-entry"]) - 1

    ok, msg = yanglint([_corrupt(plan, tmp_path, edit)], modules)
    assert not ok and "supported-list-max" in msg


def test_taprio_scripts_match_the_gate_lists(plan):
    gcl = json.loads((plan / "switches" / "sw1.json").read_text())
    script = (plan / "taprio" / "sw1.sh").read_text()
    for port in gcl["ports"]:
        block = script.split(f"tc qdisc replace dev {port['port']} ")[1].split("clockid CLOCK_TAI")[0]
        assert f"base-time {gcl['base_time_ns']} cycle-time {port['cycle_ns']}" in block
        entries = [line.split()[2:4] for line in block.splitlines() if line.strip().startswith("sched-entry")]
        assert [(int(m, 16), int(n)) for m, n in entries] == [
            (e["gate_states"], e["interval_ns"]) for e in port["entries"]
        ]
        assert sum(int(n) for _, n in entries) == port["cycle_ns"]


def test_xml_and_json_exports_are_the_same_data(modules, plan):
    # yanglint reads each XML file and prints it as RFC 7951 JSON: the same tree as the JSON file written beside it
    import subprocess

    from keepon_plan.network.yang_modules import TOP

    for xml in sorted((plan / "yang").glob("*.xml")):
        cmd = ["yanglint", "-t", "config", "-f", "json", "-p", str(modules), *(str(modules / m) for m in TOP), str(xml)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        assert json.loads(done.stdout) == json.loads(xml.with_suffix(".json").read_text()), xml.name
