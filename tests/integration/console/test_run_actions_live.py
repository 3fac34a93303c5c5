"""Fork with a patch on recorded results only, and a forced rollback, from the console's run
page against a real broker: the commands are written by the same functions as ``sluicegate
runs fork|rollback`` and the API (`request_fork`, `request_rollback`), with the same
refusals, under the signed-in name."""

from __future__ import annotations

import re
import time

import httpx
from fastapi import FastAPI

from bench.console_runs import create_topic, write_events
from sluicegate.agents.declaration import AgentTopics
from sluicegate.agents.messages import ForkRun, RollbackRun, RunCommand, parse_command
from sluicegate.console import AgentDesk
from sluicegate.console.routes.requests import ConsoleRequests
from sluicegate.console.routes.runs import runs_router
from sluicegate.coordinator.httpapi.sessions import Sessions
from sluicegate.operators.kafka import clients as kafka_clients
from tests.unit.agents.test_fork import parent
from tests.unit.agents.test_replay import events_of

PARTITIONS = 3


async def commands(bootstrap: str, topic: str) -> list[RunCommand]:
    """Every command on ``topic``, read to its end."""
    consumer = kafka_clients.consumer(
        bootstrap, topic, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        found: list[RunCommand] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assigned = consumer.assignment()
            if assigned:
                ends = await consumer.end_offsets(list(assigned))
                positions = {tp: await consumer.position(tp) for tp in assigned}
                if all(positions[tp] >= end for tp, end in ends.items()):
                    return found
            for records in (await consumer.getmany(timeout_ms=200)).values():
                found.extend(parse_command(r.value) for r in records)
        raise AssertionError(f"{topic} not read to its end in 20 s")
    finally:
        await consumer.stop()


async def test_fork_with_a_patch_and_a_forced_rollback_from_the_run_page(
    kafka_bootstrap: str,
) -> None:
    desk_world = await parent()  # run r1: three steps, one effect, done
    events_topic = await create_topic(kafka_bootstrap, PARTITIONS)
    approvals = await create_topic(kafka_bootstrap, 1)
    assert await write_events(kafka_bootstrap, events_topic, PARTITIONS, events_of(desk_world))
    topics = AgentTopics(tasks="t", approvals=approvals, events=events_topic, results="r")
    requests = ConsoleRequests(
        prefix="/console/", tokens=None, sessions=Sessions(), pages=[("runs", "Runs")]
    )
    app = FastAPI()
    app.include_router(
        runs_router(requests, AgentDesk(kafka_bootstrap, {"desk": topics}), clock=time.time)
    )

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        asking = await client.get("/console/runs/desk/r1/act?action=fork&step=1")
        assert asking.status_code == 200, asking.text[:500]
        found = re.search(r'name="csrf" value="([^"]+)"', asking.text)
        assert found is not None
        csrf = found.group(1)

        async def post(action: str, **fields: str) -> str:
            form = {"csrf": csrf, "confirm": "yes", **fields}
            answer = await client.post(f"/console/runs/desk/r1/{action}", data=form)
            assert answer.status_code == 303, answer.text[:500]
            return (await client.get("/console/runs/desk/r1")).text

        page = await post("fork", step="1", patch='{"goal": "refund half"}', recorded_only="yes")
        assert "(goal replaced), on recorded results only requested by unauthenticated." in page
        refused = await post("fork", step="7")  # a step r1 never settled at
        assert "Nothing done: cannot fork run &#x27;r1&#x27; after step 7" in refused

        ghost = await client.post(
            "/console/runs/desk/ghost/rollback",
            data={"csrf": csrf, "confirm": "yes", "step": "0"},
        )
        assert ghost.status_code == 303
        said = (await client.get("/console/runs/desk/r1")).text  # the notice waits for a page
        assert "Nothing done: agent &#x27;desk&#x27; has no run &#x27;ghost&#x27;" in said
        forced = await client.post(
            "/console/runs/desk/ghost/rollback",
            data={"csrf": csrf, "confirm": "yes", "step": "0", "force": "yes"},
        )
        assert forced.status_code == 303
        page = await post("rollback", step="1", reason="wrong refund")
        assert "Rollback of run r1 to step 1 requested by unauthenticated." in page

    written = await commands(kafka_bootstrap, approvals)
    assert [type(c) for c in written] == [ForkRun, RollbackRun, RollbackRun]
    fork, ghost_rollback, rollback = written
    assert isinstance(fork, ForkRun)
    assert (fork.parent_run_id, fork.from_step, fork.recorded_only) == ("r1", 1, True)
    assert (fork.note, fork.by) == ("goal replaced", "unauthenticated")
    assert isinstance(ghost_rollback, RollbackRun)
    assert (ghost_rollback.run_id, ghost_rollback.to_step) == ("ghost", 0)
    assert isinstance(rollback, RollbackRun)
    assert (rollback.run_id, rollback.to_step, rollback.reason) == ("r1", 1, "wrong refund")
