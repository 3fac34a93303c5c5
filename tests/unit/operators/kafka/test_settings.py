"""`KafkaSettings` and the client factories: every client gets the same security options."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from aiokafka.abc import AbstractTokenProvider

from sluicegate.devkafka.secure import make_certificate
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka import (
    KafkaSettings,
    SaslMechanism,
    SecurityProtocol,
    clients as kafka_clients,
)
from sluicegate.operators.kafka.settings import kafka_settings

SASL: dict[str, object] = {
    "bootstrap": "k1:9093,k2:9093",
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "sasl_username": "alice",
    "sasl_password": "s3cret-password",
}


def sasl(**changes: object) -> KafkaSettings:
    return KafkaSettings.model_validate({**SASL, **changes})


class Tokens(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka's ABC is untyped
    async def token(self) -> str:
        return "a-token"


provider = Tokens()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SLUICEGATE_KAFKA_") and name != "SLUICEGATE_KAFKA_HOME":
            monkeypatch.delenv(name)


def test_a_string_is_a_plaintext_bootstrap() -> None:
    options = kafka_clients.connection_options("127.0.0.1:9092")
    assert options == {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"}
    assert str(KafkaSettings()) == "127.0.0.1:9092"


async def test_sasl_ssl_options_reach_every_kind_of_client(tmp_path: Path) -> None:
    cert = make_certificate(tmp_path)
    settings = sasl(ssl_cafile=cert.cafile)
    options = kafka_clients.connection_options(settings)
    context = options.pop("ssl_context")
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert options == {
        "bootstrap_servers": "k1:9093,k2:9093", "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret-password",
    }  # fmt: skip
    producer = kafka_clients.producer(settings, transactional_id="t")
    consumer = kafka_clients.consumer(settings, "topic", isolation_level="read_committed")
    admin = kafka_clients.admin(settings)
    client = kafka_clients.bare_client(settings)
    for built in (producer.client, consumer._client, admin._client, client):
        assert built._security_protocol == "SASL_SSL"
        assert built._sasl_mechanism == "SCRAM-SHA-512"
        assert built._sasl_plain_password == "s3cret-password"
        assert built._ssl_context is not None
    await producer.stop()
    await consumer.stop()
    await admin.close()
    await client.close()


def test_a_caller_cannot_override_the_connection() -> None:
    with pytest.raises(TypeError, match="connection options come from KafkaSettings"):
        kafka_clients.producer("127.0.0.1:9092", security_protocol="PLAINTEXT")


def test_secrets_are_never_printed_and_come_from_files(tmp_path: Path) -> None:
    (tmp_path / "password").write_text("from-a-file\n")
    settings = sasl(sasl_password=None, sasl_password_file=tmp_path / "password")
    assert "s3cret" not in repr(sasl())
    assert str(sasl()) == "k1:9093,k2:9093 (SASL_SSL SCRAM-SHA-512 as alice)"
    assert settings.password() == "from-a-file"
    gone = settings.model_copy(update={"sasl_password_file": tmp_path / "missing"})
    with pytest.raises(ConfigError, match="cannot read"):
        kafka_clients.connection_options(gone)


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"security_protocol": "SASL_SSL"}, "needs a SASL mechanism"),
        ({"sasl_mechanism": "PLAIN"}, "needs security protocol SASL_SSL"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "needs a user name"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "a"},
            "needs a password",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
            "needs a token provider",
        ),
        ({"security_protocol": "TLS"}, "security_protocol"),
    ],
)
def test_inconsistent_settings_are_refused_saying_why(values: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        kafka_settings(**values)


def test_settings_come_from_the_environment_and_the_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert KafkaSettings.from_env() == KafkaSettings()
    for name, value in sasl(ssl_check_hostname=False).to_env().items():
        monkeypatch.setenv(name, value)
    settings = KafkaSettings.from_env()
    assert settings == sasl(ssl_check_hostname=False)
    assert settings.security_protocol is SecurityProtocol.SASL_SSL
    assert settings.sasl_mechanism is SaslMechanism.SCRAM_SHA_512
    assert KafkaSettings.from_env("other:9093").bootstrap == "other:9093"
    monkeypatch.setenv("SLUICEGATE_KAFKA_SASL_MECHANISM", "GSSAPI")
    with pytest.raises(Exception, match=r"SASL_MECHANISM|sasl_mechanism"):
        KafkaSettings.from_env()


def test_an_oauthbearer_provider_is_imported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = KafkaSettings(
        security_protocol=SecurityProtocol.SASL_SSL,
        sasl_mechanism=SaslMechanism.OAUTHBEARER,
        sasl_oauth_token_provider=f"{__name__}:provider",
    )
    options = kafka_clients.connection_options(settings)
    assert options["sasl_oauth_token_provider"] is provider
    assert "sasl_plain_username" not in options
    wrong = settings.model_copy(update={"sasl_oauth_token_provider": "no.such.module:x"})
    with pytest.raises(ConfigError, match=r"cannot import 'no\.such\.module:x'"):
        kafka_clients.connection_options(wrong)
    made = settings.model_copy(update={"sasl_oauth_token_provider": f"{__name__}:Tokens"})
    assert isinstance(kafka_clients.connection_options(made)["sasl_oauth_token_provider"], Tokens)
