"""The CLI's logging holds back repeated Kafka-client lines: a flood of ``Topic ... not found in
cluster metadata`` errors becomes a handful of lines that say how many were held back."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from sluicegate.cli.logs import RepeatFilter, configure_logging


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def not_found(topic: str) -> logging.LogRecord:
    return logging.LogRecord(
        "aiokafka.cluster", logging.ERROR, "cluster.py", 262,
        "Topic %s not found in cluster metadata", (topic,), None,
    )  # fmt: skip


@pytest.fixture
def cli_logging() -> Iterator[io.StringIO]:
    """The CLI's logging configuration, writing to a string; undone afterwards."""
    root, kafka = logging.getLogger(), logging.getLogger("aiokafka")
    levels = root.level, kafka.level
    stream = io.StringIO()
    handler = configure_logging(verbose=False, stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(levels[0])
        kafka.setLevel(levels[1])


def test_every_up_start_logs_thousands_of_not_found_in_cluster_metadata_lines_no_more(
    cli_logging: io.StringIO,
) -> None:
    log = logging.getLogger("aiokafka.cluster")
    for n in range(1000):
        log.error("Topic %s not found in cluster metadata", f"sluicegate.p.t{n % 7}")
    logging.getLogger("sluicegate.test").warning("our own lines are never held back")
    logging.getLogger("sluicegate.test").warning("our own lines are never held back")

    lines = cli_logging.getvalue().splitlines()
    kafka_lines = [line for line in lines if "aiokafka.cluster" in line]
    assert len(kafka_lines) == 1
    assert "ERROR aiokafka.cluster: Topic sluicegate.p.t0 not found" in kafka_lines[0]
    assert sum("our own lines" in line for line in lines) == 2


def test_a_repeat_passes_once_per_window_with_the_count_held_back() -> None:
    clock = FakeClock()
    repeats = RepeatFilter(30.0, clock=clock)
    passed = []
    for n in range(1000):  # 1000 lines over 100 s: a broker outage
        clock.now = n * 0.1
        record = not_found(f"t{n}")
        if repeats.filter(record):
            passed.append(record.getMessage())
    assert passed == [
        "Topic t0 not found in cluster metadata",
        "Topic t300 not found in cluster metadata [299 more like this in 30 s]",
        "Topic t600 not found in cluster metadata [299 more like this in 30 s]",
        "Topic t900 not found in cluster metadata [299 more like this in 30 s]",
    ]


def test_kinds_are_counted_apart_and_other_loggers_pass() -> None:
    repeats = RepeatFilter(30.0, clock=FakeClock())
    other = logging.LogRecord("aiokafka.conn", logging.ERROR, "c.py", 1, "Unable connect", (), None)
    mine = logging.LogRecord("sluicegate.operators.x", logging.ERROR, "x.py", 1, "same", (), None)
    assert repeats.filter(not_found("a"))
    assert not repeats.filter(not_found("b"))
    assert repeats.filter(other)
    assert repeats.filter(mine)
    assert repeats.filter(mine)
    kafka_lookalike = logging.LogRecord("kafkaesque", logging.ERROR, "k.py", 1, "x", (), None)
    assert repeats.filter(kafka_lookalike)
    assert repeats.filter(kafka_lookalike)
