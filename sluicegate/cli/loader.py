"""Finding the user's pipeline from ``module:attribute`` (as uvicorn finds an app).

The current working directory comes first on ``sys.path``, as with uvicorn: ``sluicegate up
--pipeline myapp.flows:wc`` run from the project folder finds ``myapp/flows.py`` there, even
though the ``sluicegate`` script itself lives elsewhere.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.graph import JobGraph
from sluicegate.operators.pipeline import Pipeline

__all__ = ["is_faust_app", "load_graph", "load_module_attribute"]


def load_graph(spec: str) -> JobGraph:
    """The job graph named by ``spec``: a `JobGraph`, a `Pipeline`, a function returning one,
    or a ``faust.App`` (run by `sluicegate.faust_adapter`, which imports faust: only then)."""
    module, target = load_module_attribute(spec, setting="--pipeline")
    if is_faust_app(target):
        from sluicegate.faust_adapter import pipeline_of

        return pipeline_of(target, modules=[module]).build()
    if callable(target) and not isinstance(target, JobGraph | Pipeline):
        target = target()
    if isinstance(target, Pipeline):
        return target.build()
    if isinstance(target, JobGraph):
        return target
    raise ConfigError("--pipeline", f"{spec} is neither a Pipeline nor a JobGraph")


def load_module_attribute(spec: str, *, setting: str = "APP") -> tuple[ModuleType, object]:
    """The module and the object ``spec`` (``module:attribute``) names, imported from the
    current folder too; what is wrong is a `ConfigError` of ``setting``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(setting, f"{spec!r} is not module:attribute (e.g. app.flows:wc)")
    folder = os.getcwd()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(setting, _not_found(module_name, exc, folder)) from exc
    except ImportError as exc:
        raise ConfigError(setting, f"cannot import {module_name!r}: {exc}") from exc
    target = getattr(module, attribute, None)
    if target is None:
        raise ConfigError(setting, f"{module_name} has no attribute {attribute!r}")
    return module, target


def is_faust_app(obj: object) -> bool:
    """Whether ``obj`` is a ``faust.App``, asked without importing faust (the engine and the
    CLI never do; only `sluicegate.faust_adapter` does)."""
    return any(
        f"{kind.__module__}.{kind.__qualname__}" == "faust.app.base.App"
        for kind in type(obj).__mro__
    )


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
