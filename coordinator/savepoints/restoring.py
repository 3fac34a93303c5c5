"""Where a new attempt's state comes from when it is not simply the newest checkpoint.

`prepare_restore` is asked before every assignment, with the newest restorable checkpoint.
It performs, in order:

1. ``--from-savepoint NAME`` given and not restored yet by this storage (no marker
   ``savepoint-restores/<NAME>`` naming this savepoint's creation time: a savepoint deleted and
   taken again under the same name is a new one): load and validate the savepoint, rebuild
   it at the pipeline's current shape as a new checkpoint (`operators.savepoints.rebuild`:
   operator uids mapped by name, rows re-split by input partition, state upgraded), commit it,
   then leave the marker, so a coordinator started again with the same flag resumes from its
   own newer checkpoints instead of rewinding to the savepoint;
2. otherwise, the newest checkpoint of the same operators at another parallelism, or with
   state older than the code's: rebuild it the same way (a rescale or an upgrade);
3. otherwise the newest checkpoint as it is.

Refusals (`SavepointError`) say what to do; the coordinator fails the job with them.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from sluicegate.coordinator.numbering import mark_triggered, next_checkpoint_id
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.savepoints.exceptions import SavepointNotFoundError
from sluicegate.operators.savepoints.rebuild import rebuild_checkpoint
from sluicegate.operators.savepoints.sources import CheckpointSource, SavepointSource, StateSource
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.storage import NotFoundError, Storage
from sluicegate.operators.storage.layout import savepoint_prefix
from sluicegate.operators.storage.manifest import CheckpointManifest, ManifestStore

__all__ = [
    "RESTORES",
    "already_restored",
    "needs_rebuilding",
    "prepare_restore",
    "restored_marker",
]

logger = logging.getLogger(__name__)

RESTORES = "savepoint-restores"


def restored_marker(name: str) -> str:
    """Key left once savepoint ``name`` was restored: ``savepoint-restores/<name>``."""
    return f"{RESTORES}/{savepoint_prefix(name).split('/', 1)[1]}"


def needs_rebuilding(latest: CheckpointManifest, graph: JobGraph) -> bool:
    """Whether ``latest`` holds the same operators at another parallelism, or state of an
    older version than the code's (a checkpoint of other operators is refused elsewhere)."""
    subtasks = [str(s) for s in graph.subtasks()]
    same_uids = {s.split("#")[0] for s in latest.subtasks} == set(graph.operators)
    rescaled = latest.shape_mismatch(subtasks) is not None and same_uids
    older = any(
        latest.state_version(uid) < spec.state_versions.current
        for uid, spec in graph.operators.items()
    )
    return rescaled or (older and latest.shape_mismatch(subtasks) is None)


async def already_restored(storage: Storage, name: str) -> bool:
    """Whether savepoint ``name``, as it is now, was restored by this storage before."""
    try:
        marker = json.loads(await storage.get(restored_marker(name)))
    except NotFoundError:
        return False
    except ValueError:
        return False  # unreadable: restoring again is the safe side of a manual edit
    try:
        created_at = (await SavepointStore(storage).load(name)).created_at
    except SavepointNotFoundError:
        return True  # deleted since: nothing to restore, resume from the checkpoints
    return isinstance(marker, dict) and marker.get("created_at") == created_at


async def prepare_restore(
    storage: Storage,
    graph: JobGraph,
    latest: CheckpointManifest | None,
    *,
    attempt: int,
    from_savepoint: str | None,
    allow_non_restored: bool,
    work_root: Path | None = None,
) -> CheckpointManifest | None:
    """The checkpoint the new attempt restores from; steps in the module docstring."""
    if from_savepoint is not None and not await already_restored(storage, from_savepoint):
        manifest = await SavepointStore(storage).load(from_savepoint)
        if manifest.pipeline != graph.name:
            logger.warning(
                "savepoint %s was taken by pipeline %s; restoring it into %s",
                from_savepoint, manifest.pipeline, graph.name,
            )  # fmt: skip
        restored = await _rebuild(
            storage, graph, SavepointSource(storage, manifest), attempt=attempt,
            allow_non_restored=allow_non_restored, what=f"savepoint {from_savepoint}",
            work_root=work_root, after=manifest.from_checkpoint,
        )  # fmt: skip
        marker = json.dumps(
            {"checkpoint_id": restored.checkpoint_id, "created_at": manifest.created_at}
        ).encode()
        await storage.put(restored_marker(from_savepoint), marker)
        return restored
    if from_savepoint is not None:
        logger.info(
            "savepoint %s was restored before (%s exists): resuming from the newest checkpoint",
            from_savepoint, restored_marker(from_savepoint),
        )  # fmt: skip
    if latest is None or not needs_rebuilding(latest, graph):
        return latest
    work = Path(tempfile.mkdtemp(prefix="sluicegate-rescale-", dir=work_root))
    async with await CheckpointSource.open(storage, latest, work / "read") as source:
        return await _rebuild(
            storage, graph, source, attempt=attempt, allow_non_restored=allow_non_restored,
            what=f"checkpoint {latest.checkpoint_id}", work_root=work_root,
        )  # fmt: skip


async def _rebuild(
    storage: Storage,
    graph: JobGraph,
    source: StateSource,
    *,
    attempt: int,
    allow_non_restored: bool,
    what: str,
    work_root: Path | None,
    after: int = 0,
) -> CheckpointManifest:
    """1. take a fresh checkpoint id durably, above ``after`` too (a savepoint's checkpoint:
    in new checkpoint storage the ids would start again at 1, below what the sinks recorded as
    published up to that checkpoint); 2. build the checkpoint; 3. commit its manifest."""
    checkpoint_id = max(await next_checkpoint_id(storage), after + 1)
    await mark_triggered(storage, checkpoint_id)
    work = Path(tempfile.mkdtemp(prefix="sluicegate-restore-", dir=work_root))
    manifest, notes = await rebuild_checkpoint(
        storage, source, graph, checkpoint_id=checkpoint_id, attempt=attempt, work_dir=work,
        allow_non_restored=allow_non_restored, what=what,
    )  # fmt: skip
    for note in notes:
        logger.warning("restoring %s: %s", what, note)
    await ManifestStore(storage).commit(manifest)
    logger.info(
        "%s restored at the current shape as checkpoint %s (%s subtasks)",
        what, checkpoint_id, len(manifest.subtasks),
    )  # fmt: skip
    return manifest
