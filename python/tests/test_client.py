"""The Python client (`keepon_client`): the byte protocol both ways, tolerance of newer daemons, and a live
`keepon daemon --backend sim` (no root) where every submit of every kind gets exactly one typed outcome."""

from __future__ import annotations

import random
import re
import struct

import pytest
from daemon_support import BYTE, CYCLE, REPO, SLOT, eth_frame, start_daemon

from keepon_client import (
    Client,
    ErrorReply,
    FrameRejected,
    Info,
    Outcome,
    ProtocolError,
    Reason,
    Released,
    RequestError,
    Scheduled,
    Subscribed,
    UnknownMessage,
    UnknownReason,
    reason_from_code,
)
from keepon_client.protocol import (
    HOST_FIFO,
    encode_info,
    encode_schedule,
    encode_schedule_windows,
    encode_submit,
    frame_message,
    parse_response,
    split_messages,
)

# -- the byte protocol, without a daemon -------------------------------------------------------------------------


def test_reasons_match_the_rust_enum():
    """Names and wire codes are those of `keepon_core::outcome::Reason` (read from its source)."""
    src = (REPO / "crates/core/src/outcome.rs").read_text()
    order = re.search(r"const ALL: \[Reason; Reason::COUNT\] = \[(.*?)\];", src, re.S).group(1)
    variants = re.findall(r"Reason::(\w+)", order)
    names = dict(re.findall(r'Reason::(\w+) => "([a-z-]+)"', src))
    assert [names[v] for v in variants] == [r.value for r in Reason]
    assert [r.code for r in Reason] == list(range(len(variants)))


def test_submit_bytes_are_the_documented_layout():
    b = encode_submit("tc-0", 1000, b"\x01\x02\x03", 7)
    # Same literal as the Rust test `requests_round_trip_and_byte_literal`.
    assert b[:4] == bytes([1, 2, 1, 4])
    assert b[4:12] == (7).to_bytes(8, "little")
    assert b[12:20] == (1000).to_bytes(8, "little")
    assert b[20:24] == b"tc-0" and b[24:] == b"\x01\x02\x03"
    assert encode_submit("be", None, b"", 1)[2] == 0, "best effort: no txtime flag"
    assert encode_submit("x", -5, b"", 0)[12:20] == (-5).to_bytes(8, "little", signed=True)
    assert encode_info() == bytes([1, 1])
    assert frame_message(b"ab") == b"\x02\x00\x00\x00ab"


def test_bad_submit_arguments_are_refused_before_sending():
    with pytest.raises(ValueError, match="255"):
        encode_submit("x" * 256, 0, b"", 0)
    with pytest.raises(TypeError, match="int nanoseconds"):
        encode_submit("tc-0", 1.5, b"", 0)
    with pytest.raises(ValueError, match="16384"):
        encode_submit("tc-0", 0, bytes(17000), 0)
    with pytest.raises(ValueError, match="u64"):
        encode_submit("tc-0", 0, b"", -1)


def outcome_bytes(status: int, reason: int, tag: int, slot: int = 0, time: int = 0, ring_slot: int = 0) -> bytes:
    return bytes([1, 0x82, status, reason]) + struct.pack("<QQqI", tag, slot, time, ring_slot)


def test_outcomes_parse_including_a_newer_daemons_values():
    sent = parse_response(outcome_bytes(0, 0, 9, 5, -3, 1))
    assert sent == Outcome(9, True, slot=5, time=-3, ring_slot=1)
    assert sent.check() is sent
    rej = parse_response(outcome_bytes(1, 11, 4))
    assert rej == Outcome(4, False, reason=Reason.FORBIDDEN)
    with pytest.raises(FrameRejected) as e:
        rej.check()
    assert e.value.reason is Reason.FORBIDDEN and e.value.tag == 4
    # Status 2: sent, off its schedule slot after an underrun.
    off = parse_response(outcome_bytes(2, 0, 3, 7, 700, 2))
    assert off.sent and off.off_schedule and off.time == 700
    # A reason code from a newer daemon.
    unk = parse_response(outcome_bytes(1, 200, 5))
    assert unk.reason == UnknownReason(200) and str(unk.reason) == "unknown(200)"
    assert reason_from_code(14) is Reason.SHUTDOWN and reason_from_code(15) is Reason.CLOCK_STEP
    assert reason_from_code(16) is Reason.NOT_SYNCHRONISED
    assert reason_from_code(17) is Reason.SCHEDULE_CHANGE
    assert str(reason_from_code(18)) == "unknown(18)"
    # Longer outcomes (fields appended later) still parse; unknown status is a protocol error naming the frame.
    assert parse_response(outcome_bytes(0, 0, 1, 2, 3, 4) + b"\x00\x00").tag == 1
    with pytest.raises(ProtocolError, match="frame 6: unknown status 3"):
        parse_response(outcome_bytes(3, 0, 6))


def info_bytes(classes: list[tuple[bytes, list[tuple[int, int]]]], den: int = 10) -> bytes:
    """An Info reply with the fixed values of the Rust test `responses_round_trip` and these classes."""
    b = bytes([1, 0x81]) + struct.pack("<QIIIqqqQQI", 10**9, 1230, 32, 8, 5, 6, 10**9, 21_504, den, HOST_FIFO)
    for name, windows in classes:
        b += bytes([len(name)]) + name + struct.pack("<H", len(windows))
        b += b"".join(struct.pack("<QQ", off, length) for off, length in windows)
    return b


def test_info_error_and_unknown_kinds_parse():
    b = info_bytes([(b"a", []), (b"bb", [])])
    assert len(b) == 66 + 4 + 5
    assert parse_response(b) == Info(10**9, 1230, 32, 8, 5, 6, 10**9, 21_504, 10, ("a", "bb"), ((), ()), HOST_FIFO)
    assert Info(10**8, 1230, 32, 8, 5, 6, 0, 3_200_000, 1, (), ()).slot_ns == (1250 * 8 * 10**9, 10**8)
    assert parse_response(bytes([1, 0x83]) + b"bad") == ErrorReply("bad")
    assert parse_response(bytes([1, 0x8F, 9])) == UnknownMessage(0x8F, b"\x09")
    # The former layout (a 38-byte fixed part, then names alone) is too short or cut short now.
    old = bytes([1, 0x81]) + struct.pack("<QIIIqq", 10**8, 1230, 32, 8, 5, 6) + b"\x01a\x02bb"
    for bad in (b"", b"\x01", bytes([2, 0x82]), outcome_bytes(0, 0, 1)[:31], b[:65], b + b"\x05ab", old):
        with pytest.raises(ProtocolError):
            parse_response(bad)


def test_info_windows_parse_and_a_class_cut_short_is_malformed():
    """The Info of the Rust test `responses_round_trip`: class "a" with two windows, "bb" best effort."""
    b = info_bytes([(b"a", [(0, 10_000), (40_000, 20_000)]), (b"bb", [])])
    info = parse_response(b)
    assert info == Info(
        10**9, 1230, 32, 8, 5, 6, 10**9, 21_504, 10, ("a", "bb"), (((0, 10_000), (40_000, 20_000)), ()), HOST_FIFO
    )
    assert (info.base_time, info.cycle_num, info.cycle_den) == (10**9, 21_504, 10)
    # Valid only where a class ends: 66 (no classes) and 102 ("a" alone); anywhere else the class is cut short.
    for cut in range(len(b)):
        if cut in (66, 102):
            assert len(parse_response(b[:cut]).classes) == (cut == 102)
        else:
            with pytest.raises(ProtocolError, match=r"shorter|cut short"):
                parse_response(b[:cut])
    # The Rust test `garbage_is_an_error_not_a_panic`: one byte short of the windows the class promises.
    one = info_bytes([(b"a", [(0, 1)])])
    assert parse_response(one).windows == (((0, 1),),)
    with pytest.raises(ProtocolError, match="cut short"):
        parse_response(one[:-1])
    with pytest.raises(ProtocolError, match="cut short"):
        parse_response(info_bytes([(b"a", [])])[:-1] + b"\xff\xff")
    with pytest.raises(ProtocolError, match="denominator 0"):
        parse_response(info_bytes([(b"a", [])], den=0))
    with pytest.raises(ProtocolError, match="UTF-8"):
        parse_response(info_bytes([(b"\xff", [])]))


def test_time_reply_parses_and_bad_state_is_a_protocol_error():
    from keepon_client import Time
    from keepon_client.protocol import encode_time

    assert encode_time() == bytes([1, 3])
    body = struct.pack("<8q", 1_700_000_000_000_000_123, -5, -42, 50_000_000, 3_100, 1, 7, 9)
    t = parse_response(bytes([1, 0x84, 1, 2, 2, 3]) + body)
    assert t == Time(1, 2, 2, 1_700_000_000_000_000_123, -5, -42, 50_000_000, 3_100, None) and t.synchronised
    free = parse_response(bytes([1, 0x84, 0, 0, 0, 0]) + body)
    assert free.offset is None and free.path_delay is None and free.alignment is None and not free.synchronised
    # Bit 2: the alignment (median, p99, max) of the Rust test `responses_round_trip`.
    aligned = parse_response(bytes([1, 0x84, 0, 0, 0, 4]) + body)
    assert aligned.alignment == (1, 7, 9) and aligned.offset is None and aligned.path_delay is None
    assert parse_response(bytes([1, 0x84, 1, 2, 2, 7]) + body).alignment == (1, 7, 9)
    for cut in (-1, -24):
        with pytest.raises(ProtocolError, match="expected 70"):
            parse_response(bytes([1, 0x84, 1, 2, 2, 3]) + body[:cut])
    with pytest.raises(ProtocolError, match="expected 70"):
        parse_response(bytes([1, 0x84, 1, 2, 2, 3]) + body + b"\x00")
    with pytest.raises(ProtocolError, match="bad state"):
        parse_response(bytes([1, 0x84, 7, 2, 2, 3]) + body)
    for flags in (8, 0x0F, 0x80):
        with pytest.raises(ProtocolError, match=f"flags {flags:#04x} has unknown bits"):
            parse_response(bytes([1, 0x84, 1, 2, 2, flags]) + body)


def test_time_over_the_socket_without_ptp_is_free_running(daemon):
    with Client(daemon.socket, timeout=10) as c:
        t = c.time()
        # No [ptp]: the EPHC runs free on the (simulated, wall-clock-held) link, next to the host clock.
        assert (t.sync, t.port) == (0, 0) and t.offset is None
        if t.alignment is not None:
            assert 0 <= t.alignment[0] <= t.alignment[1] <= t.alignment[2]
        assert abs(t.ephc_now - t.host_now) < 10_000_000


def test_untrusted_bytes_raise_only_protocol_errors():
    rng = random.Random(11)
    for _ in range(20_000):
        b = bytes(rng.randrange(256) for _ in range(rng.randrange(96)))
        if rng.random() < 0.5 and len(b) >= 2:
            b = bytes([1, rng.choice([0x81, 0x82, 0x83, 0x84, 0x85, 0x86])]) + b[2:]
        try:
            parse_response(b)
        except ProtocolError:
            pass
        buf = bytearray(b)
        try:
            split_messages(buf)
        except ProtocolError:
            pass


def test_split_messages_keeps_partial_tail_and_refuses_huge_lengths():
    buf = bytearray(frame_message(b"\x01\x01") + b"\x03\x00")
    assert split_messages(buf) == [b"\x01\x01"] and buf == b"\x03\x00"
    with pytest.raises(ProtocolError, match="exceeds"):
        split_messages(bytearray(b"\xff\xff\xff\x7f"))


# -- against a live daemon ---------------------------------------------------------------------------------------


@pytest.fixture
def daemon(tmp_path):
    d = start_daemon(tmp_path)
    yield d
    d.stop()


def test_every_submit_gets_exactly_one_typed_outcome(daemon):
    with Client(daemon.socket, timeout=10) as c:
        info = c.info()
        assert (info.rate_bps, info.slot_bytes, info.ring, info.batch) == (100_000_000, 1230, 32, 8)
        assert info.classes == ("tc-0", "tc-1", "tc-2")
        assert info.cycle_start > info.now
        # The schedule: cycle = 32 slots of 100 µs from the base time; tc-0 owns ring slot 0, tc-1 slots 1 and 17.
        assert info.cycle_num == CYCLE * info.cycle_den and (info.cycle_start - info.base_time) % CYCLE == 0
        assert info.windows == (((0, SLOT),), ((SLOT, SLOT), (17 * SLOT, SLOT)), ())
        # 100 cycles (320 ms) ahead: a loaded host that delays the daemon's reading of these submits past their
        # slots would turn `not-owned` and the others into `late` (the daemon checks time first, as ETF does).
        first = info.cycle_start + 100 * CYCLE
        good = {i: first + i * CYCLE for i in range(20)}  # ring slot 0 of 20 upcoming cycles
        for tag, t in good.items():
            assert c.submit("tc-0", t, eth_frame(100, tag), tag) == tag
        bad = {
            100: ("tc-0", info.now - 1_000_000, 1000, Reason.LATE),
            101: ("tc-0", first + 5 * SLOT, 100, Reason.NOT_OWNED),
            102: ("tc-1", first + SLOT, 100, Reason.FORBIDDEN),
            103: ("tc-9", first, 100, Reason.UNKNOWN_CLASS),
            104: ("tc-0", first + 40 * CYCLE, 2000, Reason.OVERSIZE),
            105: ("tc-0", None, 100, Reason.MISSING_TXTIME),
            106: ("tc-2", first, 100, Reason.UNEXPECTED_TXTIME),
            107: ("tc-0", info.now + 5_000_000_000, 100, Reason.TOO_FAR_AHEAD),
            108: ("tc-0", first + 2 * CYCLE, 10, Reason.RUNT),
        }
        for tag, (cls, t, n, _) in bad.items():
            c.submit(cls, t, eth_frame(n, tag), tag)
        be = [c.submit("tc-2", None, eth_frame(200, k), 200 + k) for k in range(5)]
        # A malformed submit (unknown flag bit) gets an error, not an outcome, and the connection stays usable.
        raw = bytearray(encode_submit("tc-0", first, eth_frame(100), 300))
        raw[2] |= 0x80
        c.send_raw(frame_message(bytes(raw)))

        expected = len(good) + len(bad) + len(be)
        outcomes: dict[int, Outcome] = {}
        errors: list[str] = []
        while len(outcomes) < expected:
            m = c.recv()
            assert m is not None, f"daemon closed the connection after {len(outcomes)} outcomes"
            if isinstance(m, ErrorReply):
                errors.append(m.text)
                continue
            assert isinstance(m, Outcome), m
            assert m.tag not in outcomes, f"two outcomes for frame {m.tag}"
            outcomes[m.tag] = m
        assert errors == ["submit flags 0x81 has unknown bits"]
        assert 300 not in outcomes
        for tag, (_, _, _, why) in bad.items():
            assert outcomes[tag].reason is why, (tag, outcomes[tag])
            with pytest.raises(FrameRejected):
                outcomes[tag].check()
        for tag in be:
            o = outcomes[tag]
            assert o.sent and o.ring_slot not in (0, 1, 17), o  # best effort: only unowned ring slots
        assert c.info().ring == 32, "still usable after the malformed request"
        c.close_write()
    out = daemon.stop()
    underruns = daemon.underruns()
    # The simulated grid follows the wall clock; a stalled host underruns it, which the daemon must report.
    for tag, t in good.items():
        o = outcomes[tag]
        if underruns == 0:
            # On the schedule to the byte: the slot starts on the first byte at or after its schedule time.
            assert o.sent and 0 <= o.time - t < BYTE and o.ring_slot == 0, (o, out)
        elif o.sent:
            assert abs(o.time - t) < SLOT and o.ring_slot == 0, (o, underruns)
        else:
            assert o.reason in (Reason.UNDERRUN, Reason.LATE), (o, underruns)


def test_malformed_requests_get_typed_errors(daemon):
    with Client(daemon.socket, timeout=10) as c:
        c.send_raw(frame_message(b"\x07\x07\x07"))
        with pytest.raises(RequestError, match="version"):
            c.outcome()
        c.send_raw(frame_message(bytes([1, 9])))
        m = c.recv()
        assert isinstance(m, ErrorReply) and "unknown request kind" in m.text
        assert c.info().classes == ("tc-0", "tc-1", "tc-2")
    with Client(daemon.socket, timeout=10) as broken:
        broken.send_raw(b"\xff\xff\xff\x7f\x01\x02\x03")
        m = broken.recv()
        assert isinstance(m, ErrorReply) and "closing" in m.text
        assert broken.recv() is None, "broken framing ends the connection"


def test_a_flood_beyond_max_in_flight_is_rejected_queue_full_not_lost(daemon):
    with Client(daemon.socket, timeout=10) as c:
        info = c.info()
        start = info.cycle_start + 20 * CYCLE
        n = 100  # max_in_flight = 64 in the test config
        for k in range(n):
            c.submit("tc-0", start + k * CYCLE, eth_frame(100, k), k)
        got = c.outcomes(n)
        assert sorted(got) == list(range(n))
        full = [o for o in got.values() if o.reason is Reason.QUEUE_FULL]
        assert len(full) >= n - 64, [str(o.reason) for o in got.values()]
        assert all(o.sent or o.reason in (Reason.QUEUE_FULL, Reason.UNDERRUN, Reason.LATE) for o in got.values())


def test_released_and_subscribed_parse():
    b = bytes([1, 0x85, 3, 0]) + struct.pack("<Qq", 7, -5)
    assert parse_response(b) == Released(7, -5, True)
    assert parse_response(bytes([1, 0x85, 0, 0]) + struct.pack("<Qq", 8, 99)) == Released(8, None, False)
    assert parse_response(bytes([1, 0x86, 1])) == Subscribed(True)
    for bad in (b[:19], bytes([1, 0x85, 4, 0]) + b[4:], bytes([1, 0x86, 2]), bytes([1, 0x86])):
        with pytest.raises(ProtocolError):
            parse_response(bad)


def test_release_times_follow_every_sent_frame_once(daemon):
    """Subscribed: every sent frame's outcome is followed by one release time (none on the simulated NIC, which
    paces its link itself), a rejected frame gets none, and `outcome()`/`released()` keep what the other reads."""
    with Client(daemon.socket, timeout=10) as c:
        info = c.info()
        assert c.subscribe_release_times() is True
        first = info.cycle_start + 10 * CYCLE
        for tag in range(5):
            c.submit("tc-0", first + tag * CYCLE, eth_frame(100, tag), tag)
        c.submit("tc-9", None, eth_frame(100, 9), 9)
        c.close_write()
        outcomes = c.outcomes(6)
        assert outcomes[9].reason is Reason.UNKNOWN_CLASS
        # A loaded host may stall the daemon past a slot (an underrun): such a frame is rejected and gets no
        # release time, like the unknown-class one.
        assert all(outcomes[t].sent or outcomes[t].reason in (Reason.LATE, Reason.UNDERRUN) for t in range(5))
        sent = [t for t in range(5) if outcomes[t].sent]
        assert sent, outcomes
        released = [c.released() for _ in sent]
        assert sorted(r.tag for r in released) == sent
        assert all(r.time is None and not r.stamped for r in released), released
        assert c.recv() is None, "nothing more: no release time for the rejected frame"


def test_schedule_bytes_are_the_documented_layout():
    b = encode_schedule(-7, {"tc-0": [4, 12], "be": []})
    assert b[:10] == bytes([1, 6]) + struct.pack("<q", -7)
    assert b[10:21] == bytes([4]) + b"tc-0" + bytes([2, 0, 4, 0, 12, 0])
    assert b[21:] == bytes([2]) + b"be" + bytes([0, 0])
    assert parse_response(bytes([1, 0x88, 0, 0]) + struct.pack("<qQ", 5, 3)) == Scheduled(5, 3)
    refused = parse_response(bytes([1, 0x88, 1, 0]) + bytes(16) + b"too late")
    assert refused == Scheduled(None, 0, "too late")
    with pytest.raises(ProtocolError):
        parse_response(bytes([1, 0x88, 0, 0]))
    with pytest.raises(ValueError):
        encode_schedule(0, {"tc-0": [70_000]})


def test_schedule_windows_bytes_are_the_documented_layout():
    b = encode_schedule_windows(9, {"ctrl": [(20_000, 5_000)], "be": []})
    assert b[:10] == bytes([1, 7]) + struct.pack("<q", 9)
    assert b[10:17] == bytes([4]) + b"ctrl" + bytes([1, 0])
    assert b[17:33] == struct.pack("<QQ", 20_000, 5_000)
    assert b[33:] == bytes([2]) + b"be" + bytes([0, 0])
    with pytest.raises(ValueError):
        encode_schedule_windows(0, {"ctrl": [(-1, 5)]})


def test_windows_move_a_slot_daemons_class_where_they_are_whole_slots(daemon):
    with Client(daemon.socket, timeout=10) as c:
        change = c.info().cycle_start + 100 * CYCLE
        slot = SLOT
        # Ring slot 5 as a window: taken as that slot; half a slot is refused, naming the window.
        assert c.change_windows(change, {"tc-0": [(5 * slot, slot)]}) == Scheduled(change, 0)
        refused = c.change_windows(change, {"tc-0": [(5 * slot, slot // 2)]})
        assert refused.time is None and "not a run of whole slots" in refused.error, refused


def test_a_schedule_change_moves_a_window_from_its_base_time(daemon):
    with Client(daemon.socket, timeout=10) as c:
        info = c.info()
        change = info.cycle_start + 100 * CYCLE  # 320 ms ahead
        assert c.change_schedule(change, {"tc-0": [5]}) == Scheduled(change, 0)
        before, after = change - 10 * CYCLE, change + 10 * CYCLE
        c.submit("tc-0", before, eth_frame(100, 1), 1)  # the old window, before the change: sent in ring slot 0
        c.submit("tc-0", after + 5 * SLOT, eth_frame(100, 2), 2)  # the new window: sent in ring slot 5
        c.submit("tc-0", after, eth_frame(100, 3), 3)  # the old window after the change: schedule-change
        c.submit("tc-0", before + 5 * SLOT, eth_frame(100, 4), 4)  # the new window before the change: not-owned
        got = c.outcomes(4)
        assert got[1].sent and got[1].ring_slot == 0 and got[1].time - before < BYTE
        assert got[2].sent and got[2].ring_slot == 5 and got[2].time - (after + 5 * SLOT) < BYTE
        assert (got[3].reason, got[4].reason) == (Reason.SCHEDULE_CHANGE, Reason.NOT_OWNED)
        # A base time whose slot has passed is refused, naming the earliest possible.
        late = c.change_schedule(info.now - 1_000_000, {"tc-0": [6]})
        assert late.time is None and "earliest" in late.error
        assert c.info().windows[0] == ((5 * SLOT, SLOT),)


def test_the_byte_clock_sends_each_frame_at_its_txtime_unpadded(tmp_path):
    """``link.timing = "bytes"``: the same classes as time windows; a frame at any ns inside its window leaves on the
    byte nearest its txtime (not at the slot start before it); outside its window it is refused; best effort runs
    outside every window; a live schedule change is refused with the reason."""
    d = start_daemon(tmp_path, timing="bytes")
    try:
        with Client(d.socket, timeout=10) as c:
            info = c.info()
            assert info.windows == (((0, SLOT),), ((SLOT, SLOT), (17 * SLOT, SLOT)), ())
            assert info.cycle_num == CYCLE * info.cycle_den
            first = info.cycle_start + 100 * CYCLE
            # Anywhere in ring slot 0's window, at odd ns: 100 B frames take 9.92 µs of wire.
            good = {i: first + i * CYCLE + 1_001 + 4_567 * i for i in range(16)}
            for tag, t in good.items():
                c.submit("tc-0", t, eth_frame(100, tag), tag)
            c.submit("tc-0", first + 95_000, eth_frame(100, 50), 50)  # runs past its window's end
            c.submit("tc-0", first + 5 * SLOT, eth_frame(100, 51), 51)  # in no window of tc-0
            be = [c.submit("tc-2", None, eth_frame(1000, k), 200 + k) for k in range(5)]
            outcomes: dict[int, Outcome] = {}
            while len(outcomes) < len(good) + 2 + len(be):
                m = c.recv()
                assert isinstance(m, Outcome), m
                outcomes[m.tag] = m
            refused = c.change_schedule(first, {"tc-0": [3]})
            assert refused.time is None and "byte clock" in refused.error, refused
    finally:
        d.stop()
    underruns = d.underruns()
    assert outcomes[50].reason is Reason.NOT_OWNED and outcomes[51].reason is Reason.NOT_OWNED
    for tag, t in good.items():
        o = outcomes[tag]
        if underruns == 0:
            assert o.sent and abs(o.time - t) <= BYTE // 2 and o.ring_slot == 0, o
        else:
            assert o.sent or o.reason in (Reason.UNDERRUN, Reason.LATE), o
    windows = [(0, SLOT), (SLOT, 2 * SLOT), (17 * SLOT, 18 * SLOT)]
    for tag in be:
        o = outcomes[tag]
        off = (o.time - info.base_time) % CYCLE
        assert o.sent and o.ring_slot == off // SLOT, (o, off)  # the ring slot its start falls in
        end = off + (1000 + 4 + 20) * BYTE
        assert all(end <= a or off >= b for a, b in windows), (o, off)
