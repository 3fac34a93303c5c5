"""Finding the user's pipeline from ``module:attribute`` (as uvicorn finds an app).

The current working directory comes first on ``sys.path``, as with uvicorn: ``sluicegate up
--pipeline myapp.flows:wc`` run from the project folder finds ``myapp/flows.py`` there, even
though the ``sluicegate`` script itself lives elsewhere.
"""

from __future__ import annotations

import importlib
import os
import sys

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline

__all__ = ["load_graph"]


def load_graph(spec: str) -> JobGraph:
    """The job graph named by ``spec``: a `JobGraph`, a `Pipeline`, or a function returning one."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError("--pipeline", f"{spec!r} is not module:attribute (e.g. app.flows:wc)")
    folder = os.getcwd()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError("--pipeline", _not_found(module_name, exc, folder)) from exc
    except ImportError as exc:
        raise ConfigError("--pipeline", f"cannot import {module_name!r}: {exc}") from exc
    target = getattr(module, attribute, None)
    if target is None:
        raise ConfigError("--pipeline", f"{module_name} has no attribute {attribute!r}")
    if callable(target) and not isinstance(target, JobGraph | Pipeline):
        target = target()
    if isinstance(target, Pipeline):
        return target.build()
    if isinstance(target, JobGraph):
        return target
    raise ConfigError("--pipeline", f"{spec} is neither a Pipeline nor a JobGraph")


def _not_found(module_name: str, exc: ModuleNotFoundError, folder: str) -> str:
    """Which module was missing, and where it was looked for."""
    missing = exc.name or module_name
    parts = module_name.split(".")
    ours = [".".join(parts[: i + 1]) for i in range(len(parts))]
    if missing in ours:
        path = missing.replace(".", os.sep)
        return (
            f"cannot import {module_name!r}: no module named {missing!r} in {folder} (the "
            f"current folder) or elsewhere on sys.path; run from the folder that holds "
            f"{path}.py or {path}{os.sep}, or add its folder to PYTHONPATH"
        )
    return (
        f"cannot import {module_name!r}: it imports {missing!r}, which is not installed "
        f"(looked in {folder} and on sys.path)"
    )
