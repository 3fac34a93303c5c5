"""The Storage contract against S3: a moto server this module starts on 127.0.0.1
(`bench.moto_s3`), stopped when the module is done; nothing outside the test process is
needed. Every test gets its own key prefix in one bucket, so each starts
from an empty store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3  # type: ignore[import-untyped]
import pytest
from obstore.store import S3Store

from bench.moto_s3 import moto_s3_server
from sluicegate.operators.storage import Storage, StorageBackendError, open_storage
from tests.unit.operators.storage import test_storage_contract as contract

pytestmark = pytest.mark.integration

BUCKET = "sluicegate-test"
ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing"
REGION = "us-east-1"


def open_s3(url: str, endpoint: str) -> Storage:
    """Storage for ``url`` on the moto server, configured through keyword arguments."""
    return open_storage(
        url,
        endpoint_url=endpoint,
        region=REGION,
        access_key_id=ACCESS_KEY_ID,
        secret_access_key=SECRET_ACCESS_KEY,
    )


def create_bucket(endpoint: str, bucket: str) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        region_name=REGION,
    )
    client.create_bucket(Bucket=bucket)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """Endpoint of this module's moto server, with :data:`BUCKET` created."""
    with moto_s3_server() as endpoint:
        create_bucket(endpoint, BUCKET)
        yield endpoint


@pytest.fixture
def backend(s3_endpoint: str) -> contract.Backend:
    """Storage over a fresh prefix of the moto bucket, built from its URL."""
    prefix = f"test-{uuid.uuid4().hex}"
    storage = open_s3(f"s3://{BUCKET}/{prefix}", s3_endpoint)
    raw = S3Store(
        BUCKET,
        prefix=prefix,
        endpoint=s3_endpoint,
        access_key_id=ACCESS_KEY_ID,
        secret_access_key=SECRET_ACCESS_KEY,
        region=REGION,
        client_options={"allow_http": True},
    )
    return contract.Backend("s3", storage, raw)


class TestS3StorageContract(contract.TestStorageContract):
    """Every contract test, against S3."""


async def test_settings_come_from_aws_environment_variables(s3_endpoint: str) -> None:
    environ = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    storage = open_storage(f"s3://{BUCKET}/env-{uuid.uuid4().hex}", environ=environ)
    stored = await storage.put("attempts/1", b"1")
    assert await storage.get_verified(stored) == b"1"


async def test_missing_bucket_is_fatal_not_a_missing_key(s3_endpoint: str) -> None:
    storage = open_s3("s3://no-such-bucket", s3_endpoint)
    with pytest.raises(StorageBackendError) as caught:
        await storage.put("attempts/1", b"1")
    assert "NoSuchBucket" in caught.value.detail
    with pytest.raises(StorageBackendError):
        await storage.get("attempts/1")
    with pytest.raises(StorageBackendError):
        await storage.list()
