"""Can this state restore this pipeline? Sans-IO checks before anything is written.

Operators are mapped by uid. `check_restore` refuses, with what to do:

* state of an operator the pipeline no longer has (unless ``allow_non_restored``, which drops
  it, as Flink's ``--allowNonRestoredState``);
* state whose version is newer than the code's (`StateVersions.current`): state is never
  downgraded;
* state of an older version without an upgrader for every step up to the code's;
* rows of input partitions the operator no longer reads (another topic, or a partition count
  that shrank: a topic's partition count is the operator's maximum parallelism and must not
  change), unless ``allow_non_restored``.

An operator without state in the savepoint starts empty and reads its inputs from the start,
as a new operator does. The answer lists what a restore will do that a person should know.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluicegate.operators.graph import JobGraph
from sluicegate.operators.savepoints.exceptions import SavepointRefusedError
from sluicegate.operators.savepoints.sources import OperatorInfo
from sluicegate.operators.state.store import PartitionId

__all__ = ["check_restore"]


def check_restore(
    operators: Mapping[str, OperatorInfo],
    graph: JobGraph,
    *,
    allow_non_restored: bool,
    what: str,
) -> list[str]:
    """Notes on the restore of ``operators`` (from ``what``) into ``graph``; raises
    `SavepointRefusedError` for the cases in the module docstring."""
    notes: list[str] = []
    gone = sorted(set(operators) - set(graph.operators))
    if gone and not allow_non_restored:
        raise SavepointRefusedError(
            f"{what} holds state of operator(s) {', '.join(gone)} that the pipeline no longer has",
            "Add them back with the same uid (state is mapped by uid), or pass "
            "--allow-non-restored-state to start without that state",
        )
    if gone:
        notes.append(f"state of operator(s) {', '.join(gone)} is dropped (not restored)")
    for uid, spec in graph.operators.items():
        info = operators.get(uid)
        if info is None:
            notes.append(f"operator {uid} has no state in {what}: it starts empty")
            continue
        saved, current = info.state_schema_version, spec.state_versions.current
        if saved > current:
            raise SavepointRefusedError(
                f"the state of operator {uid} in {what} is version {saved}, newer than this "
                f"code's version {current}",
                "State is never downgraded: restore it with the code that wrote it (or newer)",
            )
        if missing := spec.state_versions.missing(saved):
            raise SavepointRefusedError(
                f"the state of operator {uid} in {what} is version {saved}; the code is at "
                f"version {current} and has no upgrader from version(s) "
                f"{', '.join(map(str, missing))}",
                "Declare an upgrader for each step (operators.state.versions.StateVersions), "
                "or restore with the code that wrote it",
            )
        if saved < current:
            notes.append(f"state of operator {uid} is upgraded from version {saved} to {current}")
        owned = {
            PartitionId(topic, p)
            for topic in spec.inputs
            for p in range(graph.topics[topic].partitions)
        }
        stray = sorted(str(p) for p in info.with_rows - owned)
        if stray and not allow_non_restored:
            raise SavepointRefusedError(
                f"{what} holds rows of operator {uid} for input partitions it no longer reads: "
                f"{', '.join(stray[:10])}",
                "Keep the operator's inputs and their partition counts as they were (a topic's "
                "partition count is the maximum parallelism), or pass "
                "--allow-non-restored-state to drop those rows",
            )
        if stray:
            notes.append(f"rows of operator {uid} in {', '.join(stray[:10])} are dropped")
    return notes
