"""The savepoint manifest as untrusted input: valid ones parse, hostile ones are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluicegate.operators.savepoints.exceptions import CorruptSavepointError, SavepointRefusedError
from sluicegate.operators.savepoints.manifest import (
    FORMAT_VERSION,
    OperatorState,
    PartitionRows,
    RowsFile,
    SavepointManifest,
    SubtaskMetadata,
)

_SHA = "ab" * 32


def _manifest() -> SavepointManifest:
    return SavepointManifest(
        name="before-upgrade",
        pipeline="wordcount",
        created_at=1.5,
        from_checkpoint=7,
        attempt=2,
        operators={
            "counter": OperatorState(
                parallelism=2,
                state_schema_version=1,
                partitions=(
                    PartitionRows(
                        topic="words", partition=0, offset=10, rows=3,
                        file=RowsFile(path="data/0", size=99, sha256=_SHA),
                    ),
                    PartitionRows(topic="words", partition=1, offset=None, rows=0, file=None),
                ),
                metadata=(
                    SubtaskMetadata(
                        index=1, rows=1, file=RowsFile(path="data/1", size=9, sha256=_SHA)
                    ),
                ),
            )
        },
    )  # fmt: skip


def _raw() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(_manifest().to_json())
    return raw


def _parse(raw: dict[str, Any]) -> SavepointManifest:
    return SavepointManifest.parse(json.dumps(raw).encode())


def test_a_manifest_round_trips() -> None:
    manifest = _manifest()
    assert SavepointManifest.parse(manifest.to_json()) == manifest
    assert manifest.format_version == FORMAT_VERSION
    assert manifest.rows == 3
    assert manifest.size_bytes == 108


@pytest.mark.parametrize(
    "path",
    [
        "../checkpoints/1/_manifest.json",
        "/etc/passwd",
        "data/../../x",
        "data/1/2",
        "shared/ab",
        "data/",
    ],
)
def test_path_like_file_names_are_refused(path: str) -> None:
    raw = _raw()
    raw["operators"]["counter"]["partitions"][0]["file"]["path"] = path
    with pytest.raises(CorruptSavepointError, match="data/<digits>"):
        _parse(raw)


@pytest.mark.parametrize("uid", ["../x", "Counter", "a/b", "", "x" * 101])
def test_names_that_are_not_uids_are_refused(uid: str) -> None:
    raw = _raw()
    raw["operators"][uid] = raw["operators"].pop("counter")
    with pytest.raises(CorruptSavepointError, match="uid"):
        _parse(raw)


@pytest.mark.parametrize("topic", ["..", "a/b", "", "t" * 250])
def test_topics_kafka_would_not_accept_are_refused(topic: str) -> None:
    raw = _raw()
    raw["operators"]["counter"]["partitions"][0]["topic"] = topic
    with pytest.raises(CorruptSavepointError):
        _parse(raw)


def test_absurd_numbers_are_refused() -> None:
    for field, value in (("partition", -1), ("partition", 2**31), ("offset", -5), ("rows", -1)):
        raw = _raw()
        raw["operators"]["counter"]["partitions"][0][field] = value
        with pytest.raises(CorruptSavepointError):
            _parse(raw)
    raw = _raw()
    raw["operators"]["counter"]["partitions"][0]["file"]["size"] = 2**62
    with pytest.raises(CorruptSavepointError):
        _parse(raw)


def test_duplicates_are_refused() -> None:
    raw = _raw()
    raw["operators"]["counter"]["partitions"][1]["partition"] = 0
    with pytest.raises(CorruptSavepointError, match="twice"):
        _parse(raw)
    raw = _raw()
    raw["operators"]["counter"]["metadata"][0]["file"]["path"] = "data/0"
    with pytest.raises(CorruptSavepointError, match="twice"):
        _parse(raw)


def test_rows_without_a_file_and_metadata_of_no_subtask_are_refused() -> None:
    raw = _raw()
    raw["operators"]["counter"]["partitions"][1]["rows"] = 4
    with pytest.raises(CorruptSavepointError, match="no file"):
        _parse(raw)
    raw = _raw()
    raw["operators"]["counter"]["metadata"][0]["index"] = 2
    with pytest.raises(CorruptSavepointError, match="below the parallelism"):
        _parse(raw)


def test_unknown_fields_and_types_are_refused() -> None:
    raw = _raw()
    raw["extra"] = 1
    with pytest.raises(CorruptSavepointError):
        _parse(raw)
    raw = _raw()
    raw["from_checkpoint"] = "7"
    with pytest.raises(CorruptSavepointError):
        _parse(raw)


def test_not_json_or_too_large_is_refused() -> None:
    with pytest.raises(CorruptSavepointError, match="not JSON"):
        SavepointManifest.parse(b"\xff\xfe{")
    with pytest.raises(CorruptSavepointError, match="JSON object"):
        SavepointManifest.parse(b"[1]")
    with pytest.raises(CorruptSavepointError, match="over"):
        SavepointManifest.parse(b" " * (64 * 1024 * 1024 + 1))


def test_a_newer_format_is_refused_with_what_to_do() -> None:
    raw = _raw()
    raw["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(SavepointRefusedError, match="newer than this build") as raised:
        _parse(raw)
    assert "sluicegate version that wrote it" in raised.value.what_to_do


def test_version_1_one_file_and_version_2_chunks_both_read_but_never_together() -> None:
    raw = _raw()
    entry = raw["operators"]["counter"]["partitions"][0]
    del entry["files"]
    raw["format_version"] = 1
    v1 = _parse(raw).operators["counter"].partitions[0]
    assert [f.path for f in v1.chunks()] == ["data/0"]
    raw = _raw()
    entry = raw["operators"]["counter"]["partitions"][0]
    entry["files"], entry["file"] = [entry["file"], {**entry["file"], "path": "data/5"}], None
    v2 = _parse(raw).operators["counter"].partitions[0]
    assert [f.path for f in v2.chunks()] == ["data/0", "data/5"]
    entry["file"] = dict(entry["files"][0], path="data/6")
    with pytest.raises(CorruptSavepointError, match="both file and files"):
        _parse(raw)
