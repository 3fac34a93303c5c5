"""`BlobReferences`: an agent's payloads converted to handles at the operator boundary, and
resolved lazily when a model call is built.

The boundary is one wrapper around each effect the agent performs: `Payloads.offloading`
returns the effect with its call (and lookup) converting what they return, inside the call the
journal performs, before its ``done`` write, so the journal's entries, `RunState` and the
events only ever see the handle:

* a tool's result whose JSON text (what the model is shown) is larger than the policy's
  threshold becomes ``{"$blob": {...}}``;
* a model message whose content is larger becomes the handle's text.

A value that merely looks like a handle is stored by reference whatever its size, so that
nothing but a handle written here can be taken for one. The outcome the journal returns is
accepted as a handle only when its id is the one this effect key gives (`Payloads.stored`), and
only the run's own handles (`RunState.blobs`) are resolved.

`resolve` reads every handle of the run's messages; a handle that cannot be read is `Lost`
with a reason: ``out_of_scope`` (the handle's scope is not this run's), ``expired`` (past
``expires_at``, whether or not garbage collection removed it yet), ``erased`` (not found),
``corrupt`` (size or sha256 differ, or not UTF-8). Storage being unreachable is no reason:
the error goes up and the step is retried.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from sluicegate.agents.blobs.handle import (
    BlobHandle,
    blob_id,
    handle_of,
    handle_of_text,
    looks_like_handle,
    looks_like_handle_text,
)
from sluicegate.agents.blobs.policy import BlobPolicy
from sluicegate.agents.journal import Effect, EffectKind, LookupFound, LookupResult
from sluicegate.agents.metrics import AgentMetrics
from sluicegate.agents.models.contract import ChatMessage
from sluicegate.agents.runs.state import RunState
from sluicegate.operators.storage import CorruptFileError, NotFoundError
from sluicegate.operators.storage.blobs import BlobMeta, BlobStore, subject_digest

__all__ = [
    "LOST_REASONS",
    "BlobReferences",
    "Inline",
    "Lost",
    "LostReason",
    "Payloads",
    "Resolved",
]

logger = logging.getLogger(__name__)

LostReason = Literal["out_of_scope", "expired", "erased", "corrupt"]
LOST_REASONS: tuple[LostReason, ...] = ("out_of_scope", "expired", "erased", "corrupt")

_RESULT, _CONTENT = "result", "content"


@dataclass(frozen=True, slots=True)
class Lost:
    """A handle of the run that cannot be read, and the message content that held it."""

    handle: BlobHandle
    reason: LostReason
    content: str


@dataclass(frozen=True, slots=True)
class Resolved:
    """The run's messages with every readable handle replaced by its payload."""

    messages: tuple[ChatMessage, ...]
    lost: tuple[Lost, ...]


class Payloads(Protocol):
    """How a run's payloads cross the operator boundary: large ones by reference
    (`BlobReferences`), or all of them as they are (`Inline`). The effect calls go through one
    of the two, never asking which."""

    def offloading(self, state: RunState, effect: Effect) -> Effect:
        """``effect`` (a model or tool call of the run ``state``), its call and lookup
        returning what the run keeps: a large payload's handle instead of the payload."""
        ...

    def stored(self, state: RunState, effect: Effect, value: Any) -> BlobHandle | None:
        """The handle ``effect``'s recorded outcome ``value`` holds, if this wrapper stored it
        (a model response's content, a tool's result)."""
        ...

    async def resolve(self, state: RunState) -> Resolved:
        """The run's messages for a model call, its own handles resolved."""
        ...


class Inline:
    """`Payloads` of an agent without a blob policy: every payload stays in the run."""

    def offloading(self, state: RunState, effect: Effect) -> Effect:
        return effect

    def stored(self, state: RunState, effect: Effect, value: Any) -> BlobHandle | None:
        return None

    async def resolve(self, state: RunState) -> Resolved:
        return Resolved(tuple(state.messages), ())


class BlobReferences:
    """The blobs of one agent's runs in one subtask (`Payloads` by reference); see the module
    docstring."""

    def __init__(
        self,
        policy: BlobPolicy,
        store: BlobStore,
        *,
        agent: str,
        metrics: AgentMetrics,
        labels: tuple[str, str, str],
        clock: Callable[[], float],
    ) -> None:
        self.policy, self.store, self.agent = policy, store, agent
        self._metrics, self._labels, self._clock = metrics, labels, clock

    def scope(self, state: RunState) -> str:
        return self.policy.scope(self.agent, state.metadata)

    # -- conversion -----------------------------------------------------------------------

    def offloading(self, state: RunState, effect: Effect) -> Effect:
        """``effect`` converting its outcome on the way out (module docstring)."""
        call, find, key = effect.call, effect.lookup, effect.key
        if effect.kind is EffectKind.MODEL:

            async def model_call() -> Any:
                return await self._offload_response(state, key, await call())

            return replace(effect, call=model_call)

        async def tool_call() -> Any:
            return await self._offload_result(state, key, await call())

        async def lookup() -> LookupResult:
            assert find is not None
            found = await find()
            if not isinstance(found, LookupFound):
                return found
            return LookupFound(await self._offload_result(state, key, found.value))

        return replace(effect, call=tool_call, lookup=lookup if find is not None else None)

    def stored(self, state: RunState, effect: Effect, value: Any) -> BlobHandle | None:
        """The handle ``effect``'s recorded outcome holds, if it is the one its key stored: a
        model response document's message content, or a tool's result."""
        if effect.kind is EffectKind.MODEL:
            message = value.get("message") if isinstance(value, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            text = content if isinstance(content, str) else None
            return self._ours(state, effect.key, _CONTENT, handle_of_text(text))
        return self._ours(state, effect.key, _RESULT, handle_of(value))

    async def _offload_result(self, state: RunState, key: str, result: Any) -> Any:
        """``result``, or the handle it is stored under when it is large (or handle-like)."""
        text = json.dumps(result, sort_keys=True)
        if not looks_like_handle(result) and len(text.encode()) <= self.policy.threshold_bytes:
            return result
        return (await self._store(state, key, _RESULT, text, "json")).value()

    async def _offload_response(self, state: RunState, key: str, response: Any) -> Any:
        """A model response document (`ModelResponse` as JSON) whose message content is stored
        by reference when it is large (or handle-like); any other document as it is."""
        if not isinstance(response, dict) or not isinstance(response.get("message"), dict):
            return response
        message: dict[str, Any] = response["message"]
        content = message.get("content")
        if not isinstance(content, str) or not (
            looks_like_handle_text(content) or len(content.encode()) > self.policy.threshold_bytes
        ):
            return response
        handle = await self._store(state, key, _CONTENT, content, "text")
        return {**response, "message": {**message, "content": handle.text()}}

    def _ours(
        self, state: RunState, key: str, part: str, handle: BlobHandle | None
    ) -> BlobHandle | None:
        scope = self.scope(state)
        if handle is None or handle.scope != scope or handle.id != blob_id(scope, key, part):
            return None
        return handle

    async def _store(
        self, state: RunState, key: str, part: str, text: str, kind: Literal["json", "text"]
    ) -> BlobHandle:
        data = text.encode()
        scope, now = self.scope(state), self._clock()
        ttl = self.policy.ttl_s
        meta = BlobMeta(
            id=blob_id(scope, key, part),
            subject=subject_digest(self.policy.subject(state.run_id, state.metadata)),
            scope=scope,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            created_at=now,
            expires_at=None if ttl is None else now + ttl,
        )
        written = await self.store.put(meta, data)
        if written.uploaded:
            self._metrics.blobs_written.labels(*self._labels, kind).inc()
            self._metrics.blob_bytes_written.labels(*self._labels).inc(len(data))
        else:
            logger.debug("run %s: blob %s of %s stored already", state.run_id, meta.id, key)
        stored = written.meta
        return BlobHandle(
            id=stored.id,
            subject=stored.subject,
            scope=stored.scope,
            size=stored.size,
            sha256=stored.sha256,
            expires_at=stored.expires_at,
            kind=kind,
        )

    # -- resolution -----------------------------------------------------------------------

    async def resolve(self, state: RunState) -> Resolved:
        """The run's messages for a model call, its own handles resolved (module docstring)."""
        messages: list[ChatMessage] = []
        lost: list[Lost] = []
        for message in state.messages:
            handle = handle_of_text(message.content)
            if handle is None or handle.id not in state.blobs:
                messages.append(message)
                continue
            assert message.content is not None
            payload = await self.read(state, handle)
            if isinstance(payload, str):
                messages.append(message.model_copy(update={"content": payload}))
            else:
                lost.append(Lost(handle, payload.reason, message.content))
                messages.append(message)
        return Resolved(tuple(messages), tuple(lost))

    async def read(self, state: RunState, handle: BlobHandle) -> str | Lost:
        """The payload of ``handle``, or why it cannot be read (`Lost`, with no content)."""
        payload = await self._read(state, handle)
        if isinstance(payload, str):
            self._metrics.blob_resolutions.labels(*self._labels, "resolved").inc()
            return payload
        self._metrics.blob_resolutions.labels(*self._labels, payload.reason).inc()
        logger.warning("run %s: blob %s is %s", state.run_id, handle.id, payload.reason)
        return payload

    async def _read(self, state: RunState, handle: BlobHandle) -> str | Lost:
        if handle.scope != self.scope(state):
            return Lost(handle, "out_of_scope", "")
        if handle.expired(self._clock()):
            return Lost(handle, "expired", "")
        try:
            data = await self.store.get(
                handle.subject, handle.id, size=handle.size, sha256=handle.sha256
            )
        except NotFoundError:
            return Lost(handle, "erased", "")
        except CorruptFileError:
            return Lost(handle, "corrupt", "")
        try:
            return data.decode()
        except UnicodeDecodeError:
            return Lost(handle, "corrupt", "")
