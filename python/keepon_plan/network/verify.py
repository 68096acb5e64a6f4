"""Independent verifier of a network plan directory: replays every frame instance hop by hop.

It reads the network description and the written files only — each talker's runtime config (``stations/*.toml``, as
keepon reads it), the routes in ``plan.json`` and the switches' gate control lists (``switches/*.json``) — and
uses nothing of the scheduler: it recomputes every time from the topology itself. Over the hyperperiod ``H`` (lcm of
all periods) it checks:

1. every stream of the description has a plan entry whose routes exist and reach exactly its listeners;
2. on slots, the talker sends instance ``l`` at the start of slot ``⌊(offset + l·period)/δ⌋`` of its ring (keepon's
   mapping), in a ring slot its class owns, the frame padded to the slot size; on the byte clock
   (``timing = "bytes"``) at ``offset + l·period`` exactly, at its own length, its wire time inside one window of its
   class; within the stream's transmit-offset window ``[earliest_offset, latest_offset]``;
3. hop by hop, store-and-forward, as an 802.1Qbv bridge forwards: the frame is ready at a switch's egress when its
   last bit is in plus the forwarding delay; a frame the plan has not wait needs its class's gate open for its whole
   transmission then; otherwise it starts at the first time from then at which the gate is open and stays open for
   the whole frame, and while it waits the gate must be closed (so each class queue holds one waiting frame, in FIFO
   order), and no more frames wait at once in one class queue than the switch's ``max_queue_frames`` (none with
   ``queueing = false``). Every hop of instance 0 must be where ``plan.json`` says, every instance one period on;
4. no two frames overlap on any directed link (modulo ``H``);
5. with a ``guard``, the gate is open over the guarded window of every frame (and these windows do not overlap);
   every port's list has at most ``supported_list_max`` entries, each a whole number of ``gate_granularity``;
6. every listener receives every instance within ``max_latency`` and by its absolute ``deadline`` after the period
   start, and the instances' latencies spread by at most ``max_jitter``.

Each violation is one line naming the stream, link or port.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import tomllib
from pathlib import Path

from ..units import parse_duration, parse_mask
from .topology import Network


def _byte_ps(rate: int) -> int:
    return 8 * 10**12 // rate


_UNIT_NS = {"ns": 1, "us": 1000, "µs": 1000, "ms": 10**6, "s": 10**9}


def _dur(value) -> int:
    """A duration in ns: whole numbers with a unit read directly, anything else by the shared parser."""
    if isinstance(value, str):
        for unit in ("ns", "us", "µs", "ms", "s"):
            if value.endswith(unit) and value[: -len(unit)].isdigit():
                return int(value[: -len(unit)]) * _UNIT_NS[unit]
    return parse_duration(value)


def _station_flows(path: Path) -> tuple[str, int, int, dict, dict]:
    """(timing, grid ps, ring size, {flow: (offset ns, period ns, owned ring slots, frame bytes)}, {class: windows})
    from a runtime config: on slots the grid is δ, on the byte clock one ns (txtimes are whole ns)."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    from ..units import parse_rate

    bps = parse_rate(doc["link"]["rate"])
    timing = doc["link"].get("timing", "slots")
    slot_bytes = doc["ring"]["slot_bytes"]
    delta = (slot_bytes + 20) * _byte_ps(bps) if timing == "slots" else 1000
    n = doc["ring"]["slots"]
    masks = {c["name"]: parse_mask(c["mask"]) if "mask" in c else [] for c in doc.get("class", [])}
    windows = {c["name"]: [(_dur(w[0]), _dur(w[1])) for w in c.get("windows", [])] for c in doc.get("class", [])}
    if timing == "bytes":
        windows["cycle"] = parse_duration(doc["schedule"]["cycle_time"])
    flows = {}
    for f in doc.get("flow", []):
        if "offset" not in f:
            raise ValueError(f"{path.name}: flow {f['name']!r} is not strictly periodic (no offset)")
        flows[f["name"]] = (
            _dur(f["offset"]),
            _dur(f["period"]),
            masks.get(f["class"], []),
            f["frame_bytes"],
            f["class"],
        )
    return timing, delta, n, flows, windows


def _in_window(windows: dict, cls: str, t_ns_ps: int, length_ps: int) -> bool:
    """Whether ``[t, t + length)`` (ps, modulo the cycle) lies in one window of the class (meeting windows joined)."""
    cycle = windows["cycle"] * 1000
    runs: list[list[int]] = []
    for s, n in sorted(windows.get(cls, [])):
        if runs and s * 1000 <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], (s + n) * 1000)
        else:
            runs.append([s * 1000, (s + n) * 1000])
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][1] == cycle:
        runs[-1][1] = cycle + runs.pop(0)[1]
    t = t_ns_ps % cycle
    return any(a <= x and x + length_ps <= b for a, b in runs for x in (t, t + cycle))


def _gate_opens(doc: dict) -> dict[str, tuple[int, list[tuple[int, int, int]], list[int]]]:
    """Per port: (cycle ps, [(start ps, end ps, gate states)], [start ps]) from a switch's GCL file."""
    out = {}
    for p in doc.get("ports", []):
        t = 0
        spans = []
        for e in p["entries"]:
            spans.append((t * 1000, (t + e["interval_ns"]) * 1000, e["gate_states"]))
            t += e["interval_ns"]
        if t != p["cycle_ns"]:
            raise ValueError(
                f"switch {doc['switch']!r} port {p['port']!r}: entries sum to {t} ns, cycle {p['cycle_ns']}"
            )
        out[p["port"]] = (p["cycle_ns"] * 1000, spans, [a for a, _, _ in spans])
    return out


def _open_throughout(gate: tuple, tc: int, t: int, length: int) -> bool:
    """Whether gate ``tc`` is open during ``[t, t + length)`` (mod cycle), across entries and cycle wraps."""
    cycle, spans, starts = gate
    t %= cycle
    end = t + length
    while t < end:
        i = bisect.bisect_right(starts, t % cycle) - 1
        _s, e, states = spans[i]
        if not states >> tc & 1:
            return False
        t += e - (t % cycle)
    return True


def _open_anywhere(gate: tuple, tc: int, t: int, length: int) -> bool:
    """Whether gate ``tc`` is open at some time in ``[t, t + length)``."""
    cycle, spans, starts = gate
    t %= cycle
    end = t + length
    while t < end:
        i = bisect.bisect_right(starts, t % cycle) - 1
        _s, e, states = spans[i]
        if states >> tc & 1:
            return True
        t += e - (t % cycle)
    return False


def _next_fit(gate: tuple, tc: int, t: int, length: int) -> int | None:
    """802.1Qbv: the first time from ``t`` at which gate ``tc`` is open and stays open for ``length``."""
    cycle, spans, starts = gate
    for _ in range(2 * len(spans) + 2):
        if _open_throughout(gate, tc, t, length):
            return t
        # move to the end of the entry holding t, then on to the next entry whose gate is open
        i = bisect.bisect_right(starts, t % cycle) - 1
        t += spans[i][1] - t % cycle
        for _k in range(len(spans)):
            j = bisect.bisect_right(starts, t % cycle) - 1
            if spans[j][2] >> tc & 1:
                break
            t += spans[j][1] - t % cycle
    return None


def verify_plan_dir(net: Network, out: Path) -> list[str]:
    bad: list[str] = []
    try:
        plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"plan.json unreadable: {exc}"]
    entries = {s["name"]: s for s in plan.get("streams", [])}
    base = plan.get("base_time_ns")
    if base != net.base_time:
        bad.append(f"plan.json: base time {base} differs from the network's {net.base_time}")
    stations: dict[str, tuple] = {}
    gates: dict[str, dict] = {}
    for sw, switch in net.switches.items():
        try:
            doc = json.loads((out / "switches" / f"{sw}.json").read_text(encoding="utf-8"))
            if doc.get("base_time_ns") != net.base_time:
                bad.append(f"switch {sw!r}: GCL base time {doc.get('base_time_ns')} is not the network's")
            gates[sw] = _gate_opens(doc)
            for p in doc.get("ports", []):
                if len(p["entries"]) > switch.supported_list_max:
                    bad.append(
                        f"switch {sw!r} port {p['port']!r}: {len(p['entries'])} gate entries, more than "
                        f"supported_list_max {switch.supported_list_max}"
                    )
                if any(e["interval_ns"] % switch.gate_granularity_ns for e in p["entries"]):
                    bad.append(
                        f"switch {sw!r} port {p['port']!r}: an interval is not a whole number of its gate_granularity "
                        f"{switch.gate_granularity_ns} ns"
                    )
        except (OSError, ValueError, KeyError) as exc:
            bad.append(f"switch {sw!r}: gate control lists unreadable: {exc}")
            gates[sw] = {}
    horizon = 1
    for s in net.streams:
        horizon = math.lcm(horizon, s.period_ns)
    horizon *= 1000
    busy: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    queued: dict[tuple[str, str, int], list[tuple[int, int, int, str, int, bool]]] = {}

    for s in net.streams:
        e = entries.get(s.name)
        if e is None:
            bad.append(f"stream {s.name!r}: not in plan.json")
            continue
        routes = [tuple(r) for r in e.get("routes", [])]
        if sorted(r[-1] for r in routes if r) != sorted(s.listeners):
            bad.append(f"stream {s.name!r}: its routes do not reach exactly its listeners {list(s.listeners)}")
            continue
        first = net.link(s.talker, routes[0][1]) if len(routes[0]) > 1 else None
        if first is None:
            bad.append(f"stream {s.name!r}: its route does not leave the talker on its link")
            continue
        sender = net.sender(s.talker, routes[0][1])  # a two-port talker has one config per port
        if sender not in stations:
            try:
                stations[sender] = _station_flows(out / "stations" / f"{sender}.toml")
            except (OSError, ValueError, KeyError) as exc:
                bad.append(f"station {sender!r}: runtime config unreadable: {exc}")
                stations[sender] = ("slots", 1, 1, {}, {})
        timing, delta, ring, flows, windows = stations[sender]
        if s.name not in flows:
            bad.append(f"stream {s.name!r}: no [[flow]] in the runtime config of its talker's port {sender!r}")
            continue
        offset, period, owned, frame, cls = flows[s.name]
        if period != s.period_ns:
            bad.append(f"stream {s.name!r}: the talker's flow has period {period} ns, the stream {s.period_ns} ns")
            continue
        if timing != net.stations[s.talker].timing:
            bad.append(f"station {s.talker!r}: its config is on timing {timing!r}, the description says otherwise")
        if timing == "slots":
            wire = delta // _byte_ps(first.rate) - 20  # the talker's slot size: keepon pads every frame to it
        else:
            wire = max(frame, 64)  # the byte clock sends the frame at its own length
            if frame != s.frame_bytes:
                bad.append(f"stream {s.name!r}: the talker's flow has {frame} bytes, the stream {s.frame_bytes}")
        claimed = {h["link"]: h["start_ps"] for h in e.get("hops", [])}
        p_ps = s.period_ns * 1000
        # the tree: each directed link once, with the link before it (None at the talker)
        tree: dict[tuple[str, str], tuple[str, str] | None] = {}
        lasts: dict[str, tuple[str, str]] = {}
        ok = True
        for route in routes:
            if route[0] != s.talker or any(net.link(u, v) is None for u, v in itertools.pairwise(route)):
                bad.append(f"stream {s.name!r}: route {' → '.join(route)} does not exist in the topology")
                ok = False
                break
            if any(n not in net.switches for n in route[1:-1]):
                bad.append(f"stream {s.name!r}: route {' → '.join(route)} is forwarded by a station")
                ok = False
                break
            before = None
            for u, v in itertools.pairwise(route):
                if tree.setdefault((u, v), before) != before:
                    bad.append(f"stream {s.name!r}: two routes reach {u}→{v} along different links")
                before = (u, v)
            lasts[route[-1]] = before
        if not ok:
            continue
        worst: dict[str, list[int]] = {listener: [] for listener in lasts}
        first_at: dict[tuple[str, str], int] = {}
        for l in range(horizon // p_ps):
            send = (offset * 1000 + l * p_ps) // delta * delta
            if l == 0:
                lo = s.earliest_offset_ns * 1000
                hi = (s.latest_offset_ns if s.latest_offset_ns is not None else s.period_ns) * 1000
                if not lo <= send <= hi:
                    bad.append(
                        f"stream {s.name!r}: departs at {send} ps, outside its transmit-offset window [{lo}, {hi}] ps"
                    )
            if timing == "slots":
                slot = send // delta
                if slot % ring not in owned:
                    bad.append(
                        f"stream {s.name!r} instance {l}: talker slot {slot} (ring slot {slot % ring}) not owned"
                    )
            elif not _in_window(windows, cls, send, (wire + 20) * _byte_ps(first.rate)):
                bad.append(f"stream {s.name!r} instance {l}: its wire time is in no window of class {cls!r}")
            at: dict[tuple[str, str], int] = {}  # first bit on each directed link
            for (u, v), prev in tree.items():
                link = net.link(u, v)
                tx = (wire + 20) * _byte_ps(link.rate)
                if prev is None:
                    t = send
                else:
                    pl = net.link(*prev)
                    ready = (
                        at[prev] + (wire + 20) * _byte_ps(pl.rate) + pl.delay_ps + net.switches[u].forwarding_delay_ps
                    )
                    t = ready
                    port = net.port_name(u, v)
                    g = gates.get(u, {}).get(port)
                    stated = claimed.get(f"{u}->{v}")
                    flagged = False  # a violation is reported here already: the queue replay takes the plan's time
                    if g is None:
                        bad.append(f"stream {s.name!r}: switch {u!r} port {port!r} has no gate control list")
                    elif stated is not None and stated + l * p_ps == ready:
                        # planned without a wait: the gate must be open when the frame is ready
                        if not _open_throughout(g, s.traffic_class, ready, tx):
                            flagged = True
                            bad.append(
                                f"stream {s.name!r} instance {l}: on switch {u!r} port {port!r} the gate of traffic "
                                f"class {s.traffic_class} is not open for the whole transmission [{ready}, "
                                f"{ready + tx}) ps"
                            )
                    elif (
                        stated is not None
                        and stated + l * p_ps > ready
                        and _open_throughout(g, s.traffic_class, stated + l * p_ps, tx)
                    ):
                        t = stated + l * p_ps  # planned to wait: the queue simulation below checks it goes then
                    else:
                        fit = _next_fit(g, s.traffic_class, ready, tx)
                        if fit is None:
                            bad.append(
                                f"stream {s.name!r}: on switch {u!r} port {port!r} the gate of traffic class "
                                f"{s.traffic_class} never stays open for its frame"
                            )
                        else:
                            t = fit
                    queued.setdefault((u, v, s.traffic_class), []).append((ready, t, tx, s.name, l, flagged))
                at[(u, v)] = t
                if l == 0 and claimed.get(f"{u}->{v}") != t:
                    bad.append(
                        f"stream {s.name!r}: plan.json puts hop {u}→{v} at {claimed.get(f'{u}->{v}')} ps, the replay "
                        f"at {t} ps"
                    )
                elif l > 0 and first_at.get((u, v)) != t - l * p_ps and ok:
                    bad.append(f"stream {s.name!r} instance {l}: hop {u}→{v} is not at instance 0's time + l·period")
                    ok = False
                if l == 0:
                    first_at[(u, v)] = t
                # on a switch's egress a frame that does not wait finds its gate open over the guarded window
                g_ps = net.guard_ps if u in net.switches else 0
                busy.setdefault((u, v), []).append(((t - g_ps) % horizon, tx + 2 * g_ps, s.name))
                if u in net.switches and g_ps:
                    port = net.port_name(u, v)
                    gate = gates.get(u, {}).get(port)
                    if gate is not None and not _open_throughout(gate, s.traffic_class, t - g_ps, tx + 2 * g_ps):
                        bad.append(
                            f"stream {s.name!r} instance {l}: on switch {u!r} port {port!r} the gate of traffic class "
                            f"{s.traffic_class} is not open for the whole transmission with its guard [{t - g_ps}, "
                            f"{t + tx + g_ps}) ps"
                        )
            for listener, last in lasts.items():
                lk = net.link(*last)
                arrive = at[last] + (wire + 20) * _byte_ps(lk.rate) + lk.delay_ps
                worst[listener].append(arrive - send)
                if s.deadline_ns is not None and arrive - l * p_ps > s.deadline_ns * 1000:
                    bad.append(
                        f"stream {s.name!r} instance {l}: reaches {listener!r} at {arrive - l * p_ps} ps after its "
                        f"period start, after its deadline {s.deadline_ns} ns"
                    )
        for listener, lats in worst.items():
            if max(lats) > s.max_latency_ns * 1000:
                bad.append(
                    f"stream {s.name!r}: latency to {listener!r} is {max(lats)} ps > max_latency {s.max_latency_ns} ns"
                )
            if max(lats) - min(lats) > s.max_jitter_ns * 1000:
                bad.append(f"stream {s.name!r}: jitter to {listener!r} exceeds max_jitter {s.max_jitter_ns} ns")

    bad += _replicas_apart(net, entries)
    for (u, v), frames in busy.items():
        frames.sort()
        for (t0, n0, s0), (t1, _, s1) in itertools.pairwise(frames):
            if t0 + n0 > t1:
                bad.append(f"link {u}→{v}: frames of {s0!r} and {s1!r} overlap at {t1} ps (mod {horizon} ps)")
        if frames and frames[-1][0] + frames[-1][1] > frames[0][0] + horizon:
            bad.append(f"link {u}→{v}: frames of {frames[-1][2]!r} and {frames[0][2]!r} overlap across the wrap")
    for key, frames in queued.items():
        bad += _simulate_queue(net, key, frames, gates.get(key[0], {}).get(net.port_name(key[0], key[1])), horizon)
    return bad


def _replicas_apart(net: Network, entries: dict) -> list[str]:
    """The member streams of a replicated stream (802.1CB) leave the talker on two ports and share no link."""
    groups: dict[str, list] = {}
    for s in net.streams:
        if s.replica_of is not None and s.name in entries:
            groups.setdefault(s.replica_of, []).append([tuple(r) for r in entries[s.name].get("routes", [])])
    bad = []
    for name, routes in groups.items():
        if len(routes) != 2 or not all(routes):
            continue  # a member missing from plan.json is reported already
        links = [{frozenset(e) for r in rs for e in itertools.pairwise(r)} for rs in routes]
        for common in sorted(tuple(sorted(e)) for e in links[0] & links[1]):
            bad.append(f"replicated stream {name!r}: both member streams cross link {common[0]}–{common[1]}")
    return bad


def _simulate_queue(net: Network, key: tuple, frames: list, gate, horizon: int) -> list[str]:
    """802.1Qbv on one class queue of one port: frames join in the order they are ready, the head starts when the
    gate is open and stays open for it, after the frame before it has left. Two hyperperiods are simulated from an
    empty queue and the second is compared with the plan; also the most frames waiting at once, against the switch's
    ``max_queue_frames`` (none with ``queueing = false``)."""
    u, v, tc = key
    if gate is None:
        return []
    where = f"switch {u!r} port {net.port_name(u, v)!r} traffic class {tc}"
    items = sorted(  # each frame once per hyperperiod: its ready time taken modulo the hyperperiod
        (ready % horizon + k * horizon, ready % horizon + start - ready + k * horizon, tx, name, l, k, flagged)
        for ready, start, tx, name, l, flagged in frames
        for k in (0, 1)
    )
    bad: list[str] = []
    for (r0, _s0, _t0, n0, _l0, k0, _f0), (r1, _s1, _t1, n1, _l1, _k1, _f1) in itertools.pairwise(items):
        if r0 == r1 and k0 == 1:
            bad.append(f"{where}: frames of {n0!r} and {n1!r} are ready at the same time ({r0 % horizon} ps)")
    end = -(10**30)
    for ready, start, tx, name, l, k, flagged in items:
        at = start if flagged else _next_fit(gate, tc, max(ready, end), tx)
        if at is None:
            break
        end = at + tx
        if k == 1 and at != start:
            bad.append(
                f"stream {name!r} instance {l}: on {where} the queue sends it at {at % horizon} ps (FIFO, gate), the "
                f"plan at {start % horizon} ps"
            )
    limit = net.switches[u].max_queue_frames if net.queueing else 0
    events = sorted(
        [(r, 1) for r, s_, *_ in items if s_ > r] + [(s_, -1) for r, s_, *_ in items if s_ > r],
        key=lambda x: (x[0], x[1]),
    )
    depth = most = 0
    for _t, d in events:
        depth += d
        most = max(most, depth)
    if most > limit:
        what = f"max_queue_frames {limit}" if net.queueing else "none (queueing = false)"
        bad.append(f"{where}: {most} frames wait at once, more than {what}")
    return bad[:20]
