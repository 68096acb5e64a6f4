"""keepon-plan network where it is hard: byte-clock talkers, queueing, certificates, offsets and deadlines, GCL caps."""

from __future__ import annotations

import json
import tomllib

from network_support import line_network, run, write

from keepon_plan.network.topology import load_network
from keepon_plan.network.verify import verify_plan_dir
from keepon_plan.network.verify_certificate import check_certificate


def _stream(name: str, talker: str, period: str, frame: int, extra: str = "", latency: str = "1ms") -> str:
    return (
        f'[[stream]]\nname = "{name}"\ntalker = "{talker}"\nlisteners = ["l1"]\nperiod = "{period}"\n'
        f'frame_bytes = {frame}\nmax_latency = "{latency}"\n{extra}'
    )


def _six_full_frames() -> str:
    # six talkers, one 1522-byte frame each per 100 µs, all to l1: on slots each is padded to a 2480-byte slot
    # (20 µs at 1 Gb/s: the smallest slot dividing 100 µs that holds it), 120 µs per 100 µs on sw1→l1; at their own
    # length (1542 wire bytes, 12.336 µs) they need 74 %.
    return line_network("".join(_stream(f"s{i}", f"t{i}", "100us", 1522) for i in range(1, 7)), talkers=6)


def test_a_set_that_fits_only_on_the_byte_clock(tmp_path):
    slots = write(tmp_path, _six_full_frames())
    cert = tmp_path / "cert.json"
    code, err = run("network", slots, "--out", str(tmp_path / "p"), "--certificate", str(cert))
    assert code == 1, err  # not 3: the set is not bad input, it fits unpadded
    assert "120.0 %" in err and "74.0 %" in err and 'timing = "bytes"' in err and "padded" in err
    doc = json.loads(cert.read_text())
    assert doc["kind"] == "capacity" and doc["model"]["frames"] == "padded" and doc["link"] == "sw1->l1"
    code, err = run("network-verify", slots, "--certificate", str(cert))
    assert code == 0, err

    on_bytes = write(tmp_path, 'timing = "bytes"\n' + _six_full_frames(), "bytes.toml")
    out = tmp_path / "b"
    code, err = run("network", on_bytes, "--out", str(out))
    assert code == 0, err
    assert verify_plan_dir(load_network(on_bytes), out) == []
    plan = json.loads((out / "plan.json").read_text())
    assert {s["wire_bytes"] for s in plan["streams"]} == {1522}
    # every hop as long as the frame: 1542 bytes at 8 ns
    assert all(h["end_ps"] - h["start_ps"] == 1542 * 8000 for s in plan["streams"] for h in s["hops"])
    t1 = tomllib.loads((out / "stations" / "t1.toml").read_text())
    assert t1["link"]["timing"] == "bytes"
    # The frame's wire time (1 542 B: 12 336 ns) and one byte more, for the runtime's rounding to a byte.
    assert [w[1] for c in t1["class"] for w in c.get("windows", [])] == ["12344ns"]
    # the byte-clock certificate of the same set would not hold: the verifier refuses it
    doc["model"]["frames"] = "own length"
    for row in doc["streams"]:
        row["wire_bytes"] = 1522
    doc["demand_ps"] = 6 * 1542 * 8000
    assert any("fits in the interval" in v for v in check_certificate(load_network(on_bytes), doc))


def _two_paths(extra_a: str, extra_b: str, same_class: bool = False) -> str:
    # a: t1 → sw1 → sw2 → l1 (1000 B; hops at 0, 9.16 µs and 18.42 µs after it leaves); b: t2 → sw2 → l1, its hop
    # onto sw2→l1 9.16 µs after it leaves. With a leaving at 0 and b at 10.264 µs, both want sw2→l1 at about
    # 18.4 µs without waiting: no no-wait schedule, but b can wait in sw2 for a's frame to pass.
    tc = "" if same_class else "traffic_class = 6\n"
    return f"""version = 1
timing = "bytes"
[[station]]
name = "t1"
[[station]]
name = "t2"
[[station]]
name = "l1"
[[switch]]
name = "sw1"
forwarding_delay = "1us"
[[switch]]
name = "sw2"
forwarding_delay = "1us"
[[link]]
a = "t1"
b = "sw1"
rate = "1Gbps"
[[link]]
a = "t2"
b = "sw2"
rate = "1Gbps"
[[link]]
a = "sw1"
b = "sw2"
rate = "1Gbps"
delay = "100ns"
[[link]]
a = "sw2"
b = "l1"
rate = "1Gbps"
{_stream("a", "t1", "100us", 1000, extra_a)}{_stream("b", "t2", "100us", 1000, extra_b + tc)}"""


PIN_A = 'earliest_offset = "0ns"\nlatest_offset = "0ns"\n'
PIN_B = 'earliest_offset = "10264ns"\nlatest_offset = "10264ns"\n'


def test_a_set_feasible_only_with_queueing(tmp_path):
    path = write(tmp_path, _two_paths(PIN_A, PIN_B))
    net = load_network(path)
    out = tmp_path / "q"
    code, err = run("network", path, "--out", str(out))
    assert code == 0, err
    assert verify_plan_dir(net, out) == []
    plan = {s["name"]: s for s in json.loads((out / "plan.json").read_text())["streams"]}
    a_hop = next(h for h in plan["a"]["hops"] if h["link"] == "sw2->l1")
    b_hop = next(h for h in plan["b"]["hops"] if h["link"] == "sw2->l1")
    assert b_hop["wait_ps"] > 0 and b_hop["start_ps"] == a_hop["end_ps"]  # b waits for a's last bit, then goes
    assert plan["b"]["departure_ps"] == 10_264_000

    # without queueing: refused, with a certificate that holds in the no-wait model
    cert = tmp_path / "nowait.json"
    code, err = run("network", path, "--out", str(tmp_path / "n"), "--no-wait", "--certificate", str(cert))
    assert code == 1, err
    doc = json.loads(cert.read_text())
    assert doc["kind"] == "pair" and doc["model"]["hops"] == "no-wait" and doc["link"] == "sw2->l1"
    assert check_certificate(net, doc) == []
    code, err = run("network-verify", path, "--certificate", str(cert))
    assert code == 0, err
    # the same claim in the model with queueing is refused by the verifier
    doc["model"]["hops"] = "strictly periodic"
    assert check_certificate(net, doc)

    # the verifier replays 802.1Qbv: b's frame waiting while its gate is open is caught, and so is a queue
    # on a switch that allows none
    bad = verify_plan_dir(
        load_network(
            write(
                tmp_path,
                _two_paths(PIN_A, PIN_B).replace('name = "sw2"\n', 'name = "sw2"\nmax_queue_frames = 0\n'),
                "noq.toml",
            )
        ),
        out,
    )
    assert any("frames wait at once" in v and "sw2" in v for v in bad), bad


def test_a_corrupted_certificate_is_refused(tmp_path):
    path = write(tmp_path, _two_paths(PIN_A, PIN_B))
    net = load_network(path)
    cert = tmp_path / "c.json"
    code, _ = run("network", path, "--out", str(tmp_path / "n"), "--no-wait", "--certificate", str(cert))
    assert code == 1
    doc = json.loads(cert.read_text())
    moved = dict(doc, link="sw1->sw2")  # a port only one of the two streams uses
    assert any("does not use link sw1→sw2" in v for v in check_certificate(net, moved))
    wider = json.loads(cert.read_text())
    wider["streams"][1]["departure_range_ps"] = [10_264_000, 10_400_000]  # a window beyond the stream's
    assert any("not within its offsets" in v for v in check_certificate(net, wider))

    slots = write(tmp_path, _six_full_frames(), "six.toml")
    six = load_network(slots)
    code, _ = run("network", slots, "--out", str(tmp_path / "p"), "--certificate", str(cert))
    assert code == 1
    doc = json.loads(cert.read_text())
    assert check_certificate(six, doc) == []
    for change, expect in (
        ({"link": "t1->sw1"}, "does not use link t1→sw1"),
        ({"link": "sw1->t9"}, "does not exist"),
        ({"interval_ps": [0, 150_000_000]}, "not a whole number"),
        ({"demand_ps": doc["demand_ps"] - 8000}, "the demand is 120000000 ps, not"),
    ):
        bad = check_certificate(six, dict(doc, **change))
        assert any(expect in v for v in bad), (change, bad)
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps(dict(doc, link="t1->sw1")))
    code, err = run("network-verify", slots, "--certificate", str(bad_file))
    assert code == 1 and "certificate refused" in err


def _one_stream(extra: str) -> str:
    # t1 → sw1 → l1, 1000 B: 8160 ns per hop and 1 µs forwarding: the last bit arrives 17 320 ns after the first
    # leaves
    return 'timing = "bytes"\n' + line_network(_stream("s", "t1", "100us", 1000, extra), talkers=1)


def test_a_deadline_window_is_respected_to_the_nanosecond(tmp_path):
    exact = write(tmp_path, _one_stream('earliest_offset = "5us"\ndeadline = "22320ns"\n'))
    out = tmp_path / "p"
    code, err = run("network", exact, "--out", str(out))
    assert code == 0, err
    net = load_network(exact)
    assert verify_plan_dir(net, out) == []
    plan = json.loads((out / "plan.json").read_text())["streams"][0]
    assert plan["departure_ps"] == 5_000_000 and plan["latency_ps"]["l1"] == 17_320_000  # arrives at 22 320 ns

    late = write(tmp_path, _one_stream('earliest_offset = "5us"\ndeadline = "22319ns"\n'), "late.toml")
    cert = tmp_path / "c.json"
    code, err = run("network", late, "--out", str(tmp_path / "l"), "--certificate", str(cert))
    assert code == 1 and "deadline 22319 ns" in err, err
    assert check_certificate(load_network(late), json.loads(cert.read_text())) == []

    # the verifier holds the plan to the window: one byte earlier than earliest_offset, or a deadline 1 ns shorter
    path = out / "stations" / "t1.toml"
    text = path.read_text()
    path.write_text(text.replace('offset = "5us"', 'offset = "4992ns"'))
    bad = verify_plan_dir(net, out)
    assert any("outside its transmit-offset window" in v for v in bad), bad
    path.write_text(text)
    assert any("after its deadline 22319 ns" in v for v in verify_plan_dir(load_network(late), out))


def test_a_gate_list_cap_of_eight_is_honoured_or_the_port_named(tmp_path):
    # three streams at 100 µs and one at 50 µs through sw1→l1 on a 100 µs cycle: first fit packs them back to
    # back, two windows of tc7 and the gaps: within 8 entries
    fits = "".join(_stream(f"s{i}", f"t{i}", "100us", 200) for i in range(1, 4)) + _stream("f", "t4", "50us", 200)
    text = line_network(fits, talkers=4).replace('name = "sw1"\n', 'name = "sw1"\nsupported_list_max = 8\n')
    path = write(tmp_path, text)
    out = tmp_path / "p"
    code, err = run("network", path, "--out", str(out))
    assert code == 0, err
    doc = json.loads((out / "switches" / "sw1.json").read_text())
    assert all(len(p["entries"]) <= 8 for p in doc["ports"])
    assert verify_plan_dir(load_network(path), out) == []
    # five more streams, each in a class of its own: a window each, nine at least with tc7's; refused, naming the port
    dense = text + "".join(_stream(f"d{c}", "t1", "100us", 200, f"traffic_class = {c}\n") for c in range(5))
    code, err = run("network", write(tmp_path, dense, "dense.toml"), "--out", str(tmp_path / "d"))
    assert code in (2, 3) and "switch 'sw1' port 'to-l1'" in err and "supported_list_max 8" in err, err


def test_the_byte_clock_example(tmp_path):
    from network_support import SMALL

    example = str(SMALL.parent / "byteclock.toml")
    out = tmp_path / "p"
    code, err = run("network", example, "--out", str(out))
    assert code == 0 and "1 of 3 streams wait in a queue" in err, err
    assert verify_plan_dir(load_network(example), out) == []
    plan = {s["name"]: s for s in json.loads((out / "plan.json").read_text())["streams"]}
    assert plan["a"]["wire_bytes"] == 1000 and plan["b"]["wire_bytes"] == 2480  # t2 stays on slots: padded
    assert plan["c"]["latency_ps"]["l1"] <= 40_000_000 - 10_264_000  # its deadline
    code, err = run("network", example, "--out", str(tmp_path / "n"), "--no-wait")
    assert code == 1 and "'a' and 'c'" in err and "no-wait" in err, err


def test_a_gate_granularity_widens_every_window_to_it(tmp_path):
    streams = "".join(_stream(f"s{i}", f"t{i}", "100us", 300) for i in range(1, 4))
    text = line_network(streams, talkers=3).replace('name = "sw1"\n', 'name = "sw1"\ngate_granularity = "1us"\n')
    path = write(tmp_path, text)
    out = tmp_path / "p"
    code, err = run("network", path, "--out", str(out))
    assert code == 0, err
    entries = json.loads((out / "switches" / "sw1.json").read_text())["ports"][0]["entries"]
    assert all(e["interval_ns"] % 1000 == 0 for e in entries)
    assert sum(1 for e in entries if e["gate_states"] & 0x80) >= 1
    net = load_network(path)
    assert verify_plan_dir(net, out) == []
    # the same plan against a switch whose gates move on 3 µs: the verifier names the port
    coarse = load_network(
        write(tmp_path, text.replace('gate_granularity = "1us"', 'gate_granularity = "3us"'), "c.toml")
    )
    assert any("gate_granularity 3000 ns" in v and "sw1" in v for v in verify_plan_dir(coarse, out))


def test_a_wait_into_the_next_period_is_replayed(tmp_path):
    # a leaves at 91 µs and is ready at sw2→l1 at 109.42 µs, 9.42 µs into the next period, while b (same class,
    # leaving at 0) is on that link from 9.16 to 17.32 µs: a waits behind b, and the verifier's queue simulation must
    # take a's ready time modulo the hyperperiod to put it behind b
    pin_a = 'earliest_offset = "91us"\nlatest_offset = "91us"\n'
    pin_b = 'earliest_offset = "0ns"\nlatest_offset = "0ns"\n'
    path = write(tmp_path, _two_paths(pin_a, pin_b, same_class=True))
    out = tmp_path / "p"
    code, err = run("network", path, "--out", str(out))
    assert code == 0, err
    plan = {s["name"]: s for s in json.loads((out / "plan.json").read_text())["streams"]}
    a_hop = next(h for h in plan["a"]["hops"] if h["link"] == "sw2->l1")
    b_hop = next(h for h in plan["b"]["hops"] if h["link"] == "sw2->l1")
    assert a_hop["wait_ps"] > 0 and a_hop["start_ps"] == b_hop["end_ps"] + 100_000_000
    assert verify_plan_dir(load_network(path), out) == []
