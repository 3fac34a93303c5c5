"""The dev broker explains what to install when java or mvn is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sluicegate.devkafka.broker import new_cluster_id
from sluicegate.devkafka.exceptions import MissingToolError
from sluicegate.devkafka.jars import require_tool

SLUICEGATE = str(Path(sys.executable).with_name("sluicegate"))


@pytest.mark.parametrize(("tool", "advice"), [("java", "openjdk-17"), ("mvn", "maven")])
def test_missing_tool_error_names_the_package(
    tool: str, advice: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingToolError) as caught:
        require_tool(tool)
    assert caught.value.tool == tool
    assert advice in str(caught.value)
    assert "docker compose" in str(caught.value)


def test_cli_without_java_exits_with_the_advice(tmp_path: Path) -> None:
    done = subprocess.run(
        [SLUICEGATE, "dev", "kafka", "--port", "0"],
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "java was not found on PATH" in done.stderr
    assert "SLUICEGATE_KAFKA_BOOTSTRAP" in done.stderr


def test_a_cluster_id_never_starts_with_a_dash() -> None:
    # 0xf8 puts "-" (index 62 of the URL-safe alphabet) first; the tool would read an option.
    draws = iter([b"\xf8" + bytes(15), bytes(16)])
    cluster_id = new_cluster_id(lambda: next(draws))
    assert cluster_id == "A" * 22
    assert not new_cluster_id().startswith("-")
