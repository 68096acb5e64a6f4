"""Stream-to-core allocation (keepon_plan.cores, ``keepon-plan cores``): the conflict test against laid-out
instances, refusals that name the streams, optimality statements, bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from keepon_plan.cli import main
from keepon_plan.cores import (
    FOUND,
    INFEASIBLE,
    CoreBudget,
    CoreStream,
    _first_overlap,
    allocate,
    conflict,
    conflict_graph,
    min_cores,
    verify_allocation,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cores"
BUDGET = CoreBudget(per_descriptor_ns=0, per_frame_ns=0, host_delay_ns=10_000)


def fixed(name: str, period_us: int, offset_us: int) -> CoreStream:
    return CoreStream(name, period_us * 1000, 200, offset_us * 1000, offset_us * 1000)


def ring_of(n: int, gap_us: int = 8) -> list[CoreStream]:
    """``n`` streams of period ``n·gap`` launched ``gap`` apart: each conflicts with its two neighbours (10 µs busy)
    and with no other when ``gap ≥ 5`` µs."""
    return [fixed(f"s{i}", n * gap_us, i * gap_us) for i in range(n)]


def test_conflict_agrees_with_instances_laid_out() -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(4000):
        budget = CoreBudget(
            rng.choice((0, 40)), rng.choice((0, 100)), rng.choice((0, 3000, 9000)), rng.choice((0, 2000))
        )
        streams = []
        for name in "ab":
            period = rng.choice((20, 30, 40, 60, 100)) * 1000
            earliest = rng.randrange(period)
            latest = earliest if rng.random() < 0.6 else rng.randrange(earliest, period)
            streams.append(CoreStream(name, period, 100, earliest, latest, rng.choice((1, 3))))
        a, b = streams
        if budget.before(a) > a.period_ns or budget.before(b) > b.period_ns:
            continue
        assert conflict(a, b, budget) == (_first_overlap(a, b, budget) is not None), (a, b, budget)
        assert conflict(a, b, budget) == conflict(b, a, budget)
        checked += 1
    assert checked > 3000


def test_three_cores_needed_refused_at_two_naming_the_streams_and_found_at_three() -> None:
    streams = ring_of(5)
    refused = allocate(streams, BUDGET, 2)
    assert refused.status == INFEASIBLE
    assert sorted(refused.conflicting) == sorted(s.name for s in streams)  # the odd cycle is all five
    cycle = refused.conflicting
    adj = conflict_graph(streams, BUDGET)
    index = {s.name: i for i, s in enumerate(streams)}
    for u, w in zip(cycle, cycle[1:] + cycle[:1], strict=True):  # consecutive names conflict: a real cycle
        assert index[w] in adj[index[u]]
    found = allocate(streams, BUDGET, 3)
    assert found.status == FOUND and found.used == 3
    assert verify_allocation(streams, BUDGET, found.cores) == []
    assert found.optimal and found.lower_bound == 3 and "odd cycle" in found.bound


def test_a_clique_larger_than_k_is_named() -> None:
    # three streams 4 µs apart, all within one 10 µs busy span of each other, plus two far away
    streams = [fixed("a", 100, 0), fixed("b", 100, 4), fixed("c", 100, 8), fixed("x", 100, 50), fixed("y", 100, 70)]
    refused = allocate(streams, BUDGET, 2)
    assert refused.status == INFEASIBLE and refused.method == "clique"
    assert sorted(refused.conflicting) == ["a", "b", "c"]
    found = allocate(streams, BUDGET, 3)
    assert found.status == FOUND and found.optimal and found.lower_bound == 3


def test_cp_sat_refusal_is_a_minimal_set_without_a_large_clique() -> None:
    # The Grötzsch-like case: the 5-wheel (an odd cycle plus a hub conflicting with all) needs 4 cores, its largest
    # clique is 3. Built directly on the graph level through offsets: the hub has a long window.
    rim = ring_of(5, gap_us=8)
    hub = CoreStream("hub", 40_000, 200, 0, 39_999)  # any offset: conflicts with every rim stream
    far = [fixed("far", 400, 200)]  # a stream on its own (period 400 µs: meets the rim only where they allow)
    streams = [*rim, hub]
    refused = allocate(streams, BUDGET, 3)
    assert refused.status == INFEASIBLE and refused.method == "CP-SAT"
    assert sorted(refused.conflicting) == sorted(s.name for s in streams)
    # every named stream is needed: without any one, 3 cores suffice
    for drop in refused.conflicting:
        rest = [s for s in streams if s.name != drop]
        assert allocate(rest, BUDGET, 3).status == FOUND
    assert allocate(streams + far, BUDGET, 4).status == FOUND
    assert min_cores(streams, BUDGET) == (4, True)


def test_dsatur_with_equal_clique_says_optimal() -> None:
    streams = [fixed("a", 100, 0), fixed("b", 100, 5), fixed("c", 100, 50)]
    found = allocate(streams, BUDGET, 4)
    assert found.status == FOUND and found.used == 2 and found.optimal
    assert "pairwise conflict" in found.bound


def test_a_stream_busy_longer_than_its_period_fits_no_core() -> None:
    s = fixed("fast", 8, 0)  # 10 µs busy, 8 µs period
    out = allocate([s, fixed("slow", 100, 50)], BUDGET, 8)
    assert out.status == INFEASIBLE and out.conflicting == ["fast"]


def test_verifier_catches_a_corrupted_allocation() -> None:
    streams = ring_of(5)
    found = allocate(streams, BUDGET, 3)
    cores = [list(c) for c in found.cores]
    # move a stream onto the core of one of its neighbours
    name_core = {n: c for c, names in enumerate(cores) for n in names}
    a = "s0"
    b = "s1"
    cores[name_core[a]].remove(a)
    cores[name_core[b]].append(a)
    bad = verify_allocation(streams, BUDGET, cores)
    assert any("'s0'" in v and "'s1'" in v and "in hand" in v for v in bad), bad
    cores[0].append("s2")
    assert any("on cores" in v for v in verify_allocation(streams, BUDGET, cores))


def test_windowed_offsets_conflict_for_some_choice() -> None:
    a = fixed("a", 100, 50)
    near = CoreStream("w", 100_000, 200, 0, 45_000)  # could launch 5 µs before a: conflict
    far = CoreStream("w", 100_000, 200, 0, 30_000)  # at best 20 µs before a (and 50 µs after): free
    assert conflict(a, near, BUDGET)
    assert not conflict(a, far, BUDGET)


# -------------------------------------------------------------------------------------------------------------------
# The command


def test_cli_refuses_two_naming_five_and_allocates_three(tmp_path: Path, capsys) -> None:
    example = str(EXAMPLES / "three-cores.toml")
    assert main(["cores", example, "--cores", "2"]) == 1
    err = capsys.readouterr().err
    assert "infeasible (proven)" in err and "odd length" in err
    for name in ("axis-1", "axis-2", "axis-3", "axis-4", "io-1"):
        assert name in err.split("conflicting streams:")[1]
    out = tmp_path / "alloc.json"
    assert main(["cores", example, "--cores", "3", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "optimal" in captured.err and "verified" in captured.err
    doc = json.loads(out.read_text())
    assert doc["used"] == 3 and doc["optimal"] is True
    assert sorted(n for c in doc["allocation"] for n in c["streams"]) == [
        "axis-1",
        "axis-2",
        "axis-3",
        "axis-4",
        "io-1",
    ]
    assert main(["cores", example]) == 0  # the fewest that suffice
    assert "fewest cores: 3" in capsys.readouterr().err


STREAM = '[[stream]]\nname = "a"\nperiod = "100us"\nframe_bytes = 200\noffset = "0us"\n'


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[core]\nhost_dely = 5\n" + STREAM, "unknown key 'host_dely'"),
        ('[core]\nhost_delay = "5 parsecs"\n' + STREAM, "host_delay"),
        ("[core]\ncores = 0\n" + STREAM, "cores must be an integer"),
        (STREAM + STREAM, "duplicate stream name"),
        (STREAM.replace('offset = "0us"', 'offset = "100us"'), "offset"),
        (STREAM + 'earliest_offset = "0us"\n', "not both"),
        (STREAM.replace("frame_bytes = 200\n", ""), "'frame_bytes'"),
        ("version = 1\n", "no [[stream]]"),
    ],
)
def test_bad_input_is_exit_3_naming_the_key(tmp_path: Path, capsys, text: str, needle: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert main(["cores", str(path)]) == 3
    err = capsys.readouterr().err
    assert "bad input" in err and needle in err and str(path) in err


def test_bad_input_names_the_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.toml"
    path.write_text(STREAM + '[[stream]]\nname = "b"\nperiod = "100us"\nframe_bytes = 200\nofset = "1us"\n')
    assert main(["cores", str(path)]) == 3
    assert f"{path}:10:" in capsys.readouterr().err


def test_cores_bench_writes_rows_summary_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "f7"
    args = ["cores-bench", "--sets", "3", "--seeds", "2", "--streams", "4-10", "--out", str(out)]
    assert main(args) == 0
    rows = (out / "rows.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 2 * 2 * 2  # header + sets × seeds × families × budgets
    summary = (out / "summary.md").read_text()
    assert "*paper*" in summary and "*predicted*" in summary and "*chosen*" in summary
    assert (out / "fig7b.png").stat().st_size > 0


def test_cores_of_a_network_plan_per_talker_port(tmp_path: Path, capsys) -> None:
    from network_support import run

    example = Path(__file__).resolve().parents[1] / "examples" / "network" / "frer-ring.toml"
    plan_dir = tmp_path / "plan"
    code, err = run("network", str(example), "--out", str(plan_dir))
    assert code == 0, err
    out = tmp_path / "alloc.json"
    assert main(["cores", "--plan", str(plan_dir), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert sorted(doc["ports"]) == ["t1.eth0", "t1.eth1", "t2"]  # a two-port talker: each port on its own
    assert doc["ports"]["t1.eth0"]["allocation"][0]["streams"] == ["axis.1"]
    capsys.readouterr()
    assert main(["cores", "--plan", str(plan_dir), "--station", "t1"]) == 0
    printed = capsys.readouterr().out
    assert "t1.eth0: core 0: axis.1" in printed and "t2" not in printed
    # the budget from the command line: a host delay beyond t2's 500 µs period fits no core
    assert main(["cores", "--plan", str(plan_dir), "--host-delay", "600us"]) == 1
    assert "stream 'plain' alone" in capsys.readouterr().err
    assert main(["cores", "--plan", str(plan_dir), "--station", "nobody"]) == 3
    assert main(["cores", str(EXAMPLES / "three-cores.toml"), "--plan", str(plan_dir)]) == 3
    assert main(["cores", "--plan", str(tmp_path)]) == 3  # no plan.json there
    assert "not a keepon-plan network directory" in capsys.readouterr().err


def test_command_line_budget_overrides_the_file(capsys) -> None:
    example = str(EXAMPLES / "three-cores.toml")
    # neighbours are 10 µs apart; with a 5 µs host delay (5.373 µs busy) nothing conflicts: one core
    assert main(["cores", example, "--host-delay", "5us"]) == 0
    assert "fewest cores: 1" in capsys.readouterr().err
