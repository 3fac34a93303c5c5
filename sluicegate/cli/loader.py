"""Finding the user's pipeline from ``module:attribute`` (as uvicorn finds an app)."""

from __future__ import annotations

import importlib

from operators.exceptions import ConfigError
from operators.graph import JobGraph
from operators.pipeline import Pipeline

__all__ = ["load_graph"]


def load_graph(spec: str) -> JobGraph:
    """The job graph named by ``spec``: a `JobGraph`, a `Pipeline`, or a function returning one."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError("--pipeline", f"{spec!r} is not module:attribute (e.g. app.flows:wc)")
    try:
        module = importlib.import_module(module_name)
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
