"""The sans-IO cores are pure in their imports too: loading one loads no I/O library.

Each module is imported in a fresh interpreter (this test process has loaded everything), and
its ``sys.modules`` must hold none of the Kafka, RocksDB, storage or HTTP clients.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

IO_LIBRARIES = (
    "aiokafka", "rocksdict", "obstore", "httpx", "fastapi", "uvicorn", "openai", "opentelemetry",
)  # fmt: skip

CORES = (
    "sluicegate.operators.protocol.alignment",
    "sluicegate.operators.protocol.restore_filter",
    "sluicegate.operators.protocol.records",
    "sluicegate.operators.protocol.messages",
    "sluicegate.operators.protocol.wire",
    "sluicegate.operators.protocol.wire_schema",
    "sluicegate.operators.protocol.snapshot",
    "sluicegate.operators.savepoints.rows",
    "sluicegate.operators.savepoints.manifest",
    "sluicegate.coordinator.checkpoints.tracker",
    "sluicegate.coordinator.checkpoints.pending",
    "sluicegate.coordinator.stopping",
    "sluicegate.coordinator.job_state",
    "sluicegate.coordinator.liveness",
    "sluicegate.coordinator.restart",
    "sluicegate.coordinator.recovery",
    "sluicegate.coordinator.running",
    "sluicegate.coordinator.savepoints.phase",
    "sluicegate.operators.storage.manifest",
    "sluicegate.agents.runs.machine",
    "sluicegate.agents.history.replay",
    "sluicegate.agents.fork.patch",
    "sluicegate.agents.fork.request",
    "sluicegate.agents.rollback.machine",
    "sluicegate.agents.journal.resolution",
    "sluicegate.agents.journal.entries",
    "sluicegate.agents.blobs.handle",
)


def loaded_io_libraries(module: str) -> list[str]:
    io = sorted(IO_LIBRARIES)
    probe = (
        f"import json, sys, {module}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({io!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


@pytest.mark.parametrize("module", CORES)
def test_a_core_loads_no_io_library(module: str) -> None:
    assert loaded_io_libraries(module) == []


def test_the_check_sees_an_io_library() -> None:
    assert "aiokafka" in loaded_io_libraries("sluicegate.operators.runtime.worker")


ENGINE_ENTRY_POINTS = (
    "sluicegate",
    "sluicegate.operators.runtime.worker",
    "sluicegate.coordinator.service",
    "sluicegate.agents.operator",
    "sluicegate.cli.main",
    "sluicegate.cli.loader",
)


def loaded_modules(module: str, names: tuple[str, ...]) -> list[str]:
    probe = (
        f"import json, sys, {module}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({names!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


@pytest.mark.parametrize("module", ENGINE_ENTRY_POINTS)
def test_the_engine_never_imports_faust(module: str) -> None:
    # faust is an optional extra (sluicegate[faust]): only sluicegate.faust_adapter loads it
    assert loaded_modules(module, ("faust", "mode")) == []


def test_the_faust_check_sees_faust() -> None:
    assert loaded_modules("sluicegate.faust_adapter", ("faust",)) == ["faust"]
