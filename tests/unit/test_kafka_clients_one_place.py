"""Every Kafka client is built by `operators.kafka.clients`, so none can miss the cluster's
TLS and SASL settings: no other module of the packages (and the benchmarks) calls an aiokafka
client class."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT_CLASSES = {"AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient", "AIOKafkaClient"}
THE_PLACE = ROOT / "operators" / "kafka" / "clients.py"


def client_constructions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in CLIENT_CLASSES:
                found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_only_the_factories_construct_kafka_clients() -> None:
    offenders = [
        hit
        for package in ("operators", "agents", "coordinator", "sluicegate", "bench")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != THE_PLACE
        for hit in client_constructions(path)
    ]
    assert offenders == []
    assert len(client_constructions(THE_PLACE)) == 4


def test_the_check_sees_a_construction(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import aiokafka\np = aiokafka.AIOKafkaProducer(bootstrap_servers='x')\n")
    assert client_constructions(module) == ["m.py:2 AIOKafkaProducer"]
