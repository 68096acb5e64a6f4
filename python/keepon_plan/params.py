"""Parameter selection (paper A.10): slot size first, ring size, then batch; and the trade-off table (Table 6).

- **Slot size.** Candidates are the slot periods ``δ`` that divide the GCD ``G`` of the flow periods (so every
  period is a whole number of slots and the hyperperiod in slots is smallest) and give a whole number of bytes
  ``slot_bytes = δ·rate/8 − 20`` in 64..=9018. Choose the smallest candidate that holds the largest frame: finer
  granularity, better sync accuracy, less padding.
- **Ring size** (when not given): the largest power of two that divides the hyperperiod in slots (so the
  schedule repeats every ``H`` slots and ownership is as fine as it can be); if that is below 32, the largest
  divisor of the hyperperiod. Both are capped by 4096 and by the hyperperiod of the flows whose periods fit in
  4096 slots (at least 32), so one slow flow does not blow the ring up. A multiple of a feasible ring size is
  always feasible too.
- **Batch.** The largest ``b ≤ N − 1`` with (a) the PTP offset bound of Eq. 4 within ``sync_budget`` when the
  station's effective clock granularity is ``b·δ``: ``δ_TS = ½(g_M + b·δ + max(j_M, j_S))``; (b) the lead
  ``(b + 1)·δ`` within ``max_data_age`` (default: the shortest period). It must also leave the poll loop
  ``b·δ ≥ poll_budget`` (paper Table 3: the poll period must fit in ``b·δ``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .model import MAX_RING_SLOTS, MAX_SLOT_BYTES, MIN_SLOT_BYTES, FlowSet, InputError
from .units import PREAMBLE_SFD_IFG_BYTES, ceil_frac, floor_frac, lcm_all, slot_period


class ParamError(InputError):
    """No parameter choice satisfies the stated bounds."""


@dataclass(frozen=True)
class RingChoice:
    slot_bytes: int
    slots: int
    batch: int
    lead: int
    notes: tuple[str, ...] = field(default=())

    def delta(self, rate: int) -> Fraction:
        return slot_period(self.slot_bytes, rate)


def slot_candidates(fs: FlowSet) -> list[int]:
    """Slot sizes (bytes) whose slot period divides the GCD of the periods, ascending (any frame size)."""
    per_gcd = Fraction(fs.period_gcd * fs.rate, 8 * 10**9)  # bytes on the wire per G
    out = []
    for wire in range(MIN_SLOT_BYTES + PREAMBLE_SFD_IFG_BYTES, MAX_SLOT_BYTES + PREAMBLE_SFD_IFG_BYTES + 1):
        if (per_gcd / wire).denominator == 1:
            out.append(wire - PREAMBLE_SFD_IFG_BYTES)
    return out


def choose_slot_bytes(fs: FlowSet) -> int:
    if fs.slot_bytes is not None:
        return fs.slot_bytes
    fitting = [s for s in slot_candidates(fs) if s >= fs.max_frame]
    if not fitting:
        raise fs.error(
            f"no slot size in {MIN_SLOT_BYTES}..={MAX_SLOT_BYTES} bytes holds the largest frame "
            f"({fs.max_frame} B) and divides the GCD of the periods ({fs.period_gcd} ns) at {fs.rate} bit/s; "
            "set [ring] slot_bytes or adjust the periods",
            ("ring",),
        )
    return fitting[0]


def hyperperiod_slots(fs: FlowSet, slot_bytes: int) -> int:
    delta = slot_period(slot_bytes, fs.rate)
    periods = []
    for i, f in enumerate(fs.flows):
        p = Fraction(f.period) / delta
        if p.denominator != 1:
            raise fs.error(
                f"flow {f.name!r}: period {f.period} ns is not a whole number of slots of δ = {delta} ns",
                ("flow", i, "period"),
            )
        periods.append(int(p))
    return lcm_all(periods)


def choose_slots(fs: FlowSet, slot_bytes: int) -> int:
    if fs.slots is not None:
        return fs.slots
    h = hyperperiod_slots(fs, slot_bytes)
    delta = slot_period(slot_bytes, fs.rate)
    # Periods longer than the largest ring (e.g. a 125 ms PTP flow) would only blow the ring up; the ring need not
    # be longer than the hyperperiod of the other flows.
    short = [int(Fraction(f.period) / delta) for f in fs.flows if Fraction(f.period) / delta <= MAX_RING_SLOTS]
    cap = min(MAX_RING_SLOTS, max(32, lcm_all(short) if short else 32))
    power = 1
    while h % (power * 2) == 0 and power * 2 <= cap:
        power *= 2
    if power >= 32:
        return power
    divisors = [d for d in range(2, min(h, cap) + 1) if h % d == 0]
    return max([*divisors, power, 2])


def sync_bound(fs: FlowSet, delta: Fraction, batch: int) -> Fraction:
    """Eq. 4 with the station as PTP slave and ``g_S = batch·δ``: ``½(g_M + g_S + max(j_M, j_S))``."""
    p = fs.params
    return Fraction(p.master_granularity + batch * delta + max(p.master_jitter, p.station_jitter), 2)


def max_data_age(fs: FlowSet) -> int:
    return fs.params.max_data_age if fs.params.max_data_age is not None else min(f.period for f in fs.flows)


def default_lead(fs: FlowSet, delta: Fraction, batch: int) -> int:
    return fs.params.lead if fs.params.lead is not None else ceil_frac((batch + 1) * delta)


def batch_bounds(fs: FlowSet, delta: Fraction, slots: int) -> tuple[int, int, list[str]]:
    """(lowest, highest) admissible batch and the reason for each bound."""
    p = fs.params
    lo = max(1, ceil_frac(Fraction(p.poll_budget) / delta))
    why = [f"batch ≥ {lo}: batch·δ ≥ poll_budget {p.poll_budget} ns"]
    hi = slots - 1
    why.append(f"batch ≤ {hi}: ring of {slots} slots")
    if p.sync_budget is not None:
        b = floor_frac((2 * p.sync_budget - p.master_granularity - max(p.master_jitter, p.station_jitter)) / delta)
        why.append(f"batch ≤ {b}: Eq. 4 offset bound within sync_budget {p.sync_budget} ns")
        hi = min(hi, b)
    age = max_data_age(fs)
    if p.lead is not None:
        b = floor_frac(Fraction(p.lead) / delta)
        why.append(f"batch ≤ {b}: lead {p.lead} ns ≥ batch·δ")
        hi = min(hi, b)
        if p.lead > age:
            why.append(f"lead {p.lead} ns exceeds the max data age {age} ns")
            hi = min(hi, 0)
    else:
        b = floor_frac(Fraction(age) / delta) - 1
        why.append(f"batch ≤ {b}: lead (batch+1)·δ within max data age {age} ns")
        hi = min(hi, b)
    return lo, hi, why


def choose(fs: FlowSet) -> RingChoice:
    """Slot size, ring size and batch for the flow set (values fixed in the file are kept, and checked)."""
    slot_bytes = choose_slot_bytes(fs)
    slots = choose_slots(fs, slot_bytes)
    delta = slot_period(slot_bytes, fs.rate)
    lo, hi, why = batch_bounds(fs, delta, slots)
    batch, notes = pick_batch(fs, lo, hi, why)
    lead = default_lead(fs, delta, batch)
    return RingChoice(slot_bytes, slots, batch, lead, tuple(notes))


def pick_batch(fs: FlowSet, lo: int, hi: int, why: list[str], mode: str = "") -> tuple[int, list[str]]:
    """The flow set's batch (a note if it is outside ``lo..=hi``), else the largest within the bounds."""
    notes: list[str] = []
    if fs.batch is not None:
        if not lo <= fs.batch <= hi:
            notes.append(f"note: batch {fs.batch} given in the flow set is outside {lo}..={hi} ({'; '.join(why)})")
        return fs.batch, notes
    if lo > hi:
        raise ParamError(
            f"{mode}no batch satisfies the bounds ({'; '.join(why)}); relax [params] or set [ring] batch",
            fs.path,
            fs.source.line(("params",)) if fs.source else None,
        )
    return hi, notes


def _fmt(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    return f"{x.numerator / x.denominator:.3f}"  # display only, never used for time arithmetic


def tradeoff_table(fs: FlowSet, choice: RingChoice) -> str:
    """Paper Table 6 made concrete: metrics for the chosen slot size and batch and their neighbours."""
    delta = choice.delta(fs.rate)
    cands = slot_candidates(fs)
    if choice.slot_bytes not in cands:
        cands = sorted([*cands, choice.slot_bytes])
    k = cands.index(choice.slot_bytes)
    rows = cands[max(0, k - 2) : k + 3]
    mean_frame = Fraction(sum(f.frame_bytes for f in fs.flows), len(fs.flows))
    lines = [
        f"slot size (batch fixed at {choice.batch}; * = chosen):",
        f"{'':2}{'slot_B':>7} {'δ_ns':>9} {'util_%':>7} {'pad_eff_%':>9} {'lead_ns':>9} {'δ_TS_ns':>9}  note",
    ]
    for s in rows:
        d = slot_period(s, fs.rate)
        util = sum((d / f.period for f in fs.flows), Fraction(0)) * 100
        fragments = s < fs.max_frame
        eff = "-" if fragments else _fmt(mean_frame / s * 100)
        note = "fragments frames (the runtime does not)" if fragments else ""
        mark = "*" if s == choice.slot_bytes else " "
        lines.append(
            f"{mark:2}{s:>7} {_fmt(d):>9} {_fmt(util):>7} {eff:>9} "
            f"{_fmt((choice.batch + 1) * d):>9} {_fmt(sync_bound(fs, d, choice.batch)):>9}  {note}"
        )
    lo, hi, why = batch_bounds(fs, delta, choice.slots)
    lines.append("")
    lines.append(f"batch (slot {choice.slot_bytes} B, δ = {_fmt(delta)} ns; admissible {lo}..={hi}; * = chosen):")
    lines.append(f"{'':2}{'batch':>7} {'poll_ns':>9} {'lead_ns':>9} {'δ_TS_ns':>9}  note")
    b = choice.batch
    for x in sorted({max(1, b // 2), max(1, b - 1), b, min(choice.slots - 1, b + 1), min(choice.slots - 1, 2 * b)}):
        note = []
        if x < lo:
            note.append("poll loop cannot keep up")
        if x > hi:
            note.append("exceeds a bound")
        mark = "*" if x == b else " "
        lines.append(
            f"{mark:2}{x:>7} {_fmt(x * delta):>9} {_fmt((x + 1) * delta):>9} "
            f"{_fmt(sync_bound(fs, delta, x)):>9}  {', '.join(note)}"
        )
    lines.append("")
    lines.append("bounds: " + "; ".join(why))
    lines.append(
        "trends (paper Table 6): larger slot -> coarser granularity, longer lead, worse sync bound, more padding; "
        "larger batch -> longer lead, worse sync bound, lower CPU load."
    )
    lines.append(f"ring: {choice.slots} slots (cycle {_fmt(choice.slots * delta)} ns)")
    return "\n".join(lines)
