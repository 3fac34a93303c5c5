"""The benchmarks' small statistics: nearest-rank percentiles, spreads, paired ratios."""

from __future__ import annotations

import pytest

from bench.stats import median_spread, paired_ratios, percentile, spread


def test_percentile_is_the_nearest_rank() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 99) == 5.0
    assert percentile(values, 0) == 1.0
    assert percentile(list(range(1, 101)), 99) == 99


@pytest.mark.parametrize(("values", "p"), [([], 50), ([1.0], -1), ([1.0], 101)])
def test_percentile_refuses_no_values_and_a_rank_outside_0_to_100(
    values: list[float], p: float
) -> None:
    with pytest.raises(ValueError):
        percentile(values, p)


def test_spread_is_the_lowest_and_the_highest() -> None:
    assert spread([3.0, 1.0, 2.0]) == (1.0, 3.0)
    with pytest.raises(ValueError):
        spread([])


def test_paired_ratios_divide_each_rounds_median_by_the_same_rounds_baseline() -> None:
    measured = [[10.0, 12.0, 11.0], [30.0, 40.0, 20.0]]
    baseline = [[1.0, 1.0, 2.0], [2.0, 3.0, 4.0]]
    assert paired_ratios(measured, baseline) == [11.0, 10.0]


@pytest.mark.parametrize(
    ("measured", "baseline"),
    [([[1.0]], [[1.0], [1.0]]), ([[]], [[1.0]]), ([[1.0]], [[0.0]])],
)
def test_paired_ratios_refuse_unpaired_empty_or_zero_rounds(
    measured: list[list[float]], baseline: list[list[float]]
) -> None:
    with pytest.raises(ValueError):
        paired_ratios(measured, baseline)


def test_median_spread_reads_median_then_lowest_to_highest() -> None:
    assert median_spread([3.0, 1.04, 2.0]) == "2.0 (1.0-3.0)"
    assert median_spread([2.0, 4.0, 3.0], digits=2, unit="x") == "3.00x (2.00-4.00)"
