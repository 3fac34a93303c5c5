"""Tools an agent may call, declared with `@tool`.

A tool is an async function whose first parameter is a `ToolContext` and whose other
parameters, with their type hints, become the argument schema the model sees (via pydantic)::

    @tool(kind=ToolKind.REVERSIBLE, compensate="reverse_refund", on_unknown=OnUnknown.LOOKUP,
          lookup=find_refund)
    async def issue_refund(ctx: ToolContext, order_id: str, amount: float) -> dict[str, Any]:
        \"\"\"Refund ``amount`` of order ``order_id`` to the customer.\"\"\"
        return await world.issue_refund(order_id, amount, ctx.run_id, key=ctx.idempotency_key)

What a declaration promises, and what the runtime does with it:

* ``kind``: ``read_only`` (no effect; safe to call again), ``idempotent_write`` (an effect
  that the tool deduplicates by ``ctx.idempotency_key``, such as an upsert or a ``PUT``: it is
  journaled like any effect but needs neither approval nor a compensating tool),
  ``reversible`` (names the tool that ``compensate``\\ s it), ``irreversible`` (the run waits
  for a person's approval first).
* ``on_unknown``: how to settle a call that was issued but whose result was never recorded
  (the worker died in between): ``lookup`` asks ``lookup(ctx)`` whether the effect with this
  idempotency key happened; ``retry`` calls again with the same key (the tool is idempotent);
  ``fail`` neither: the run fails closed with reason ``outcome_unknown``. The default is
  ``retry`` for ``read_only`` and ``idempotent_write`` tools, ``fail`` for the others.
* The tool receives ``ctx.idempotency_key``; HTTP tools send it as ``Idempotency-Key``.
* ``ctx.trace_headers`` is the W3C trace context (``traceparent``) of the call's span, for a
  tool to send with its HTTP or MCP requests (empty with tracing off; ``docs/tracing.md``).
* ``ctx.metadata`` is the task's ``metadata`` (``customer_id``, ``tenant``, ...), read-only,
  the same on every call of the run and after any restore.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from sluicegate.agents.journal import LookupResult, OnUnknown
from sluicegate.agents.models.contract import ToolSchema
from sluicegate.operators.exceptions import FatalError

__all__ = [
    "AnyArguments",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolDeclarationError",
    "ToolKind",
    "ToolResources",
    "ToolSource",
    "offered_digests",
    "tool",
    "tool_schemas",
]


class ToolKind(StrEnum):
    """What a call of the tool does to the world; see the module docstring."""

    READ_ONLY = "read_only"
    IDEMPOTENT_WRITE = "idempotent_write"
    REVERSIBLE = "reversible"
    IRREVERSIBLE = "irreversible"

    @property
    def has_effect(self) -> bool:
        """Calls are journaled as effects, behind a ``RecordIntent`` safe point."""
        return self is not ToolKind.READ_ONLY

    @property
    def default_on_unknown(self) -> OnUnknown:
        """``retry`` where calling again with the same key is safe by declaration."""
        if self in (ToolKind.READ_ONLY, ToolKind.IDEMPOTENT_WRITE):
            return OnUnknown.RETRY
        return OnUnknown.FAIL


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool call knows about itself, and the metadata of its run's task."""

    run_id: str
    step: int
    idempotency_key: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The task's ``metadata``, read-only (see `of_run`)."""
    trace_headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """The W3C trace context of this call's span (``traceparent``, ``tracestate``), for the
    requests the tool sends (``docs/tracing.md``); empty with tracing off."""

    @classmethod
    def of_run(
        cls,
        run_id: str,
        step: int,
        idempotency_key: str,
        metadata: Mapping[str, Any],
        trace_headers: Mapping[str, str] | None = None,
    ) -> ToolContext:
        """A context whose ``metadata`` is a read-only view of a deep copy of ``metadata``: a
        tool that changes a nested value changes nothing in the run's state."""
        return cls(
            run_id, step, idempotency_key, MappingProxyType(copy.deepcopy(dict(metadata))),
            MappingProxyType(dict(trace_headers or {})),
        )  # fmt: skip


class ToolDeclarationError(FatalError):
    """A `@tool` declaration is inconsistent; the message says how to fix it."""

    def __init__(self, tool: str, problem: str) -> None:
        super().__init__(f"tool {tool!r}: {problem}")
        self.tool, self.problem = tool, problem


class ToolArgumentsError(FatalError):
    """The model's arguments do not match the tool's schema (the model is told and goes on)."""


class ToolResources(Protocol):
    """What a set of tools holds open (an HTTP client pool, say): each subtask running the
    agent acquires it when it opens and releases it when it closes."""

    async def acquire(self) -> None: ...

    async def release(self) -> None: ...


class ToolSource(ToolResources, Protocol):
    """Tools an agent learns when it runs, not when it is declared (the tools of an MCP
    server: `agents.mcp`). Each subtask running the agent acquires it when it opens, takes
    its `tools` before each step when it is `stale`, and releases it when it closes."""

    @property
    def name(self) -> str: ...

    @property
    def stale(self) -> bool:
        """The tools are to be listed (again) before the next step."""
        ...

    def invalidate(self) -> None:
        """List the tools again before the next step (a model asked for one it does not
        hold)."""

    async def tools(self) -> Sequence[Tool]:
        """The tools, listed now if `stale`; a ``RetryableError`` when the source cannot be
        reached, a ``ToolDeclarationError`` when a tool cannot be declared."""
        ...


ToolFunction = Callable[..., Awaitable[Any]]
LookupFunction = Callable[[ToolContext], Awaitable[LookupResult]]


@dataclass(frozen=True, slots=True)
class Tool:
    """A declared tool: the function, its argument model, and its promises."""

    name: str
    description: str
    function: ToolFunction
    arguments: type[BaseModel]
    kind: ToolKind
    on_unknown: OnUnknown
    compensate: str | None = None
    lookup: LookupFunction | None = None
    parameters: Mapping[str, Any] | None = None
    """The JSON schema of the arguments, for a tool not declared in Python (an MCP tool,
    `agents.mcp`): offered to the model as it is, the arguments checked against it by the
    owner of the tool; None: ``arguments`` is the schema."""

    @property
    def needs_approval(self) -> bool:
        return self.kind is ToolKind.IRREVERSIBLE

    def schema(self) -> ToolSchema:
        if self.parameters is not None:
            parameters = copy.deepcopy(dict(self.parameters))
        else:
            parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        return ToolSchema(name=self.name, description=self.description, parameters=parameters)

    def parse(self, arguments: str) -> dict[str, Any]:
        """Validate the model's JSON arguments; raise `ToolArgumentsError` saying what is wrong."""
        try:
            return self.arguments.model_validate_json(arguments or "{}").model_dump(mode="json")
        except ValidationError as exc:
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {exc}") from exc

    async def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        return await self.function(ctx, **arguments)


def tool(
    *,
    kind: ToolKind = ToolKind.READ_ONLY,
    on_unknown: OnUnknown | None = None,
    compensate: str | None = None,
    lookup: LookupFunction | None = None,
    name: str | None = None,
) -> Callable[[ToolFunction], Tool]:
    """Declare an async function as a tool; see the module docstring."""

    def declare(function: ToolFunction) -> Tool:
        tool_name = name or function.__name__
        if not inspect.iscoroutinefunction(function):
            raise ToolDeclarationError(tool_name, "a tool is an async function")
        policy = kind.default_on_unknown if on_unknown is None else on_unknown
        if policy is OnUnknown.LOOKUP and lookup is None:
            raise ToolDeclarationError(tool_name, "on_unknown=lookup needs a lookup function")
        if kind is ToolKind.REVERSIBLE and not compensate:
            raise ToolDeclarationError(tool_name, "a reversible tool names its compensating tool")
        if kind is not ToolKind.REVERSIBLE and compensate:
            raise ToolDeclarationError(tool_name, "only a reversible tool has a compensation")
        return Tool(
            name=tool_name,
            description=inspect.getdoc(function) or tool_name,
            function=function,
            arguments=_arguments_model(tool_name, function),
            kind=kind,
            on_unknown=policy,
            compensate=compensate,
            lookup=lookup,
        )

    return declare


class AnyArguments(BaseModel):
    """The argument model of a tool whose schema is ``Tool.parameters``: any JSON object."""

    model_config = ConfigDict(extra="allow")


def tool_schemas(tools: Sequence[Tool]) -> list[ToolSchema]:
    return [t.schema() for t in tools]


def offered_digests(schemas: Sequence[ToolSchema]) -> dict[str, str]:
    """Each offered tool's name and the SHA-256 of its schema as canonical JSON (sorted keys):
    what a run records of the tools it was offered (`RunState.offered_tools`)."""
    return {
        s.name: hashlib.sha256(
            json.dumps(s.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
        for s in schemas
    }


def _arguments_model(tool_name: str, function: ToolFunction) -> type[BaseModel]:
    hints = get_type_hints(function)
    params = list(inspect.signature(function).parameters.values())
    if not params or hints.get(params[0].name) is not ToolContext:
        raise ToolDeclarationError(tool_name, "the first parameter is `ctx: ToolContext`")
    fields: dict[str, Any] = {}
    for param in params[1:]:
        if param.name not in hints:
            raise ToolDeclarationError(tool_name, f"parameter {param.name!r} has no type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    config = ConfigDict(extra="forbid")
    model: type[BaseModel] = create_model(f"{tool_name}_arguments", __config__=config, **fields)
    return model
