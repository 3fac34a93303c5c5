"""The coordinator's HTTP API as a FastAPI application over a `CoordinatorView`.

Every handler is ``async`` and calls the view on the event loop that serves the request: the
coordinator sequences its steps in one asyncio task with no locks, so the view must never be
called from FastAPI's thread pool.

Every error answer, whatever raised it, is JSON of one shape (`ErrorBody`)::

    {"error": "<short code>", "message": "...", "what_to_do": "..."}

=====  ======================  ==============================================================
code   error                   when
=====  ======================  ==============================================================
401    unauthorized            no bearer token, or one the coordinator does not accept
403    insufficient_scope      the token lacks the route's scope (see `coordinator.httpapi.auth`)
403    cross_origin            the request came from a web page (`coordinator.httpapi.guard`)
404    not_found               no such route
405    method_not_allowed      the route exists, the method does not (``Allow`` says which)
415    unsupported_media_type  a request body that is not JSON
409    checkpoint_refused      the view raised `CheckpointRefusedError`
409    fenced                  a newer coordinator fenced this one (`FencedError`)
422    invalid_request         a request failed validation
503    unavailable             the view raised another `RetryableError`
500    coordinator_error       the view raised another `SluicegateError` (its message is shown)
500    internal_error          anything else; the traceback goes to the log, never to the client
=====  ======================  ==============================================================
"""

from __future__ import annotations

import http
import logging
from collections.abc import Collection, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from sluicegate.coordinator.exceptions import FencedError
from sluicegate.coordinator.httpapi.auth import ApiAuthError, ApiTokens, Scope, requirement
from sluicegate.coordinator.httpapi.guard import BrowserGuard
from sluicegate.coordinator.httpapi.view import (
    CheckpointInfo,
    CheckpointRefusedError,
    CoordinatorView,
    JobStatus,
    SubtaskInfo,
    WorkerInfo,
)
from sluicegate.operators.exceptions import RetryableError, SluicegateError
from sluicegate.operators.runtime.exposition import encode_metrics

__all__ = ["CheckpointTriggered", "ErrorBody", "Health", "create_app"]

logger = logging.getLogger(__name__)

_SPEC_HINT = "GET /openapi.json (or /docs in a browser) lists every operation"


class ErrorBody(BaseModel):
    """The body of every error answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    error: str = Field(description="short machine-readable code, e.g. checkpoint_refused")
    message: str = Field(description="what went wrong, for a person")
    what_to_do: str = Field(description="what the caller can do about it")


class CheckpointTriggered(BaseModel):
    """The answer to a checkpoint trigger: the id of the checkpoint now in flight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: int = Field(ge=1)


class Health(BaseModel):
    """The answer of the liveness probe."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok"] = "ok"


def _error_response(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


# Errors any operation that reads the view can answer.
_VIEW_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error_response("No bearer token, or one the coordinator does not accept"),
    403: _error_response("The token lacks the scope, or the request came from a web page"),
    503: _error_response("The coordinator cannot answer now (retry later)"),
    500: _error_response("The coordinator failed; details are in its log"),
}

_ERROR_SCHEMA = {"$ref": "#/components/schemas/ErrorBody"}
_METRICS_CONTENT: dict[str, Any] = {
    "text/plain": {"schema": {"type": "string"}},
    "application/openmetrics-text": {"schema": {"type": "string"}},
}


def create_app(
    view: CoordinatorView,
    registry: CollectorRegistry,
    *,
    tokens: ApiTokens | None = None,
    allowed_origins: Collection[str] = (),
    console_prefix: str | None = None,
) -> FastAPI:
    """The HTTP API over ``view``; ``GET /metrics`` exposes ``registry``.

    With ``tokens``, every route but ``/healthz`` needs a bearer token with its scope;
    without, the API is open (bind it to loopback only). Requests from web pages are refused
    unless their origin is in ``allowed_origins`` (`BrowserGuard`), or, under
    ``console_prefix`` (where the CLI wiring mounts the web console), is the API's own.
    """
    app = FastAPI(
        title="sluicegate coordinator",
        version=_package_version(),
        summary="Status, workers, subtasks and checkpoints of a sluicegate job.",
        description=(
            "The control API of a sluicegate coordinator. Every error answer is JSON with "
            "`error` (a short code), `message` and `what_to_do`."
        ),
        generate_unique_id_function=lambda route: route.name,
    )
    _add_error_handlers(app)
    app.add_middleware(BrowserGuard, allowed_origins=allowed_origins, console_prefix=console_prefix)
    read = [Depends(requirement(tokens, Scope.READ))]
    operate = [Depends(requirement(tokens, Scope.OPERATE))]

    @app.get(
        "/status",
        dependencies=read,
        response_model=JobStatus,
        tags=["job"],
        summary="Job status",
        responses=_VIEW_ERRORS,
    )
    async def get_status() -> JobStatus:
        """The job's state, attempt, last completed checkpoint, checkpoint lag and restarts."""
        return view.status()

    @app.get(
        "/workers",
        dependencies=read,
        response_model=list[WorkerInfo],
        tags=["job"],
        summary="Workers",
        responses=_VIEW_ERRORS,
    )
    async def get_workers() -> list[WorkerInfo]:
        """Every known worker with its slots, subtasks and the age of its last heartbeat."""
        return view.workers()

    @app.get(
        "/subtasks",
        dependencies=read,
        response_model=list[SubtaskInfo],
        tags=["job"],
        summary="Subtasks",
        responses=_VIEW_ERRORS,
    )
    async def get_subtasks() -> list[SubtaskInfo]:
        """Every subtask (``uid#index``) with the worker that hosts it (null: unassigned)."""
        return view.subtasks()

    @app.get(
        "/checkpoints",
        dependencies=read,
        response_model=list[CheckpointInfo],
        tags=["checkpoints"],
        summary="Checkpoints, newest first",
        responses=_VIEW_ERRORS,
    )
    async def get_checkpoints() -> list[CheckpointInfo]:
        """Retained completed checkpoints, the one in flight and recent aborts, newest first."""
        checkpoints = await view.checkpoints()
        return sorted(checkpoints, key=lambda c: c.checkpoint_id, reverse=True)

    @app.post(
        "/checkpoints",
        dependencies=operate,
        status_code=202,
        response_model=CheckpointTriggered,
        tags=["checkpoints"],
        summary="Trigger a checkpoint",
        responses={
            409: _error_response(
                "A checkpoint cannot be triggered now (one is in flight, or a newer coordinator "
                "fenced this one); the message says why"
            ),
            **_VIEW_ERRORS,
        },
    )
    async def post_checkpoint() -> CheckpointTriggered:
        """Trigger a checkpoint now, outside the interval.

        Answers as soon as the barriers are on their way: the checkpoint is in flight, not
        complete; ``GET /checkpoints`` shows how it ends.
        """
        checkpoint_id = await view.trigger_checkpoint()
        logger.info("checkpoint triggered over HTTP", extra={"checkpoint_id": checkpoint_id})
        return CheckpointTriggered(checkpoint_id=checkpoint_id)

    @app.post(
        "/stop",
        dependencies=operate,
        response_model=JobStatus,
        tags=["job"],
        summary="Stop the job gracefully",
        responses={
            **_VIEW_ERRORS,
            409: _error_response("A newer coordinator fenced this one: ask the newer one"),
        },
    )
    async def post_stop(
        final_checkpoint: Annotated[
            bool,
            Query(description="take a final checkpoint first (the next start resumes from it)"),
        ] = True,
        wait_seconds: Annotated[
            float, Query(ge=0, le=600, description="answer once stopped, or after this long")
        ] = 0,
    ) -> JobStatus:
        """Stop the job: a final checkpoint (unless ``final_checkpoint=false``), then every
        subtask stops; the coordinator process exits once the job is ``stopped``.

        Asking again while it stops changes nothing. The answer is the job's status, with
        ``stop`` saying how far the stop got; starting the coordinator again resumes the job.
        """
        logger.info("stop requested over HTTP", extra={"final_checkpoint": final_checkpoint})
        return await view.stop(final_checkpoint=final_checkpoint, wait_seconds=wait_seconds)

    @app.get(
        "/metrics",
        dependencies=read,
        response_class=PlainTextResponse,
        tags=["operations"],
        summary="Prometheus metrics",
        responses={
            200: {"description": "Prometheus text exposition", "content": _METRICS_CONTENT},
            # The route's media type is text; its errors are JSON like every other error.
            **{
                code: {
                    "description": _VIEW_ERRORS[code]["description"],
                    "content": {"application/json": {"schema": _ERROR_SCHEMA}},
                }
                for code in (401, 403, 500)
            },
        },
    )
    async def get_metrics(request: Request) -> Response:
        """The coordinator's metrics in the Prometheus text format (OpenMetrics if accepted)."""
        content, content_type = encode_metrics(registry, request.headers.get("accept"))
        return Response(content=content, media_type=content_type)

    @app.get("/healthz", response_model=Health, tags=["operations"], summary="Liveness")
    async def get_healthz() -> Health:
        """Answers while the coordinator's event loop is responsive."""
        return Health()

    return app


def _add_error_handlers(app: FastAPI) -> None:
    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            body = ErrorBody(
                error="not_found",
                message=f"no such route: {request.url.path}",
                what_to_do=f"Check the path; {_SPEC_HINT}.",
            )
        elif exc.status_code == 405:
            allowed = _allowed_methods(request)
            body = ErrorBody(
                error="method_not_allowed",
                message=f"{request.method} is not allowed on {request.url.path}",
                what_to_do=f"Use {allowed}; {_SPEC_HINT}.",
            )
            # Starlette names only the methods of the first route that matches the path.
            return _json(405, body, {**(exc.headers or {}), "Allow": allowed})
        else:
            phrase = _phrase(exc.status_code)
            body = ErrorBody(
                error=phrase.lower().replace(" ", "_").replace("-", "_"),
                message=exc.detail if isinstance(exc.detail, str) else phrase,
                what_to_do=f"Check the request; {_SPEC_HINT}.",
            )
        return _json(exc.status_code, body, exc.headers)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error.get('loc', ()))}: {error.get('msg', '')}"
            for error in exc.errors()
        )
        body = ErrorBody(
            error="invalid_request",
            message=f"invalid request: {problems or 'validation failed'}",
            what_to_do=f"Fix the request as the message says; {_SPEC_HINT}.",
        )
        return _json(422, body)

    async def on_checkpoint_refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, CheckpointRefusedError)
        body = ErrorBody(
            error="checkpoint_refused",
            message=f"checkpoint refused: {exc.reason}",
            what_to_do=(
                "Try again later; GET /checkpoints shows the checkpoint in flight and "
                "GET /status what the job is doing."
            ),
        )
        return _json(409, body)

    async def on_fenced(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, FencedError)
        return _json(409, ErrorBody(error="fenced", message=exc.message, what_to_do=exc.what_to_do))

    async def on_sluicegate_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SluicegateError)
        if isinstance(exc, RetryableError):
            logger.warning("API request failed, retryable: %s", exc, extra=_where(request))
            return _json(
                503,
                ErrorBody(
                    error="unavailable",
                    message=str(exc),
                    what_to_do="Retry in a few seconds; the condition may pass.",
                ),
            )
        logger.error("API request failed: %s", exc, extra=_where(request))
        return _json(
            500,
            ErrorBody(
                error="coordinator_error",
                message=str(exc),
                what_to_do="Act on the message; the coordinator's log has the details.",
            ),
        )

    async def on_unexpected_error(request: Request, exc: Exception) -> Response:
        # Starlette re-raises after answering, so the server logs the traceback; the client
        # gets neither the traceback nor the exception's text, which may hold internals.
        return _json(
            500,
            ErrorBody(
                error="internal_error",
                message="the coordinator failed to answer this request",
                what_to_do="Check the coordinator's log; report a bug if it happens again.",
            ),
        )

    async def on_auth_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiAuthError)
        logger.warning("API request refused: %s", exc.message, extra=_where(request))
        body = ErrorBody(error=exc.error, message=exc.message, what_to_do=exc.what_to_do)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _json(exc.status, body, headers)

    app.add_exception_handler(ApiAuthError, on_auth_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(CheckpointRefusedError, on_checkpoint_refused)
    app.add_exception_handler(FencedError, on_fenced)
    app.add_exception_handler(SluicegateError, on_sluicegate_error)
    app.add_exception_handler(Exception, on_unexpected_error)


def _json(status: int, body: ErrorBody, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=body.model_dump(), headers=headers)


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at the request's path, e.g. ``GET, HEAD, POST``."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route | APIRoute) and route.methods:
            match, _ = route.matches(request.scope)
            if match is not Match.NONE:
                methods |= route.methods
    return ", ".join(sorted(methods))


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _where(request: Request) -> dict[str, str]:
    return {"http_method": request.method, "http_path": request.url.path}


def _package_version() -> str:
    try:
        return version("sluicegate")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"
