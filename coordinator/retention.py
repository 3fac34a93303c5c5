"""Checkpoint retention and the orphan audit.

Three parts (DESIGN.md, "Storage": reference counting plus an orphan audit drive retention):

* :func:`plan_retention` (pure) keeps the newest ``keep`` completed checkpoints, plus any pinned
  one, and lists what goes: the other checkpoints, and the ``shared/`` files only they
  reference. A file a kept manifest references is never in the plan.
* :func:`apply_retention` performs a plan in a crash-safe order (steps in its docstring): at
  every moment, every visible manifest names only files that exist, so a crash anywhere leaves
  every kept checkpoint (and every not yet deleted one) restorable. A crash leaves orphans
  behind at worst, which the audit finds.
* :func:`audit` finds files nothing needs: ``shared/`` files no committed manifest references,
  and what is left of checkpoints older than the newest completed one that have no manifest
  (aborted checkpoints' ``_triggered`` markers, folders half deleted by retention).
  :func:`delete_orphans` deletes what an audit found deletable.

The audit's race, and the rule that closes it
---------------------------------------------

A checkpoint uploads its files to ``shared/`` before its manifest exists, so "no manifest
references it" does not mean "nothing will": an audit must not delete the files of a checkpoint
that can still complete. Storage keeps no upload time we could rely on, so the rule is by
confirmation across a completed checkpoint (mark and sweep):

    An unreferenced ``shared/`` file is deletable only if it was already unreferenced in an
    earlier audit (``previous``), and a checkpoint newer than that audit's newest completed one
    has completed since.

Why that is enough, given what the coordinator guarantees (ids only grow, at most one
checkpoint in flight): the file existed when ``previous`` listed ``shared/``, so the checkpoint
``k`` that uploaded it was triggered before that; the checkpoint ``c`` completed since is newer
than ``k`` (had ``c`` completed before ``k`` was triggered, ``previous`` would have seen it).
A subtask reuses a file without uploading it only while it is still part of its RocksDB
instance, so a file of ``k`` still in use would be in ``c``'s manifest too; it is not, so no
later checkpoint reuses it. The same holds for files left by a crash mid-retention. Files of
checkpoint folders need no confirmation: a checkpoint older than the newest completed one ended
long ago (at most one is in flight, and ids grow).

What the rule cannot close: uploads are content-addressed and deduplicated, so a checkpoint in
flight may find an orphan with the very content it is about to upload (typically a small
``CURRENT`` or ``OPTIONS`` file), skip the upload, and name it in its manifest; deleting it then
leaves that manifest naming a missing file. The same holds for :func:`apply_retention`.
Therefore the coordinator runs :func:`apply_retention` and :func:`delete_orphans` from its
single task **while no checkpoint is in flight** (after ``completed(n)``, before the next
trigger); :func:`delete_orphans` also re-reads the manifests just before deleting, so a
manifest committed since the audit protects its files. Savepoints are self-contained and never
reference ``shared/``; the audit does not look at them.

Every step fails closed: a manifest that cannot be read (e.g. written by a newer version)
raises :class:`UnreadableManifestError` instead of being treated as absent, since its files
would otherwise look like orphans.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from sluicegate.coordinator.exceptions import UnreadableManifestError
from sluicegate.coordinator.known_manifests import KnownManifests
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.storage import NotFoundError, Storage
from sluicegate.operators.storage.layout import (
    CHECKPOINTS,
    MANIFEST_NAME,
    SHARED,
    checkpoint_manifest,
    checkpoint_prefix,
    parse_checkpoint_id,
)
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = [
    "DEFAULT_KEEP",
    "AuditReport",
    "RetentionPlan",
    "apply_retention",
    "audit",
    "delete_orphans",
    "load_report",
    "plan_retention",
    "save_report",
]

logger = logging.getLogger(__name__)

DEFAULT_KEEP = 3
"""Completed checkpoints kept by default."""


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What retention keeps and deletes; ids ascending, paths sorted."""

    keep_checkpoints: tuple[int, ...]
    delete_checkpoints: tuple[int, ...]
    delete_files: tuple[str, ...]
    """``shared/`` files referenced by a dropped checkpoint and by no kept one."""


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What an :func:`audit` found; pass it as ``previous`` to the next audit."""

    newest_completed: int | None
    """The newest checkpoint with a committed manifest when the audit ran."""
    unreferenced_files: tuple[str, ...]
    """``shared/`` files no committed manifest references (possibly of a checkpoint in flight)."""
    stale_checkpoint_files: tuple[str, ...]
    """Files under ``checkpoints/<n>/`` without a manifest, ``n`` < :attr:`newest_completed`."""
    deletable: tuple[str, ...]
    """What :func:`delete_orphans` may delete now: the stale checkpoint files, and the
    unreferenced files that were unreferenced in ``previous`` too, if a checkpoint newer than
    ``previous.newest_completed`` completed since (the rule in the module docstring)."""

    @property
    def orphans(self) -> tuple[str, ...]:
        """Everything found, deletable now or not, sorted."""
        return tuple(sorted((*self.unreferenced_files, *self.stale_checkpoint_files)))


def plan_retention(
    completed_manifests: Iterable[CheckpointManifest],
    keep: int = DEFAULT_KEEP,
    *,
    pinned: Collection[int] = (),
) -> RetentionPlan:
    """Keep the newest ``keep`` completed checkpoints and those in ``pinned``; drop the rest.

    ``pinned`` protects, e.g., the checkpoint the running attempt restored from when it is not
    among the newest (a fallback past a corrupt one): its subtasks may still reuse its files.
    Files are reference-counted over the kept manifests: a file any kept manifest references is
    never deleted, whichever dropped manifests reference it too. Only files under ``shared/``
    are deleted by this step; anything else a dropped manifest names is left alone.

    Raises:
        ConfigError: ``keep`` < 1 (the newest completed checkpoint is always kept: it is what a
            recovery restores, and its folder carries the highest checkpoint id).
    """
    if keep < 1:
        raise ConfigError("retention keep", f"must be >= 1, got {keep}")
    by_id = {m.checkpoint_id: m for m in completed_manifests}
    ids = sorted(by_id)
    kept = set(ids[-keep:]) | (set(pinned) & by_id.keys())
    dropped = [n for n in ids if n not in kept]
    referenced = {path for n in kept for path in _files_of(by_id[n])}
    doomed = {
        path
        for n in dropped
        for path in _files_of(by_id[n])
        if path not in referenced and path.startswith(f"{SHARED}/")
    }
    return RetentionPlan(tuple(sorted(kept)), tuple(dropped), tuple(sorted(doomed)))


async def apply_retention(
    storage: Storage,
    keep: int = DEFAULT_KEEP,
    *,
    pinned: Collection[int] = (),
    known: KnownManifests | None = None,
) -> RetentionPlan:
    """Delete every completed checkpoint but the newest ``keep`` (and ``pinned``, and the
    newest full checkpoint) from storage.

    Steps, in this order (a crash between any two leaves every visible manifest restorable):

    1. load every committed manifest and plan with :func:`plan_retention`;
    2. delete the manifests of the dropped checkpoints, so none is restorable any more;
    3. delete the ``shared/`` files that only dropped checkpoints referenced;
    4. delete everything else under the dropped checkpoints' ``checkpoints/<n>/`` folders.

    A crash after step 2 leaves orphans (files, folders without a manifest) that :func:`audit`
    reports. Run it while no checkpoint is in flight (see the module docstring). ``known``:
    the manifests the caller already holds decoded (`coordinator.known_manifests`); the
    others are read from storage.

    Raises:
        UnreadableManifestError: a committed manifest cannot be read; nothing was deleted.
        StorageError: a storage call failed; what was deleted so far is safe to have deleted.
    """
    manifests = await _load_manifests(storage, await ManifestStore(storage).completed(), known)
    full = [n for n, m in manifests.items() if m.is_full]
    pinned = (*pinned, *full[-1:])  # the newest full checkpoint depends on no shared file
    plan = plan_retention(manifests.values(), keep, pinned=pinned)
    if not plan.delete_checkpoints:
        return plan
    for n in plan.delete_checkpoints:
        await storage.delete(checkpoint_manifest(n))
    await storage.delete_many(plan.delete_files)
    for n in plan.delete_checkpoints:
        for path in await storage.list(checkpoint_prefix(n)):
            await storage.delete(path)
    logger.info(
        "retention dropped checkpoints %s and %s files, kept %s",
        list(plan.delete_checkpoints),
        len(plan.delete_files),
        list(plan.keep_checkpoints),
        extra={
            "dropped_checkpoints": list(plan.delete_checkpoints),
            "kept_checkpoints": list(plan.keep_checkpoints),
            "deleted_files": len(plan.delete_files),
        },
    )
    return plan


async def audit(
    storage: Storage, *, previous: AuditReport | None = None, known: KnownManifests | None = None
) -> AuditReport:
    """Find files no committed manifest needs; nothing is deleted.

    Steps, in this order:

    1. list ``shared/`` (before the manifests: a file listed here whose checkpoint commits
       during the audit is then seen referenced);
    2. list ``checkpoints/`` and load every committed manifest;
    3. unreferenced files: listed in step 1, named by no manifest;
    4. stale checkpoint files: under ``checkpoints/<n>/`` with no manifest, ``n`` older than the
       newest completed checkpoint (never the newest folder: it carries the next id);
    5. deletable: the stale files, and the unreferenced files confirmed by ``previous`` (the
       rule in the module docstring). Without ``previous`` no ``shared/`` file is deletable.

    Raises:
        UnreadableManifestError: a committed manifest cannot be read.
    """
    shared = await storage.list(SHARED)
    folders: dict[int, list[str]] = defaultdict(list)
    for path in await storage.list(CHECKPOINTS):
        n = parse_checkpoint_id(path)
        if n is not None:
            folders[n].append(path)
    committed = [n for n, paths in folders.items() if checkpoint_manifest(n) in paths]
    manifests = await _load_manifests(storage, sorted(committed), known)
    referenced = {path for m in manifests.values() for path in _files_of(m)}
    newest = max(manifests, default=None)
    unreferenced = tuple(sorted(p for p in shared if p not in referenced))
    stale = tuple(
        sorted(
            path
            for n, paths in folders.items()
            if newest is not None and n < newest and n not in manifests
            for path in paths
            if path != checkpoint_manifest(n)
        )
    )
    deletable = set(stale)
    if _confirms(previous, newest):
        assert previous is not None
        deletable.update(set(unreferenced) & set(previous.unreferenced_files))
    report = AuditReport(newest, unreferenced, stale, tuple(sorted(deletable)))
    if report.orphans:
        logger.info(
            "audit found %s unreferenced files and %s stale checkpoint files; %s deletable",
            len(unreferenced),
            len(stale),
            len(report.deletable),
            extra={
                "newest_completed": newest,
                "unreferenced_files": len(unreferenced),
                "stale_checkpoint_files": len(stale),
                "deletable_files": len(report.deletable),
            },
        )
    return report


async def delete_orphans(
    storage: Storage, paths: Iterable[str], *, known: KnownManifests | None = None
) -> list[str]:
    """Delete ``paths`` (normally ``AuditReport.deletable``); return those deleted, sorted.

    Steps, in this order:

    1. re-read every committed manifest, so that a checkpoint committed since the audit keeps
       its files;
    2. skip any path a manifest references, any manifest itself, and any path neither under
       ``shared/`` nor in a ``checkpoints/<n>/`` folder older than the newest completed
       checkpoint (logged: a caller bug, never deleted);
    3. delete the rest.

    Run it while no checkpoint is in flight (see the module docstring).

    Raises:
        UnreadableManifestError: a committed manifest cannot be read; nothing was deleted.
    """
    wanted = sorted(set(paths))
    ids = await ManifestStore(storage).completed()
    manifests = await _load_manifests(storage, ids, known)
    referenced = {path for m in manifests.values() for path in _files_of(m)}
    newest = max(manifests, default=None)
    deleted: list[str] = []
    for path in wanted:
        if path in referenced or path.rsplit("/", 1)[-1] == MANIFEST_NAME:
            logger.info("not deleting %s: a committed manifest needs it", path)
            continue
        if not _may_delete(path, newest):
            logger.warning(
                "not deleting %s: neither in shared/ nor in a checkpoint folder older than the "
                "newest completed checkpoint",
                path,
            )
            continue
        await storage.delete(path)
        deleted.append(path)
    if deleted:
        logger.info(
            "deleted %s orphaned files", len(deleted), extra={"deleted_files": len(deleted)}
        )
    return deleted


def _confirms(previous: AuditReport | None, newest: int | None) -> bool:
    """Whether a checkpoint completed since ``previous`` ran (see the module docstring)."""
    if previous is None or newest is None:
        return False
    return previous.newest_completed is None or newest > previous.newest_completed


def _may_delete(path: str, newest: int | None) -> bool:
    if path.startswith(f"{SHARED}/"):
        return True
    n = parse_checkpoint_id(path)
    return n is not None and newest is not None and n < newest


def _files_of(manifest: CheckpointManifest) -> set[str]:
    return {p for s in manifest.subtasks.values() for f in s.handle.all_files for p in f.paths}


async def _load_manifests(
    storage: Storage, ids: Iterable[int], known: KnownManifests | None = None
) -> dict[int, CheckpointManifest]:
    """Load the manifests of ``ids`` (those in ``known`` without reading them again); one
    deleted meanwhile is skipped, one unreadable raises. ``known`` then forgets all others."""
    store = known or KnownManifests(storage)
    ids = list(ids)
    manifests: dict[int, CheckpointManifest] = {}
    for n in ids:
        try:
            manifests[n] = await store.load(n)
        except NotFoundError:
            continue
        except (ValidationError, UnicodeDecodeError) as exc:
            raise UnreadableManifestError(n, _first_line(exc)) from exc
        if manifests[n].checkpoint_id != n:
            raise UnreadableManifestError(
                n, f"it says it is checkpoint {manifests[n].checkpoint_id}"
            )
    store.keep_only(set(ids))
    return manifests


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_REPORT = "audits/last.json"


async def save_report(storage: Storage, report: AuditReport) -> None:
    """Keep ``report`` as the previous audit for the next one (``audits/last.json``)."""
    body = {
        "schema_version": 1,
        "newest_completed": report.newest_completed,
        "unreferenced_files": list(report.unreferenced_files),
        "stale_checkpoint_files": list(report.stale_checkpoint_files),
        "deletable": list(report.deletable),
    }
    await storage.put(_REPORT, json.dumps(body, indent=1).encode())


async def load_report(storage: Storage) -> AuditReport | None:
    """The report `save_report` kept, or None."""
    try:
        body = json.loads(await storage.get(_REPORT))
    except NotFoundError:
        return None
    if body.get("schema_version") != 1:
        return None
    return AuditReport(
        newest_completed=body["newest_completed"],
        unreferenced_files=tuple(body["unreferenced_files"]),
        stale_checkpoint_files=tuple(body["stale_checkpoint_files"]),
        deletable=tuple(body["deletable"]),
    )
