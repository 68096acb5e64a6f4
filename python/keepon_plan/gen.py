"""Seeded generator of flow sets like the paper's schedulability experiment (A.8, Table 5).

How the paper's ambiguities are resolved (also in README.md):

- **Settings**: 1 Gb/s, slot 1230 B (δ = 10 µs), ring of 32 slots, batch 8 — Table 5's slot and ring.
- **Utilisation** is the paper's: instances per ring cycle over ring slots, ``Σ_f δ/p_f``. A set generated for
  level ``u`` has utilisation within ``u ± 1 %`` (exact hits are impossible with few flows and fixed periods).
- **Periods**: Table 5 lists "80, 160, 240, …, 1600 µs" but the text says all periods are harmonic. Family
  ``harmonic`` uses the harmonic members of that list, 80·2^k µs (80…1280); family ``nonharmonic`` uses the
  multiples 80·k µs with k ∈ {1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, 20} (bounded hyperperiod: 19.2 ms; all
  multiples 1…20 would give lcm(1..20)·80 µs ≈ 5.2 hours).
- **Flow count** per set is drawn from {2, 4, 8, 12, 16} among the counts that can reach the level with these
  periods (2 flows cannot reach 70 %; 16 flows cannot go below 10 %).
- **Per-flow utilisation** by UUniFast, rounded to the nearest period, then nudged one period step at a time
  until the total is within tolerance.
- **Jitter**: uniform in 5–20 % of the period, whole µs. **Classes**: 1…min(8, flows), each non-empty.
  **Frames**: 64…1230 B.
- **896 flow sets**: the paper generated 64 sets per level; 896 = 14 × 64 matches 14 levels, i.e. 5 % … 70 % in
  5 % steps (its plot may only show up to 50 %). ``bench`` defaults to those 14 levels.
- **Fixed phase** (family ``fixed-phase``, not in the paper): harmonic periods, and each flow's release phase
  drawn uniformly from the slot starts within its period (a network schedule built on the same 10 µs grid).
"""

from __future__ import annotations

import random
from fractions import Fraction

from .model import FlowSet, parse_flowset

SLOT_BYTES, SLOTS, BATCH, RATE = 1230, 32, 8, "1Gbps"
DELTA_US = 10
HARMONIC_US = (80, 160, 320, 640, 1280)
NONHARMONIC_US = tuple(80 * k for k in (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, 20))
FLOW_COUNTS = (2, 4, 8, 12, 16)
FAMILIES = ("harmonic", "nonharmonic", "fixed-phase")
TOLERANCE = Fraction(1, 100)


def periods_of(family: str) -> tuple[int, ...]:
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (one of {', '.join(FAMILIES)})")
    return NONHARMONIC_US if family == "nonharmonic" else HARMONIC_US


def _uunifast(rng: random.Random, n: int, total: float) -> list[float]:
    # Utilisation shares only (not time): floats are fine here, the result is rounded to periods.
    out, rest = [], total
    for i in range(1, n):
        nxt = rest * rng.random() ** (1.0 / (n - i))
        out.append(rest - nxt)
        rest = nxt
    out.append(rest)
    return out


def _util(periods_us: list[int]) -> Fraction:
    return sum((Fraction(DELTA_US, p) for p in periods_us), Fraction(0))


def _draw_periods(rng: random.Random, family: str, level: int) -> list[int]:
    options = sorted(periods_of(family))
    target = Fraction(level, 100)
    counts = [
        n
        for n in FLOW_COUNTS
        if n * Fraction(DELTA_US, options[-1]) <= target + TOLERANCE
        and n * Fraction(DELTA_US, options[0]) >= target - TOLERANCE
    ]
    if not counts:
        raise ValueError(f"no flow count in {FLOW_COUNTS} reaches {level} % with periods {options}")
    for _ in range(200):
        n = rng.choice(counts)
        shares = _uunifast(rng, n, float(target))
        idx = [min(range(len(options)), key=lambda k: abs(DELTA_US / options[k] - u)) for u in shares]
        for _ in range(400):
            u = _util([options[k] for k in idx])
            if abs(u - target) <= TOLERANCE:
                return [options[k] for k in idx]
            i = rng.randrange(n)
            if u < target and idx[i] > 0:
                idx[i] -= 1
            elif u > target and idx[i] < len(options) - 1:
                idx[i] += 1
    raise ValueError(f"could not draw periods for {level} % ({family})")


def flowset_text(family: str, level: int, index: int, seed: int = 0) -> str:
    """The TOML text of flow set ``index`` at utilisation ``level`` % of ``family``; deterministic."""
    rng = random.Random(f"keepon-plan:{seed}:{family}:{level}:{index}")
    periods = _draw_periods(rng, family, level)
    n = len(periods)
    k = rng.randint(1, min(8, n))
    classes = list(range(k)) + [rng.randrange(k) for _ in range(n - k)]
    rng.shuffle(classes)
    lines = [
        f"# generated: family {family}, level {level} %, set {index}, seed {seed}; "
        f"utilisation {float(_util(periods)) * 100:.2f} %",
        "[link]",
        f'rate = "{RATE}"',
        "",
        "[ring]",
        f"slot_bytes = {SLOT_BYTES}",
        f"slots = {SLOTS}",
        f"batch = {BATCH}",
    ]
    for c in range(k):
        lines += ["", "[[class]]", f'name = "tc-{c}"']
    for i, (p, c) in enumerate(zip(periods, classes, strict=True)):
        lo, hi = -(-p * 5 // 100), p * 20 // 100
        lines += [
            "",
            "[[flow]]",
            f'name = "f{i}"',
            f'class = "tc-{c}"',
            f'period = "{p}us"',
            f'jitter = "{rng.randint(lo, hi)}us"',
            f"frame_bytes = {rng.randint(64, SLOT_BYTES)}",
        ]
        if family == "fixed-phase":
            lines.append(f'phase = "{rng.randrange(p // DELTA_US) * DELTA_US}us"')
    return "\n".join(lines) + "\n"


def generate(family: str, level: int, index: int, seed: int = 0) -> FlowSet:
    return parse_flowset(flowset_text(family, level, index, seed), f"<{family}-{level}-{index}>")
