"""Storage keys: what the layout helpers build and what every key must look like."""

from __future__ import annotations

import pytest

from sluicegate.operators.storage import InvalidPathError, layout

SHA = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "path",
    [
        "checkpoints/7/_manifest.json",
        f"shared/{SHA}",
        "savepoints/before-upgrade/counter/3.rows",
        "a",
        "blobs/subject=alice/handle.bin",
        "x/.hidden/y",
    ],
)
def test_valid_keys_pass_unchanged(path: str) -> None:
    assert layout.validate_path(path) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("/checkpoints/1", "absolute"),
        ("../shared/x", "'..'"),
        ("checkpoints/../../etc", "'..'"),
        ("checkpoints/./1", "'.'"),
        ("checkpoints//1", "empty segment"),
        ("checkpoints/1/", "empty segment"),
        ("checkpoints\\1", "'\\\\'"),
        ("shared/abc#1", "'#'"),
        ("shared/a\nb", "'\\n'"),
    ],
)
def test_invalid_keys_are_refused_with_a_reason(path: str, reason: str) -> None:
    with pytest.raises(InvalidPathError) as caught:
        layout.validate_path(path)
    assert caught.value.path == path
    assert reason in caught.value.reason


def test_empty_prefix_means_everything() -> None:
    assert layout.validate_prefix("") == ""
    assert layout.validate_prefix("checkpoints") == "checkpoints"
    with pytest.raises(InvalidPathError):
        layout.validate_prefix("checkpoints/")


def test_layout_keys() -> None:
    assert layout.shared_file(SHA) == f"shared/{SHA}"
    assert layout.checkpoint_prefix(7) == "checkpoints/7"
    assert layout.checkpoint_manifest(7) == "checkpoints/7/_manifest.json"
    assert layout.savepoint_prefix("before-upgrade_2.1") == "savepoints/before-upgrade_2.1"
    assert layout.attempt_marker(3) == "attempts/3"
    assert layout.blob_path("subject-1/h-9") == "blobs/subject-1/h-9"
    assert layout.join("savepoints", "sp1", "counter") == "savepoints/sp1/counter"


@pytest.mark.parametrize("digest", ["", "abc", SHA.upper(), SHA + "0", "g" * 64])
def test_shared_file_wants_a_lowercase_sha256(digest: str) -> None:
    with pytest.raises(InvalidPathError):
        layout.shared_file(digest)


@pytest.mark.parametrize("bad", [-1, True])
def test_numbers_are_non_negative_ints(bad: int) -> None:
    with pytest.raises(InvalidPathError):
        layout.checkpoint_manifest(bad)
    with pytest.raises(InvalidPathError):
        layout.attempt_marker(bad)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "-x", "sp 1", "sp#1"])
def test_savepoint_names_are_one_plain_segment(name: str) -> None:
    with pytest.raises(InvalidPathError):
        layout.savepoint_prefix(name)


@pytest.mark.parametrize("handle", ["", "../x", "/abs", "a//b"])
def test_blob_handles_are_valid_keys(handle: str) -> None:
    with pytest.raises(InvalidPathError):
        layout.blob_path(handle)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("checkpoints/7/_manifest.json", 7),
        ("checkpoints/0/x", 0),
        ("checkpoints/12", 12),
        ("checkpoints/07/x", None),
        ("checkpoints/x/y", None),
        ("checkpoints/-1/y", None),
        ("checkpoints/\u0667/y", None),
        ("savepoints/7/x", None),
        ("checkpoints", None),
    ],
)
def test_parse_checkpoint_id(path: str, expected: int | None) -> None:
    assert layout.parse_checkpoint_id(path) == expected


def test_parse_inverts_the_builders() -> None:
    ids = [10, 9, 100, 1]
    keys = sorted(layout.checkpoint_manifest(n) for n in ids)
    # Keys sort as text; the ids come back as numbers for the caller to order.
    assert keys[0] == "checkpoints/1/_manifest.json"
    assert keys[1] == "checkpoints/10/_manifest.json"
    back = sorted(n for k in keys if (n := layout.parse_checkpoint_id(k)) is not None)
    assert back == [1, 9, 10, 100]
