"""`McpServer`: the tools of an MCP server as tools of an agent (`mcp_server`, `mcp_stdio`).

An agent lists it among its tools (``Agent(..., tools=[lookup, mcp_server(url, ...)])``); each
worker process holds one connection to it, shared by the subtasks of the agent it runs.

The listing rule:

1. the tools are listed when a subtask opens (a server that cannot be reached then is not
   fatal: the subtask opens, and the listing is retried before each run's next step);
2. they are listed again before the next step of any run after the server sends
   ``notifications/tools/list_changed``, or after a model asks for a tool the listing does not
   hold, or after the server answers a call with "unknown tool";
3. an unannotated tool with no declared kind is refused when it is listed first
   (`McpToolKindError`, naming it, fails the subtask's open); one that appears in a later
   listing is left out of it, with an error in the log, so a server's change cannot crash
   the runs already going.

A call is the effect of a `Tool` like any other (journaled by the agent's runtime); the
request carries the effect's idempotency key in its ``_meta`` under `IDEMPOTENCY_KEY_META`
(``"sluicegate/idempotency-key"``), so that a server can deduplicate a retried call, and, with
tracing on, the W3C trace context of the call's ``execute_tool`` span (``traceparent``, and
``tracestate`` if any) in the same ``_meta``, the MCP convention for trace propagation, so that
a server's spans join the run's trace (``docs/tracing.md``). A server
that cannot be reached, or does not answer within ``timeout_s``, raises
`McpServerUnavailableError` (retryable: the run's step is retried with backoff, and a call
whose outcome is unknown is settled by its kind's ``on_unknown``); the connection is opened
again at the next call. An ``isError`` answer is `McpToolCallError`: the call failed, the
model is told.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import httpx2
from mcp.client import Client, IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    RequestParamsMeta,
    TextContent,
    Tool as ListedTool,
    ToolListChangedNotification,
)

from sluicegate.agents.mcp.exceptions import (
    McpServerUnavailableError,
    McpToolCallError,
    McpToolKindError,
)
from sluicegate.agents.mcp.kinds import Hints, McpToolDescription, kind_of
from sluicegate.agents.mcp.secrets import HeaderValue, masked, resolved
from sluicegate.agents.tools import AnyArguments, Tool, ToolContext, ToolKind
from sluicegate.operators.exceptions import SluicegateError

__all__ = ["IDEMPOTENCY_KEY_META", "TRACE_META", "McpServer", "mcp_server", "mcp_stdio"]

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_META = "sluicegate/idempotency-key"
"""The ``_meta`` entry of a ``tools/call`` request that holds the effect's idempotency key."""

TRACE_META = ("traceparent", "tracestate")
"""The ``_meta`` entries of a ``tools/call`` request that hold the W3C trace context of the
call's span (with tracing on; ``tracestate`` only if the context has one)."""

_MAX_PAGES = 100
_CONNECTION_LOST = (CONNECTION_CLOSED, REQUEST_TIMEOUT)
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    OSError, httpx2.HTTPError, ExceptionGroup, RuntimeError,
)  # fmt: skip
_LISTING_ERRORS: tuple[type[Exception], ...] = (TimeoutError, MCPError, *_TRANSPORT_ERRORS)

ClientFactory = Callable[[], AbstractAsyncContextManager[Client]]


class McpServer:
    """The tools of one MCP server, as a `ToolSource` of an agent; see the module docstring.

    Build it with `mcp_server` (streamable HTTP) or `mcp_stdio` (a command line)."""

    def __init__(
        self,
        name: str,
        connect: ClientFactory,
        *,
        kinds: Mapping[str, ToolKind] | None = None,
        timeout_s: float = 30.0,
        display: str,
    ) -> None:
        self._name, self._connect, self._display = name, connect, display
        self._kinds = dict(kinds or {})
        self._timeout_s = timeout_s
        self._users = 0
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._lock = asyncio.Lock()
        self._listing: list[Tool] | None = None
        self._stale = True

    @property
    def name(self) -> str:
        return self._name

    @property
    def stale(self) -> bool:
        """The listing is to be fetched (again) before a run's next step."""
        return self._stale

    def __repr__(self) -> str:
        return f"McpServer({self._name!r}, {self._display})"

    # -- ToolResources ---------------------------------------------------------------------

    async def acquire(self) -> None:
        self._users += 1

    async def release(self) -> None:
        self._users = max(0, self._users - 1)
        if self._users == 0:
            await self._disconnect()
            self._listing, self._stale = None, True

    # -- ToolSource ------------------------------------------------------------------------

    def invalidate(self) -> None:
        """List the tools again before the next step."""
        self._stale = True

    async def tools(self) -> Sequence[Tool]:
        """The tools of the listing, listed first if `stale`; `McpServerUnavailableError`."""
        async with self._lock:
            if self._stale or self._listing is None:
                first = self._listing is None
                listed = await self._list()
                self._listing = self._declared(listed, strict=first)
                self._stale = False
                logger.info(
                    "MCP server %s: %d tools listed", self._name, len(self._listing),
                    extra={"tools": [t.name for t in self._listing]},
                )  # fmt: skip
            return list(self._listing)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        key: str,
        trace_headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Call ``tool`` with the idempotency key ``key``, and the W3C ``trace_headers`` of
        its span (`TRACE_META`) if any, in the request's ``_meta``: the result's structured
        content, else its text (a JSON value when it parses as one)."""
        client = await self._connected()
        entries = {IDEMPOTENCY_KEY_META: key}
        if trace_headers:
            entries.update((k, v) for k, v in trace_headers.items() if k in TRACE_META)
        meta = cast(RequestParamsMeta, entries)  # an open map of keys
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, arguments, meta=meta),
                self._timeout_s,
            )
        except TimeoutError as exc:
            await self._disconnect()
            raise McpServerUnavailableError(
                self._name, f"{tool} got no answer in {self._timeout_s} s"
            ) from exc
        except MCPError as exc:
            if exc.code not in _CONNECTION_LOST:
                raise McpToolCallError(tool, exc.error.message) from exc
            await self._disconnect()
            raise McpServerUnavailableError(self._name, f"{tool}: {exc.error.message}") from exc
        except _TRANSPORT_ERRORS as exc:
            await self._disconnect()
            raise McpServerUnavailableError(self._name, f"{tool}: {exc!r}") from exc
        return self._value(tool, result)

    # -- connection ------------------------------------------------------------------------

    async def _list(self) -> list[ListedTool]:
        client = await self._connected()
        listed: list[ListedTool] = []
        cursor: str | None = None
        try:
            for _ in range(_MAX_PAGES):
                page = await asyncio.wait_for(
                    client.list_tools(cursor=cursor, cache_mode="refresh"), self._timeout_s
                )
                listed.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except _LISTING_ERRORS as exc:
            await self._disconnect()
            raise McpServerUnavailableError(self._name, f"listing tools: {exc!r}") from exc
        return listed

    async def _connected(self) -> Client:
        """The open connection, opened now if there is none (or it died)."""
        if self._client is not None and self._holder is not None and not self._holder.done():
            return self._client
        await self._disconnect()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready), name=f"mcp-{self._name}")
        try:
            self._client = await asyncio.wait_for(asyncio.shield(ready), self._timeout_s)
        except SluicegateError:
            await self._disconnect()
            raise
        except Exception as exc:
            await self._disconnect()
            raise McpServerUnavailableError(self._name, f"cannot connect: {exc!r}") from exc
        logger.info("MCP server %s: connected (%s)", self._name, self._display)
        return self._client

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        """Open the client, hand it over and keep it open until `_disconnect`: the SDK's
        transports are task-scoped, so one task enters and leaves them."""
        try:
            async with self._connect() as client:
                if not ready.done():
                    ready.set_result(client)
                await self._closing.wait()
        except Exception as exc:  # noqa: BLE001 - the connection is gone: the next call reopens
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.warning("MCP server %s: connection lost: %r", self._name, exc)
        finally:
            self._client = None

    async def _disconnect(self) -> None:
        holder, self._holder, self._client = self._holder, None, None
        if holder is None:
            return
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(holder), self._timeout_s)
        except TimeoutError:
            holder.cancel()
            await asyncio.gather(holder, return_exceptions=True)
        except Exception:  # noqa: BLE001, S110 - its failure was logged by the holder
            pass

    async def on_message(self, message: IncomingMessage) -> None:
        """The client's message handler: a changed tool list makes the listing stale."""
        if isinstance(message, ToolListChangedNotification):
            logger.info("MCP server %s: tool list changed", self._name)
            self._stale = True

    # -- mapping ---------------------------------------------------------------------------

    def _declared(self, listed: Sequence[ListedTool], *, strict: bool) -> list[Tool]:
        tools: list[Tool] = []
        for item in listed:
            description = describe(item)
            try:
                kind = kind_of(self._name, description, self._kinds.get(item.name))
            except McpToolKindError:
                if strict:
                    raise
                logger.exception("MCP server %s: tool %s left out", self._name, item.name)
                continue
            tools.append(self._tool(description, kind))
        unknown = sorted(set(self._kinds) - {t.name for t in tools})
        if unknown:
            logger.warning("MCP server %s lists none of %s declared in kinds", self._name, unknown)
        return tools

    def _tool(self, description: McpToolDescription, kind: ToolKind) -> Tool:
        name = description.name

        async def call(ctx: ToolContext, **arguments: Any) -> Any:
            return await self.call(name, arguments, ctx.idempotency_key, ctx.trace_headers)

        return Tool(
            name=name,
            description=description.description or name,
            function=call,
            arguments=AnyArguments,
            kind=kind,
            on_unknown=kind.default_on_unknown,
            parameters=description.input_schema,
        )

    def _value(self, tool: str, result: CallToolResult) -> Any:
        text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
        if result.is_error:
            if text.startswith("Unknown tool"):
                self.invalidate()
            raise McpToolCallError(tool, text or "the server answered with an error")
        if result.structured_content is not None:
            return result.structured_content
        return text


def describe(tool: ListedTool) -> McpToolDescription:
    """What the kind mapping needs of a listed tool."""
    notes = tool.annotations
    hints = None
    if notes is not None:
        hints = Hints(
            read_only=notes.read_only_hint,
            destructive=notes.destructive_hint,
            idempotent=notes.idempotent_hint,
        )
    return McpToolDescription(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        hints=hints,
    )


def mcp_server(
    url: str,
    *,
    name: str | None = None,
    headers: Mapping[str, HeaderValue] | None = None,
    kinds: Mapping[str, ToolKind] | None = None,
    timeout_s: float = 30.0,
) -> McpServer:
    """The tools of the MCP server at ``url`` (streamable HTTP).

    ``headers`` are sent with every request; give secrets as `Secret.env` / `Secret.file`
    (read at each connection, masked everywhere). ``kinds`` declares the kind of a tool by
    name, over whatever its annotations say. ``timeout_s`` bounds connecting, listing and each
    call. ``name`` (default: the URL's host and path) is what logs and errors call it.
    """
    given = dict(headers or {})
    display = f"url={url!r}, headers={masked(given)}"
    server: McpServer | None = None

    @asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        assert server is not None
        http = httpx2.AsyncClient(headers=resolved(given), timeout=timeout_s)
        async with http:
            transport = streamable_http_client(url, http_client=http)
            client = Client(transport, message_handler=server.on_message, cache=None)
            async with client:
                yield client

    label = name or url.split("://", 1)[-1]
    server = McpServer(label, connect, kinds=kinds, timeout_s=timeout_s, display=display)
    return server


def mcp_stdio(
    command: str | Sequence[str],
    *,
    name: str | None = None,
    env: Mapping[str, HeaderValue] | None = None,
    kinds: Mapping[str, ToolKind] | None = None,
    timeout_s: float = 30.0,
) -> McpServer:
    """The tools of the MCP server that ``command`` starts (a command line, split like a shell
    does, or its words), talking over the process's stdin and stdout. The process is started
    by the first connection of a worker, and again after it exits. ``env`` adds environment
    variables (secrets as `Secret`, masked); the rest as in `mcp_server`."""
    words = shlex.split(command) if isinstance(command, str) else list(command)
    if not words:
        raise ValueError("mcp_stdio needs a command")
    given = dict(env or {})
    display = f"command={words[0]!r}, env={masked(given)}"
    server: McpServer | None = None

    @asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        assert server is not None
        params = StdioServerParameters(
            command=words[0], args=words[1:], env=resolved(given) or None
        )
        client = Client(params, message_handler=server.on_message, cache=None)
        async with client:
            yield client

    server = McpServer(
        name or words[0].rsplit("/", 1)[-1], connect, kinds=kinds, timeout_s=timeout_s,
        display=display,
    )  # fmt: skip
    return server
