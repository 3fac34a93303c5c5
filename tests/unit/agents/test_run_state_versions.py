"""RunState versions: every older stored version reads, through the upgraders, as the current
one; a newer version is refused saying what to do. The stored documents come from the
committed savepoint fixtures (written by older builds), never from this build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluicegate.agents.runs.machine import start_run
from sluicegate.agents.runs.state import SCHEMA_VERSION, Budget, RunState, RunStatus
from sluicegate.agents.runs.versions import (
    CURRENT,
    UPGRADERS,
    run_state_versions,
    upgrade_document,
)
from sluicegate.operators.savepoints.manifest import SavepointManifest
from sluicegate.operators.savepoints.rows import decode_rows

FIXTURES = Path(__file__).parents[2] / "fixtures" / "savepoints"


def stored_runs(name: str) -> list[tuple[bytes, bytes]]:
    """Every ``run/`` row of the agent's state in fixture ``name``."""
    folder = FIXTURES / name
    manifest = SavepointManifest.parse((folder / "_savepoint.json").read_bytes())
    rows = []
    for partition in manifest.operators["refund-desk"].partitions:
        for file in (partition.file, *partition.files):  # one file, or (newer builds) several
            if file is not None:
                data = (folder / file.path).read_bytes()
                rows += [(k, v) for k, v in decode_rows(data) if k.startswith(b"run/")]
    return rows


def test_every_version_below_the_current_one_has_an_upgrader() -> None:
    assert SCHEMA_VERSION == CURRENT
    assert sorted(UPGRADERS) == list(range(1, CURRENT))
    assert run_state_versions().missing(1) == []


@pytest.mark.parametrize("version", [1, 2])
def test_older_documents_of_the_fixtures_read_as_the_current_version(version: int) -> None:
    rows = stored_runs(f"refund-desk-runstate-v{version}")
    assert len(rows) == 6
    for _, value in rows:
        assert json.loads(value)["schema_version"] == version
        state = RunState.decode(value)
        assert state.schema_version == CURRENT
        assert state.status is RunStatus.WAITING_APPROVAL
        assert state.pending_approval is not None
        assert state.offered_tools == {}  # not recorded before version 3: nothing is gone


@pytest.mark.parametrize("version", [1, 2])
def test_the_row_upgrader_changes_run_rows_only_and_matches_decode(version: int) -> None:
    versions = run_state_versions()
    rows = [*stored_runs(f"refund-desk-runstate-v{version}"), (b"history/x/1", b'{"seq": 1}')]
    upgraded = dict(versions.upgrade(rows, version))
    assert upgraded[b"history/x/1"] == b'{"seq": 1}'
    for key, value in rows[:-1]:
        assert json.loads(upgraded[key])["schema_version"] == CURRENT
        assert RunState.decode(upgraded[key]) == RunState.decode(value)


def test_a_newer_document_is_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="newer than this code's"):
        upgrade_document({"schema_version": CURRENT + 1})
    with pytest.raises(ValueError, match="not a version"):
        upgrade_document({"schema_version": "2"})


def test_a_current_document_reads_the_same_through_the_one_pass_path() -> None:
    state = start_run("run-1", "refund o-1", "be careful", Budget(max_steps=5), 1.0).state
    state = state.model_copy(update={"scratchpad": {"n": [1, 2.5, None, {"k": "v"}]}})
    encoded = state.encode()
    assert encoded.startswith(b'{"schema_version":%d,' % CURRENT)  # the one-pass path is taken
    assert RunState.decode(encoded) == state
    assert RunState.decode(encoded) == RunState.model_validate(json.loads(encoded))
    # The same document with its fields in another order reads the same, the long way.
    reordered = json.dumps(dict(reversed(list(json.loads(encoded).items())))).encode()
    assert RunState.decode(reordered) == state


def test_a_current_document_that_does_not_validate_is_refused() -> None:
    state = start_run("run-1", "refund o-1", "be careful", Budget(max_steps=5), 1.0).state
    broken = state.encode().replace(b'"step":0', b'"step":"zero"')
    with pytest.raises(ValueError, match="step"):
        RunState.decode(broken)
