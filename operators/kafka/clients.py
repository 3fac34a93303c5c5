"""The one place that builds Kafka clients: producer, consumer, admin and bare client, each from
`KafkaSettings` (or a bootstrap string, reached over PLAINTEXT) plus the caller's own options.

    producer(kafka, enable_idempotence=True)           # AIOKafkaProducer, not started
    producer(kafka, transactional_id="...")            # transactional
    consumer(kafka, isolation_level="read_committed")  # AIOKafkaConsumer, not started
    admin(kafka)                                       # AIOKafkaAdminClient, not started

The caller's options may not set the connection itself (``bootstrap_servers``, ``ssl_context``,
``security_protocol``, ``sasl_*``): those come from the settings only, so no client can miss
the cluster's security.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.helpers import create_ssl_context

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka.settings import KafkaLike, KafkaSettings

__all__ = [
    "BATCH_BYTES",
    "READ_TO_END_WAIT_MS",
    "admin",
    "bare_client",
    "connection_options",
    "consumer",
    "producer",
    "settings_of",
]

BATCH_BYTES = 256 * 1024
"""``max_batch_size`` of the producers that write whole batches (a subtask's records between
operators and at-least-once sink records, an exactly-once sink's publications): aiokafka's
16 KiB held about 150 of the word count's records, so every fetch cycle shipped dozens of
batches; a quarter of Kafka's default ``message.max.bytes`` (1 MiB) cut the word count's CPU a
word by 3-11%, the broker's included 7-11% (performance.md)."""

READ_TO_END_WAIT_MS = 50
"""``fetch_max_wait_ms`` of a consumer that reads partitions to their end offsets (a rebuild at
start): the broker answers a connection's requests in order, so with the default long poll
(500 ms) in flight, every end-offsets request waited up to half a second behind it."""

BOOTSTRAP_GRACE_S = 5.0
"""How long a cancelled `start()` lets the client's bootstrap finish (see `_bootstrap_closing`)."""

_CONNECTION_OPTIONS = frozenset(
    {
        "bootstrap_servers",
        "ssl_context",
        "security_protocol",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "sasl_oauth_token_provider",
    }
)


def settings_of(kafka: KafkaLike) -> KafkaSettings:
    """``kafka`` as settings: a string is a PLAINTEXT bootstrap address."""
    return kafka if isinstance(kafka, KafkaSettings) else KafkaSettings(bootstrap=kafka)


def connection_options(kafka: KafkaLike) -> dict[str, Any]:
    """The aiokafka keyword arguments that connect to ``kafka``: bootstrap, TLS, SASL.

    Raises:
        ConfigError: a TLS file or the password file cannot be read.
    """
    settings = settings_of(kafka)
    options: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap,
        "security_protocol": settings.security_protocol.value,
    }
    if settings.secure:
        options["ssl_context"] = _ssl_context(settings)
    if settings.sasl_mechanism is not None:
        options["sasl_mechanism"] = settings.sasl_mechanism.value
        if settings.sasl_username is not None:
            options["sasl_plain_username"] = settings.sasl_username
            options["sasl_plain_password"] = settings.password()
        provider = settings.token_provider()
        if provider is not None:
            options["sasl_oauth_token_provider"] = provider
    return options


def producer(kafka: KafkaLike, **options: Any) -> AIOKafkaProducer:
    """An `AIOKafkaProducer` for ``kafka`` with ``options`` (acks, idempotence, transactional
    id, ...). Not started."""
    built = AIOKafkaProducer(**_merged(kafka, options))
    _bootstrap_closing(built.client)
    return built


def consumer(kafka: KafkaLike, *topics: str, **options: Any) -> AIOKafkaConsumer:
    """An `AIOKafkaConsumer` for ``kafka`` (subscribed to ``topics`` if any). Not started."""
    built = AIOKafkaConsumer(*topics, **_merged(kafka, options))
    _bootstrap_closing(built._client)
    return built


def admin(kafka: KafkaLike, **options: Any) -> AIOKafkaAdminClient:
    """An `AIOKafkaAdminClient` for ``kafka``. Not started."""
    built = AIOKafkaAdminClient(**_merged(kafka, options))
    _bootstrap_closing(built._client)
    return built


def bare_client(kafka: KafkaLike, **options: Any) -> AIOKafkaClient:
    """An `AIOKafkaClient` (metadata only) for ``kafka``. Not bootstrapped."""
    return _bootstrap_closing(AIOKafkaClient(**_merged(kafka, options)))


_Client = TypeVar("_Client", bound=AIOKafkaClient)


def _bootstrap_closing(client: _Client) -> _Client:
    """Make a cancelled bootstrap leave no connection open; returns ``client``.

    aiokafka 0.14's `AIOKafkaClient.bootstrap` connects, then asks for metadata on a connection
    it holds in a local variable: cancelled during that request (a `start()` cut short by a
    shutdown or a timeout), the connection is in no pool that `stop()` closes, and it surfaces
    at garbage collection as "Unclosed AIOKafkaConnection", anywhere later. So the bootstrap
    runs as a task of its own; a cancel lets it finish, for at most `BOOTSTRAP_GRACE_S`
    (milliseconds when the broker answers), and is passed on after it, so `stop()` finds every
    connection. A bootstrap still running after the grace is cancelled as before.
    """
    bootstrap = client.bootstrap

    async def finishing() -> None:
        task = asyncio.ensure_future(bootstrap())
        task.add_done_callback(_retrieve)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait({task}, timeout=BOOTSTRAP_GRACE_S)
            task.cancel()
            raise

    client.bootstrap = finishing
    return client


def _retrieve(task: asyncio.Future[None]) -> None:
    """Mark the outcome of an abandoned bootstrap as seen (no "never retrieved" warning)."""
    if not task.cancelled():
        task.exception()


def _merged(kafka: KafkaLike, options: dict[str, Any]) -> dict[str, Any]:
    clash = _CONNECTION_OPTIONS.intersection(options)
    if clash:
        raise TypeError(f"connection options come from KafkaSettings, not {sorted(clash)}")
    return {**connection_options(kafka), **options}


def _ssl_context(settings: KafkaSettings) -> Any:
    key_password = (
        None if settings.ssl_key_password is None else settings.ssl_key_password.get_secret_value()
    )
    try:
        context = create_ssl_context(
            cafile=None if settings.ssl_cafile is None else str(settings.ssl_cafile),
            certfile=None if settings.ssl_certfile is None else str(settings.ssl_certfile),
            keyfile=None if settings.ssl_keyfile is None else str(settings.ssl_keyfile),
            password=key_password,
        )
    except OSError as exc:  # ssl.SSLError is an OSError
        raise ConfigError(
            "SLUICEGATE_KAFKA_SSL_*", f"cannot load the TLS files ({exc.strerror or exc})"
        ) from exc
    context.check_hostname = settings.ssl_check_hostname
    return context
