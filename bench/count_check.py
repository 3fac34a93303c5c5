"""Checking a word count's output against the input, and summing runs up: pure helpers of
``bench.faust_both_ways``, unit-tested in ``tests/unit/bench/test_count_check.py``.

An output is *exact* when every word's counts are ``1, 2, ..., n`` in order, ``n`` the times
the word occurs in the input, and nothing else is in it. Otherwise the check says what it
found: a count *duplicated* when its word got that value more often than it should, *missing*
when less, records that do not parse as ``(word, count)`` *malformed* (every byte read from a
topic is hostile: a bad record is counted, never a crash of the benchmark).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

__all__ = [
    "CountCheck",
    "check_counts",
    "guarantee_label",
    "parse_count",
    "ratio_summary",
    "time_summary",
]


@dataclass(frozen=True, slots=True)
class CountCheck:
    """What an output held against the exact one."""

    expected_records: int
    records: int
    duplicated: int
    missing: int
    malformed: int
    keys_wrong: int
    keys: int

    @property
    def exact(self) -> bool:
        return (self.records, self.duplicated, self.missing, self.malformed) == (
            self.expected_records, 0, 0, 0,
        ) and self.keys_wrong == 0  # fmt: skip

    def verdict(self) -> str:
        """``exact``, or what was wrong, in a few words."""
        if self.exact:
            return "exact"
        found = f"{self.records} of {self.expected_records} records"
        wrong = [f"{self.duplicated} duplicated", f"{self.missing} missing"]
        if self.malformed:
            wrong.append(f"{self.malformed} malformed")
        return f"{found}: {', '.join(wrong)}, {self.keys_wrong} of {self.keys} words wrong"


def parse_count(key: bytes | None, value: bytes | None) -> tuple[str, int] | None:
    """A counts record as ``(word, count)``: key the word (UTF-8), value the count as JSON;
    None when it is not one."""
    if key is None or value is None:
        return None
    try:
        word, count = key.decode(), json.loads(value)
    except (UnicodeDecodeError, ValueError):
        return None
    if type(count) is not int:
        return None
    return word, count


def check_counts(
    expected: Mapping[str, int], records: Iterable[tuple[bytes | None, bytes | None]]
) -> CountCheck:
    """Check ``records`` (key, value) against ``expected`` (word -> times in the input)."""
    seen: dict[str, list[int]] = {}
    total = malformed = 0
    for key, value in records:
        total += 1
        parsed = parse_count(key, value)
        if parsed is None:
            malformed += 1
            continue
        seen.setdefault(parsed[0], []).append(parsed[1])
    duplicated = missing = wrong = 0
    words = set(seen) | {w for w, n in expected.items() if n > 0}
    for word in words:
        want = list(range(1, expected.get(word, 0) + 1))
        got = seen.get(word, [])
        duplicated += sum((Counter(got) - Counter(want)).values())
        missing += sum((Counter(want) - Counter(got)).values())
        wrong += got != want
    return CountCheck(
        expected_records=sum(expected.values()), records=total, duplicated=duplicated,
        missing=missing, malformed=malformed, keys_wrong=wrong, keys=len(words),
    )  # fmt: skip


def time_summary(seconds: Sequence[float]) -> tuple[str, str]:
    """``(median, "min-max")`` of the runs that finished (NaN: did not), as text; ``-`` when
    none did."""
    done = [s for s in seconds if not math.isnan(s)]
    if not done:
        return "-", "-"
    return f"{median(done):.1f}", f"{min(done):.1f}-{max(done):.1f}"


def ratio_summary(theirs: Sequence[float], ours: Sequence[float]) -> str:
    """Median and spread of the per-round ratios ``theirs / ours`` (rounds where both
    finished); ``-`` when there are none.

    Raises:
        ValueError: the two have different numbers of rounds.
    """
    if len(theirs) != len(ours):
        raise ValueError(f"{len(theirs)} rounds paired with {len(ours)}")
    ratios = [
        t / o for t, o in zip(theirs, ours, strict=True) if not (math.isnan(t) or math.isnan(o))
    ]
    if not ratios:
        return "-"
    return f"{median(ratios):.1f}x ({min(ratios):.1f}-{max(ratios):.1f})"


def guarantee_label(setting: str, markers: Sequence[int]) -> str:
    """A system's guarantee by what its output held: ``setting`` only when every run's output
    had transaction markers (control records), else at-least-once whatever it was set to."""
    if markers and all(m > 0 for m in markers):
        return f"{setting} (transaction markers on its output)"
    return f"at-least-once: no transaction markers on its output ({setting})"
