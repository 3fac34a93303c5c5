"""open_storage: which store a URL names, and how S3 settings are found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from obstore.store import LocalStore, MemoryStore, S3Store

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.storage import ObstoreStorage, Storage, open_storage


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """obstore reads AWS_* itself; keep the developer's settings out of these tests."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)


def obstore_storage(storage: Storage) -> ObstoreStorage:
    assert isinstance(storage, ObstoreStorage)
    return storage


def s3_store(storage: Storage) -> S3Store:
    store = obstore_storage(storage).store
    assert isinstance(store, S3Store)
    return store


async def test_file_url_is_a_local_directory_created_on_demand(tmp_path: Path) -> None:
    root = tmp_path / "my dir" / "checkpoints-root"
    storage = open_storage("file://" + str(root).replace(" ", "%20"))
    store = obstore_storage(storage).store
    assert isinstance(store, LocalStore)
    assert store.prefix == root
    await storage.put("checkpoints/1/_manifest.json", b"{}")
    assert (root / "checkpoints" / "1" / "_manifest.json").read_bytes() == b"{}"


async def test_plain_path_resolves_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    storage = open_storage("state")
    await storage.put("attempts/1", b"1")
    assert (tmp_path / "state" / "attempts" / "1").read_bytes() == b"1"
    store = obstore_storage(open_storage(tmp_path / "other")).store
    assert isinstance(store, LocalStore)
    assert store.prefix == tmp_path / "other"


async def test_memory_url_gives_a_new_empty_store_each_time() -> None:
    first = open_storage("memory://")
    second = open_storage("memory:///")
    assert isinstance(obstore_storage(first).store, MemoryStore)
    await first.put("attempts/1", b"1")
    assert await second.list() == []


def test_s3_url_with_keyword_settings() -> None:
    storage = open_storage(
        "s3://checkpoints-bucket/prod/pipeline-a",
        endpoint_url="http://127.0.0.1:9000",
        region="eu-west-1",
        access_key_id="AKIAEXAMPLE",
        secret_access_key="s3cr3t",
        session_token="t0ken",
    )
    store = s3_store(storage)
    assert store.prefix == "prod/pipeline-a"
    assert store.config == {
        "bucket": "checkpoints-bucket",
        "endpoint": "http://127.0.0.1:9000",
        "region": "eu-west-1",
        "access_key_id": "AKIAEXAMPLE",
        "secret_access_key": "s3cr3t",
        "session_token": "t0ken",
    }
    # An explicit http:// endpoint is intent enough to allow plain http.
    assert (store.client_options or {}).get("allow_http") in (True, "true")
    assert "s3cr3t" not in repr(storage)


def test_s3_settings_from_environment_and_keywords_win() -> None:
    environ = {
        "AWS_ENDPOINT_URL": "https://minio.internal:9000",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_ACCESS_KEY_ID": "from-env",
        "AWS_SECRET_ACCESS_KEY": "env-secret",
    }
    store = s3_store(open_storage("s3://bkt", environ=environ, access_key_id="from-kwarg"))
    assert store.prefix is None
    assert store.config["endpoint"] == "https://minio.internal:9000"
    assert store.config["region"] == "us-west-2"
    assert store.config["access_key_id"] == "from-kwarg"
    assert store.config["secret_access_key"] == "env-secret"
    assert "allow_http" not in (store.client_options or {})


def test_s3_service_specific_endpoint_and_allow_http_from_environment() -> None:
    environ = {
        "AWS_ENDPOINT_URL": "http://generic:1",
        "AWS_ENDPOINT_URL_S3": "http://s3-only:2",
        "AWS_ALLOW_HTTP": "true",
    }
    store = s3_store(open_storage("s3://bkt/p", environ=environ))
    assert store.config["endpoint"] == "http://s3-only:2"
    assert (store.client_options or {}).get("allow_http") in (True, "true")


def test_refusing_http_for_an_http_endpoint_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        open_storage("s3://bkt", endpoint_url="http://127.0.0.1:9000", allow_http=False)
    assert caught.value.setting == "allow_http"


@pytest.mark.parametrize(
    "url",
    [
        "gs://bucket/x",
        "s3://",
        "s3:///prefix",
        "s3://bkt/a/../b",
        "file://otherhost/data",
    ],
)
def test_bad_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        open_storage(url)
    assert caught.value.setting == "storage url"
    assert url in caught.value.problem


def test_a_file_is_not_a_storage_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(ConfigError):
        open_storage(tmp_path / "f")
