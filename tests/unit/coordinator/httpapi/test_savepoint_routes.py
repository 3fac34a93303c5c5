"""The savepoint routes of the HTTP API over a fake view: answers, refusals and names."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from sluicegate.coordinator.httpapi.savepoint_models import SavepointInfo
from sluicegate.coordinator.httpapi.savepoints import savepoints_router
from sluicegate.operators.savepoints.exceptions import SavepointNotFoundError, SavepointRefusedError


class FakeView:
    def __init__(self) -> None:
        self.stored = {"a": SavepointInfo(name="a", status="stored", rows=3)}
        self.asked: list[tuple[str | None, bool]] = []
        self.full = 0

    async def savepoints(self) -> list[SavepointInfo]:
        return list(self.stored.values())

    async def savepoint(self, name: str) -> SavepointInfo:
        if name not in self.stored:
            raise SavepointNotFoundError(name)
        return self.stored[name]

    async def create_savepoint(self, name: str | None, *, stop: bool) -> SavepointInfo:
        self.asked.append((name, stop))
        if name in self.stored:
            raise SavepointRefusedError("a savepoint named 'a' exists already", "Choose another")
        return SavepointInfo(name=name or "default", status="waiting", stop=stop)

    async def trigger_full_checkpoint(self) -> int:
        self.full += 1
        if self.full > 1:
            raise SavepointRefusedError("a checkpoint is in flight", "Try again in a moment")
        return 7

    async def delete_savepoint(self, name: str) -> int:
        if name not in self.stored:
            raise SavepointNotFoundError(name)
        del self.stored[name]
        return 4


def client() -> tuple[httpx.AsyncClient, FakeView]:
    view = FakeView()
    app = FastAPI()
    app.include_router(savepoints_router(view))
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://api"), view


async def test_create_answers_202_with_the_request() -> None:
    http, view = client()
    answer = await http.post("/savepoints", params={"name": "b", "stop": "true"})
    assert answer.status_code == 202
    assert answer.json()["status"] == "waiting"
    assert view.asked == [("b", True)]
    assert (await http.post("/savepoints")).json()["name"] == "default"


async def test_a_refusal_is_409_with_what_to_do() -> None:
    http, _ = client()
    answer = await http.post("/savepoints", params={"name": "a"})
    assert answer.status_code == 409
    assert answer.json() == {
        "error": "savepoint_refused",
        "message": "a savepoint named 'a' exists already",
        "what_to_do": "Choose another",
    }


async def test_names_that_are_paths_never_reach_the_view() -> None:
    http, view = client()
    for name in ("../x", ".hidden", "a/b", "x" * 201):
        assert (await http.post("/savepoints", params={"name": name})).status_code == 422
    assert (await http.get("/savepoints/..%2Fx")).status_code in (404, 422)
    assert view.asked == []


async def test_get_list_and_delete() -> None:
    http, _ = client()
    assert [s["name"] for s in (await http.get("/savepoints")).json()] == ["a"]
    assert (await http.get("/savepoints/a")).json()["rows"] == 3
    assert (await http.get("/savepoints/zz")).status_code == 404
    assert (await http.delete("/savepoints/a")).json() == {"name": "a", "files": 4}
    missing = await http.delete("/savepoints/a")
    assert missing.status_code == 404
    assert missing.json()["error"] == "savepoint_not_found"


async def test_a_full_checkpoint_on_demand() -> None:
    http, _ = client()
    first = await http.post("/checkpoints/full")
    assert first.status_code == 202
    assert first.json() == {"checkpoint_id": 7}
    second = await http.post("/checkpoints/full")
    assert second.status_code == 409
    assert second.json()["what_to_do"] == "Try again in a moment"
