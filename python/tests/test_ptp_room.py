"""The planner keeps room for PTP (the flow set's `[ptp]`): its class owns enough ring slots (or window time) beyond
its flows' for PTP's frames at the configured intervals, the plan carries `[ptp]`, and the verifier checks it.

The rates here are worked out by hand from IEEE 1588's message intervals (a message every 2^log s), not taken from
the planner: as master Sync + Follow_Up (two-step) + Announce + Delay_Resp (E2E), as slave Delay_Req, P2P the
Pdelay exchange both ways (3 per interval).
"""

import math
import subprocess
import tomllib
from fractions import Fraction

import pytest
from test_runtime_roundtrip import keepon_binary

from keepon_plan.cli import main

# 100 Mb/s, 1230-byte slots: δ = 1250 B · 80 ns = 100 µs; a ring of 256 slots is a cycle of 25.6 ms.
RING = """
[link]
rate = "100Mbps"
[ring]
slot_bytes = 1230
slots = {slots}
[[class]]
name = "ctrl"
[[class]]
name = "sync"
[[class]]
name = "be"
"""

FLOWS = """
[[flow]]
name = "c1"
class = "ctrl"
period = "3200us"
frame_bytes = 200
count = 40
[[flow]]
name = "s1"
class = "sync"
period = "6400us"
frame_bytes = 300
count = 20
"""

# Master, two-step, E2E at 2^-7 s, Announce every 2 s: Sync 128 + Follow_Up 128 + Announce 0.5 + Delay_Resp 128.
FAST_MASTER = """
[ptp]
class = "sync"
role = "master"
log_sync_interval = -7
log_delay_req_interval = -7
"""
FAST_MASTER_RATE = Fraction(128 + 128 + 128) + Fraction(1, 2)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def solve(flows, out, *extra):
    return main(["solve", str(flows), "--out", str(out), "--time-limit", "30", *extra])


def classes(plan_path):
    doc = tomllib.loads(plan_path.read_text())
    owned = {}
    for c in doc["class"]:
        mask = int(c["mask"], 16) if "mask" in c else 0
        owned[c["name"]] = {i for i in range(mask.bit_length()) if mask >> i & 1}
    return doc, owned


def ring_slots_of_flow(doc, name):
    """Ring slots the plan's flow uses over one repetition (offsets/δ, δ = 100 µs, N from the plan)."""
    n = doc["ring"]["slots"]
    f = next(f for f in doc["flow"] if f["name"] == name)
    assert "instance_offsets" not in f
    offset, period = _ns(f["offset"]), _ns(f["period"])
    return {((offset + l * period) // 100_000) % n for l in range(n)}


def _ns(text):
    for unit, scale in (("ms", 10**6), ("us", 10**3), ("ns", 1)):
        if text.endswith(unit):
            return int(Fraction(text[: -len(unit)]) * scale)
    raise AssertionError(text)


def largest_gap(slots, n):
    s = sorted(slots)
    return max((b - a) % n or n for a, b in zip(s, s[1:] + s[:1], strict=True))


def test_the_ptp_class_owns_the_needed_slots_beyond_its_flows_spread_over_the_cycle(tmp_path, capsys):
    flows = write(tmp_path, "f.toml", RING.format(slots=256) + FLOWS + FAST_MASTER)
    plan = tmp_path / "plan.toml"
    assert solve(flows, plan) == 0, capsys.readouterr().err
    doc, owned = classes(plan)
    # 384.5 frames/s over a 25.6 ms cycle: 9.84, so 10 ring slots a cycle beyond what s1 uses.
    need = math.ceil(FAST_MASTER_RATE * Fraction(256 * 100_000, 10**9))
    assert need == 10
    used = ring_slots_of_flow(doc, "s1")
    kept = owned["sync"] - used
    assert len(kept) >= need, (owned["sync"], used)
    # The ring is nearly empty: the kept slots lie evenly, at most ⌈256/10⌉ = 26 apart.
    assert largest_gap(kept, 256) <= math.ceil(256 / need), sorted(kept)
    # The plan carries [ptp] as written; the verifier agrees.
    assert doc["ptp"] == {"class": "sync", "role": "master", "log_sync_interval": -7, "log_delay_req_interval": -7}
    assert main(["verify", str(flows), str(plan)]) == 0
    assert "PTP's room" in capsys.readouterr().err


def test_without_ptp_no_slots_are_kept(tmp_path, capsys):
    flows = write(tmp_path, "f.toml", RING.format(slots=256) + FLOWS)
    plan = tmp_path / "plan.toml"
    assert solve(flows, plan) == 0, capsys.readouterr().err
    doc, owned = classes(plan)
    assert owned["sync"] == ring_slots_of_flow(doc, "s1")
    assert "ptp" not in doc


@pytest.mark.parametrize(
    ("ptp", "rate"),
    [
        # The runtime's defaults (role auto: the master's side is larger): Sync 1 + Follow_Up 1 + Announce 0.5 +
        # Delay_Resp 1.
        ('class = "sync"\n', Fraction(7, 2)),
        # A slave sends only Delay_Req (2^-5 s).
        ('class = "sync"\nrole = "slave"\nlog_delay_req_interval = -5\n', Fraction(32)),
        # gPTP's defaults: Sync and Follow_Up 8, Announce 1, the Pdelay exchange 3 × 1.
        ('class = "sync"\nprofile = "gptp"\n', Fraction(20)),
        # One-step master: no Follow_Up (Sync 64, Announce 0.5, Delay_Resp 1).
        ('class = "sync"\nrole = "master"\none_step = true\nlog_sync_interval = -6\n', Fraction(131, 2)),
    ],
)
def test_the_kept_slots_follow_the_intervals(tmp_path, capsys, ptp, rate):
    # A 4096-slot ring of 100 µs slots: a cycle of 409.6 ms.
    flows = write(tmp_path, "f.toml", RING.format(slots=4096) + FLOWS + "[ptp]\n" + ptp)
    plan = tmp_path / "plan.toml"
    assert solve(flows, plan) == 0, capsys.readouterr().err
    doc, owned = classes(plan)
    need = math.ceil(rate * Fraction(4096 * 100_000, 10**9))
    kept = owned["sync"] - ring_slots_of_flow(doc, "s1")
    assert len(kept) == need, (need, sorted(kept))


def test_a_set_that_fits_only_without_ptp_is_refused_naming_the_class(tmp_path, capsys):
    # 32 ring slots of 100 µs (3.2 ms), all taken by 32 flows of one a cycle; PTP needs one more.
    ring = RING.format(slots=32)
    many = "".join(
        f'[[flow]]\nname = "f{i}"\nclass = "ctrl"\nperiod = "3200us"\nframe_bytes = 100\n' for i in range(32)
    )
    flows = write(tmp_path, "f.toml", ring + many)
    assert solve(flows, tmp_path / "a.toml") == 0, capsys.readouterr().err
    capsys.readouterr()
    flows = write(tmp_path, "g.toml", ring + many + '[ptp]\nclass = "sync"\n')
    assert solve(flows, tmp_path / "b.toml") == 1
    err = capsys.readouterr().err
    assert "infeasible (proven): ptp: class 'sync'" in err, err
    # Both rates: what the free ring slots carry (none: 0 frames/s) and what PTP needs (3.5 frames/s).
    assert "carry 0 frames/s, PTP needs 3.5" in err, err
    assert not (tmp_path / "b.toml").exists()


def test_a_proof_beyond_counting_names_the_kept_slots(tmp_path, capsys):
    # A 300 µs flow on a ring of four 100 µs slots visits every ring slot (gcd(3, 4) = 1), so "ctrl" must own
    # all four, though by counting it needs only ⌈4/3⌉ = 2: counting leaves room for PTP, the search does not.
    ring = RING.format(slots=4)
    text = ring + '[[flow]]\nname = "a"\nclass = "ctrl"\nperiod = "300us"\nframe_bytes = 100\n'
    assert solve(write(tmp_path, "f.toml", text), tmp_path / "a.toml") == 0, capsys.readouterr().err
    capsys.readouterr()
    flows = write(tmp_path, "g.toml", text + '[ptp]\nclass = "sync"\n')
    assert solve(flows, tmp_path / "p.toml") == 1
    err = capsys.readouterr().err
    assert "infeasible (proven)" in err and "kept for PTP in class 'sync'" in err and "3.5 frames/s" in err, err


@pytest.mark.parametrize(
    ("ptp", "key"),
    [
        ('class = "sync"\nlog_sync = -3\n', "log_sync"),
        ('class = "sync"\nprofile = "ieee"\n', "ptp.profile"),
        ('class = "sync"\nrole = "boss"\n', "ptp.role"),
        ('class = "sync"\nprofile = "gptp"\ndelay_mechanism = "e2e"\n', "ptp.delay_mechanism"),
        ('class = "nope"\n', "ptp.class"),
        ('role = "master"\n', "class"),
        ('class = "sync"\nlog_sync_interval = 5\n', "ptp.log_sync_interval"),
        ('class = "sync"\nrole = "slave"\none_step = true\n', "ptp.one_step"),
        ('class = "sync"\nlog_pdelay_req_interval = 0\n', "ptp.log_pdelay_req_interval"),
        ('class = "sync"\nprofile = "automotive"\n', "ptp.role"),
        ('class = "sync"\none_step = "yes"\n', "ptp.one_step"),
    ],
)
def test_bad_ptp_input_is_exit_3_naming_the_key_and_line(tmp_path, capsys, ptp, key):
    text = RING.format(slots=32) + FLOWS + "[ptp]\n" + ptp
    flows = write(tmp_path, "f.toml", text)
    for argv in (
        ["solve", str(flows), "--out", str(tmp_path / "p.toml")],
        ["solve", str(flows), "--out", str(tmp_path / "p.toml"), "--timing", "bytes"],
        ["params", str(flows)],
    ):
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert f"bad input: {flows}:" in err and key in err, err
    # The line is the key's (or, for a missing key, the table's).
    line = int(err.split(f"{flows}:")[1].split(":")[0])
    lines = text.splitlines()
    wanted = key.removeprefix("ptp.")
    assert lines[line - 1].startswith(wanted) or lines[line - 1] == "[ptp]", (line, lines[line - 1])


def test_the_verifier_flags_a_plan_that_takes_ptps_slots_away(tmp_path, capsys):
    flows = write(tmp_path, "f.toml", RING.format(slots=256) + FLOWS + FAST_MASTER)
    plan = tmp_path / "plan.toml"
    assert solve(flows, plan) == 0, capsys.readouterr().err
    doc, owned = classes(plan)
    used = ring_slots_of_flow(doc, "s1")
    text = plan.read_text()
    # Give "sync" only its flow's slots and one more: 1 < 10 kept.
    one = min(owned["sync"] - used)
    mask = hex(sum(1 << s for s in used | {one}))
    edited = text.replace(f'mask = "{hex(sum(1 << s for s in owned["sync"]))}"', f'mask = "{mask}"')
    assert edited != text
    bad = write(tmp_path, "bad.toml", edited)
    capsys.readouterr()
    assert main(["verify", str(flows), str(bad)]) == 1
    err = capsys.readouterr().err
    assert "invalid: ptp room: class 'sync' (ptp.class) keeps 1 ring slot a cycle that no flow uses" in err, err
    assert "PTP needs 384.5 frames/s" in err, err
    # A plan without the [ptp] table is flagged too (the runtime would not synchronise).
    cut = write(tmp_path, "cut.toml", text.split("\n[ptp]\n")[0])
    assert main(["verify", str(flows), str(cut)]) == 1
    assert "ptp: the flow set's [ptp] (class 'sync') is missing from the plan" in capsys.readouterr().err


def ptp_places(windows, busy, frame):
    """Whole frames of ``frame`` ns that fit in ``windows`` ((offset, length) ns) outside the ``busy`` intervals."""
    places = 0
    for start, length in windows:
        at, end = start, start + length
        for b0, b1 in sorted(busy):
            if b1 <= at or b0 >= end:
                continue
            places += max(0, b0 - at) // frame
            at = max(at, b1)
        places += max(0, end - at) // frame
    return places


def test_byte_clock_windows_hold_ptps_frames(tmp_path, capsys):
    # gPTP automotive master at 2^-7 s: Sync 128 + Follow_Up 128 + Pdelay 3 × 128 = 640 frames/s; the cycle is
    # the flows' hyperperiod, 6.4 ms: 4.096, so 5 frames of 110 B (130 B on the wire: 10 400 ns at 100 Mb/s).
    ptp = '[ptp]\nclass = "sync"\nprofile = "automotive"\nrole = "master"\nlog_sync_interval = -7\n'
    ptp += "log_pdelay_req_interval = -7\n"
    flows = write(tmp_path, "f.toml", RING.format(slots=32) + FLOWS + ptp)
    plan = tmp_path / "plan.toml"
    assert solve(flows, plan, "--timing", "bytes") == 0, capsys.readouterr().err
    doc = tomllib.loads(plan.read_text())
    need = math.ceil(Fraction(640) * Fraction(6_400_000, 10**9))
    assert need == 5
    sync = next(c for c in doc["class"] if c["name"] == "sync")
    windows = [(_ns(o), _ns(n)) for o, n in sync["windows"]]
    s1 = _ns(next(f for f in doc["flow"] if f["name"] == "s1")["offset"]) % 6_400_000
    busy = [(s1, s1 + 320 * 80)]  # s1's 300 B frame: 320 B on the wire
    assert ptp_places(windows, busy, 130 * 80) >= need, windows
    assert doc["ptp"]["profile"] == "automotive"
    assert main(["verify", str(flows), str(plan)]) == 0
    # The class's windows cut to its flow's frame leave PTP nothing: the verifier names the class.
    capsys.readouterr()
    lines = plan.read_text().splitlines()
    at = lines.index('name = "sync"') + 1
    assert lines[at].startswith("windows = ")
    lines[at] = f'windows = [["{s1}ns", "25600ns"]]'
    bad = write(tmp_path, "bad.toml", "\n".join(lines) + "\n")
    assert main(["verify", str(flows), str(bad)]) == 1
    err = capsys.readouterr().err
    assert "ptp room: class 'sync' (ptp.class): its windows hold 0 of PTP's 110 B frames" in err, err


def test_the_runtime_accepts_the_plan_and_refuses_it_without_ptps_room(tmp_path, capsys):
    exe = keepon_binary()
    if exe is None:
        pytest.skip("keepon binary not built (cargo build -p keepon)")
    # Alone on the simulated link the station is master: `keepon run` synchronises at once and sends the flows.
    flows = write(tmp_path, "f.toml", RING.format(slots=256) + FLOWS + FAST_MASTER)
    plan = tmp_path / "plan.toml"
    assert solve(flows, plan) == 0, capsys.readouterr().err
    records = tmp_path / "records.csv"
    run = subprocess.run(
        [str(exe), "run", "--config", str(plan), "--records", str(records), "--sync-wait", "20s"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "network time" in run.stdout + run.stderr, run.stdout + run.stderr
    # The same plan with PTP's kept slots given back to best effort: the runtime refuses it at start, naming the
    # class and both rates (its own check, crates/keepon/src/ptproom.rs).
    doc, owned = classes(plan)
    used = ring_slots_of_flow(doc, "s1")
    text = plan.read_text()
    edited = text.replace(
        f'mask = "{hex(sum(1 << s for s in owned["sync"]))}"', f'mask = "{hex(sum(1 << s for s in used))}"'
    )
    bad = write(tmp_path, "bad.toml", edited)
    run = subprocess.run(
        [str(exe), "run", "--config", str(bad), "--records", str(records)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode != 0
    assert 'ptp.class = "sync": its ring slots carry' in run.stderr and "PTP needs 384.5" in run.stderr, run.stderr


def test_slots_too_long_for_a_synchronised_station_are_bad_input(tmp_path, capsys):
    # With [ptp] the runtime needs fillers to lengthen by 100 ppm of a slot within link.max_frame (1518 B): a
    # 2000-byte slot cannot, a 1517-byte one can.
    text = (
        '[link]\nrate = "100Mbps"\n[ring]\nslot_bytes = 2000\nslots = 32\n'
        '[[flow]]\nname = "a"\nclass = "ctrl"\nperiod = "1616us"\nframe_bytes = 1900\n'
        '[ptp]\nclass = "ctrl"\n'
    )
    flows = write(tmp_path, "f.toml", text)
    assert solve(flows, tmp_path / "p.toml") == 3
    err = capsys.readouterr().err
    assert f"{flows}:11: [ptp]: slot_bytes 2000" in err and "at most 1517 B" in err, err
    # Without [ptp] the same set plans.
    flows = write(tmp_path, "g.toml", text.split("[ptp]")[0])
    assert solve(flows, tmp_path / "p.toml") == 0, capsys.readouterr().err
