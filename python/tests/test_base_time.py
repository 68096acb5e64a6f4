"""The absolute schedule (issue 19): the base time in the runtime config's [schedule] and in the gate list."""

import tomllib
from fractions import Fraction

import pytest
from conftest import EXAMPLES

from keepon_plan.cli import main
from keepon_plan.emit import gate_list, runtime_config
from keepon_plan.isolation import PLAN, synthesize
from keepon_plan.model import InputError, parse_flowset, to_problem
from keepon_plan.params import choose
from keepon_plan.units import parse_duration, slot_period
from keepon_plan.verify import verify_plan_text

EXAMPLE2 = (EXAMPLES / "example2.toml").read_text()

# 10 Gb/s, 64-byte slots: δ = 67.2 ns, so a ring of 32 slots lasts 2150.4 ns (not whole ns); 5 rings = 10752 ns.
TEN_GIG_32 = """
[link]
rate = "10Gbps"
[ring]
slot_bytes = 64
slots = 32
batch = 1
[[flow]]
name = "a"
class = "x"
period = "10752ns"
frame_bytes = 64
[[flow]]
name = "b"
class = "y"
period = "5376ns"
frame_bytes = 64
"""


def plan(text: str, base_time: int | None = None) -> tuple[str, str]:
    fs = parse_flowset(text)
    choice = choose(fs)
    problem = to_problem(fs, choice.slot_bytes, choice.slots)
    out = synthesize(problem, time_limit=20)
    assert out.status == PLAN
    config = runtime_config(fs, choice, problem, out.schedule, base_time=base_time)
    assert verify_plan_text(fs, config) == []
    return config, gate_list(fs, choice, out.schedule, base_time=base_time)


def gcl_value(gcl: str, key: str) -> int:
    return int(next(line for line in gcl.splitlines() if line.startswith(key + " ")).split()[1])


def test_schedule_section_has_base_time_and_whole_cycle_time():
    config, gcl = plan(EXAMPLE2, base_time=1_700_000_000_000_000_000)
    schedule = tomllib.loads(config)["schedule"]
    assert schedule["base_time"] == 1_700_000_000_000_000_000
    assert parse_duration(schedule["cycle_time"]) == 32 * 10_000 == slot_period(1230, 10**9) * 32
    assert gcl_value(gcl, "base-time") == 1_700_000_000_000_000_000
    assert gcl_value(gcl, "cycle-time") == 320_000


def test_fractional_ring_cycle_omits_cycle_time_and_keeps_the_base_time():
    delta = slot_period(64, 10**10)
    assert delta * 32 == Fraction(21504, 10)  # 2150.4 ns
    config, gcl = plan(TEN_GIG_32, base_time=5)
    schedule = tomllib.loads(config)["schedule"]
    assert schedule == {"base_time": 5}
    assert "# cycle_time omitted: slots × δ = 32 × 67.2 ns = 2150.4 ns is not a whole number of ns" in config
    # The gate list's cycle is 5 rings long (10752 ns): cycles from the same base time start with a ring cycle.
    assert gcl_value(gcl, "base-time") == 5
    assert gcl_value(gcl, "cycle-time") == 10_752 == 5 * 32 * delta


def test_base_time_from_the_flow_file_default_zero():
    config, gcl = plan(EXAMPLE2)
    assert tomllib.loads(config)["schedule"]["base_time"] == 0
    assert gcl_value(gcl, "base-time") == 0
    config, gcl = plan("base_time = 1000000\n" + EXAMPLE2)
    assert tomllib.loads(config)["schedule"]["base_time"] == 1_000_000
    assert gcl_value(gcl, "base-time") == 1_000_000
    config, gcl = plan("base_time = 1000000\n" + EXAMPLE2, base_time=7)  # the argument overrides the file
    assert tomllib.loads(config)["schedule"]["base_time"] == 7
    assert gcl_value(gcl, "base-time") == 7


@pytest.mark.parametrize("value", ["-1", "1.5", '"0"', "4611686018427387904", "true"])
def test_bad_base_time_in_the_flow_file_names_the_key_and_line(value):
    with pytest.raises(InputError) as info:
        parse_flowset(f"# a comment\nbase_time = {value}\n" + EXAMPLE2, "flows.toml")
    assert info.value.line == 2 and "base_time" in str(info.value)


def test_largest_base_time_is_accepted():
    assert parse_flowset(f"base_time = {2**62 - 1}\n" + EXAMPLE2).base_time == 2**62 - 1


def test_cli_writes_the_same_base_time_to_plan_and_gate_list(tmp_path, capsys):
    flows, out = tmp_path / "flows.toml", tmp_path / "plan.toml"
    flows.write_text("base_time = 42\n" + EXAMPLE2)
    assert main(["solve", str(flows), "--out", str(out)]) == 0
    assert tomllib.loads(out.read_text())["schedule"]["base_time"] == 42
    assert gcl_value((tmp_path / "plan.gcl").read_text(), "base-time") == 42
    assert main(["solve", str(flows), "--out", str(out), "--base-time", "1700000000000000000"]) == 0
    assert tomllib.loads(out.read_text())["schedule"]["base_time"] == 1_700_000_000_000_000_000
    assert gcl_value((tmp_path / "plan.gcl").read_text(), "base-time") == 1_700_000_000_000_000_000
    assert main(["verify", str(flows), str(out)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("value", ["-1", "1.5", "1e9", "abc", "", str(2**62)])
def test_cli_refuses_a_bad_base_time_naming_the_option(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["solve", str(EXAMPLES / "example2.toml"), "--out", str(tmp_path / "p.toml"), f"--base-time={value}"])
    assert info.value.code == 3
    err = capsys.readouterr().err
    assert "--base-time" in err and "Traceback" not in err
    assert not (tmp_path / "p.toml").exists()


def test_bad_base_time_in_the_flow_file_is_exit_3(tmp_path, capsys):
    flows = tmp_path / "flows.toml"
    flows.write_text("base_time = -5\n" + EXAMPLE2)
    assert main(["solve", str(flows), "--out", str(tmp_path / "p.toml")]) == 3
    assert f"{flows}:1: base_time" in capsys.readouterr().err


def test_verifier_checks_the_schedule_section():
    config, _ = plan(EXAMPLE2, base_time=9)
    fs = parse_flowset(EXAMPLE2)
    wrong = config.replace('cycle_time = "320us"', 'cycle_time = "330us"')
    assert [v.constraint for v in verify_plan_text(fs, wrong)] == ["ring"]
    negative = config.replace("base_time = 9", "base_time = -9")
    assert [v.constraint for v in verify_plan_text(fs, negative)] == ["format"]
