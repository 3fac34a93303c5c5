"""Checkpoint storage the harness can take away: S3 (moto, in this process) behind a TCP proxy.

`OutageProxy.down` makes the proxy refuse new connections and cut open ones, so every process's
storage calls fail as an unreachable S3 fails (connection errors, then
``StorageUnavailableError``) until it is up again; the harness itself reads the checkpoints
through moto directly (`S3Storage.monitor`), outage or not.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import boto3  # type: ignore[import-untyped]

from bench.moto_s3 import moto_s3_server
from sluicegate.operators.storage import Storage, open_storage

__all__ = ["OutageProxy", "S3Storage", "s3_storage"]

logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise

_BUCKET = "soak"
_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "soak", "AWS_SECRET_ACCESS_KEY": "soak"}
_REGION = "us-east-1"


class OutageProxy:
    """Forwards TCP from a port of its own to ``target_port``, except while `down`."""

    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._down = False
        threading.Thread(target=self._accept, daemon=True, name="outage-proxy").start()

    @property
    def down(self) -> bool:
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        with self._lock:
            self._down = value
            cut = list(self._open) if value else []
        for sock in cut:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            self._open.discard(source)
        source.close()

    def close(self) -> None:
        self._listener.close()
        self.down = True


@dataclass(frozen=True, slots=True)
class S3Storage:
    """The processes' storage environment (through ``proxy``) and the harness's own view."""

    env: dict[str, str]
    monitor: Storage
    proxy: OutageProxy


@contextmanager
def s3_storage() -> Iterator[S3Storage]:
    """moto's S3 on a free port (`bench.moto_s3`), a bucket, and an `OutageProxy` in front of
    it."""
    with moto_s3_server() as direct:
        keys = {k.lower(): v for k, v in _CREDENTIALS.items()}
        boto3.client("s3", endpoint_url=direct, region_name=_REGION, **keys).create_bucket(
            Bucket=_BUCKET
        )
        proxy = OutageProxy(int(direct.rsplit(":", 1)[1]))
        env = {
            **_CREDENTIALS,
            "SLUICEGATE_STORAGE_URL": f"s3://{_BUCKET}",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}",
            "AWS_REGION": _REGION,
            "AWS_ALLOW_HTTP": "true",
        }
        monitor = open_storage(
            f"s3://{_BUCKET}", endpoint_url=direct, region=_REGION,
            access_key_id="soak", secret_access_key="soak",
        )  # fmt: skip
        try:
            yield S3Storage(env, monitor, proxy)
        finally:
            proxy.close()
