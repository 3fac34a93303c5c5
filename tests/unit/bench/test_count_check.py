"""Checking a word count's output and summing runs up (``bench.count_check``)."""

from __future__ import annotations

import math

import pytest

from bench.count_check import (
    check_counts,
    guarantee_label,
    parse_count,
    ratio_summary,
    time_summary,
)


def counts(*pairs: tuple[str, int]) -> list[tuple[bytes | None, bytes | None]]:
    return [(word.encode(), str(n).encode()) for word, n in pairs]


def test_every_count_once_in_order_is_exact() -> None:
    check = check_counts({"a": 2, "b": 1}, counts(("a", 1), ("b", 1), ("a", 2)))
    assert check.exact
    assert check.verdict() == "exact"
    assert (check.records, check.expected_records, check.keys) == (3, 3, 2)


def test_a_count_twice_is_a_duplicate_and_one_never_published_is_missing() -> None:
    check = check_counts({"a": 3, "b": 1}, counts(("a", 1), ("a", 1), ("a", 2), ("b", 1)))
    assert not check.exact
    assert (check.duplicated, check.missing, check.keys_wrong) == (1, 1, 1)
    assert check.verdict() == "4 of 4 records: 1 duplicated, 1 missing, 1 of 2 words wrong"


def test_counts_out_of_order_are_wrong_though_none_is_missing() -> None:
    check = check_counts({"a": 2}, counts(("a", 2), ("a", 1)))
    assert (check.duplicated, check.missing, check.keys_wrong) == (0, 0, 1)
    assert not check.exact


def test_a_word_the_input_never_had_is_all_duplicates() -> None:
    check = check_counts({"a": 1}, counts(("a", 1), ("zz", 1)))
    assert (check.duplicated, check.keys_wrong, check.keys) == (1, 1, 2)


def test_a_word_with_no_count_at_all_is_all_missing() -> None:
    check = check_counts({"a": 1, "b": 2}, counts(("a", 1)))
    assert (check.records, check.missing, check.keys_wrong) == (1, 2, 1)


@pytest.mark.parametrize(
    ("key", "value"),
    [(None, b"1"), (b"a", None), (b"\xff", b"1"), (b"a", b"not json"), (b"a", b'"1"'),
     (b"a", b"1.5"), (b"a", b"true")],
)  # fmt: skip
def test_a_hostile_record_is_malformed_not_a_crash(key: bytes | None, value: bytes | None) -> None:
    assert parse_count(key, value) is None
    check = check_counts({"a": 1}, [*counts(("a", 1)), (key, value)])
    assert (check.malformed, check.records) == (1, 2)
    assert not check.exact
    assert "1 malformed" in check.verdict()


def test_parse_count_reads_the_word_and_its_json_count() -> None:
    assert parse_count(b"w001", b"17") == ("w001", 17)


def test_time_summary_is_median_and_spread_of_the_runs_that_finished() -> None:
    assert time_summary([3.0, 1.0, 2.0]) == ("2.0", "1.0-3.0")
    assert time_summary([math.nan, 4.0]) == ("4.0", "4.0-4.0")
    assert time_summary([math.nan]) == ("-", "-")


def test_ratio_summary_pairs_rounds_and_skips_a_round_either_did_not_finish() -> None:
    assert ratio_summary([10.0, 30.0, 8.0], [2.0, 3.0, 4.0]) == "5.0x (2.0-10.0)"
    assert ratio_summary([math.nan, 6.0], [1.0, 2.0]) == "3.0x (3.0-3.0)"
    assert ratio_summary([math.nan], [1.0]) == "-"
    with pytest.raises(ValueError, match="2 rounds paired with 1"):
        ratio_summary([1.0, 2.0], [1.0])


def test_the_guarantee_is_the_setting_only_with_markers_in_every_run() -> None:
    assert guarantee_label("exactly-once", [5, 3]).startswith("exactly-once (transaction")
    assert guarantee_label("exactly_once", [5, 0]).startswith("at-least-once")
    assert guarantee_label("exactly_once", []).startswith("at-least-once")
