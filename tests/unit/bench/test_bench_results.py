"""The benchmarks' honesty checks and result files: a wrong word count aborts the peer
comparison, faust's guarantee is the one the table names, results are JSON lines the report
reads back."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import ConsumerRecord

from bench.peers_wordcount import (
    NotReadyError,
    Setup,
    Timed,
    WrongCountsError,
    check_counts,
    cpu_per_word,
    faust_guarantee_at,
    guarantee_of,
    started_within,
)
from bench.report import load, markdown_table
from bench.table import record, report_table

SETUP = Setup("quix", 2)


def counts(*pairs: tuple[str, int]) -> list[ConsumerRecord[bytes, bytes]]:
    return [
        ConsumerRecord(
            topic="counts", partition=0, offset=n, timestamp=0, timestamp_type=0,
            key=word.encode(), value=str(count).encode(), checksum=None,
            serialized_key_size=len(word), serialized_value_size=len(str(count)), headers=(),
        )
        for n, (word, count) in enumerate(pairs)
    ]  # fmt: skip


def test_exact_counts_pass() -> None:
    expected = Counter({"a": 3, "b": 1})
    check_counts(SETUP, counts(("a", 1), ("b", 1), ("a", 2), ("a", 3)), expected)


@pytest.mark.parametrize(
    ("records", "word"),
    [
        (counts(("a", 1), ("a", 3), ("b", 1)), "a"),  # a gap
        (counts(("a", 1), ("a", 1), ("a", 2), ("b", 1)), "a"),  # a duplicate
        (counts(("a", 1), ("a", 2)), "b"),  # a word missing
        (counts(("a", 1), ("a", 2), ("b", 1), ("c", 1)), "c"),  # a word never sent
    ],
)
def test_a_wrong_count_aborts(records: list[ConsumerRecord[bytes, bytes]], word: str) -> None:
    with pytest.raises(WrongCountsError) as raised:
        check_counts(SETUP, records, Counter({"a": 2, "b": 1}))
    assert raised.value.word == word
    assert raised.value.setup == "quix x2"
    assert "the benchmark is void" in str(raised.value)


def test_faust_guarantee_is_named_in_the_table() -> None:
    assert faust_guarantee_at("auto", 1) == "exactly_once"
    assert faust_guarantee_at("auto", 2) == "at_least_once"
    assert faust_guarantee_at("exactly_once", 2) == "exactly_once"
    assert guarantee_of(Setup("faust", 2), "auto").startswith("faust at_least_once")
    assert guarantee_of(Setup("quix", 2), "auto").startswith("exactly-once")


def test_an_output_without_transaction_markers_is_labelled_at_least_once() -> None:
    labelled = guarantee_of(Setup("faust", 1), "auto", transactional=False)
    assert labelled.startswith("at-least-once: no transaction markers")
    assert "exactly_once" in labelled  # what it was set to, beside what it is
    assert guarantee_of(Setup("sluicegate", 1), "auto", transactional=True).startswith(
        "exactly-once"
    )


def test_results_are_json_lines_the_report_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEGATE_BENCH_OUT", str(tmp_path))
    record("recovery", "restore", state_mb=10.0, local=True, seconds=1.5)
    report_table("recovery", "Recovery", ("MB", "s"), [("10", "1.5")], ["a note"])
    assert "a note" in capsys.readouterr().out
    rows = load(tmp_path / "results.jsonl")
    assert [r["kind"] for r in rows] == ["restore", "table"]
    assert rows[1] == {
        "bench": "recovery", "kind": "table", "title": "Recovery", "header": ["MB", "s"],
        "rows": [["10", "1.5"]], "notes": ["a note"],
    }  # fmt: skip
    assert (
        markdown_table(rows[1]["header"], rows[1]["rows"]) == "| MB | s |\n|---|---:|\n| 10 | 1.5 |"
    )


def test_the_report_refuses_lines_that_are_not_results(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"bench": "x", "kind": "table"}) + "\n" + json.dumps([1]) + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:2: not a benchmark result"):
        load(path)


def test_a_system_that_never_started_is_run_again_on_fresh_topics() -> None:
    calls: list[int] = []

    async def flaky() -> float:
        calls.append(1)
        if len(calls) < 3:
            raise NotReadyError("warm-up: 2 of 4 counts within 180 s")
        return 4.2

    assert asyncio.run(started_within(3, "faust x2", flaky)) == 4.2
    assert len(calls) == 3


def test_a_system_that_never_starts_or_stalls_after_starting_voids_the_benchmark() -> None:
    async def never() -> float:
        raise NotReadyError("warm-up: 0 of 4 counts within 180 s")

    async def stalls() -> float:
        raise TimeoutError("9000 of 20000 counts within 1800 s")

    with pytest.raises(NotReadyError):
        asyncio.run(started_within(2, "faust x2", never))
    with pytest.raises(TimeoutError, match="9000 of 20000"):
        asyncio.run(started_within(3, "faust x2", stalls))


@pytest.mark.parametrize("changelog", [False, True], ids=["rocksdb-files", "changelog"])
def test_the_memory_benchmark_restores_the_memory_it_checkpointed(
    tmp_path: Path, changelog: bool
) -> None:
    from bench.memory_state import measure

    figures = asyncio.run(measure(300, 3, 2, 0.1, 0.01, tmp_path, changelog=changelog))
    assert figures["changed MB"] > 0
    assert figures["mean"] > 0
    assert figures["state MB"] > 0


def test_cpu_per_word_is_the_median_of_the_rounds_and_adds_the_broker_when_known() -> None:
    runs = [Timed(1.0, 2.0, True, cpu, broker) for cpu, broker in ((1.0, 0.5), (3.0, 0.5),
                                                                   (2.0, 1.0))]  # fmt: skip
    assert cpu_per_word(runs, 100_000) == ("20.0 (10.0-30.0)", "30.0")
    unknown = [Timed(1.0, 2.0, True, 1.0, None), *runs[1:]]
    assert cpu_per_word(unknown, 100_000) == ("20.0 (10.0-30.0)", "-")
