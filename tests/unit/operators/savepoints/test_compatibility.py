"""The checks before a restore, pure: every refusal says what to do, and the flag that allows
dropping state drops exactly what cannot be restored."""

from __future__ import annotations

import pytest

from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.savepoints.compatibility import check_restore
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.savepoints.sources import OperatorInfo
from sluicegate.operators.state.store import PartitionId
from sluicegate.operators.state.versions import StateVersions


def noop(record: Record, ctx: Context) -> None:
    """Never called."""


def graph(partitions: int = 4, version: int = 1) -> JobGraph:
    p = Pipeline("g")
    p.source("in", partitions=partitions)
    p.sink("out", partitions=1)
    versions = StateVersions.of(
        version, {k: lambda key, value: (key, value) for k in range(1, version)}
    )
    p.operator("op", noop, inputs="in", outputs="out", parallelism=2, state_versions=versions)
    return p.build()


def info(*rows_in: int, version: int = 1) -> OperatorInfo:
    partitions = {PartitionId("in", p): 10 for p in range(4)}
    return OperatorInfo(2, version, partitions, frozenset(PartitionId("in", p) for p in rows_in))


def test_a_matching_savepoint_needs_no_note() -> None:
    assert check_restore({"op": info(0, 1)}, graph(), allow_non_restored=False, what="sp") == []


def test_rows_of_partitions_no_longer_read_are_refused_or_dropped() -> None:
    with pytest.raises(SavepointRefusedError, match=r"in\[3\]") as refused:
        check_restore({"op": info(0, 3)}, graph(partitions=2), allow_non_restored=False, what="sp")
    assert "partition count" in refused.value.what_to_do
    notes = check_restore(
        {"op": info(0, 3)}, graph(partitions=2), allow_non_restored=True, what="sp"
    )
    assert notes == ["rows of operator op in in[3] are dropped"]


def test_an_operator_without_state_starts_empty_and_an_upgrade_is_noted() -> None:
    assert check_restore({}, graph(), allow_non_restored=False, what="sp") == [
        "operator op has no state in sp: it starts empty"
    ]
    assert check_restore(
        {"op": info(1)}, graph(version=3), allow_non_restored=False, what="sp"
    ) == ["state of operator op is upgraded from version 1 to 3"]


def test_what_to_do_is_in_every_refusal() -> None:
    cases = [
        ({"op": info(), "gone": info()}, graph(), "Add them back with the same uid"),
        ({"op": info(version=2)}, graph(), "never downgraded"),
    ]
    for operators, g, advice in cases:
        with pytest.raises(SavepointRefusedError) as refused:
            check_restore(operators, g, allow_non_restored=False, what="sp")
        assert advice in refused.value.what_to_do
        assert advice in str(refused.value)
