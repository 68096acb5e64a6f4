"""The flow set's ``[ptp]`` table: the runtime's ``[ptp]`` (docs/config.md), read by the planner.

The planner keeps room in the schedule for PTP's messages (:mod:`keepon_plan.ptproom`) and writes the table into the
plan unchanged. The keys and defaults are the runtime's (``crates/keepon/src/ptpconf.rs``); the keys that decide how
many frames PTP sends (``class``, ``role``, ``profile``, ``delay_mechanism``, the log intervals, ``one_step``) are
checked here as the runtime checks them, the others only for their form (the runtime checks the rest at start).

PTP's frames a second (:func:`needs`) are the runtime's formula (``crates/keepon/src/ptproom.rs``, ``needs``), with
``r(x) = 2^−x``: as master Sync ``r(log_sync)`` + Follow_Up ``r(log_sync)`` (two-step) + Announce
``r(log_announce)`` (not automotive) + Delay_Resp ``r(log_delay_req)`` (E2E); as slave Delay_Req ``r(log_delay_req)``
(E2E); role ``auto`` the larger of the two; P2P adds ``3·r(log_pdelay_req)`` in any role (Pdelay_Req and the peer's
Pdelay_Resp and Pdelay_Resp_Follow_Up).

This module is shared by the planner and the independent verifier, like the flow-set parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .units import ValueError_, parse_duration

PTP_LONGEST_FRAME = 64 + 42 + 4
"""PTP's longest frame in bytes, with FCS: an Announce (64 B) over UDPv4 (42 B of headers). The runtime's
``PTP_LONGEST_FRAME`` (crates/keepon/src/ptpconf.rs); its wire time adds preamble, SFD and gap (20 B)."""

PTP_KEYS = (
    "class",
    "role",
    "profile",
    "domain",
    "transport",
    "ipv4",
    "delay_mechanism",
    "log_sync_interval",
    "log_announce_interval",
    "log_delay_req_interval",
    "log_pdelay_req_interval",
    "one_step",
    "priority1",
    "servo",
    "sync_threshold",
    "delay_floor_window",
    "tx_latency",
    "rx_latency",
    "measurement_log",
    "dual_clock",
    "neighbor_prop_delay_thresh",
)
"""The runtime's ``[ptp]`` keys (crates/keepon/src/ptpconf.rs, ``PtpSection``)."""

_DURATION_KEYS = ("sync_threshold", "delay_floor_window", "tx_latency", "rx_latency", "neighbor_prop_delay_thresh")
_DEFAULT_INTERVALS = {"default": (0, 1, 0), "gptp": (-3, 0, 0), "automotive": (-3, 0, 0)}
"""(log Sync, log Announce, log (P)Delay_Req) by profile (crates/ptp/src/gptp, ``Profile::default_intervals``)."""


@dataclass(frozen=True)
class PtpInput:
    """The ``[ptp]`` table, validated: what decides PTP's frame rate, and the table as written."""

    cls: str
    role: str
    profile: str
    delay_mechanism: str
    log_sync: int
    log_announce: int
    log_delay: int
    """log₂ of the Delay_Req interval (E2E) or of the Pdelay_Req interval (P2P)."""
    one_step: bool
    table: dict = field(compare=False)
    """The table exactly as written (key order kept): the plan carries it unchanged."""


class PtpError(Exception):
    """A bad ``[ptp]`` value; ``key`` is the offending key (``None``: the table itself)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _string(t: dict, key: str, default: str, allowed: tuple[str, ...]) -> str:
    value = t.get(key, default)
    if value not in allowed:
        options = ", ".join(f'"{a}"' for a in allowed)
        raise PtpError(f"ptp.{key} = {_show(value)}: use {options}", key)
    return value


def _show(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _interval(t: dict, key: str, default: int, lo: int, hi: int) -> int:
    value = t.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise PtpError(f"ptp.{key} = {_show(value)}: must be an integer within {lo}..={hi}", key)
    return value


def _boolean(t: dict, key: str) -> bool:
    value = t.get(key, False)
    if not isinstance(value, bool):
        raise PtpError(f"ptp.{key} = {_show(value)}: use true or false", key)
    return value


def parse_ptp(t: object, classes: tuple[str, ...]) -> PtpInput:
    """The ``[ptp]`` table ``t`` of a flow set with ``classes``; raises :class:`PtpError` naming the key."""
    if not isinstance(t, dict):
        raise PtpError("[ptp] must be a table")
    for key in t:
        if key not in PTP_KEYS:
            raise PtpError(f"unknown key {key!r} in [ptp] (allowed: {', '.join(sorted(PTP_KEYS))})", key)
    for key, value in t.items():
        if not isinstance(value, str | int | bool):  # the runtime has no other kind of [ptp] value
            raise PtpError(f"ptp.{key} = {value!r}: expected a string, an integer or a boolean", key)
    if "class" not in t:
        raise PtpError("[ptp] needs class = the name of the class whose slots carry PTP's messages", "class")
    cls = t["class"]
    if not isinstance(cls, str) or cls not in classes:
        raise PtpError(f"ptp.class = {_show(cls)}: no such class (classes: {', '.join(classes)})", "class")
    profile = _string(t, "profile", "default", ("default", "gptp", "automotive"))
    ieee_802_1as = profile != "default"
    if ieee_802_1as:
        if t.get("delay_mechanism", "p2p") != "p2p":
            raise PtpError(
                f'ptp.delay_mechanism = {_show(t["delay_mechanism"])}: profile = "{profile}" (IEEE 802.1AS) '
                'measures every link peer to peer: use "p2p" or leave it out',
                "delay_mechanism",
            )
        if t.get("transport", "l2") != "l2":
            raise PtpError(
                f'ptp.transport = {_show(t["transport"])}: profile = "{profile}" (IEEE 802.1AS) runs over '
                'Ethernet only: use "l2" or leave it out',
                "transport",
            )
        if t.get("one_step") is True:
            raise PtpError(f'ptp.one_step = true: profile = "{profile}" sends two-step Sync', "one_step")
        if profile == "automotive" and t.get("role") not in ("master", "slave"):
            raise PtpError(
                'ptp.role: profile = "automotive" has static roles and no BMCA: set role = "master" or "slave"',
                "role",
            )
    elif "neighbor_prop_delay_thresh" in t:
        raise PtpError(
            'ptp.neighbor_prop_delay_thresh is only for profile = "gptp" or "automotive" (asCapable)',
            "neighbor_prop_delay_thresh",
        )
    role = _string(t, "role", "auto", ("master", "slave", "auto"))
    log_sync, log_announce, log_delay = _DEFAULT_INTERVALS[profile]
    delay = _string(t, "delay_mechanism", "p2p" if ieee_802_1as else "e2e", ("e2e", "p2p"))
    if delay == "e2e" and "log_pdelay_req_interval" in t:
        raise PtpError(
            'ptp.log_pdelay_req_interval is only for delay_mechanism = "p2p" (E2E sends '
            "ptp.log_delay_req_interval's Delay_Req)",
            "log_pdelay_req_interval",
        )
    if delay == "p2p" and "log_delay_req_interval" in t:
        raise PtpError(
            'ptp.log_delay_req_interval is only for delay_mechanism = "e2e" (P2P sends '
            "ptp.log_pdelay_req_interval's Pdelay_Req)",
            "log_delay_req_interval",
        )
    delay_key = "log_delay_req_interval" if delay == "e2e" else "log_pdelay_req_interval"
    one_step = _boolean(t, "one_step")
    if one_step and role == "slave":
        raise PtpError(
            'ptp.one_step = true: a slave sends no Sync (one-step is for role = "master" or "auto")', "one_step"
        )
    _boolean(t, "dual_clock")
    for key in ("domain", "priority1"):
        if key in t:
            _interval(t, key, 0, 0, 255)
    _string(t, "transport", "l2", ("l2", "udpv4"))
    _string(t, "servo", "kalman", ("kalman", "pi", "moving-average"))
    for key in _DURATION_KEYS:
        if key in t:
            try:
                parse_duration(t[key])
            except ValueError_ as exc:
                raise PtpError(f"ptp.{key}: {exc}", key) from exc
    return PtpInput(
        cls=cls,
        role=role,
        profile=profile,
        delay_mechanism=delay,
        log_sync=_interval(t, "log_sync_interval", log_sync, -7, 4),
        log_announce=_interval(t, "log_announce_interval", log_announce, -3, 4),
        log_delay=_interval(t, delay_key, log_delay, -7, 6),
        one_step=one_step,
        table=dict(t),
    )


def _rate(log: int) -> Fraction:
    """Frames a second of one every ``2^log`` s, exactly."""
    return Fraction(2) ** -log


def _per_s(x: Fraction) -> str:
    return f"{float(x):g}/s"


def needs(p: PtpInput) -> tuple[Fraction, str]:
    """PTP's frames a second at ``p``'s intervals (exact) and what they are, for messages (module docstring)."""
    master: list[tuple[str, Fraction]] = [("Sync", _rate(p.log_sync))]
    if not p.one_step:
        master.append(("Follow_Up", _rate(p.log_sync)))
    if p.profile != "automotive":
        master.append(("Announce", _rate(p.log_announce)))
    slave: list[tuple[str, Fraction]] = []
    common: list[tuple[str, Fraction]] = []
    if p.delay_mechanism == "e2e":
        master.append(("Delay_Resp", _rate(p.log_delay)))
        slave.append(("Delay_Req", _rate(p.log_delay)))
    else:
        common.append(("Pdelay_Req and the peer's Pdelay_Resp + Pdelay_Resp_Follow_Up", 3 * _rate(p.log_delay)))

    def total(parts: list[tuple[str, Fraction]]) -> Fraction:
        return sum((r for _, r in parts), Fraction(0))

    if p.role == "master" or (p.role == "auto" and total(master) >= total(slave)):
        side = master
    else:
        side = slave
    parts = side + common
    return total(parts), ", ".join(f"{what} {_per_s(r)}" for what, r in parts)


def slots_per_cycle(rate: Fraction, cycle_ns: Fraction) -> int:
    """Owned slots (or longest-frame places) a cycle of ``cycle_ns`` needs for ``rate`` frames a second:
    ``⌈rate × cycle⌉``, exactly."""
    x = rate * cycle_ns / 10**9
    return -(-x.numerator // x.denominator)


def describe(p: PtpInput) -> str:
    """PTP's rate and its parts, for a message."""
    rate, what = needs(p)
    return f"PTP sends {float(rate):g} frames/s at its intervals ({what})"


def table_problem(p: PtpInput | None, plan_table: object) -> str | None:
    """Why a plan's ``[ptp]`` (``plan_table``, ``None`` if absent) is not the flow set's ``p``, or ``None``."""
    want = p.table if p is not None else None
    if plan_table == want:
        return None
    if p is None:
        return "the plan has a [ptp] table the flow set has not (the planner kept no room for PTP)"
    if plan_table is None:
        return f"the flow set's [ptp] (class {p.cls!r}) is missing from the plan"
    return "the plan's [ptp] differs from the flow set's"
