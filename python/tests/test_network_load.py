"""keepon-plan network at high load: the free departures, the ejection repair and the greedy's orders."""

from __future__ import annotations

import random
import time

from network_support import line_network, run, write

from keepon_plan.deadline import Deadline
from keepon_plan.network.departures import free_ranges, least_covered
from keepon_plan.network.eject import eject
from keepon_plan.network.plan import greedy_orders
from keepon_plan.network.routing import Router, route_stream
from keepon_plan.network.schedule import Placement, _nowait, _State, departure_range, grids_of, hyperperiod_ps
from keepon_plan.network.stations import station_rings
from keepon_plan.network.sweep import generate
from keepon_plan.network.topology import load_network, parse_network
from keepon_plan.network.verify import verify_plan_dir


def test_a_line_at_75_percent_the_old_greedy_left_out_is_planned_and_verified(tmp_path):
    # network-sweep's 20-bridge line with 1 522-byte frames at 75 % (seed 25, 474 streams): the greedy by period
    # with its repair passes and the LNS left one stream out (unknown, measured before this placement); the greedy by
    # demand and the ejection repair place all of them, and the verifier replays the plan.
    text, n, busiest = generate("line", 20, 1000, "1522", 75, 25)
    assert n == 474 and 74 < busiest <= 75
    path = write(tmp_path, 'timing = "bytes"\n' + text)
    code, err = run("network", path, "--out", str(tmp_path / "p"), "--time-limit", "60")
    assert code == 0, err
    assert verify_plan_dir(load_network(path), tmp_path / "p") == []


def _placed(text: str):
    net = parse_network(text, "<test>")
    rings = station_rings(net)
    router = Router(net)
    routed = [route_stream(net, router, s, rings[s.talker].wire_bytes(s)) for s in net.streams]
    grids = grids_of(net, rings, queueing=True)
    return net, routed, grids, _State(hyperperiod_ps(routed), net, grids)


def test_the_free_departures_are_exactly_those_without_a_collision():
    # three talkers' streams through one switch to l1, some placed by hand: every departure of a fourth stream on
    # its grid is free iff the no-wait check finds nothing in its way, and the least covered one meets the fewest.
    streams = "".join(
        f'[[stream]]\nname = "s{i}"\ntalker = "t{1 + i % 3}"\nlisteners = ["l1"]\nperiod = "200us"\n'
        f'frame_bytes = {100 + 150 * i}\nmax_latency = "1ms"\n'
        for i in range(4)
    )
    _net, routed, grids, state = _placed('timing = "bytes"\n' + line_network(streams, talkers=3))
    for r, a in zip(routed[:3], (0, 30_000_000, 90_000_000), strict=True):
        state.add(r, r.nowait_starts(a))
    r = routed[3]
    grid = grids.departure_ps[r.stream.talker]
    lo, hi = departure_range(r, grids)
    ranges = free_ranges(state, r, lo, hi, grid)
    free = {s for s0, s1 in ranges for s in range(s0, s1 + 1)}
    period = r.stream.period_ns * 1000
    for s in range(-(-lo // grid), hi // grid + 1):
        assert (s in free) == (_nowait(state, r, s * grid, period)[0] == 0), s
    assert free and len(free) < (hi - lo) // grid
    a = least_covered(state, r, lo, hi, grid, random.Random(1))
    assert a is not None and a // grid in free


def test_the_ejection_repair_puts_a_stream_in_and_keeps_the_state_exact():
    # the sweep's line at 85 % (seed 26): whatever the moves, the state the repair ends with holds exactly the
    # placement it returns (every window of every placed stream, nothing else), and that placement is verified.
    text, _n, _busiest = generate("line", 20, 1000, "1522", 85, 26)
    net, routed, grids, state = _placed('timing = "bytes"\n' + text)
    from keepon_plan.network.schedule import greedy

    _label, order = greedy_orders(routed)[1]
    placement, _ = greedy(routed, net, grids, Deadline(60), order, state)
    assert placement.unplaced
    rank = {r.stream.name: k for k, r in enumerate(order)}
    by_name = {r.stream.name: r for r in routed}
    fixed, how = eject(state, by_name, placement, rank, time.monotonic() + 20)
    assert len(fixed.unplaced) < len(placement.unplaced), how
    assert set(fixed.starts_ps) | {n for n, _ in fixed.unplaced} == set(by_name)
    fresh = _State(state.horizon, net, grids)
    for name, st in fixed.starts_ps.items():
        fresh.add(by_name[name], st)
    for link, occ in state.busy.items():
        other = fresh.busy.get(link)
        got = sorted(zip(occ.starts, occ.ends, occ.who, strict=True))
        want = sorted(zip(other.starts, other.ends, other.who, strict=True)) if other else []
        assert got == want, link
    assert isinstance(fixed, Placement)


class _PassesAsTheGreedyStarts(Deadline):
    """A time limit that passes just after the greedy's stage is entered."""

    def enter(self, stage: str) -> None:
        super().enter(stage)
        if stage.startswith("greedy"):
            self.at = time.monotonic()


def test_a_greedy_stopped_by_the_time_limit_says_how_far_it_got():
    # the time limit passes as the greedy starts: the answer is unknown and says what the greedy did (not only
    # "time limit reached"), with a stream it left out
    from keepon_plan.network.plan import UNKNOWN, plan_network

    text, _n, _busiest = generate("line", 20, 1000, "1522", 75, 25)
    net = parse_network('timing = "bytes"\n' + text, "<test>")
    status, why = plan_network(net, _PassesAsTheGreedyStarts(60), "auto", say=lambda m: None)
    assert status == UNKNOWN
    assert "greedy (by demand, first fit) placed 0 of 474 when the time limit stopped it" in why, why
    assert "474 streams left out" in why, why
