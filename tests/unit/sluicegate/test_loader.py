"""``--pipeline module:attr`` finds the module in the current folder (as uvicorn does), and when
it cannot, says which module was missing and in which folder it looked. The real console
script, run from a project folder: unlike ``python -m``, it does not put the folder on
sys.path itself."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluicegate.devkafka import free_port

SLUICEGATE = str(Path(sys.executable).with_name("sluicegate"))

FLOWS = """
from sluicegate.operators.pipeline import Pipeline

def _upper(record, ctx):
    ctx.emit("out", record.value.upper())

x = Pipeline("myapp-flow")
x.source("in", partitions=1)
x.sink("out", partitions=1)
x.operator("upper", _upper, inputs="in", outputs="out")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder holding the package ``myapp`` with ``myapp/flows.py``."""
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "flows.py").write_text(FLOWS)
    (tmp_path / "myapp" / "broken.py").write_text("import no_such_dependency_here\n")
    return tmp_path


def worker(project: Path, spec: str) -> subprocess.Popen[str]:
    """``sluicegate worker --pipeline spec`` in ``project``, against a closed port (a loaded
    pipeline makes it wait for Kafka)."""
    return subprocess.Popen(
        [SLUICEGATE, "worker", "--worker-id", "w1", "--pipeline", spec,
         "--bootstrap", f"127.0.0.1:{free_port()}"],
        cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_pipeline_from_the_project_folder_fails_with_no_hint_no_more(project: Path) -> None:
    process = worker(project, "myapp.flows:x")
    assert process.stderr is not None
    try:
        deadline = time.monotonic() + 30
        seen = []
        for line in process.stderr:  # the pipeline loaded: now it waits for Kafka
            seen.append(line)
            if "cannot reach Kafka" in line or time.monotonic() > deadline:
                break
        assert "cannot reach Kafka" in seen[-1], "".join(seen)
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "nothere.flows:x",
            "cannot import 'nothere.flows': no module named 'nothere' in {project} "
            "(the current folder)",
        ),
        (
            "myapp.flows2:x",
            "cannot import 'myapp.flows2': no module named 'myapp.flows2' in {project}",
        ),
        (
            "myapp.broken:x",
            "cannot import 'myapp.broken': it imports 'no_such_dependency_here', which is not "
            "installed (looked in {project}",
        ),
    ],
)
def test_a_module_not_found_says_which_and_where(project: Path, spec: str, message: str) -> None:
    process = worker(project, spec)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert message.format(project=project) in stderr
    assert "Traceback" not in stderr
