"""keepon-plan network: exact and greedy plans verified, infeasibility proven with a reason, corruption caught."""

from __future__ import annotations

import itertools
import json
import tomllib

from network_support import SMALL, line_network, run, write

from keepon_plan.deadline import Deadline
from keepon_plan.network.command import plan_network
from keepon_plan.network.topology import load_network, parse_network
from keepon_plan.network.verify import verify_plan_dir


def _streams(entries: list[tuple[str, str, str, int]], max_latency: str = "100us") -> str:
    return "".join(
        f'[[stream]]\nname = "{n}"\ntalker = "{t}"\nlisteners = ["l1"]\nperiod = "{p}"\nframe_bytes = {b}\n'
        f'max_latency = "{max_latency}"\n'
        for n, t, p, b in entries
    )


def test_small_network_exact_plan_is_verified(tmp_path):
    out = tmp_path / "plan"
    code, err = run("network", str(SMALL), "--out", str(out), "--method", "exact", "--time-limit", "20")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["method"] == "exact no-wait (CP-SAT)"
    assert {s["name"] for s in plan["streams"]} == {"ctrl-a", "ctrl-b", "ctrl-c"}
    assert verify_plan_dir(load_network(str(SMALL)), out) == []
    # every talker's config is keepon's format, with the network's base time and one offset per flow
    t1 = tomllib.loads((out / "stations" / "t1.toml").read_text())
    assert t1["schedule"]["base_time"] == 1_000_000_000
    assert {f["name"] for f in t1["flow"]} == {"ctrl-a", "ctrl-c"}
    # the multicast stream is one tree reaching both listeners
    b = next(s for s in plan["streams"] if s["name"] == "ctrl-b")
    assert sorted(r[-1] for r in b["routes"]) == ["l1", "l2"]
    assert [h["link"] for h in b["hops"]].count("t2->sw1") == 1
    code, err = run("network-verify", str(SMALL), str(out))
    assert code == 0, err


def test_greedy_plan_is_verified_and_links_are_shared(tmp_path):
    streams = _streams([(f"s{i}", f"t{1 + i % 2}", "100us", 200) for i in range(12)])
    path = write(tmp_path, line_network(streams, switches=3))
    out = tmp_path / "plan"
    code, err = run("network", path, "--out", str(out), "--method", "heuristic")
    assert code == 0, err
    net = load_network(path)
    assert verify_plan_dir(net, out) == []
    plan = json.loads((out / "plan.json").read_text())
    # 12 frames share sw3→l1 within 100 µs: their windows there are pairwise disjoint
    starts = sorted(h["start_ps"] % 100_000_000 for s in plan["streams"] for h in s["hops"] if h["link"] == "sw3->l1")
    ends = {h["start_ps"] % 100_000_000: h["end_ps"] - h["start_ps"] for s in plan["streams"] for h in s["hops"]}
    assert len(starts) == 12
    assert all(a + ends[a] <= b for a, b in itertools.pairwise(starts))


def test_infeasible_is_proven_with_a_reason_naming_the_streams_and_link(tmp_path):
    # t1 (period 200 µs, 6000-byte frames) gets 6230-byte slots (50 µs at 1 Gb/s), t2 (period 300 µs, 7000 B)
    # 7480-byte slots (60 µs); keepon pads frames to them. On sw1→l1 the two streams meet every gcd(200, 300) =
    # 100 µs, less than their 50 + 60 µs of frames, although the link is only 45 % loaded.
    streams = _streams([("a", "t1", "200us", 6000), ("b", "t2", "300us", 7000)], max_latency="1ms")
    path = write(tmp_path, line_network(streams))
    code, err = run("network", path, "--out", str(tmp_path / "p"), "--method", "exact")
    assert code == 1, err
    assert "infeasible (proven)" in err and "'a'" in err and "'b'" in err and "sw1→l1" in err
    assert not (tmp_path / "p").exists()
    # the same by brute force, even with frames placed anywhere on a 1 µs grid of the link
    for x in range(200):
        for y in range(300):
            a = [(x + 200 * k, 50) for k in range(3)]
            b = [(y + 300 * k, 60) for k in range(2)]
            frames = sorted(a + b)
            overlap = any(t0 + n0 > t1 for (t0, n0), (t1, _) in itertools.pairwise(frames))
            assert overlap or frames[-1][0] + frames[-1][1] > frames[0][0] + 600


def test_link_level_cp_sat_proof_names_the_link(tmp_path):
    # Six talkers at 1 Gb/s, one 1230-byte frame each per 100 µs: 10 µs slots, so ten phases mod 100 µs. The
    # listener's link runs at 800 Mb/s, where each frame takes 12.5 µs: two frames need two slots of spacing, so
    # at most five fit, although six load it only 75 % and every pair fits (gcd 100 µs).
    text = line_network(
        _streams([(f"s{i}", f"t{i}", "100us", 1230) for i in range(1, 7)]), talkers=6, sw_rate="800Mbps"
    )
    net = parse_network(text)
    status, reason = plan_network(net, Deadline(20), method="exact", say=lambda m: None)
    assert status == "infeasible"
    assert "sw1→l1" in reason and "CP-SAT proof" in reason
    # five of them are feasible, and the plan passes the verifier
    text5 = line_network(
        _streams([(f"s{i}", f"t{i}", "100us", 1230) for i in range(1, 6)]), talkers=5, sw_rate="800Mbps"
    )
    path = write(tmp_path, text5)
    code, err = run("network", path, "--out", str(tmp_path / "p5"), "--method", "exact")
    assert code == 0, err


def test_latency_bound_below_the_route_is_proven_infeasible(tmp_path):
    streams = _streams([("far", "t1", "100us", 1230)], max_latency="20us")
    path = write(tmp_path, line_network(streams, switches=3))
    code, err = run("network", path, "--out", str(tmp_path / "p"))
    assert code == 1, err
    assert "stream 'far'" in err and "max_latency 20000 ns" in err and "any route" in err


def _plan(tmp_path):
    out = tmp_path / "plan"
    code, err = run("network", str(SMALL), "--out", str(out))
    assert code == 0, err
    return load_network(str(SMALL)), out


def test_verifier_catches_a_gate_entry_shifted_by_one_byte_time(tmp_path):
    net, out = _plan(tmp_path)
    path = out / "switches" / "sw2.json"
    doc = json.loads(path.read_text())
    entries = doc["ports"][0]["entries"]
    k = next(i for i, e in enumerate(entries) if e["gate_states"] & 0x80 and i > 0)  # a tc-7 window, not the first
    entries[k - 1]["interval_ns"] += 8  # one byte at 1 Gb/s: the window opens 8 ns late
    entries[k]["interval_ns"] -= 8
    path.write_text(json.dumps(doc))
    bad = verify_plan_dir(net, out)
    assert bad and all("sw2" in v and "gate of traffic class 7 is not open" in v for v in bad)


def test_verifier_catches_an_offset_shifted_by_one_byte_time(tmp_path):
    net, out = _plan(tmp_path)
    path = out / "plan.json"
    doc = json.loads(path.read_text())
    doc["streams"][0]["hops"][1]["start_ps"] += 8000
    path.write_text(json.dumps(doc))
    bad = verify_plan_dir(net, out)
    assert len(bad) == 1 and doc["streams"][0]["name"] in bad[0] and "replay" in bad[0]


def test_verifier_catches_overlap_when_a_talker_moves_a_flow(tmp_path):
    net, out = _plan(tmp_path)
    plan = json.loads((out / "plan.json").read_text())
    dep = {s["name"]: s["departure_ps"] for s in plan["streams"]}
    # move ctrl-c onto ctrl-a's slot in t1's runtime config (and keep plan.json consistent with the move)
    path = out / "stations" / "t1.toml"
    text = path.read_text()
    old = f'offset = "{_ns(dep["ctrl-c"])}"'
    assert old in text
    path.write_text(text.replace(old, f'offset = "{_ns(dep["ctrl-a"])}"'))
    bad = verify_plan_dir(net, out)
    assert any("overlap" in v and "t1→sw1" in v for v in bad)


def _ns(ps: int) -> str:
    ns = ps // 1000
    for unit, scale in (("ms", 10**6), ("us", 10**3)):
        if ns and ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"


def test_time_limit_bounds_the_command(tmp_path):
    streams = _streams([(f"s{i}", f"t{1 + i % 2}", "1ms", 200) for i in range(40)])
    path = write(tmp_path, line_network(streams, switches=2))
    code, err = run("network", path, "--out", str(tmp_path / "p"), "--time-limit", "0.001")
    assert code == 2 and "time limit" in err
    assert not (tmp_path / "p").exists()


def test_talker_slot_size_is_the_station_planners_choice():
    # the network planner computes the slot size in integers; it must be what keepon-plan solve would pick
    from keepon_plan.model import InputError, parse_flowset
    from keepon_plan.network.stations import smallest_slot
    from keepon_plan.network.topology import Stream
    from keepon_plan.params import choose_slot_bytes

    cases = [((250_000, 500_000), (128, 300)), ((100_000,), (1230,)), ((500_000, 1_000_000, 2_000_000), (64, 100, 80))]
    for periods, frames in cases:
        for rate in (10**9, 10**10, 100 * 10**6):
            streams = [
                Stream(f"f{i}", "t", ("l",), p, b, p, 0, 7, None)
                for i, (p, b) in enumerate(zip(periods, frames, strict=True))
            ]
            text = f"[link]\nrate = {rate}\n" + "".join(
                f'[[flow]]\nname = "f{i}"\nclass = "c"\nperiod = {p}\nframe_bytes = {b}\n'
                for i, (p, b) in enumerate(zip(periods, frames, strict=False))
            )
            fs = parse_flowset(text)
            try:
                expected = choose_slot_bytes(fs)
            except InputError:
                expected = None
            assert smallest_slot(rate, streams) == expected, (periods, frames, rate)


def test_guard_widens_every_switch_window_and_keeps_them_apart(tmp_path):
    text = SMALL.read_text().replace("traffic_class = 7 ", 'guard = "800ns"\ntraffic_class = 7 ', 1)
    path = write(tmp_path, text)
    out = tmp_path / "plan"
    code, err = run("network", path, "--out", str(out), "--method", "heuristic")
    assert code == 0, err
    net = load_network(path)
    assert net.guard_ps == 800_000
    assert verify_plan_dir(net, out) == []
    plan = json.loads((out / "plan.json").read_text())
    assert plan["guard_ps"] == 800_000
    # the topology a replay needs is in the plan
    assert {sw["name"]: sw["forwarding_delay_ps"] for sw in plan["network"]["switches"]} == {
        "sw1": 2_000_000,
        "sw2": 2_000_000,
    }
    assert any(lk["a"] == "sw1" and lk["b"] == "sw2" and lk["delay_ps"] == 500_000 for lk in plan["network"]["links"])
    # every frame's window on a switch port is open 800 ns before its first bit and after its last
    sw1 = json.loads((out / "switches" / "sw1.json").read_text())["ports"][0]
    opens, t = [], 0
    for e in sw1["entries"]:
        if e["gate_states"] & 0xC0:
            opens.append((t, t + e["interval_ns"]))
        t += e["interval_ns"]
    for s in plan["streams"]:
        hop = next(h for h in s["hops"] if h["link"] == "sw1->sw2")
        lo, hi = hop["start_ps"] // 1000 - 800, -(-hop["end_ps"] // 1000) + 800
        start = lo % sw1["cycle_ns"]
        assert any(a <= start and start + (hi - lo) <= b for a, b in opens), (s["name"], lo, hi, opens)
    # the same plan judged against a larger guard: its windows are too narrow, and the verifier says where
    wider = parse_network(text.replace('guard = "800ns"', 'guard = "2us"'), path)
    bad = verify_plan_dir(wider, out)
    assert any("is not open for the whole transmission" in b and "switch 'sw1'" in b for b in bad), bad
