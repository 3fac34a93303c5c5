"""Small statistics the benchmarks share: a nearest-rank percentile, a spread, paired ratios.

Pure functions over plain lists, unit-tested in ``tests/unit/bench/test_stats.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

__all__ = ["paired_ratios", "percentile", "spread"]


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``values`` (``p`` in 0..100).

    Raises:
        ValueError: ``values`` is empty, or ``p`` is outside 0..100.
    """
    if not values:
        raise ValueError("a percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside 0..100")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def spread(values: Sequence[float]) -> tuple[float, float]:
    """``(lowest, highest)`` of ``values``.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("a spread of no values")
    return min(values), max(values)


def median_spread(values: Sequence[float], digits: int = 1, unit: str = "") -> str:
    """``median<unit> (lowest-highest)`` of ``values``, ``digits`` decimals each."""
    low, high = spread(values)
    return f"{median(values):.{digits}f}{unit} ({low:.{digits}f}-{high:.{digits}f})"


def paired_ratios(
    measured: Sequence[Sequence[float]], baseline: Sequence[Sequence[float]]
) -> list[float]:
    """Per round, the median of ``measured``'s values over the median of ``baseline``'s (the
    same round's): ratios that machine noise between rounds does not enter.

    Raises:
        ValueError: the two have different numbers of rounds, a round is empty, or a
            baseline's median is not positive.
    """
    if len(measured) != len(baseline):
        raise ValueError(f"{len(measured)} rounds paired with {len(baseline)}")
    ratios = []
    for mine, base in zip(measured, baseline, strict=True):
        if not mine or not base:
            raise ValueError("a round without values")
        if (denominator := median(base)) <= 0:
            raise ValueError(f"a baseline median of {denominator}")
        ratios.append(median(mine) / denominator)
    return ratios
