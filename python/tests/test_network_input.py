"""keepon-plan network: bad input is exit 3 with a message naming the element (and the line)."""

from __future__ import annotations

import pytest
from network_support import line_network, run, write

STREAM = (
    '[[stream]]\nname = "s1"\ntalker = "t1"\nlisteners = ["l1"]\nperiod = "1ms"\nframe_bytes = 200\n'
    'max_latency = "1ms"\n'
)

RING = """version = 1
[[station]]
name = "t1"
[[station]]
name = "l1"
[[switch]]
name = "sw1"
[[switch]]
name = "sw2"
[[switch]]
name = "sw3"
[[switch]]
name = "sw4"
[[link]]
a = "t1"
b = "sw1"
rate = "1Gbps"
[[link]]
a = "sw3"
b = "l1"
rate = "1Gbps"
[[link]]
a = "sw1"
b = "sw2"
rate = "1Gbps"
[[link]]
a = "sw2"
b = "sw3"
rate = "1Gbps"
[[link]]
a = "sw3"
b = "sw4"
rate = "1Gbps"
[[link]]
a = "sw4"
b = "sw1"
rate = "1Gbps"
"""


def _bad(tmp_path, text: str) -> str:
    code, err = run("network", write(tmp_path, text), "--out", str(tmp_path / "out"))
    assert code == 3, err
    assert "bad input" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    return err


def test_loop_without_route_is_an_error_naming_the_stream_and_both_paths(tmp_path):
    err = _bad(tmp_path, RING + STREAM)
    assert "stream 's1'" in err and "loop" in err
    assert "t1 → sw1 → sw2 → sw3 → l1" in err and "t1 → sw1 → sw4 → sw3 → l1" in err
    assert "net.toml:" in err


def test_loop_with_a_route_is_planned(tmp_path):
    text = RING + STREAM + 'route = ["t1", "sw1", "sw4", "sw3", "l1"]\n'
    code, err = run("network", write(tmp_path, text), "--out", str(tmp_path / "out"))
    assert code == 0, err


def test_route_that_does_not_exist_names_the_missing_link(tmp_path):
    err = _bad(tmp_path, RING + STREAM + 'route = ["t1", "sw1", "sw3", "l1"]\n')
    assert "stream 's1'" in err and "does not exist: no link sw1–sw3" in err


def test_route_through_an_unknown_node(tmp_path):
    err = _bad(tmp_path, RING + STREAM + 'route = ["t1", "sw9", "l1"]\n')
    assert "stream 's1'" in err and "unknown node 'sw9'" in err


def test_link_slower_than_its_streams_names_the_link_and_direction(tmp_path):
    # ten 1230-byte frames per 100 µs: 100 µs of wire time at 1 Gb/s, but sw1→l1 runs at 100 Mb/s
    streams = "".join(
        STREAM.replace('"s1"', f'"s{i}"').replace('"1ms"', '"100us"', 1).replace("200", "1230") for i in range(10)
    )
    err = _bad(tmp_path, line_network(streams, sw_rate="100Mbps"))
    assert "link sw1–l1" in err and "sw1→l1 is slower than its streams" in err and "> 100 %" in err


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (('b = "sw1"', 'b = "swX"'), "unknown node 'swX'"),
        (('talker = "t1"', 'talker = "t9"'), "stream 's1': talker 't9' is not a [[station]]"),
        (('listeners = ["l1"]', 'listeners = ["l7"]'), "stream 's1': listener 'l7' is not a [[station]]"),
        (('period = "1ms"', 'period = "1 fortnight"'), "stream 's1': period"),
        (("frame_bytes = 200", "frame_bytes = 20000"), "stream 's1': frame_bytes: must be in 64..=9018"),
        (('max_latency = "1ms"', 'max_latency = "1ms"\ncolour = "red"'), "stream 's1': unknown key 'colour'"),
        (('rate = "1Gbps"', 'rate = "3Mbps"'), "link t1–sw1: rate 3000000 bit/s has a byte time"),
    ],
)
def test_bad_element_is_named(tmp_path, change, expect):
    text = line_network(STREAM, talkers=1).replace(*change, 1)
    err = _bad(tmp_path, text)
    assert expect in err


def test_station_with_three_links(tmp_path):
    text = line_network(STREAM, talkers=2) + "".join(
        f'[[link]]\na = "t1"\nb = "{b}"\nrate = "1Gbps"\n' for b in ("l1", "t2")
    )
    err = _bad(tmp_path, text)
    assert "station 't1': a keepon station has one port, or two for replicated streams" in err and "it has 3" in err


def test_multicast_routes_must_form_a_tree(tmp_path):
    text = (
        RING.replace('[[station]]\nname = "l1"', '[[station]]\nname = "l1"\n[[station]]\nname = "l2"')
        + '[[link]]\na = "sw2"\nb = "l2"\nrate = "1Gbps"\n'
        + STREAM.replace('["l1"]', '["l1", "l2"]')
        + 'routes = [["t1", "sw1", "sw2", "sw3", "l1"], ["t1", "sw1", "sw4", "sw3", "sw2", "l2"]]\n'
    )
    err = _bad(tmp_path, text)
    assert "stream 's1'" in err and "must form a tree" in err
