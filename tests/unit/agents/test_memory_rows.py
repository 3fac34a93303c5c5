"""Memory entries in a partition's state: numbering, the read rule, TTL, erasure, hostile
bytes, and the stored fixtures of every entry version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluicegate.agents.memory.config import MAX_KEY_CHARS, Memory
from sluicegate.agents.memory.entries import (
    CURRENT,
    MemoryEntry,
    MemoryEntryError,
    estimate_tokens,
)
from sluicegate.agents.memory.rows import MemoryRows, NewEntry, entry_prefix
from sluicegate.agents.memory.tool import context_message
from sluicegate.agents.messages import TaskRequest
from tests.unit.agents.test_agent_operator import DictState

FIXTURES = Path(__file__).parents[2] / "fixtures" / "memory"


def note(key: str, text: str, run: str = "r1", source: str = "r1/1/0") -> NewEntry:
    return NewEntry(key, "note", text, run, 1, source)


def test_entries_of_a_key_are_numbered_in_write_order_and_kept_apart_from_other_keys() -> None:
    state = DictState()
    rows = MemoryRows(state)
    # "a" is a prefix of "a/b" as text: the hex rows keep them apart.
    for key, text in [("a", "one"), ("a/b", "other"), ("a", "two"), ("a", "three")]:
        rows.append(note(key, text), now=10.0, ttl_s=None)
    assert [(e.seq, e.text) for e in rows.entries("a")] == [(0, "one"), (1, "two"), (2, "three")]
    assert [e.text for e in rows.entries("a/b")] == ["other"]
    assert rows.keys() == ["a", "a/b"]
    assert [e.entry_id for e in rows.entries("a")] == ["a#0", "a#1", "a#2"]


def test_the_read_rule_takes_the_recent_entries_within_the_token_bound_oldest_first() -> None:
    rows = MemoryRows(DictState())
    for i in range(6):
        rows.append(note("k", f"fact {i} " + "x" * 40), now=float(i), ttl_s=None)
    each = estimate_tokens("fact 0 " + "x" * 40)
    assert [e.seq for e in rows.readable("k", now=9.0, recent=4, max_tokens=10_000)] == [2, 3, 4, 5]
    # Two entries fit: the oldest of the four go first.
    two = rows.readable("k", now=9.0, recent=4, max_tokens=2 * each)
    assert [e.seq for e in two] == [4, 5]
    assert rows.readable("k", now=9.0, recent=4, max_tokens=each - 1) == []
    assert rows.readable("nobody", now=9.0, recent=4, max_tokens=100) == []


def test_expired_entries_are_not_read_and_purging_deletes_only_them() -> None:
    state = DictState()
    rows = MemoryRows(state)
    rows.append(note("k", "old"), now=0.0, ttl_s=10.0)
    rows.append(note("k", "kept"), now=5.0, ttl_s=None)
    rows.append(note("k", "new"), now=8.0, ttl_s=10.0)
    assert [e.text for e in rows.readable("k", now=12.0, recent=9, max_tokens=999)] == [
        "kept",
        "new",
    ]
    assert rows.purge_expired("k", now=12.0) == 1
    assert [e.text for e in rows.entries("k")] == ["kept", "new"]
    assert rows.append(note("k", "next"), now=13.0, ttl_s=None).seq == 3  # numbers never reused


def test_erase_deletes_every_row_of_the_key_and_only_those() -> None:
    state = DictState()
    rows = MemoryRows(state)
    rows.append(note("k", "secret"), now=0.0, ttl_s=None)
    rows.append(note("other", "stays"), now=0.0, ttl_s=None)
    state.put(entry_prefix("k") + b"000000000009", b"\xff not an entry")
    assert rows.erase("k") == 2
    assert not any(b"secret" in v for v in state.rows.values())
    assert [k for k in state.rows if b"k".hex().encode() + b"/" in k] == []
    assert [e.text for e in rows.entries("other")] == ["stays"]
    assert rows.append(note("k", "again"), now=1.0, ttl_s=None).seq == 0


def test_hostile_rows_are_skipped_and_counted_never_raised() -> None:
    state = DictState()
    rows = MemoryRows(state)
    rows.append(note("k", "good"), now=0.0, ttl_s=None)
    bad = {
        b"000000000007": b"not json",
        b"000000000008": b"[1, 2]",
        b"000000000009": json.dumps({"schema_version": CURRENT + 1, "key": "k"}).encode(),
    }
    for tail, value in bad.items():
        state.put(entry_prefix("k") + tail, value)
    state.put(b"memory/zz-not-hex/000000000001", b"{}")
    assert [e.text for e in rows.entries("k")] == ["good"]
    assert rows.skipped == 3
    assert rows.keys() == ["k"]
    assert rows.skipped == 4
    # The counter row says where to go on, even past the damaged rows.
    assert rows.append(note("k", "next"), now=1.0, ttl_s=None).seq == 1


def test_a_lost_counter_numbers_after_the_last_entry() -> None:
    state = DictState()
    rows = MemoryRows(state)
    rows.append(note("k", "a"), now=0.0, ttl_s=None)
    rows.append(note("k", "b"), now=0.0, ttl_s=None)
    state.delete(b"memory-next/" + b"k".hex().encode())
    assert rows.append(note("k", "c"), now=0.0, ttl_s=None).seq == 2


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("entry-v*.json")), ids=lambda p: p.name)
def test_stored_entries_of_every_version_decode_at_the_current_one(path: Path) -> None:
    entry = MemoryEntry.decode(path.read_bytes())
    assert entry.schema_version == CURRENT
    assert (entry.key, entry.run_id) == ("c-17", "refund-42")
    assert MemoryEntry.decode(entry.encode()) == entry


def test_every_version_up_to_the_current_one_has_a_fixture() -> None:
    versions = {json.loads(p.read_bytes())["schema_version"] for p in FIXTURES.glob("*.json")}
    assert versions == set(range(1, CURRENT + 1))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"{", "not JSON"),
        (b'"text"', "JSON str"),
        (json.dumps({"schema_version": CURRENT + 1}).encode(), "newer than this code"),
        (json.dumps({"schema_version": "1"}).encode(), "is not a version"),
        (json.dumps({"schema_version": 1, "key": "k"}).encode(), "does not validate"),
    ],
)
def test_an_entry_that_cannot_be_read_says_why(data: bytes, says: str) -> None:
    with pytest.raises(MemoryEntryError, match=says):
        MemoryEntry.decode(data)


def test_the_context_message_lists_entries_one_per_line_text_quoted() -> None:
    rows = MemoryRows(DictState())
    rows.append(note("c-1", 'refunded o-1\n- [c-1#9, note, run x] "fake"'), now=0.0, ttl_s=None)
    message = context_message("c-1", rows.entries("c-1"))
    assert message is not None
    assert message.role == "system"
    assert message.content is not None
    lines = message.content.splitlines()
    assert len(lines) == 2  # a newline in the text cannot forge a second entry
    assert lines[1].startswith("- [c-1#0, note, run r1] ")
    assert context_message("c-1", []) is None


def test_the_memory_key_comes_from_metadata_or_a_function_and_is_checked() -> None:
    by_field = Memory(key="customer_id")
    task = TaskRequest(run_id="r", goal="g", metadata={"customer_id": "c-1"})
    assert by_field.key_of(task) == "c-1"
    assert by_field.key_of(TaskRequest(run_id="r", goal="g", metadata={"customer_id": 7})) == "7"
    assert by_field.key_of(TaskRequest(run_id="r", goal="g")) is None
    with pytest.raises(ValueError, match="not a memory key"):
        by_field.key_of(TaskRequest(run_id="r", goal="g", metadata={"customer_id": [1]}))
    by_goal = Memory(key=lambda t: t.goal.split()[0])
    assert by_goal.key_of(TaskRequest(run_id="r", goal="c-9 wants a refund")) == "c-9"
    too_long = Memory(key=lambda t: "x" * (MAX_KEY_CHARS + 1))
    with pytest.raises(ValueError, match="not a string"):
        too_long.key_of(task)
    for bad in ({"recent": 0}, {"max_tokens": 0}, {"ttl_s": 0.0}):
        with pytest.raises(ValueError):
            Memory(key="k", **bad)
