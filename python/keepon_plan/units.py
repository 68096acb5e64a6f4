"""Value forms shared with the runtime config (docs/config.md): durations, rates, masks.

Time is an ``int`` of nanoseconds everywhere; the slot period, which can be a fraction of a nanosecond
(10 Gb/s: 0.8 ns per byte), is a :class:`fractions.Fraction`. No float ever carries time.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

PREAMBLE_SFD_IFG_BYTES = 20
"""Bytes every frame costs on the wire beyond its L2 length (7 preamble + 1 SFD + 12 inter-frame gap)."""

_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_RATE_UNITS = {"bps": 1, "kbps": 1_000, "Mbps": 1_000_000, "Gbps": 1_000_000_000}
_NUMBER = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9_]+)?)\s*([A-Za-zµμ]+)\s*$")


class ValueError_(ValueError):
    """A value that does not have the documented form (the message says which form was expected)."""


def _decimal(text: str) -> Fraction:
    return Fraction(text.replace("_", ""))


def parse_duration(value: object) -> int:
    """Integer nanoseconds from an int or a string such as ``"320us"``, ``"1.5us"``, ``"250ns"``."""
    if isinstance(value, bool):
        raise ValueError_(f"expected a duration, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError_(f"duration must not be negative, got {value}")
        return value
    if isinstance(value, str):
        m = _NUMBER.match(value)
        if m and m.group(2) in _DURATION_UNITS:
            ns = _decimal(m.group(1)) * _DURATION_UNITS[m.group(2)]
            if ns.denominator != 1:
                raise ValueError_(f"duration {value!r} is not a whole number of nanoseconds")
            return int(ns)
        raise ValueError_(f'expected a duration like "320us" (units ns, us, ms, s), got {value!r}')
    raise ValueError_(f"expected a duration (integer ns or a string with a unit), got {value!r}")


def parse_rate(value: object) -> int:
    """Bits per second from an int or a string such as ``"1Gbps"``; must be a whole number of Mb/s."""
    if isinstance(value, bool):
        raise ValueError_(f"expected a rate, got {value!r}")
    if isinstance(value, int):
        bps = Fraction(value)
    elif isinstance(value, str):
        m = _NUMBER.match(value)
        if not (m and m.group(2) in _RATE_UNITS):
            raise ValueError_(f'expected a rate like "1Gbps" (units bps, kbps, Mbps, Gbps), got {value!r}')
        bps = _decimal(m.group(1)) * _RATE_UNITS[m.group(2)]
    else:
        raise ValueError_(f"expected a rate (integer bit/s or a string with a unit), got {value!r}")
    if bps <= 0 or bps % 1_000_000 != 0:
        raise ValueError_(f"rate {value!r} must be a positive whole number of Mb/s")
    return int(bps)


def format_duration(ns: int) -> str:
    """The shortest exact string form of a duration: ``320000`` -> ``"320us"``."""
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns != 0 and ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"


def format_rate(bps: int) -> str:
    """``1_000_000_000`` -> ``"1Gbps"``; other whole Mb/s values as ``"2500Mbps"``."""
    if bps % 1_000_000_000 == 0:
        return f"{bps // 1_000_000_000}Gbps"
    return f"{bps // 1_000_000}Mbps"


def slot_period(slot_bytes: int, rate_bps: int) -> Fraction:
    """δ in nanoseconds: ``(slot_bytes + 20)·8 / rate``, exact."""
    return Fraction((slot_bytes + PREAMBLE_SFD_IFG_BYTES) * 8 * 10**9, rate_bps)


def ceil_frac(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def floor_frac(x: Fraction) -> int:
    return x.numerator // x.denominator


def slot_start_ns(slot: int, delta: Fraction) -> int:
    """The integer-ns time that the runtime maps back to ``slot``: ``ceil(slot·δ)``.

    The runtime computes ``⌊t/δ⌋``; since ``ceil(slot·δ) < slot·δ + 1 ≤ (slot+1)·δ`` for ``δ ≥ 1 ns``, the
    result is ``slot`` again.
    """
    return ceil_frac(slot * delta)


def mask_hex(slots: list[int] | set[int]) -> str:
    return hex(sum(1 << s for s in slots))


def parse_mask(value: object) -> list[int]:
    if not isinstance(value, str) or not value.lower().startswith("0x"):
        raise ValueError_(f'expected a hex mask string like "0x20002", got {value!r}')
    try:
        bits = int(value, 16)
    except ValueError as exc:
        raise ValueError_(f'expected a hex mask string like "0x20002", got {value!r}') from exc
    return [i for i in range(bits.bit_length()) if bits >> i & 1]


def lcm_all(values: list[int] | tuple[int, ...]) -> int:
    out = 1
    for v in values:
        out = math.lcm(out, v)
    return out
