"""Payloads by reference with S3 as the job's storage (a moto server on 127.0.0.1): a run's
1 MiB tool result is stored there, read back for the model, listed, then erased by subject."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.moto_s3 import moto_s3_server
from sluicegate.agents.client import submit_tasks
from sluicegate.agents.messages import TaskRequest
from sluicegate.operators.storage.blobs import BlobStore, subject_digest
from sluicegate.testing import read_committed
from tests.integration.agents.test_blobs import bulk_agent, bulk_graph, local_job, payload_of
from tests.integration.test_storage_s3 import BUCKET, create_bucket, open_s3


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3_server() as endpoint:
        create_bucket(endpoint, BUCKET)
        yield endpoint


async def test_a_run_stores_and_reads_its_payload_in_s3(
    kafka_bootstrap: str, tmp_path: Path, s3_endpoint: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    storage = open_s3(f"s3://{BUCKET}/job-{tag}", s3_endpoint)
    graph, topics = bulk_graph(bulk_agent(tag, approval=False), tag)
    job = local_job(graph, kafka_bootstrap, storage, tmp_path / "work")
    await job.start()
    try:
        task = TaskRequest(run_id="r1", goal="fetch", metadata={"subject": "carol"})
        await submit_tasks(kafka_bootstrap, topics.tasks, [task])
        (record,) = await read_committed(kafka_bootstrap, topics.results, 1, timeout_s=90)
    finally:
        await job.crash()
    assert json.loads(record.value)["answer"] == "saw payload"
    store = BlobStore(storage)
    (blob,) = await store.list(subject_digest("carol"))
    assert blob.meta is not None
    assert blob.meta.size == len(json.dumps(payload_of(tag)))
    assert await store.erase(subject_digest("carol")) == 2
    assert await store.list() == []
