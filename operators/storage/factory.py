"""Build a :class:`~operators.storage.base.Storage` from a URL.

Supported URLs:

* ``file:///abs/dir`` or a plain path (relative paths resolve against the
  working directory): a local directory, created if missing;
* ``memory://``: a new, empty in-memory store (each call gets its own);
* ``s3://bucket`` or ``s3://bucket/prefix``: S3 or an S3-compatible server
  (MinIO, moto) when ``endpoint_url`` is given.

S3 settings come from the keyword arguments, else from ``AWS_*`` variables
(``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_ALLOW_HTTP``); anything still unset is left to
obstore's own AWS credential chain (web identity, container, instance
metadata).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from obstore.store import LocalStore, MemoryStore, S3Store

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.storage.base import Storage
from sluicegate.operators.storage.exceptions import InvalidPathError
from sluicegate.operators.storage.layout import validate_path
from sluicegate.operators.storage.obstore_storage import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_CONCURRENCY,
    ObstoreStorage,
)

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config

__all__ = ["open_storage"]

_URL_SETTING = "storage url"
_TRUE = frozenset({"1", "true", "yes", "on"})


def open_storage(
    url: str | Path,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    allow_http: bool | None = None,
    client_options: ClientConfig | None = None,
    retry_config: RetryConfig | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    environ: Mapping[str, str] | None = None,
) -> Storage:
    """Return the storage that ``url`` names.

    Args:
        url: ``file:///abs/dir``, a plain path, ``memory://`` or ``s3://bucket[/prefix]``.
        endpoint_url: S3-compatible endpoint, e.g. ``http://127.0.0.1:9000``.
        region: S3 region.
        access_key_id: S3 access key.
        secret_access_key: S3 secret key.
        session_token: S3 session token for temporary credentials.
        allow_http: permit a plain-http endpoint. ``None`` allows it exactly
            when the endpoint itself says ``http://``; ``False`` with an http
            endpoint is a ConfigError.
        client_options: obstore HTTP client options (timeouts, proxy, ...).
        retry_config: obstore retry policy used before a failure is reported.
        chunk_size: local read size and multipart part size (S3: >= 5 MiB).
        max_concurrency: parts of one upload in flight at once.
        environ: where ``AWS_*`` variables are read; defaults to ``os.environ``.

    Raises:
        ConfigError: the URL or a setting is invalid.
    """
    env = os.environ if environ is None else environ
    text = str(url)
    scheme = urlsplit(text).scheme if "://" in text else ""
    if scheme == "s3":
        store: LocalStore | MemoryStore | S3Store = _s3_store(
            text,
            env,
            endpoint_url=endpoint_url,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
            allow_http=allow_http,
            client_options=client_options,
            retry_config=retry_config,
        )
    elif scheme == "memory":
        store = MemoryStore()
    elif scheme == "file":
        store = _local_store(_file_url_path(text))
    elif scheme == "":
        store = _local_store(Path(text).expanduser().resolve())
    else:
        raise ConfigError(
            _URL_SETTING,
            f"unsupported scheme {scheme!r} in {text!r}; use file://, memory:// or s3://",
        )
    return ObstoreStorage(store, chunk_size=chunk_size, max_concurrency=max_concurrency)


def _file_url_path(url: str) -> Path:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ConfigError(_URL_SETTING, f"file URL {url!r} names host {parts.netloc!r}")
    path = Path(unquote(parts.path))
    if not path.is_absolute():
        raise ConfigError(_URL_SETTING, f"file URL {url!r} must hold an absolute path")
    return path


def _local_store(directory: Path) -> LocalStore:
    if directory.exists() and not directory.is_dir():
        raise ConfigError(_URL_SETTING, f"{str(directory)!r} exists and is not a directory")
    return LocalStore(prefix=directory, mkdir=True)


def _s3_store(
    url: str,
    env: Mapping[str, str],
    *,
    endpoint_url: str | None,
    region: str | None,
    access_key_id: str | None,
    secret_access_key: str | None,
    session_token: str | None,
    allow_http: bool | None,
    client_options: ClientConfig | None,
    retry_config: RetryConfig | None,
) -> S3Store:
    parts = urlsplit(url)
    bucket = parts.netloc
    if not bucket:
        raise ConfigError(_URL_SETTING, f"S3 URL {url!r} has no bucket; use s3://bucket/prefix")
    prefix = unquote(parts.path).strip("/")
    if prefix:
        try:
            validate_path(prefix)
        except InvalidPathError as exc:
            raise ConfigError(_URL_SETTING, f"S3 URL {url!r}: {exc.reason}") from exc

    endpoint = endpoint_url or _first(
        env, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"
    )
    if allow_http is None:
        allow_http = env.get("AWS_ALLOW_HTTP", "").lower() in _TRUE or bool(
            endpoint and endpoint.startswith("http://")
        )
    elif not allow_http and endpoint and endpoint.startswith("http://"):
        raise ConfigError("allow_http", f"endpoint {endpoint!r} is plain http; set allow_http=True")

    config: S3Config = {}
    if endpoint:
        config["endpoint"] = endpoint
    if value := region or _first(env, "AWS_REGION", "AWS_DEFAULT_REGION"):
        config["region"] = value
    if value := access_key_id or env.get("AWS_ACCESS_KEY_ID"):
        config["access_key_id"] = value
    if value := secret_access_key or env.get("AWS_SECRET_ACCESS_KEY"):
        config["secret_access_key"] = value
    if value := session_token or _first(env, "AWS_SESSION_TOKEN", "AWS_TOKEN"):
        config["session_token"] = value

    options: ClientConfig = {**(client_options or {})}
    if allow_http:
        options["allow_http"] = True
    return S3Store(
        bucket,
        prefix=prefix or None,
        config=config,
        client_options=options or None,
        retry_config=retry_config,
    )


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        if value := env.get(name):
            return value
    return None
