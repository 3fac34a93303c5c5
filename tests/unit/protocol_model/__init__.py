"""An in-memory model of the barrier protocol, driving the real sans-IO cores.

Used by ``tests/unit/test_protocol_model.py``; see :mod:`.world` for what is simulated.
"""

from tests.unit.protocol_model.reference import (
    ExactlyOnceViolationError,
    check_exactly_once,
    failure_free,
)
from tests.unit.protocol_model.subtask import LogRecord
from tests.unit.protocol_model.world import Chooser, ModelConfig, Shape, World

__all__ = [
    "Chooser",
    "ExactlyOnceViolationError",
    "LogRecord",
    "ModelConfig",
    "Shape",
    "World",
    "check_exactly_once",
    "failure_free",
]
