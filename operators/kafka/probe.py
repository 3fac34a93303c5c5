"""Trying a Kafka connection once, telling apart "not yet" from "never with these settings".

aiokafka logs an authentication failure and then reports only that it could not bootstrap, and
keeps retrying; `probe` opens one connection itself so that a wrong password or an untrusted
certificate is one clear, fatal error instead of an endless retry loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from aiokafka.conn import create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from sluicegate.operators.kafka import clients
from sluicegate.operators.kafka.exceptions import KafkaAuthenticationError, KafkaUnreachableError
from sluicegate.operators.kafka.settings import KafkaLike, KafkaSettings

__all__ = ["probe"]

_TIMEOUT_S = 10.0


async def probe(kafka: KafkaLike) -> None:
    """Return once one server of ``kafka`` accepts a connection with its security settings
    and answers a metadata request.

    Raises:
        KafkaAuthenticationError: credentials, mechanism or TLS refused (fatal).
        KafkaUnreachableError: no server answered (retryable).
        ConfigError: a TLS or password file cannot be read.
    """
    settings = clients.settings_of(kafka)
    options = clients.connection_options(settings)
    del options["bootstrap_servers"]
    reasons = []
    for server in settings.bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            connection = await asyncio.wait_for(
                create_conn(host.strip("[]"), int(port), **options), _TIMEOUT_S
            )
        except (SaslAuthenticationFailed, IllegalSaslStateError) as exc:
            raise _refused(settings, str(exc) or type(exc).__name__) from None
        except UnsupportedSaslMechanismError as exc:
            raise _refused(settings, f"the mechanism is not enabled there ({exc})") from None
        except ssl.SSLCertVerificationError as exc:
            raise KafkaAuthenticationError(
                str(settings),
                f"its TLS certificate is not trusted ({exc.verify_message})",
                "Set SLUICEGATE_KAFKA_SSL_CAFILE to the CA that signed it.",
            ) from None
        except ssl.SSLError as exc:
            raise KafkaAuthenticationError(
                str(settings),
                f"the TLS handshake failed ({exc.reason or exc})",
                "Check SLUICEGATE_KAFKA_SECURITY_PROTOCOL and the SSL settings "
                "against the listener at that port.",
            ) from None
        except Exception as exc:  # noqa: BLE001 - refused, timed out, closed: "not yet"
            reasons.append(str(exc) or type(exc).__name__)
            continue
        # Wait for the close: a TLS transport shuts down after `close` returns, and one left
        # half-closed when the loop ends is an unclosed socket.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(connection.close()), _TIMEOUT_S)
        break
    else:
        raise KafkaUnreachableError(str(settings), "; ".join(dict.fromkeys(reasons)))
    client = clients.bare_client(settings, request_timeout_ms=10_000)
    try:
        await client.bootstrap()
    except Exception as exc:
        raise KafkaUnreachableError(str(settings), str(exc) or type(exc).__name__) from exc
    finally:
        await client.close()


def _refused(settings: KafkaSettings, reason: str) -> KafkaAuthenticationError:
    return KafkaAuthenticationError(
        str(settings),
        reason,
        "Check SLUICEGATE_KAFKA_SASL_USERNAME, the password (SLUICEGATE_KAFKA_SASL_PASSWORD or "
        "_PASSWORD_FILE) and SLUICEGATE_KAFKA_SASL_MECHANISM.",
    )
