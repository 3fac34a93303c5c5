"""Backend failures land on the right branch of the error tree.

The failures are real obstore errors: an S3 client talking to a loopback
stub that answers every request with one status code, and to a port where
nothing listens. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from obstore.store import S3Store

from sluicegate.operators.exceptions import FatalError, RetryableError
from sluicegate.operators.storage import (
    AlreadyExistsError,
    CorruptFileError,
    InvalidPathError,
    LocalFileChangedError,
    NotFoundError,
    ObstoreStorage,
    StorageBackendError,
    StorageError,
    StorageUnavailableError,
    StoredFile,
)

if TYPE_CHECKING:
    from obstore.store import RetryConfig

SHA_EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
FAST_RETRY: RetryConfig = {
    "max_retries": 1,
    "retry_timeout": timedelta(seconds=2),
    "backoff": {
        "init_backoff": timedelta(milliseconds=5),
        "max_backoff": timedelta(milliseconds=20),
        "base": 2,
    },
}
Operation = Callable[[ObstoreStorage, Path], Awaitable[object]]


class StubS3:
    """An HTTP server on 127.0.0.1 that answers every request with ``status``."""

    def __init__(self) -> None:
        self.status = 200
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(stub.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def s3_storage(endpoint: str) -> ObstoreStorage:
    store = S3Store(
        "bucket",
        endpoint=endpoint,
        access_key_id="testing",
        secret_access_key="testing",
        region="us-east-1",
        client_options={"allow_http": True, "connect_timeout": timedelta(seconds=2)},
        retry_config=FAST_RETRY,
    )
    return ObstoreStorage(store)


@pytest.fixture(scope="module")
def stub_server() -> Iterator[StubS3]:
    server = StubS3()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stub(stub_server: StubS3) -> StubS3:
    """The module's stub server; each test sets the status it answers."""
    stub_server.status = 200
    return stub_server


@pytest.fixture
def local_file(tmp_path: Path) -> Path:
    path = tmp_path / "000001.sst"
    path.write_bytes(b"sst")
    return path


OPERATIONS: dict[str, Operation] = {
    "put": lambda s, _: s.put("attempts/1", b"1"),
    "put_if_absent": lambda s, _: s.put_if_absent("checkpoints/1/_manifest.json", b"{}"),
    "put_file": lambda s, f: s.put_file("shared/x", f),
    "put_content_addressed": lambda s, f: s.put_content_addressed("shared", f),
    "get": lambda s, _: s.get("attempts/1"),
    "get_verified": lambda s, _: s.get_verified(StoredFile("attempts/1", 0, SHA_EMPTY)),
    "download_verified": lambda s, f: s.download_verified(
        StoredFile("attempts/1", 0, SHA_EMPTY), f.parent / "out"
    ),
    "exists": lambda s, _: s.exists("attempts/1"),
    "list": lambda s, _: s.list("checkpoints"),
    "delete": lambda s, _: s.delete("attempts/1"),
    "size": lambda s, _: s.size("attempts/1"),
}


@pytest.mark.parametrize("status", [500, 503, 429])
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
async def test_server_errors_and_throttling_are_retryable(
    stub: StubS3, local_file: Path, status: int, operation: str
) -> None:
    stub.status = status
    with pytest.raises(StorageUnavailableError) as caught:
        await OPERATIONS[operation](s3_storage(stub.endpoint), local_file)
    assert isinstance(caught.value, RetryableError)
    assert str(status) in caught.value.detail
    assert "Debug source" not in caught.value.detail
    assert list(local_file.parent.iterdir()) == [local_file]  # no partial download left


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
async def test_nothing_listening_is_retryable(local_file: Path, operation: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        endpoint = f"http://127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(StorageUnavailableError):
            await OPERATIONS[operation](s3_storage(endpoint), local_file)


@pytest.mark.parametrize("status", [400, 401, 403])
@pytest.mark.parametrize("operation", ["put", "get", "size", "list"])
async def test_refusals_are_fatal(
    stub: StubS3, local_file: Path, status: int, operation: str
) -> None:
    stub.status = status
    with pytest.raises(StorageBackendError) as caught:
        await OPERATIONS[operation](s3_storage(stub.endpoint), local_file)
    assert isinstance(caught.value, FatalError)
    assert caught.value.__cause__ is not None


async def test_404_means_missing_key_on_reads_and_a_backend_problem_on_writes(
    stub: StubS3,
) -> None:
    stub.status = 404
    storage = s3_storage(stub.endpoint)
    with pytest.raises(NotFoundError):
        await storage.get("attempts/1")
    assert not await storage.exists("attempts/1")
    with pytest.raises(StorageBackendError):
        await storage.put("attempts/1", b"1")


def test_every_error_is_a_storage_error_on_exactly_one_branch() -> None:
    stored = StoredFile("shared/x", 0, SHA_EMPTY)
    errors: list[StorageError] = [
        StorageUnavailableError("get", "a", "503"),
        InvalidPathError("/a", "absolute"),
        NotFoundError("a"),
        AlreadyExistsError("a"),
        CorruptFileError("shared/x", stored, stored),
        LocalFileChangedError(Path("f"), SHA_EMPTY, SHA_EMPTY),
        StorageBackendError("put", "a", "403"),
    ]
    for error in errors:
        assert isinstance(error, RetryableError) != isinstance(error, FatalError), error
    retryable = {type(e).__name__ for e in errors if isinstance(e, RetryableError)}
    assert retryable == {"StorageUnavailableError"}


def test_stored_file_is_a_checked_value() -> None:
    with pytest.raises(ValueError, match="sha256"):
        StoredFile("a", 1, "ABC")
    with pytest.raises(ValueError, match="size"):
        StoredFile("a", -1, SHA_EMPTY)
    assert StoredFile("a", 0, SHA_EMPTY) == StoredFile("a", 0, SHA_EMPTY)
    assert not hasattr(StoredFile("a", 0, SHA_EMPTY), "__dict__")
