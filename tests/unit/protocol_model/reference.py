"""The failure-free outcome of a run, and the exactly-once check against it."""

from __future__ import annotations

from collections import defaultdict

from tests.unit.protocol_model.subtask import fold
from tests.unit.protocol_model.world import Shape, World

__all__ = ["ExactlyOnceViolationError", "check_exactly_once", "failure_free"]


class ExactlyOnceViolationError(AssertionError):
    """The simulated pipeline lost, repeated or reordered an effect."""


Outcome = tuple[list[dict[int, tuple[int, int]]], dict[int, list[int]]]


def failure_free(shape: Shape, source: list[tuple[int, int]]) -> Outcome:
    """Keyed state per operator and sink outputs per key of a run without failures.

    A key takes one path through the chain (one partition per topic, one writer per
    partition for it), so its records arrive in source order whatever the interleaving.
    """
    states: list[dict[int, tuple[int, int]]] = [{} for _ in range(shape.operators)]
    sink: dict[int, list[int]] = defaultdict(list)
    for key, value in source:
        for state in states:
            key, value = fold(state, key, value)
        sink[key].append(value)
    return states, dict(sink)


def observed(world: World) -> Outcome:
    """The same, read from the live subtasks and the sink's committed transactions."""
    states: list[dict[int, tuple[int, int]]] = [{} for _ in range(world.shape.operators)]
    for sub in world.subtasks.values():
        states[sub.operator].update(sub.state)
    sink: dict[int, list[int]] = defaultdict(list)
    for key, value in world.sink.committed:
        sink[key].append(value)
    return states, dict(sink)


def check_exactly_once(world: World, source: list[tuple[int, int]]) -> None:
    """Raise :class:`ExactlyOnceViolationError`, with the trace, unless the outcomes match."""
    expected_states, expected_sink = failure_free(world.shape, source)
    states, sink = observed(world)
    problems = [
        f"operator {op} state: expected {expected}, got {got}"
        for op, (expected, got) in enumerate(zip(expected_states, states, strict=True))
        if expected != got
    ]
    if sink != expected_sink:
        problems.append(f"sink: expected {expected_sink}, got {sink}")
    if problems:
        trace = "\n".join(world.trace[-200:])
        raise ExactlyOnceViolationError("\n".join(problems) + "\n--- trace ---\n" + trace)
