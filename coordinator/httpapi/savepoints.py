"""The savepoint operations of the HTTP API, as a router over a `SavepointView`.

``GET /savepoints``, ``POST /savepoints?name=&stop=`` (202; 409 when refused),
``GET /savepoints/{name}`` and ``DELETE /savepoints/{name}`` (404 when there is none; 409
while it is being written); and ``POST /checkpoints/full``, a full checkpoint on demand (its
files shared with no other checkpoint; 409 when one is in flight). Errors have the API's one
JSON shape (`coordinator.httpapi.app.ErrorBody`). The router is included by the process that
serves the API (`sluicegate coordinator`), beside the main app's routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse

from sluicegate.coordinator.httpapi.app import ErrorBody
from sluicegate.coordinator.httpapi.auth import ApiTokens, Scope, requirement
from sluicegate.coordinator.httpapi.savepoint_models import (
    FullCheckpointTriggered,
    SavepointDeleted,
    SavepointInfo,
)
from sluicegate.operators.savepoints.exceptions import SavepointNotFoundError, SavepointRefusedError
from sluicegate.operators.savepoints.manifest import SAVEPOINT_NAME

__all__ = ["SavepointView", "savepoints_router"]

_NAME = SAVEPOINT_NAME
_NamePath = Annotated[str, Path(pattern=_NAME, description="the savepoint's name")]


class SavepointView(Protocol):
    """What the savepoint routes need of a coordinator."""

    async def savepoints(self) -> list[SavepointInfo]: ...

    async def savepoint(self, name: str) -> SavepointInfo:
        """Raises `SavepointNotFoundError`."""
        ...

    async def create_savepoint(self, name: str | None, *, stop: bool) -> SavepointInfo:
        """Raises `SavepointRefusedError`."""
        ...

    async def delete_savepoint(self, name: str) -> int:
        """The number of files deleted; raises `SavepointNotFoundError`, or
        `SavepointRefusedError` while it is being written."""
        ...

    async def trigger_full_checkpoint(self) -> int:
        """Trigger a full checkpoint; its id. Raises `SavepointRefusedError` when not now."""
        ...


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


def _refused(exc: SavepointRefusedError) -> JSONResponse:
    body = ErrorBody(error="savepoint_refused", message=exc.problem, what_to_do=exc.what_to_do)
    return JSONResponse(status_code=409, content=body.model_dump())


def _not_found(exc: SavepointNotFoundError) -> JSONResponse:
    body = ErrorBody(
        error="savepoint_not_found",
        message=f"no savepoint named {exc.name!r}",
        what_to_do="GET /savepoints lists the savepoints",
    )
    return JSONResponse(status_code=404, content=body.model_dump())


def savepoints_router(view: SavepointView, *, tokens: ApiTokens | None = None) -> APIRouter:
    """The savepoint routes over ``view``; with ``tokens``, reading needs the ``read`` scope
    and the rest ``operate`` (`coordinator.httpapi.auth`)."""
    router = APIRouter(tags=["savepoints"])
    read = [Depends(requirement(tokens, Scope.READ))]
    operate = [Depends(requirement(tokens, Scope.OPERATE))]

    @router.get(
        "/savepoints",
        dependencies=read,
        response_model=list[SavepointInfo],
        summary="List savepoints",
    )
    async def get_savepoints() -> list[SavepointInfo]:
        """Stored savepoints (oldest first), then this coordinator's requests not stored."""
        return await view.savepoints()

    @router.post(
        "/savepoints",
        dependencies=operate,
        status_code=202,
        response_model=SavepointInfo,
        summary="Create a savepoint",
        responses={409: _error("The savepoint cannot be taken now; the message says why")},
    )
    async def post_savepoint(
        name: Annotated[
            str | None, Query(pattern=_NAME, description="default: <pipeline>-<UTC time>")
        ] = None,
        stop: Annotated[
            bool,
            Query(
                description="stop-with-savepoint: a final checkpoint, sinks published, "
                "every subtask stops, then the savepoint is written"
            ),
        ] = False,
    ) -> SavepointInfo | JSONResponse:
        """Ask for a savepoint; GET /savepoints/{name} shows how it goes."""
        try:
            return await view.create_savepoint(name, stop=stop)
        except SavepointRefusedError as exc:
            return _refused(exc)

    @router.get(
        "/savepoints/{name}",
        dependencies=read,
        response_model=SavepointInfo,
        summary="One savepoint",
        responses={404: _error("No savepoint of that name")},
    )
    async def get_savepoint(name: _NamePath) -> SavepointInfo | JSONResponse:
        try:
            return await view.savepoint(name)
        except SavepointNotFoundError as exc:
            return _not_found(exc)

    @router.delete(
        "/savepoints/{name}",
        dependencies=operate,
        response_model=SavepointDeleted,
        summary="Delete a savepoint",
        responses={
            404: _error("No savepoint of that name"),
            409: _error("It is being written"),
        },
    )
    async def delete_savepoint(name: _NamePath) -> SavepointDeleted | JSONResponse:
        try:
            return SavepointDeleted(name=name, files=await view.delete_savepoint(name))
        except SavepointNotFoundError as exc:
            return _not_found(exc)
        except SavepointRefusedError as exc:
            return _refused(exc)

    @router.post(
        "/checkpoints/full",
        dependencies=operate,
        status_code=202,
        response_model=FullCheckpointTriggered,
        tags=["checkpoints"],
        summary="Trigger a full checkpoint",
        responses={409: _error("A checkpoint cannot be triggered now; the message says why")},
    )
    async def post_full_checkpoint() -> FullCheckpointTriggered | JSONResponse:
        """A checkpoint whose files are its own (shared with no other checkpoint), now."""
        try:
            return FullCheckpointTriggered(checkpoint_id=await view.trigger_full_checkpoint())
        except SavepointRefusedError as exc:
            return _refused(exc)

    return router
