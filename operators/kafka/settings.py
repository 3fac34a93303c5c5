"""How to reach Kafka: bootstrap servers and security (TLS, SASL), in one settings object.

Every Kafka client sluicegate makes is built from a `KafkaSettings` by `operators.kafka.clients`.
A plain ``str`` is accepted wherever settings are (`KafkaLike`): it is a bootstrap address
reached over PLAINTEXT, which is what tests and the development broker use.

From the environment (`KafkaSettings.from_env`, prefix ``SLUICEGATE_KAFKA_``)::

    SLUICEGATE_KAFKA_BOOTSTRAP=kafka-1:9093,kafka-2:9093
    SLUICEGATE_KAFKA_SECURITY_PROTOCOL=SASL_SSL         # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    SLUICEGATE_KAFKA_SASL_MECHANISM=SCRAM-SHA-512       # PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
    SLUICEGATE_KAFKA_SASL_USERNAME=sluicegate
    SLUICEGATE_KAFKA_SASL_PASSWORD_FILE=/run/secrets/kafka-password   # or ..._SASL_PASSWORD
    SLUICEGATE_KAFKA_SSL_CAFILE=/etc/kafka/ca.pem       # else the system's trusted CAs
    SLUICEGATE_KAFKA_SSL_CERTFILE=... / _SSL_KEYFILE=... / _SSL_KEY_PASSWORD=...   # mutual TLS
    SLUICEGATE_KAFKA_SASL_OAUTH_TOKEN_PROVIDER=mymodule:provider    # for OAUTHBEARER

Secrets are `SecretStr` (masked when printed) and read from their files only when a client is
built; ``str(settings)`` names the bootstrap, protocol, mechanism and user, never a secret.
"""

from __future__ import annotations

import importlib
from enum import StrEnum
from pathlib import Path
from typing import Any

from aiokafka.abc import AbstractTokenProvider
from pydantic import BaseModel, ConfigDict, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sluicegate.operators.exceptions import ConfigError

__all__ = ["KafkaLike", "KafkaSettings", "SaslMechanism", "SecurityProtocol", "kafka_settings"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


class KafkaSettings(BaseModel):
    """Bootstrap servers and security of one Kafka cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    bootstrap: str = DEFAULT_BOOTSTRAP
    """The cluster's bootstrap servers, ``host:port`` comma-separated."""
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    """How clients talk to the brokers: in the clear or over TLS, with or without SASL."""
    sasl_mechanism: SaslMechanism | None = None
    """With a SASL protocol (and only then): how clients authenticate."""
    sasl_username: str | None = None
    """The SASL user (PLAIN, SCRAM)."""
    sasl_password: SecretStr | None = None
    """The SASL user's password (PLAIN, SCRAM)."""
    sasl_password_file: Path | None = None
    """A file holding ``sasl_password`` (read when a client is built)."""
    sasl_oauth_token_provider: str | None = None
    """``module:attribute`` naming an aiokafka ``AbstractTokenProvider`` (or a function of no
    arguments returning one), for OAUTHBEARER."""
    oauth_token_provider: AbstractTokenProvider | None = None
    """The same, given as an object (from Python, not from the environment)."""
    ssl_cafile: Path | None = None
    """The CA certificates that sign the brokers' (PEM); unset: the system's trusted CAs."""
    ssl_certfile: Path | None = None
    """The client's certificate (PEM), for mutual TLS."""
    ssl_keyfile: Path | None = None
    """The client certificate's private key (PEM), for mutual TLS."""
    ssl_key_password: SecretStr | None = None
    """The password of ``ssl_keyfile``, if it has one."""
    ssl_check_hostname: bool = True
    """Check that a broker's certificate names the host connected to."""

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        sasl = self.security_protocol in (
            SecurityProtocol.SASL_PLAINTEXT,
            SecurityProtocol.SASL_SSL,
        )
        if sasl and self.sasl_mechanism is None:
            raise ValueError(f"security protocol {self.security_protocol} needs a SASL mechanism")
        if not sasl and self.sasl_mechanism is not None:
            raise ValueError(
                f"SASL mechanism {self.sasl_mechanism} needs security protocol SASL_SSL "
                "(or SASL_PLAINTEXT)"
            )
        if self.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            if self.oauth_token_provider is None and self.sasl_oauth_token_provider is None:
                raise ValueError("OAUTHBEARER needs a token provider (sasl_oauth_token_provider)")
        elif self.sasl_mechanism is not None:
            if not self.sasl_username:
                raise ValueError(f"SASL {self.sasl_mechanism} needs a user name")
            if self.sasl_password is None and self.sasl_password_file is None:
                raise ValueError(
                    f"SASL {self.sasl_mechanism} needs a password (sasl_password or "
                    "sasl_password_file)"
                )
        return self

    @classmethod
    def from_env(cls, bootstrap: str | None = None) -> KafkaSettings:
        """Settings from ``SLUICEGATE_KAFKA_*``; ``bootstrap`` (a CLI flag) overrides the
        environment's.

        Raises:
            ConfigError: the settings are inconsistent (says which and what to do).
        """
        values = _EnvKafkaSettings().model_dump(exclude_none=True)
        if bootstrap:
            values["bootstrap"] = bootstrap
        return kafka_settings(**values)

    def to_env(self) -> dict[str, str]:
        """The ``SLUICEGATE_KAFKA_*`` variables that `from_env` reads back as these settings,
        for child processes (secrets included: pass them only to processes you start).

        Raises:
            ValueError: the token provider is an object, which no variable can carry.
        """
        if self.oauth_token_provider is not None:
            raise ValueError("an OAUTHBEARER token provider object cannot go into variables")
        env = {}
        for name, value in self.model_dump(exclude_none=True).items():
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, bool):
                value = str(value).lower()
            env[f"SLUICEGATE_KAFKA_{name.upper()}"] = str(value)
        return env

    @property
    def secure(self) -> bool:
        """Whether clients talk TLS."""
        return self.security_protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    def __str__(self) -> str:
        """The bootstrap, and the protocol, mechanism and user when not PLAINTEXT."""
        if self.security_protocol is SecurityProtocol.PLAINTEXT:
            return self.bootstrap
        how = [self.security_protocol.value]
        if self.sasl_mechanism is not None:
            how.append(self.sasl_mechanism.value)
        if self.sasl_username:
            how.append(f"as {self.sasl_username}")
        return f"{self.bootstrap} ({' '.join(how)})"

    def password(self) -> str | None:
        """The SASL password, read from its file if given so.

        Raises:
            ConfigError: the password file cannot be read.
        """
        if self.sasl_password is not None:
            return self.sasl_password.get_secret_value()
        if self.sasl_password_file is None:
            return None
        try:
            return self.sasl_password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                "SLUICEGATE_KAFKA_SASL_PASSWORD_FILE",
                f"cannot read {self.sasl_password_file} ({exc.strerror or exc})",
            ) from exc

    def token_provider(self) -> AbstractTokenProvider | None:
        """The OAUTHBEARER token provider, imported if named.

        Raises:
            ConfigError: the name does not import, or is no token provider.
        """
        if self.oauth_token_provider is not None or self.sasl_oauth_token_provider is None:
            return self.oauth_token_provider
        where = self.sasl_oauth_token_provider
        module, _, attribute = where.partition(":")
        try:
            found: Any = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(
                "SLUICEGATE_KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
                f"cannot import {where!r} ({exc}); give it as module:attribute",
            ) from exc
        provider = found if isinstance(found, AbstractTokenProvider) else found()
        if not isinstance(provider, AbstractTokenProvider):
            raise ConfigError(
                "SLUICEGATE_KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
                f"{where!r} is not an aiokafka AbstractTokenProvider",
            )
        return provider


KafkaLike = KafkaSettings | str
"""Settings, or a bootstrap address reached over PLAINTEXT."""


def kafka_settings(**values: Any) -> KafkaSettings:
    """`KafkaSettings` of ``values``; inconsistent ones raise `ConfigError` saying why."""
    from pydantic import ValidationError

    try:
        return KafkaSettings(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError("Kafka settings (SLUICEGATE_KAFKA_*)", problems) from None


class _EnvKafkaSettings(BaseSettings):
    """``SLUICEGATE_KAFKA_*`` as found; checked by `KafkaSettings`."""

    model_config = SettingsConfigDict(env_prefix="SLUICEGATE_KAFKA_", frozen=True, extra="ignore")

    bootstrap: str | None = None
    security_protocol: SecurityProtocol | None = None
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = None
    sasl_oauth_token_provider: str | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: SecretStr | None = None
    ssl_check_hostname: bool | None = None
