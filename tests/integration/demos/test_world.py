"""The refund desk's world over real HTTP: effects once per idempotency key, duplicates counted,
faults before and after executing. Needs no Kafka broker.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from sluicegate.demos.refund_desk.exceptions import WorldRejectedError, WorldUnavailableError
from sluicegate.demos.refund_desk.world import WorldServer
from sluicegate.demos.refund_desk.world_client import WorldClient
from sluicegate.demos.refund_desk.world_state import WorldState

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def world() -> Iterator[WorldServer]:
    with WorldServer(WorldState()) as server:
        yield server


@pytest.fixture
async def client(world: WorldServer) -> AsyncIterator[WorldClient]:
    async with WorldClient(world.url, timeout=5.0) as client:
        yield client


async def test_order_lookup_is_deterministic(client: WorldClient) -> None:
    order = await client.get_order("ord-1001")
    assert order == await client.get_order("ord-1001")
    assert set(order) == {"order_id", "customer", "email", "amount", "currency", "status"}
    assert 5 <= order["amount"] <= 500
    assert round(order["amount"], 2) == order["amount"]
    assert order != await client.get_order("ord-1002")


async def test_malformed_order_id_is_404(client: WorldClient) -> None:
    with pytest.raises(WorldRejectedError) as caught:
        await client.get_order("ORDER 1")
    assert caught.value.status_code == 404
    assert caught.value.error == "order_not_found"


async def test_refund_executes_once_and_replays_with_the_same_key(client: WorldClient) -> None:
    first = await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    again = await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    assert again == first
    assert first["status"] == "issued"
    stats = await client.stats()
    assert (stats["effects"], stats["replays"], stats["duplicates"]) == (1, 1, 0)
    assert stats["refunds_active"] == 1


async def test_two_keys_refunding_one_order_count_a_duplicate(client: WorldClient) -> None:
    await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    await client.issue_refund("ord-1001", 5.0, "run-1", key="k2")
    stats = await client.stats()
    assert (stats["effects"], stats["duplicates"], stats["refunds_active"]) == (2, 1, 2)


async def test_too_high_amount_is_rejected_and_the_rejection_is_stored(
    client: WorldClient,
) -> None:
    order = await client.get_order("ord-1001")
    for _ in range(2):
        with pytest.raises(WorldRejectedError) as caught:
            await client.issue_refund("ord-1001", order["amount"] + 1, "run-1", key="k1")
        assert (caught.value.status_code, caught.value.error) == (422, "invalid_amount")
    stored = await client.find_effect("k1")
    assert stored is not None
    assert stored["status_code"] == 422
    stats = await client.stats()
    assert (stats["effects"], stats["rejected"], stats["replays"]) == (0, 1, 1)


async def test_effects_need_an_idempotency_key(world: WorldServer) -> None:
    async with httpx.AsyncClient(base_url=world.url) as http:
        response = await http.post(
            "/refunds", json={"order_id": "ord-1001", "amount": 5.0, "run_id": "run-1"}
        )
    assert response.status_code == 400
    assert response.json()["error"] == "missing_idempotency_key"
    assert world.state.stats()["effects"] == 0


async def test_find_effect_before_and_after(client: WorldClient) -> None:
    key = "run-1/step-3:refund"  # a slash must survive the path
    assert await client.find_effect(key) is None
    refund = await client.issue_refund("ord-1001", 5.0, "run-1", key=key)
    assert await client.find_effect(key) == {"status_code": 201, "body": refund}


async def test_fault_before_executing_then_retry_executes_once(
    world: WorldServer, client: WorldClient
) -> None:
    world.state.set_faults(1, "before")
    with pytest.raises(WorldUnavailableError) as caught:
        await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    assert caught.value.status_code == 503
    assert await client.find_effect("k1") is None
    world.state.set_faults(0)
    await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    stats = await client.stats()
    assert (stats["effects"], stats["duplicates"], stats["faults"]) == (1, 0, 1)


async def test_fault_after_executing_leaves_the_effect_findable(
    world: WorldServer, client: WorldClient
) -> None:
    async with httpx.AsyncClient(base_url=world.url) as http:
        faults = await http.post("/admin/faults", json={"every": 2, "mode": "after"})
    assert faults.status_code == 200
    await client.send_email("a@example.com", "hello", "hi", "run-1", key="k1")
    with pytest.raises(WorldUnavailableError):
        await client.issue_refund("ord-1001", 5.0, "run-1", key="k2")
    found = await client.find_effect("k2")
    assert found is not None
    assert found["body"]["status"] == "issued"
    refund = await client.issue_refund("ord-1001", 5.0, "run-1", key="k2")  # 3rd: no fault
    assert refund == found["body"]
    stats = await client.stats()
    assert (stats["effects"], stats["replays"], stats["duplicates"]) == (2, 1, 0)


async def test_reverse_refund(client: WorldClient) -> None:
    refund = await client.issue_refund("ord-1001", 5.0, "run-1", key="k1")
    reversed_ = await client.reverse_refund(refund["refund_id"], key="r1")
    assert reversed_["status"] == "reversed"
    assert await client.reverse_refund(refund["refund_id"], key="r1") == reversed_
    assert (await client.stats())["duplicates"] == 0
    await client.reverse_refund(refund["refund_id"], key="r2")
    stats = await client.stats()
    assert (stats["duplicates"], stats["refunds_active"]) == (1, 0)
    # a new refund of a reversed order is not a duplicate
    await client.issue_refund("ord-1001", 5.0, "run-2", key="k2")
    assert (await client.stats())["duplicates"] == 1
    with pytest.raises(WorldRejectedError) as caught:
        await client.reverse_refund("ref-999999", key="r3")
    assert caught.value.status_code == 404


async def test_same_run_and_subject_under_two_keys_is_a_duplicate_email(
    world: WorldServer, client: WorldClient
) -> None:
    await client.send_email("a@example.com", "Your refund", "done", "run-1", key="e1")
    await client.send_email("a@example.com", "Your refund", "done", "run-1", key="e1")
    await client.send_email("a@example.com", "Your refund", "done", "run-2", key="e2")
    assert (await client.stats())["duplicates"] == 0
    await client.send_email("a@example.com", "Your refund", "again", "run-1", key="e3")
    stats = await client.stats()
    assert (stats["emails"], stats["duplicates"], stats["replays"]) == (3, 1, 1)
    snapshot = world.state.snapshot()
    assert [e["duplicate"] for e in snapshot["effects"]] == [False, False, True]


async def test_unreachable_world_is_retryable() -> None:
    with WorldServer() as server:
        url = server.url
    async with WorldClient(url, timeout=1.0) as client:
        with pytest.raises(WorldUnavailableError) as caught:
            await client.stats()
    assert caught.value.status_code is None


def test_module_cli_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sluicegate.demos.refund_desk.world", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--port" in done.stdout
