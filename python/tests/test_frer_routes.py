"""Replicated streams (802.1CB FRER, ``replicate = 2``): maximally disjoint routes, both members scheduled and
verified, one station config per port, refusals naming the shared link, bad input naming the key."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from network_support import run, write

from keepon_plan.network.topology import parse_network
from keepon_plan.network.verify import verify_plan_dir

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "network" / "frer-ring.toml"


def network(links: list[tuple[str, str]], stream: str, stations=("t1", "l1"), switches=None) -> str:
    switches = switches or sorted({n for link in links for n in link if n.startswith("sw")})
    out = ["version = 1"]
    out += [f'[[station]]\nname = "{s}"' for s in stations]
    out += [f'[[switch]]\nname = "{s}"\nforwarding_delay = "1us"' for s in switches]
    out += [f'[[link]]\na = "{a}"\nb = "{b}"\nrate = "1Gbps"' for a, b in links]
    return "\n".join(out) + "\n" + stream


REPLICATED = (
    '[[stream]]\nname = "x"\ntalker = "t1"\nlisteners = ["l1"]\nperiod = "1ms"\nframe_bytes = 200\n'
    'max_latency = "200us"\nreplicate = 2\n'
)
RING6 = [("t1", "sw1"), ("t1", "sw2"), ("l1", "sw4"), ("l1", "sw5")] + [
    (f"sw{i}", f"sw{i % 6 + 1}") for i in range(1, 7)
]


def plan(tmp_path: Path, text: str) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    code, err = run("network", write(tmp_path, text), "--out", str(out))
    return code, err, out


def member_routes(out: Path, name: str) -> list[tuple[str, ...]]:
    doc = json.loads((out / "plan.json").read_text())
    members = sorted((s for s in doc["streams"] if s.get("replica_of") == name), key=lambda s: s["member"])
    return [tuple(s["routes"][0]) for s in members]


def links_of(route: tuple[str, ...]) -> set[frozenset]:
    return {frozenset(e) for e in itertools.pairwise(route)}


def test_ring_gives_node_and_edge_disjoint_routes_both_verified(tmp_path: Path) -> None:
    code, err, out = plan(tmp_path, network(RING6, REPLICATED))
    assert code == 0, err
    a, b = member_routes(out, "x")
    assert a[0] == b[0] == "t1" and a[-1] == b[-1] == "l1"
    assert not links_of(a) & links_of(b)
    assert not set(a[1:-1]) & set(b[1:-1])
    assert a[1] != b[1] and a[-2] != b[-2]  # each leaves and arrives on its own port
    assert "node- and edge-disjoint" in err
    doc = json.loads((out / "plan.json").read_text())
    assert doc["replicated"] == [{"name": "x", "members": ["x.1", "x.2"], "disjoint": "node", "shared_switches": []}]
    net = parse_network(network(RING6, REPLICATED))
    assert verify_plan_dir(net, out) == []
    # one runtime config per talker port, each with its own member
    configs = sorted(p.name for p in (out / "stations").iterdir())
    assert configs == ["t1.to-sw1.toml", "t1.to-sw2.toml"]
    by_port = {p: (out / "stations" / p).read_text() for p in configs}
    first = "x.1" if a[1] == "sw1" else "x.2"
    assert f'name = "{first}"' in by_port["t1.to-sw1.toml"]
    assert f'name = "{first}"' not in by_port["t1.to-sw2.toml"]
    yang = json.loads((out / "yang" / "t1.json").read_text())
    assert sorted(i["name"] for i in yang["ietf-interfaces:interfaces"]["interface"]) == ["to-sw1", "to-sw2"]


def test_shortest_disjoint_pair_is_chosen(tmp_path: Path) -> None:
    # a ring of 6 with the listener opposite the talker: both halves have 3 switches; a chord makes one shorter
    links = [*RING6, ("sw1", "sw5")]
    code, err, out = plan(tmp_path, network(links, REPLICATED))
    assert code == 0, err
    lengths = sorted(len(r) for r in member_routes(out, "x"))
    assert lengths == [4, 5]  # t1 → sw1 → sw5 → l1 through the chord, and t1 → sw2 → sw3 → sw4 → l1


def test_a_cut_switch_is_shared_and_said(tmp_path: Path) -> None:
    links = [("t1", "sw1"), ("t1", "sw2"), ("sw1", "sw3"), ("sw2", "sw3"), ("sw3", "sw4"), ("sw3", "sw5")]
    links += [("sw4", "l1"), ("sw5", "l1")]
    code, err, out = plan(tmp_path, network(links, REPLICATED))
    assert code == 0, err
    a, b = member_routes(out, "x")
    assert not links_of(a) & links_of(b) and "sw3" in a and "sw3" in b
    assert "edge-disjoint, sharing switch sw3" in err
    assert json.loads((out / "plan.json").read_text())["replicated"][0]["shared_switches"] == ["sw3"]


def test_a_bridge_is_refused_naming_the_link(tmp_path: Path) -> None:
    # a tree in the middle: sw3–sw4 is on every path from t1 to l1
    links = [("t1", "sw1"), ("t1", "sw2"), ("sw1", "sw3"), ("sw2", "sw3"), ("sw3", "sw4"), ("sw4", "sw5")]
    links += [("sw4", "l1"), ("sw5", "l1")]
    code, err, _ = plan(tmp_path, network(links, REPLICATED))
    assert code == 3, err
    assert "stream 'x'" in err and "link sw3–sw4 is on every path" in err
    assert "net.toml:" in err  # the line of the stream's replicate key


def test_given_routes_sharing_a_link_are_refused(tmp_path: Path) -> None:
    routes = 'routes = [["t1", "sw1", "sw6", "sw5", "l1"], ["t1", "sw2", "sw1", "sw6", "sw5", "sw4", "l1"]]\n'
    code, err, _ = plan(tmp_path, network(RING6, REPLICATED + routes))
    assert (code == 3 and "share link sw1–sw6" in err) or "share link sw5–sw6" in err, err


def test_given_disjoint_routes_are_kept(tmp_path: Path) -> None:
    given = [["t1", "sw2", "sw3", "sw4", "l1"], ["t1", "sw1", "sw6", "sw5", "l1"]]
    code, err, out = plan(tmp_path, network(RING6, REPLICATED + f"routes = {json.dumps(given)}\n"))
    assert code == 0, err
    assert member_routes(out, "x") == [tuple(r) for r in given]


@pytest.mark.parametrize(
    ("links", "extra", "needle"),
    [
        # a talker with one link
        ([("t1", "sw1"), ("l1", "sw1"), ("l1", "sw2"), ("sw1", "sw2")], "", "two ports at its talker 't1'"),
        # a listener with one link
        ([("t1", "sw1"), ("t1", "sw2"), ("l1", "sw1"), ("sw1", "sw2")], "", "two ports at its listener 'l1'"),
        (RING6, 'route = ["t1", "sw1", "sw6", "sw5", "l1"]\n', "takes two routes"),
    ],
)
def test_bad_input_names_the_stream_and_key(tmp_path: Path, links, extra: str, needle: str) -> None:
    code, err, _ = plan(tmp_path, network(links, REPLICATED + extra))
    assert code == 3, err
    assert "bad input" in err and "stream 'x'" in err and needle in err
    text = network(links, REPLICATED + extra)
    key = "route" if "route =" in extra else "replicate"
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith(f"{key} ="))
    assert f"net.toml:{line}:" in err


def test_replicate_bad_values(tmp_path: Path) -> None:
    code, err, _ = plan(tmp_path, network(RING6, REPLICATED.replace("replicate = 2", "replicate = 3")))
    assert code == 3 and "replicate" in err and "1..=2" in err
    two = REPLICATED.replace('["l1"]', '["l1", "l2"]')
    code, err, _ = plan(tmp_path, network([*RING6, ("l2", "sw3")], two, stations=("t1", "l1", "l2")))
    assert code == 3 and "exactly one listener" in err
    clash = REPLICATED + '[[stream]]\nname = "x.1"\ntalker = "t1"\nlisteners = ["l1"]\nperiod = "1ms"\n'
    code, err, _ = plan(tmp_path, network(RING6, clash + 'frame_bytes = 200\nmax_latency = "1ms"\n'))
    assert code == 3 and "duplicate stream name" in err


def test_verifier_catches_a_corrupted_replicated_plan(tmp_path: Path) -> None:
    text = network(RING6, REPLICATED)
    code, err, out = plan(tmp_path, text)
    assert code == 0, err
    net = parse_network(text)
    # member 2 rerouted onto member 1's route: no longer redundant
    doc = json.loads((out / "plan.json").read_text())
    by_member = {s.get("member"): s for s in doc["streams"]}
    bad_dir = tmp_path / "corrupt"
    shutil.copytree(out, bad_dir)
    by_member[2]["routes"] = by_member[1]["routes"]
    (bad_dir / "plan.json").write_text(json.dumps(doc))
    violations = verify_plan_dir(net, bad_dir)
    assert any("replicated stream 'x': both member streams cross link" in v for v in violations), violations
    # member 2 sent 10 µs late from its port's config: its hops are not where the plan and the gates have them
    late = tmp_path / "late"
    shutil.copytree(out, late)
    config = late / "stations" / "t1.to-sw2.toml"
    text_cfg = config.read_text()
    assert 'offset = "0ns"' in text_cfg
    config.write_text(text_cfg.replace('offset = "0ns"', 'offset = "10us"'))
    violations = verify_plan_dir(net, late)
    member = "x.1" if member_routes(out, "x")[0][1] == "sw2" else "x.2"
    assert any(f"stream {member!r}" in v for v in violations), violations
    assert not any("stream 'x.1'" in v for v in violations if member == "x.2")
    # a member's port config missing: that member is not sent
    bad_dir2 = tmp_path / "corrupt2"
    shutil.copytree(out, bad_dir2)
    port = "to-sw2"
    (bad_dir2 / "stations" / f"t1.{port}.toml").unlink()
    violations = verify_plan_dir(net, bad_dir2)
    assert any(f"station 't1.{port}': runtime config unreadable" in v for v in violations), violations


def test_switch_exports_are_those_of_two_plain_streams_on_the_same_routes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    code, err, out = plan(tmp_path / "a", network(RING6, REPLICATED))
    assert code == 0, err
    a, b = member_routes(out, "x")
    plain = "".join(
        f'[[stream]]\nname = "x.{m}"\ntalker = "t1"\nlisteners = ["l1"]\nperiod = "1ms"\nframe_bytes = 200\n'
        f'max_latency = "200us"\nroute = {json.dumps(list(r))}\n'
        for m, r in ((1, a), (2, b))
    )
    (tmp_path / "b").mkdir()
    code, err, out_plain = plan(tmp_path / "b", network(RING6, plain))
    assert code == 0, err
    for sub in ("yang", "switches", "taprio"):
        for f in sorted((out_plain / sub).iterdir()):
            if f.name.startswith("sw"):
                assert (out / sub / f.name).read_bytes() == f.read_bytes(), f"{sub}/{f.name} differs"
    for f in (out_plain / "stations").iterdir():  # the same but for the comment naming the description's path

        def body(path: Path) -> list[str]:
            return [x for x in path.read_text().splitlines() if not x.startswith("#")]

        assert body(out / "stations" / f.name) == body(f)


def test_the_example_plans_and_its_yang_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, err = run("network", str(EXAMPLE), "--out", str(out))
    assert code == 0, err
    assert "stream 'axis' replicated (802.1CB)" in err and "node- and edge-disjoint" in err
    code, err = run("network-verify", str(EXAMPLE), str(out))
    assert code == 0, err
    if shutil.which("yanglint") is None:
        pytest.skip("yanglint not installed (Debian package libyang2-tools); CI installs it")
    from keepon_plan.network.yang_modules import ensure_modules, yanglint

    modules = ensure_modules()
    for f in sorted((out / "yang").iterdir()):  # the two-port talker's document has two interfaces
        ok, msg = yanglint([f], modules)
        assert ok, f"{f.name}: {msg}"


def test_the_cnc_refuses_a_two_port_station(tmp_path: Path) -> None:
    from cnc_support import CYCLE, TOPOLOGY

    from keepon_plan.cnc.service import configure
    from keepon_plan.cnc.store import Store
    from keepon_plan.model import InputError

    store = Store(str(tmp_path / "db"))
    two_ports = TOPOLOGY + '[[link]]\na = "t1"\nb = "sw2"\nrate = "1Gbps"\n'
    with pytest.raises(InputError, match="station 't1' has two ports: the CNC plans one-port stations only"):
        configure(store, two_ports, None, CYCLE, {})
    assert store.config() == {}
