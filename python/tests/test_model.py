"""Malformed inputs get precise errors naming the line."""

import pytest

from keepon_plan.model import InputError, parse_flowset, to_problem
from keepon_plan.units import ValueError_, parse_duration, parse_rate, slot_period

GOOD = """\
[link]
rate = "1Gbps"

[ring]
slot_bytes = 1230
slots = 32

[[class]]
name = "tc-0"

[[flow]]
name = "a"
class = "tc-0"
period = "320us"
jitter = "20us"
frame_bytes = 300

[[flow]]
name = "b"
class = "tc-0"
period = "160us"
frame_bytes = 300
"""


def error_of(text: str) -> InputError:
    with pytest.raises(InputError) as info:
        parse_flowset(text, "flows.toml")
    return info.value


def line_of(text: str, needle: str) -> int:
    """The last line containing ``needle``."""
    return max(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_good_file_parses():
    fs = parse_flowset(GOOD)
    assert fs.rate == 10**9 and fs.classes == ("tc-0",)
    assert [f.period for f in fs.flows] == [320_000, 160_000]
    assert fs.flows[0].jitter == 20_000 and fs.flows[1].jitter == 0


@pytest.mark.parametrize(
    ("old", "new", "needle", "words"),
    [
        ('period = "160us"', 'period = "160 parsecs"', "parsecs", "duration"),
        ('period = "160us"', 'period = "1.0005us"', "1.0005us", "whole number of nanoseconds"),
        ('period = "160us"', "period = 1.5", "period = 1.5", "duration"),
        ('jitter = "20us"', 'jiter = "20us"', "jiter", "unknown key 'jiter'"),
        ('class = "tc-0"\nperiod = "160us"', 'class = "tc-9"\nperiod = "160us"', "tc-9", "unknown class"),
        ("frame_bytes = 300\n\n", "frame_bytes = 20000\n\n", "20000", "frame_bytes"),
        ('name = "b"', 'name = "a"', 'name = "a"', "duplicate flow"),
        ('rate = "1Gbps"', 'rate = "1.0000005Gbps"', "rate =", "Mb/s"),
        ("slots = 32", "slots = 1", "slots = 1", "slots"),
        ("slots = 32", "slots = 32\nbatch = 32", "batch = 32", "batch"),
        ('jitter = "20us"', 'phase = "320us"', "phase", "below the period"),
        ('jitter = "20us"', 'jitter = "320us"', "jitter", "jitter 320000 ns must be below the period 320000 ns"),
        ('jitter = "20us"', 'jitter = "1ms"', "jitter", "must be below the period"),
    ],
)
def test_errors_name_the_line(old, new, needle, words):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    err = error_of(text)
    assert words in err.message
    assert err.line == line_of(text, needle)
    assert str(err).startswith(f"flows.toml:{err.line}: ")


def test_missing_period_names_the_flow_table():
    text = GOOD.replace('period = "160us"\n', "")
    err = error_of(text)
    assert "period" in err.message and err.line == line_of(text, 'name = "b"') - 1


def test_syntax_error_has_the_line():
    text = GOOD.replace('name = "b"', 'name = "b')
    err = error_of(text)
    assert err.line == line_of(text, 'name = "b')


def test_period_not_whole_slots_names_the_line():
    text = GOOD.replace('period = "160us"', 'period = "165us"')
    fs = parse_flowset(text, "flows.toml")
    with pytest.raises(InputError) as info:
        to_problem(fs, 1230, 32)
    assert "whole number of slots" in info.value.message
    assert info.value.line == line_of(text, "165us")


def test_units():
    assert parse_duration("1.5us") == 1500
    assert parse_duration("10ms") == 10_000_000
    assert parse_duration("320µs") == 320_000
    assert parse_duration(7) == 7
    for bad in ("1.5ns", "3 furlongs", True, -1, 1.0):
        with pytest.raises(ValueError_):
            parse_duration(bad)
    assert parse_rate("2.5Gbps") == 2_500_000_000
    assert parse_rate(100_000_000) == 100_000_000
    with pytest.raises(ValueError_):
        parse_rate("1500bps")
    assert slot_period(1230, 10**9) == 10_000
    assert slot_period(1230, 10 * 10**9) == 1000
    assert slot_period(64, 10 * 10**9) * 5 == 336  # 67.2 ns: fractional


def test_jitter_just_below_the_period_is_accepted():
    fs = parse_flowset(GOOD.replace('jitter = "20us"', "jitter = 319999"))
    assert fs.flows[0].jitter == 319_999
    assert to_problem(fs, 1230, 32).flows[0].jitter == 31  # ⌊319 999 / 10 000⌋ = P − 1 slots
