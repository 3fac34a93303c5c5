"""sluicegate on a secured cluster: a broker of its own with a SASL_SSL listener (a certificate
made here, SCRAM users written at format time). Every client the word count and the agent demo
make goes through `operators.kafka.clients`; a client that missed the settings would fail here,
since the bootstrap given is the SASL_SSL listener. A wrong password is one clear error."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluicegate.demos.refund_desk.run import run_agent_demo
from sluicegate.demos.wordcount import run_demo
from sluicegate.devkafka import DevBroker, free_port
from sluicegate.devkafka.secure import Certificate, SaslSslListener, make_certificate
from sluicegate.operators.kafka import KafkaSettings
from sluicegate.operators.kafka.exceptions import KafkaAuthenticationError
from sluicegate.operators.kafka.probe import probe

USER = "sluice"

# A TLS connection closes its socket a few loop turns after aiokafka's close returns; a job
# crashed at the end of a test (LocalJob.crash) sometimes leaves a socket for the garbage
# collector after the test's loop is gone, which reports it as unclosed (not yet fixed).
TLS_CLOSE_LAG = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@dataclass(frozen=True)
class SecureBroker:
    listener: SaslSslListener
    certificate: Certificate
    password: str

    def settings(self, mechanism: str = "SCRAM-SHA-256", **changes: object) -> KafkaSettings:
        values: dict[str, object] = {
            "bootstrap": self.listener.bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism,
            "sasl_username": USER,
            "sasl_password": self.password,
            "ssl_cafile": self.certificate.cafile,
        }
        return KafkaSettings.model_validate({**values, **changes})


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    certificate = make_certificate(tmp_path_factory.mktemp("tls"))
    password = secrets.token_hex(12)
    listener = SaslSslListener(free_port(), certificate, {USER: password})
    broker = DevBroker(port=0, sasl_ssl=listener)
    broker.start()
    try:
        yield SecureBroker(listener, certificate, password)
    finally:
        broker.stop()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
async def test_every_mechanism_is_accepted_over_tls(
    secure_broker: SecureBroker, mechanism: str
) -> None:
    await probe(secure_broker.settings(mechanism))


@TLS_CLOSE_LAG
async def test_the_word_count_runs_exactly_once_over_sasl_ssl(
    secure_broker: SecureBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = secure_broker.settings("SCRAM-SHA-512")
    assert await run_demo(settings, 2_000, state_dir=tmp_path) == 0
    out = capsys.readouterr().out
    assert "CRASH after checkpoints" in out
    assert "OK: every word counted exactly once across the crash" in out, out
    assert secure_broker.password not in out


@TLS_CLOSE_LAG
async def test_the_agent_demo_runs_over_sasl_ssl(
    secure_broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await run_agent_demo(secure_broker.settings(), runs=4, kill=False, approval_delay_s=0.2)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "duplicate effects:    0" in out
    assert "OK: every run finished once, no effect happened twice" in out


async def test_a_wrong_password_or_an_untrusted_certificate_is_one_clear_error(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    with pytest.raises(KafkaAuthenticationError) as wrong:
        await probe(secure_broker.settings(sasl_password="not-the-password"))
    assert "invalid credentials" in wrong.value.reason
    assert "SLUICEGATE_KAFKA_SASL_USERNAME" in wrong.value.what_to_do
    with pytest.raises(KafkaAuthenticationError) as untrusted:
        await probe(secure_broker.settings(ssl_cafile=None))
    assert "certificate is not trusted" in untrusted.value.reason
    assert "SLUICEGATE_KAFKA_SSL_CAFILE" in untrusted.value.what_to_do


def test_a_worker_with_a_wrong_password_exits_1_with_one_line(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        **secure_broker.settings(sasl_password="not-the-password").to_env(),
        "SLUICEGATE_STORAGE_URL": str(tmp_path / "checkpoints"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "sluicegate", "worker", "--worker-id", "w1",
         "--pipeline", "sluicegate.demos.wordcount:demo_graph"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("sluicegate: ")]
    assert len(lines) == 1, done.stderr
    assert (
        f"Kafka at {secure_broker.listener.bootstrap} (SASL_SSL SCRAM-SHA-256 as {USER})"
        in (lines[0])
    )
    assert "refused to authenticate us" in lines[0]
    assert "invalid credentials" in lines[0]
    assert "not-the-password" not in done.stderr
