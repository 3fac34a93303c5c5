"""Savepoints over real RocksDB state and in-memory storage: a checkpoint written as a
savepoint, restored at parallelism 2 -> 3 -> 1 (rows follow their input partition), state
upgraded on the way, and restores that are refused with what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sluicegate.operators.contract import Context, Record
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline
from sluicegate.operators.runtime.state_transfer import SnapshotStore
from sluicegate.operators.savepoints.exceptions import CorruptSavepointError, SavepointRefusedError
from sluicegate.operators.savepoints.rebuild import rebuild_checkpoint
from sluicegate.operators.savepoints.sources import CheckpointSource, SavepointSource, all_rows
from sluicegate.operators.savepoints.store import SavepointStore
from sluicegate.operators.savepoints.writer import write_savepoint
from sluicegate.operators.state.rocksdb import RocksDBStateStore
from sluicegate.operators.state.store import PartitionId
from sluicegate.operators.state.versions import StateVersions
from sluicegate.operators.storage import Storage, open_storage
from sluicegate.operators.storage.manifest import CheckpointManifest, SubtaskSnapshot

PARTITIONS = 6


def noop(record: Record, ctx: Context) -> None:
    """Never called: these tests build state directly."""


def graph(
    parallelism: int, versions: StateVersions | None = None, *, extra: bool = False
) -> JobGraph:
    p = Pipeline("counts")
    p.source("words", partitions=PARTITIONS)
    p.sink("out", partitions=1)
    p.operator(
        "counter",
        noop,
        inputs="words",
        outputs="out",
        parallelism=parallelism,
        state_versions=versions,
    )
    if extra:
        p.source("other", partitions=1)
        p.operator("audit", noop, inputs="other", outputs="out2")
        p.sink("out2", partitions=1)
    return p.build()


def expected_rows(p: int) -> dict[bytes, bytes]:
    return {f"word-{p}-{i}".encode(): json.dumps({"n": i}).encode() for i in range(5)}


async def checkpoint_of(storage: Storage, g: JobGraph, tmp: Path, n: int = 1) -> CheckpointManifest:
    """Checkpoint ``n`` of ``g`` as a running job would leave it: each subtask's rows under
    its own partitions, a sink write-ahead row, ``R_p`` = 100 + partition."""
    snapshots: dict[str, SubtaskSnapshot] = {}
    for s in g.subtasks():
        with RocksDBStateStore.open(tmp / f"db-{s}") as store:
            positions: dict[str, dict[int, int]] = {}
            for tp in g.input_partitions(s):
                for key, value in expected_rows(tp.partition).items():
                    store.partition(tp.topic, tp.partition).put(key, value)
                positions.setdefault(tp.topic, {})[tp.partition] = 100 + tp.partition
            store.metadata().put(b"sink-wal/x", str(s).encode())
            local = store.take_local_checkpoint(n, tmp / f"cp-{s}")
        handle = (await SnapshotStore(storage).upload(local)).handle
        snapshots[str(s)] = SubtaskSnapshot(
            positions=positions,
            handle=handle,
            alignment_seconds=0,
            sync_seconds=0,
            async_seconds=0,
        )
    return CheckpointManifest(
        pipeline=g.name, checkpoint_id=n, attempt=1, completed_at=0.0, subtasks=snapshots
    )


async def state_of(
    storage: Storage, manifest: CheckpointManifest, tmp: Path
) -> dict[str, dict[int, dict[bytes, bytes]]]:
    """subtask -> partition -> rows, read back from the checkpoint's stored files."""
    found: dict[str, dict[int, dict[bytes, bytes]]] = {}
    async with await CheckpointSource.open(storage, manifest, tmp) as source:
        for uid, info in source.operators().items():
            for pid in info.with_rows:
                owner = next(
                    s
                    for s, snap in manifest.subtasks.items()
                    if s.startswith(uid) and pid.partition in snap.positions.get(pid.topic, {})
                )
                found.setdefault(owner, {})[pid.partition] = dict(await all_rows(source, uid, pid))
    return found


@pytest.fixture
def storage() -> Storage:
    return open_storage("memory://")


async def savepoint_from(
    storage: Storage, tmp: Path, g: JobGraph, name: str = "sp"
) -> SavepointSource:
    checkpoint = await checkpoint_of(storage, g, tmp / "build")
    async with await CheckpointSource.open(storage, checkpoint, tmp / "read") as source:
        await write_savepoint(
            storage, source, name=name, pipeline=g.name, from_checkpoint=1, attempt=1
        )
    return SavepointSource(storage, await SavepointStore(storage).load(name))


async def test_a_savepoint_holds_every_partition_with_its_offset(
    storage: Storage, tmp_path: Path
) -> None:
    savepoint = await savepoint_from(storage, tmp_path, graph(2))
    manifest = savepoint.manifest
    state = manifest.operators["counter"]
    assert state.parallelism == 2
    assert state.state_schema_version == 1
    assert [(p.partition, p.offset, p.rows) for p in state.partitions] == [
        (p, 100 + p, 5) for p in range(PARTITIONS)
    ]
    assert [m.index for m in state.metadata] == [0, 1]
    for p in range(PARTITIONS):
        assert dict(await all_rows(savepoint, "counter", PartitionId("words", p))) == expected_rows(
            p
        )
    # nothing of the savepoint is under checkpoints/ or shared/: retention cannot touch it
    assert all(path.startswith("savepoints/sp/") for path in await storage.list("savepoints"))
    assert {f"savepoints/sp/{f.path}" for f in manifest.files()} | {
        "savepoints/sp/_savepoint.json"
    } == set(await storage.list("savepoints/sp"))


async def test_rescale_2_to_3_to_1_moves_rows_with_their_partition(
    storage: Storage, tmp_path: Path
) -> None:
    savepoint = await savepoint_from(storage, tmp_path, graph(2))
    three, notes = await rebuild_checkpoint(
        storage, savepoint, graph(3), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m3"
    )
    assert notes == []
    assert sorted(three.subtasks) == ["counter#0", "counter#1", "counter#2"]
    assert three.subtasks["counter#1"].positions == {"words": {2: 102, 3: 103}}
    state = await state_of(storage, three, tmp_path / "r3")
    assert state == {
        f"counter#{i}": {p: expected_rows(p) for p in (2 * i, 2 * i + 1)} for i in range(3)
    }
    # the metadata rows (sink write-ahead log) belong to a subtask: dropped on a rescale
    async with await CheckpointSource.open(storage, three, tmp_path / "meta") as source:
        assert await source.metadata("counter", 0) == []
    # and the rescaled checkpoint rescales again, straight from the checkpoint
    async with await CheckpointSource.open(storage, three, tmp_path / "r3b") as source:
        one, _ = await rebuild_checkpoint(
            storage,
            source,
            graph(1),
            checkpoint_id=3,
            attempt=3,
            work_dir=tmp_path / "m1",
            what="checkpoint 2",
        )
    assert one.subtasks["counter#0"].positions == {"words": {p: 100 + p for p in range(PARTITIONS)}}
    assert await state_of(storage, one, tmp_path / "r1") == {
        "counter#0": {p: expected_rows(p) for p in range(PARTITIONS)}
    }


async def test_same_parallelism_keeps_each_subtasks_metadata(
    storage: Storage, tmp_path: Path
) -> None:
    savepoint = await savepoint_from(storage, tmp_path, graph(2))
    same, _ = await rebuild_checkpoint(
        storage, savepoint, graph(2), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m"
    )
    async with await CheckpointSource.open(storage, same, tmp_path / "r") as source:
        assert await source.metadata("counter", 1) == [(b"sink-wal/x", b"counter#1")]


def _v1_to_v2(key: bytes, value: bytes) -> tuple[bytes, bytes]:
    decoded = json.loads(value)
    return key, json.dumps({"count": decoded["n"], "v": 2}).encode()


async def test_state_is_upgraded_on_restore_and_recorded_at_the_new_version(
    storage: Storage, tmp_path: Path
) -> None:
    savepoint = await savepoint_from(storage, tmp_path, graph(2))
    v2 = StateVersions.of(2, {1: _v1_to_v2})
    upgraded, notes = await rebuild_checkpoint(
        storage, savepoint, graph(2, v2), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m"
    )
    assert notes == ["state of operator counter is upgraded from version 1 to 2"]
    assert upgraded.state_version("counter") == 2
    state = await state_of(storage, upgraded, tmp_path / "r")
    assert json.loads(state["counter#0"][0][b"word-0-3"]) == {"count": 3, "v": 2}


async def test_newer_state_or_a_missing_upgrader_is_refused_with_what_to_do(
    storage: Storage, tmp_path: Path
) -> None:
    checkpoint = await checkpoint_of(storage, graph(2), tmp_path / "b")
    newer = checkpoint.model_copy(update={"state_versions": {"counter": 3}})
    async with await CheckpointSource.open(storage, newer, tmp_path / "r") as source:
        with pytest.raises(
            SavepointRefusedError, match="newer than this code's version 1"
        ) as raised:
            await rebuild_checkpoint(
                storage, source, graph(2), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m"
            )
        assert "never downgraded" in raised.value.what_to_do
        with pytest.raises(SavepointRefusedError, match="no upgrader from version"):
            await rebuild_checkpoint(
                storage,
                source,
                graph(2, StateVersions.of(5, {3: _v1_to_v2})),
                checkpoint_id=2,
                attempt=2,
                work_dir=tmp_path / "m",
            )


async def test_a_missing_operator_is_refused_unless_allowed(
    storage: Storage, tmp_path: Path
) -> None:
    savepoint = await savepoint_from(storage, tmp_path, graph(1, extra=True))
    with pytest.raises(SavepointRefusedError, match="audit") as raised:
        await rebuild_checkpoint(
            storage, savepoint, graph(1), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m"
        )
    assert "--allow-non-restored-state" in raised.value.what_to_do
    _, notes = await rebuild_checkpoint(
        storage,
        savepoint,
        graph(1),
        checkpoint_id=2,
        attempt=2,
        work_dir=tmp_path / "m",
        allow_non_restored=True,
    )
    assert notes == ["state of operator(s) audit is dropped (not restored)"]


async def test_a_damaged_rows_file_is_refused(storage: Storage, tmp_path: Path) -> None:
    savepoint = await savepoint_from(storage, tmp_path, graph(1))
    await storage.put("savepoints/sp/data/0", b"SGRW not what the manifest says")
    with pytest.raises(CorruptSavepointError, match="sp/data/0"):
        await rebuild_checkpoint(
            storage, savepoint, graph(1), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m"
        )


async def test_names_are_not_reused_and_delete_removes_everything(
    storage: Storage, tmp_path: Path
) -> None:
    await savepoint_from(storage, tmp_path / "a", graph(1))
    with pytest.raises(SavepointRefusedError, match="exists already"):
        await savepoint_from(storage, tmp_path / "b", graph(1))
    listed = await SavepointStore(storage).list()
    assert [s.name for s in listed] == ["sp"]
    assert listed[0].manifest is not None
    await SavepointStore(storage).delete("sp")
    assert await storage.list("savepoints") == []


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.integers(1, PARTITIONS),
    chain=st.lists(st.tuples(st.integers(1, PARTITIONS), st.booleans()), min_size=1, max_size=3),
)
async def test_any_chain_of_rescales_keeps_every_row_and_offset(
    tmp_path_factory: pytest.TempPathFactory, start: int, chain: list[tuple[int, bool]]
) -> None:
    """From parallelism ``start`` through each ``(parallelism, via a savepoint?)`` of
    ``chain``: every partition's rows and ``R_p`` arrive unchanged, owned as the graph says."""
    tmp = tmp_path_factory.mktemp("chain")
    storage = open_storage("memory://")
    current = await checkpoint_of(storage, graph(start), tmp / "build")
    for step, (parallelism, via_savepoint) in enumerate(chain):
        async with await CheckpointSource.open(storage, current, tmp / f"read{step}") as source:
            if via_savepoint:
                name = f"sp{step}"
                await write_savepoint(storage, source, name=name, pipeline="counts",
                                      from_checkpoint=current.checkpoint_id, attempt=1)  # fmt: skip
        if via_savepoint:
            loaded = await SavepointStore(storage).load(name)
            current, _ = await rebuild_checkpoint(
                storage, SavepointSource(storage, loaded), graph(parallelism),
                checkpoint_id=current.checkpoint_id + 1, attempt=1, work_dir=tmp / f"m{step}",
            )  # fmt: skip
        else:
            async with await CheckpointSource.open(storage, current, tmp / f"r{step}") as source:
                current, _ = await rebuild_checkpoint(
                    storage, source, graph(parallelism), checkpoint_id=current.checkpoint_id + 1,
                    attempt=1, work_dir=tmp / f"m{step}",
                )  # fmt: skip
        g = graph(parallelism)
        for s in g.subtasks():
            owned = [tp.partition for tp in g.input_partitions(s)]
            assert current.subtasks[str(s)].positions == {"words": {p: 100 + p for p in owned}}
    final_graph = graph(chain[-1][0])
    assert await state_of(storage, current, tmp / "final") == {
        str(s): {
            tp.partition: expected_rows(tp.partition) for tp in final_graph.input_partitions(s)
        }
        for s in final_graph.subtasks()
    }


async def test_large_partitions_are_split_over_files_and_restored_whole(
    storage: Storage, tmp_path: Path
) -> None:
    checkpoint = await checkpoint_of(storage, graph(2), tmp_path / "build")
    async with await CheckpointSource.open(storage, checkpoint, tmp_path / "read") as source:
        await write_savepoint(storage, source, name="small", pipeline="counts",
                              from_checkpoint=1, attempt=1, chunk_bytes=40)  # fmt: skip
    manifest = await SavepointStore(storage).load("small")
    partition = manifest.operators["counter"].partitions[0]
    assert partition.file is None
    assert len(partition.files) == 3  # five rows of 24 bytes, two in each 40-byte chunk
    assert partition.rows == 5
    restored, _ = await rebuild_checkpoint(
        storage, SavepointSource(storage, manifest), graph(3), checkpoint_id=2, attempt=2,
        work_dir=tmp_path / "m",
    )  # fmt: skip
    assert await state_of(storage, restored, tmp_path / "r") == {
        f"counter#{i}": {p: expected_rows(p) for p in (2 * i, 2 * i + 1)} for i in range(3)
    }


async def test_an_upgrade_that_moves_rows_onto_one_key_across_chunks_is_refused(
    storage: Storage, tmp_path: Path
) -> None:
    checkpoint = await checkpoint_of(storage, graph(1), tmp_path / "build")
    async with await CheckpointSource.open(storage, checkpoint, tmp_path / "read") as source:
        await write_savepoint(storage, source, name="sp", pipeline="counts",
                              from_checkpoint=1, attempt=1, chunk_bytes=1)  # fmt: skip
    squash = StateVersions.of(2, {1: lambda key, value: (b"same", value)})
    with pytest.raises(SavepointRefusedError, match="onto key b'same'"):
        await rebuild_checkpoint(
            storage, SavepointSource(storage, await SavepointStore(storage).load("sp")),
            graph(1, squash), checkpoint_id=2, attempt=2, work_dir=tmp_path / "m",
        )  # fmt: skip
