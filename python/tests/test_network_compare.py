"""network-compare: the instance written in TSNKit's CSV format, and the check of a TSNKit plan in TSNKit's model.

Nothing here needs TSNKit except the last test, which runs its ``ls`` when ``KEEPON_TSNKIT_PYTHON`` names a Python
with ``tsnkit`` installed, and skips otherwise.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from keepon_plan.network.compare import check_own_model, run_tsnkit, tsnkit_instance, tsnkit_rate
from keepon_plan.network.topology import parse_network

TWO_STREAMS = """version = 1
[[station]]
name = "t1"
[[station]]
name = "l1"
[[switch]]
name = "sw1"
forwarding_delay = "2us"
[[switch]]
name = "sw2"
forwarding_delay = "2us"
[[link]]
a = "t1"
b = "sw1"
rate = "1Gbps"
delay = "100ns"
[[link]]
a = "sw1"
b = "sw2"
rate = "10Gbps"
delay = "500ns"
[[link]]
a = "sw2"
b = "l1"
rate = "1Gbps"
delay = "100ns"
[[stream]]
name = "a"
talker = "t1"
listeners = ["l1"]
period = "500us"
frame_bytes = 100
max_latency = "1ms"
[[stream]]
name = "b"
talker = "l1"
listeners = ["t1"]
period = "1ms"
frame_bytes = 64
max_latency = "20us"
"""

# switches first (sw1 = 0, sw2 = 1), then stations (t1 = 2, l1 = 3); a 10 Gb/s link is written as 1 Gb/s (rate 1);
# t_proc = propagation + the receiving switch's forwarding delay
TOPO_CSV = """link,q_num,rate,t_proc,t_prop
"(2, 0)",8,1,2100,100
"(0, 2)",8,1,100,100
"(0, 1)",8,1,2500,500
"(1, 0)",8,1,2500,500
"(1, 3)",8,1,100,100
"(3, 1)",8,1,2100,100
"""
# size: the frame's bytes on the wire as given; deadline: the latency bound, at most the period
TASK_CSV = """stream,src,dst,size,period,deadline,jitter
0,2,[3],125,500000,500000,0
1,3,[2],100,1000000,20000,0
"""


def test_two_streams_convert_to_tsnkit_rows():
    net = parse_network(TWO_STREAMS, "<test>")
    assert tsnkit_instance(net, {"t1": 125, "l1": 100}) == (TOPO_CSV, TASK_CSV)


def test_rates_round_down_to_one_tsnkit_knows():
    assert [tsnkit_rate(r) for r in (10**10, 10**9, 5 * 10**8, 10**8, 10**7, 10**6)] == [1, 1, 10, 10, 100, 1000]
    with pytest.raises(ValueError, match="slower than any rate"):
        tsnkit_rate(10**5)


def _plan(tmp_path, gcl_rows):
    """A TSNKit-style plan of TASK_CSV: both streams leave at 0, hop after hop without waiting."""
    (tmp_path / "p-GCL.csv").write_text("link,queue,start,end,cycle\n" + gcl_rows, encoding="utf-8")
    (tmp_path / "p-OFFSET.csv").write_text("stream,frame,offset\n0,0,0\n1,0,0\n", encoding="utf-8")
    route = ['0,"(2, 0)"', '0,"(0, 1)"', '0,"(1, 3)"', '1,"(3, 1)"', '1,"(1, 0)"', '1,"(0, 2)"']
    (tmp_path / "p-ROUTE.csv").write_text("stream,link\n" + "\n".join(route) + "\n", encoding="utf-8")


# stream 0: 125 B is 2 units of 100 B, 1600 ns at 1 Gb/s; hops at 0, 0+1600+2100, 3700+1600+2500; twice per 1 ms.
# stream 1: 100 B, 800 ns; hops at 0, 0+800+2100, 2900+800+2500.
GOOD = """"(2, 0)",0,0,1600,1000000
"(2, 0)",0,500000,501600,1000000
"(0, 1)",0,3700,5300,1000000
"(0, 1)",0,503700,505300,1000000
"(1, 3)",0,7800,9400,1000000
"(1, 3)",0,507800,509400,1000000
"(3, 1)",0,0,800,1000000
"(1, 0)",0,2900,3700,1000000
"(0, 2)",0,6200,7000,1000000
"""


def test_own_model_check_accepts_a_consistent_plan(tmp_path):
    _plan(tmp_path, GOOD)
    assert check_own_model(TOPO_CSV, TASK_CSV, tmp_path, "p", no_wait=True) == []


def test_own_model_check_names_a_moved_window_and_an_overlap(tmp_path):
    moved = GOOD.replace('"(1, 0)",0,2900,3700', '"(1, 0)",0,3000,3800')
    _plan(tmp_path, moved + '"(0, 1)",0,5000,5800,1000000\n')
    bad = check_own_model(TOPO_CSV, TASK_CSV, tmp_path, "p", no_wait=True)
    assert "stream 1: frame 0 has no window on (1, 0) at 2900 ns" in bad
    assert "link (0, 1): windows at 3700 and 5000 ns overlap" in bad
    assert len(bad) == 2


def test_own_model_check_names_a_route_that_misses_the_listener(tmp_path):
    _plan(tmp_path, GOOD)
    route = (tmp_path / "p-ROUTE.csv").read_text(encoding="utf-8").replace('0,"(1, 3)"\n', "")
    (tmp_path / "p-ROUTE.csv").write_text(route, encoding="utf-8")
    bad = check_own_model(TOPO_CSV, TASK_CSV, tmp_path, "p", no_wait=True)
    assert bad == ["stream 0: route [(2, 0), (0, 1)] does not join 2 to 3"]


def _tsnkit_python() -> str:
    python = os.environ.get("KEEPON_TSNKIT_PYTHON")
    if not python:
        pytest.skip("KEEPON_TSNKIT_PYTHON (a Python with tsnkit installed) is not set")
    if subprocess.run([python, "-c", "import tsnkit"], capture_output=True).returncode != 0:
        pytest.skip(f"{python} cannot import tsnkit")
    return python


def test_tsnkit_ls_plans_the_two_streams_and_its_plan_holds_in_its_model():
    r = run_tsnkit(_tsnkit_python(), "ls", TOPO_CSV, TASK_CSV, 60.0)
    assert r["flag"] == "succ", r
    assert r["violations"] == []
