"""The dev broker's configuration: the controller port can be chosen (``sluicegate dev kafka
--controller-port``), and producing to a new topic creates it, as a development broker should.
No broker: the rendered ``server.properties`` and the parsed command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.cli import dev as dev_cli, main as cli
from sluicegate.devkafka.broker import DevBroker, server_properties
from sluicegate.devkafka.secure import SaslSslListener, make_certificate


def properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")
    return {key: value for key, value in pairs}


def test_the_dev_broker_controller_port_cannot_be_chosen_no_more(tmp_path: Path) -> None:
    rendered = properties(
        server_properties(port=19092, controller_port=19093, log_dir=tmp_path / "log")
    )
    assert rendered["listeners"] == ("PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093")
    assert rendered["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert rendered["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert rendered["log.dirs"] == str(tmp_path / "log")


def test_the_dev_broker_serves_clients_on_another_host_and_its_controller_on_loopback(
    tmp_path: Path,
) -> None:
    """``--host``: a network namespace's broker (tests/e2e/test_network_cut.py)."""
    from sluicegate.devkafka.broker import on_host

    rendered = properties(
        on_host(
            server_properties(port=9092, controller_port=9093, log_dir=tmp_path),
            "10.77.0.1",
            9092,
        )
    )
    assert rendered["listeners"] == "PLAINTEXT://10.77.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert rendered["advertised.listeners"] == "PLAINTEXT://10.77.0.1:9092"
    assert rendered["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert DevBroker(host="10.77.0.1", port=9092).bootstrap == "10.77.0.1:9092"


def test_the_dev_broker_refuses_to_auto_create_topics_no_more(tmp_path: Path) -> None:
    """Opt-in (``--auto-create-topics``): on by default it raced the coordinator's own topic
    creation (a producer created a 4-partition source with 1 partition first)."""
    default = properties(server_properties(port=1, controller_port=2, log_dir=tmp_path))
    assert default["auto.create.topics.enable"] == "false"
    opted = properties(
        server_properties(port=1, controller_port=2, log_dir=tmp_path, auto_create_topics=True)
    )
    assert opted["auto.create.topics.enable"] == "true"
    assert opted["num.partitions"] == "1"


def test_the_cli_passes_the_controller_port_to_the_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[DevBroker] = []

    class Started(DevBroker):
        def start(self) -> None:
            made.append(self)
            raise KeyboardInterrupt  # stands in for Ctrl-C once started

    monkeypatch.setattr(dev_cli, "DevBroker", Started)
    args = cli._parser().parse_args(
        ["dev", "kafka", "--port", "19092", "--controller-port", "19093"]
    )
    with pytest.raises(KeyboardInterrupt):
        args.run(args)
    (broker,) = made
    assert (broker.port, broker._given_controller_port) == (19092, 19093)

    args = cli._parser().parse_args(["dev", "kafka"])
    assert args.controller_port == 0  # any free port, chosen at each start


def test_a_sasl_ssl_listener_is_added_with_its_users_and_keystore(tmp_path: Path) -> None:
    certificate = make_certificate(tmp_path / "tls")
    listener = SaslSslListener(19094, certificate, {"alice": "alice-pw", "bob": "bob-pw"})
    rendered = properties(
        server_properties(port=19092, controller_port=19093, log_dir=tmp_path, sasl_ssl=listener)
    )
    assert rendered["listeners"] == (
        "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SASL_SSL://127.0.0.1:19094"
    )
    assert rendered["advertised.listeners"].endswith(",SASL_SSL://127.0.0.1:19094")
    assert "SASL_SSL:SASL_SSL" in rendered["listener.security.protocol.map"]
    assert rendered["inter.broker.listener.name"] == "PLAINTEXT"
    assert rendered["listener.name.sasl_ssl.ssl.keystore.location"] == str(certificate.keystore)
    assert rendered["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
    plain = rendered["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert 'user_alice="alice-pw" user_bob="bob-pw"' in plain
    assert listener.format_arguments()[:4] == [
        "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-pw]",
        "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-pw]",
    ]  # fmt: skip
    plain_only = properties(server_properties(port=1, controller_port=2, log_dir=tmp_path))
    assert plain_only["listeners"] == "PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2"
    assert "sasl.enabled.mechanisms" not in plain_only


def test_dev_broker_users_cannot_break_the_jaas_line(tmp_path: Path) -> None:
    certificate = make_certificate(tmp_path)
    with pytest.raises(ValueError, match="letters, digits"):
        SaslSslListener(1, certificate, {"eve": 'x" user_admin="y'})


def test_the_cli_adds_a_sasl_ssl_listener_with_its_users(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made: list[DevBroker] = []

    class Started(DevBroker):
        def start(self) -> None:
            made.append(self)
            raise KeyboardInterrupt

    monkeypatch.setattr(dev_cli, "DevBroker", Started)
    argv = ["dev", "kafka", "--data-dir", str(tmp_path), "--sasl-ssl-port", "19094"]
    args = cli._parser().parse_args([*argv, "--user", "alice:pw-1", "--user", "bob:pw-2"])
    with pytest.raises(KeyboardInterrupt):
        args.run(args)
    (broker,) = made
    assert broker.sasl_ssl is not None
    assert broker.sasl_ssl.port == 19094
    assert dict(broker.sasl_ssl.users) == {"alice": "pw-1", "bob": "pw-2"}
    assert broker.sasl_ssl.certificate.cafile == tmp_path / "tls" / "ca.pem"
    assert broker.sasl_ssl.certificate.keystore.exists()
    for wrong, problem in [
        (["--sasl-ssl-port", "0"], "add at least one --user"),
        (["--sasl-ssl-port", "0", "--user", "alice"], "give it as NAME:PASSWORD"),
        (["--user", "alice:pw"], "add --sasl-ssl-port"),
    ]:
        assert cli.main(["dev", "kafka", *wrong]) == 1
        assert problem in capsys.readouterr().err
