"""Keys of the storage layout, and the rules every key obeys.

Layout (DESIGN.md, "Storage")::

    shared/<sha256>                      content-addressed snapshot files
    checkpoints/<n>/_manifest.json       checkpoint manifest, committed create-if-absent
    checkpoints/<n>/_full                checkpoint n is full: its files go to full/ below
    checkpoints/<n>/full/<sha256>        files of a full checkpoint, shared with no other
    savepoints/<name>/...                self-contained savepoints
    attempts/<attempt>                   the durable attempt number
    coordinators/<epoch>                 a coordinator's epoch: the newest fences the others
    blobs/<handle>                       payloads stored by reference

A key is a relative POSIX path: segments joined by ``/``, no leading ``/``,
no empty segment, no ``.`` or ``..``. Backslashes, control characters and
``#`` are refused too: ``#`` is how obstore's local store names files of an
upload in progress, and backslashes mean a separator on some systems.
Checkpoint and attempt numbers are written without padding; list and parse
them with :func:`parse_checkpoint_id`, never sort the keys as numbers.
"""

from __future__ import annotations

import re

from sluicegate.operators.storage.exceptions import InvalidPathError

__all__ = [
    "ATTEMPTS",
    "BLOBS",
    "CHECKPOINTS",
    "COORDINATORS",
    "MANIFEST_NAME",
    "SAVEPOINTS",
    "SHARED",
    "attempt_marker",
    "blob_path",
    "checkpoint_manifest",
    "checkpoint_prefix",
    "coordinator_marker",
    "full_checkpoint_files",
    "full_checkpoint_marker",
    "join",
    "parse_checkpoint_id",
    "savepoint_prefix",
    "shared_file",
    "validate_path",
    "validate_prefix",
]

SHARED = "shared"
CHECKPOINTS = "checkpoints"
SAVEPOINTS = "savepoints"
ATTEMPTS = "attempts"
COORDINATORS = "coordinators"
BLOBS = "blobs"
MANIFEST_NAME = "_manifest.json"

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FORBIDDEN_CHARS = re.compile(r"[\\#\x00-\x1f\x7f]")


def validate_path(path: str) -> str:
    """Return ``path`` unchanged if it is a valid key, else raise :class:`InvalidPathError`."""
    if not path:
        raise InvalidPathError(path, "the path is empty")
    if path.startswith("/"):
        raise InvalidPathError(path, "absolute paths are not allowed; use a relative key")
    if match := _FORBIDDEN_CHARS.search(path):
        raise InvalidPathError(path, f"character {match.group()!r} is not allowed")
    for segment in path.split("/"):
        if segment == "":
            raise InvalidPathError(path, "empty segment (leading, trailing or doubled '/')")
        if segment in (".", ".."):
            raise InvalidPathError(path, f"segment {segment!r} is not allowed")
    return path


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` unchanged if it is ``""`` (everything) or a valid key."""
    return prefix if prefix == "" else validate_path(prefix)


def join(*segments: str) -> str:
    """Join key segments with ``/`` and validate the result."""
    return validate_path("/".join(segments))


def shared_file(sha256: str) -> str:
    """Key of a content-addressed file: ``shared/<sha256>``."""
    if not _SHA256_HEX.fullmatch(sha256):
        raise InvalidPathError(sha256, "not a lowercase hex sha256 digest")
    return f"{SHARED}/{sha256}"


def checkpoint_prefix(checkpoint_id: int) -> str:
    """Directory of checkpoint ``n``: ``checkpoints/<n>``."""
    return f"{CHECKPOINTS}/{_number(checkpoint_id, 'checkpoint id')}"


def checkpoint_manifest(checkpoint_id: int) -> str:
    """Manifest of checkpoint ``n``: ``checkpoints/<n>/_manifest.json``."""
    return f"{checkpoint_prefix(checkpoint_id)}/{MANIFEST_NAME}"


def full_checkpoint_marker(checkpoint_id: int) -> str:
    """Left before checkpoint ``n`` is triggered when it is to be full."""
    return f"{checkpoint_prefix(checkpoint_id)}/_full"


def full_checkpoint_files(checkpoint_id: int) -> str:
    """Where a full checkpoint's files go, content-addressed: ``checkpoints/<n>/full``."""
    return f"{checkpoint_prefix(checkpoint_id)}/full"


def parse_checkpoint_id(path: str) -> int | None:
    """The ``n`` of a key under ``checkpoints/<n>/``, or ``None`` for any other key."""
    parts = path.split("/")
    if len(parts) < 2 or parts[0] != CHECKPOINTS:
        return None
    number = parts[1]
    # Only the canonical spelling: "7", not "07" nor non-ASCII digits.
    if number.isascii() and number.isdigit() and (number == "0" or not number.startswith("0")):
        return int(number)
    return None


def savepoint_prefix(name: str) -> str:
    """Directory of a savepoint: ``savepoints/<name>``.

    ``name`` is one segment of letters, digits, ``.``, ``_`` and ``-``,
    starting with a letter or digit.
    """
    if not _NAME.fullmatch(name):
        raise InvalidPathError(
            name, "a savepoint name is letters, digits, '.', '_', '-' and starts alphanumeric"
        )
    return f"{SAVEPOINTS}/{name}"


def attempt_marker(attempt: int) -> str:
    """Key that records attempt ``n`` durably: ``attempts/<n>``."""
    return f"{ATTEMPTS}/{_number(attempt, 'attempt')}"


def coordinator_marker(epoch: int) -> str:
    """Key that records coordinator epoch ``n`` durably: ``coordinators/<n>``."""
    return f"{COORDINATORS}/{_number(epoch, 'coordinator epoch')}"


def blob_path(handle: str) -> str:
    """Key of a blob: ``blobs/<handle>``; ``handle`` may have several segments."""
    return join(BLOBS, validate_path(handle))


def _number(value: int, what: str) -> int:
    # bool is an int subclass; True as a checkpoint id is always a bug.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidPathError(repr(value), f"{what} must be a non-negative int")
    return value
