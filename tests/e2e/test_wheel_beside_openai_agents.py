"""The built wheel installs only the `sluicegate` namespace: in one fresh virtual environment
beside the OpenAI Agents SDK (which installs a top-level `agents`), both import, and the demo
(`sluicegate demo`: the refund desk through real processes, a worker SIGKILLed mid-run) runs
exactly once from the installed wheel, away from the checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPENAI_AGENTS = "openai-agents==0.24.0"
PROBE = """
import agents, sluicegate
from agents import Agent as TheirAgent, Runner
from sluicegate import Agent, Pipeline, add_agent
import sluicegate.agents.runs.machine
print(agents.__file__)
print(sluicegate.agents.runs.machine.__file__)
print(TheirAgent.__module__, Agent.__module__)
"""


def _uv() -> str:
    found = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
    if not Path(found).exists():
        pytest.fail("uv not found: run `make sync` (it installs uv into .tools/)")
    return found


@pytest.mark.e2e
def test_the_wheel_lives_beside_openai_agents_and_its_demo_runs(tmp_path: Path) -> None:
    uv = _uv()
    dist = tmp_path / "dist"
    subprocess.run([uv, "build", "--wheel", "-q", "-o", str(dist)], cwd=ROOT, check=True)
    (wheel,) = dist.glob("sluicegate-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"sluicegate"}

    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), str(wheel), OPENAI_AGENTS],
        check=True,
    )
    away = tmp_path / "elsewhere"  # not the checkout: its folders must not be importable
    away.mkdir()
    out = subprocess.run(
        [str(python), "-c", PROBE], cwd=away, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    site = venv / "lib"
    theirs, ours, modules = Path(out[0]), Path(out[1]), out[2]
    assert theirs.is_relative_to(site)
    assert theirs.parent.name == "agents"
    assert ours.is_relative_to(site)
    assert ours.parts[-4:] == ("sluicegate", "agents", "runs", "machine.py")
    assert modules == "agents.agent sluicegate.agents.declaration"

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICEGATE_KAFKA_BOOTSTRAP")}
    demo = subprocess.run(
        [str(venv / "bin" / "sluicegate"), "demo", "--runs", "6"],
        cwd=away, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    # the 6 asked for and the repeated requests its memory refuses, every one done
    finished = re.search(r"runs finished: +(\d+) \(\{'done': (\d+)\}\)", demo.stdout)
    assert finished is not None, demo.stdout[-3000:]
    assert int(finished.group(1)) == int(finished.group(2)) > 6, demo.stdout[-3000:]
    assert "duplicate effects:    0" in demo.stdout
    assert "OK: every run finished once, no effect happened twice" in demo.stdout
