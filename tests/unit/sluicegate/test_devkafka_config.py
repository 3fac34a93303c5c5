"""The dev broker's configuration: the controller port can be chosen (``sluicegate dev kafka
--controller-port``), and producing to a new topic creates it, as a development broker should.
No broker: the rendered ``server.properties`` and the parsed command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.cli import main as cli
from sluicegate.devkafka.broker import DevBroker, server_properties


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

    monkeypatch.setattr(cli, "DevBroker", Started)
    args = cli._parser().parse_args(
        ["dev", "kafka", "--port", "19092", "--controller-port", "19093"]
    )
    with pytest.raises(KeyboardInterrupt):
        args.run(args)
    (broker,) = made
    assert (broker.port, broker._given_controller_port) == (19092, 19093)

    args = cli._parser().parse_args(["dev", "kafka"])
    assert args.controller_port == 0  # any free port, chosen at each start
