"""Journal entries: the JSON round trip, refusal of what cannot be read, and record keys."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from sluicegate.agents.journal import (
    EffectKind,
    JournalCorruptError,
    JournalEntry,
    effect_key,
    record_key,
)
from sluicegate.operators.exceptions import FatalError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def make_entry(**fields: object) -> JournalEntry:
    base: dict[str, object] = {
        "key": "run-1/2/0",
        "run_id": "run-1",
        "status": "done",
        "kind": EffectKind.TOOL,
        "name": "issue_refund",
        "result": {"refund_id": "r-9", "amount": 12.5},
        "attempt": 3,
        "written_at": 1700000000.25,
    }
    return JournalEntry.model_validate(base | fields)


@given(
    status=st.sampled_from(["issued", "done"]),
    kind=st.sampled_from(EffectKind),
    request=st.dictionaries(st.text(), JSON, max_size=3),
    result=JSON,
    error=st.none() | st.text(),
)
def test_an_entry_round_trips(
    status: str, kind: EffectKind, request: dict[str, object], result: object, error: str | None
) -> None:
    entry = make_entry(status=status, kind=kind, request=request, result=result, error=error)
    assert JournalEntry.decode(entry.encode()) == entry


def test_the_encoding_is_versioned_json() -> None:
    data = json.loads(make_entry().encode())
    assert data["schema_version"] == 1
    assert data["kind"] == "tool"
    assert data["status"] == "done"


def test_entries_are_frozen() -> None:
    entry = make_entry()
    with pytest.raises(ValueError, match="frozen"):
        entry.attempt = 4


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param(b"\xff\xfe", "not JSON", id="not-utf8"),
        pytest.param(b"{not json", "not JSON", id="not-json"),
        pytest.param(b"[1, 2]", "not a JSON object", id="a-list"),
        pytest.param(b'{"schema_version": 1, "key": "k"}', "invalid entry", id="missing-fields"),
        pytest.param(
            make_entry().encode().replace(b'"done"', b'"maybe"'), "invalid entry", id="bad-status"
        ),
    ],
)
def test_garbage_is_refused_with_a_clear_error(raw: bytes, problem: str) -> None:
    with pytest.raises(JournalCorruptError) as caught:
        JournalEntry.decode(raw)
    assert isinstance(caught.value, FatalError)
    assert caught.value.problem.startswith(problem)
    assert caught.value.raw == raw
    assert "corrupt journal record" in str(caught.value)


def test_a_newer_schema_version_is_refused_not_guessed() -> None:
    data = json.loads(make_entry().encode())
    data["schema_version"] = 2
    data["new_field"] = "from the future"
    with pytest.raises(JournalCorruptError, match="schema_version 2 is newer than 1") as caught:
        JournalEntry.decode(json.dumps(data).encode())
    assert "upgrade" in caught.value.problem


def test_the_error_shows_only_a_preview_of_a_long_record() -> None:
    raw = b"x" * 10_000
    with pytest.raises(JournalCorruptError) as caught:
        JournalEntry.decode(raw)
    assert len(str(caught.value)) < 300
    assert caught.value.raw == raw


def test_effect_keys_are_deterministic_and_attempt_independent() -> None:
    assert effect_key("run-1", 4, 0) == "run-1/4/0"
    assert effect_key("run-1", 4, "call_abc") == "run-1/4/call_abc"
    assert effect_key("run-1", 4, 0) != effect_key("run-1", 4, 1)
    assert effect_key("run-1", 4, 0) != effect_key("run-1", 5, 0)


def test_issued_and_done_have_separate_record_keys() -> None:
    assert record_key("run-1/4/0", "issued") == b"run-1/4/0|issued"
    assert record_key("run-1/4/0", "done") == b"run-1/4/0|done"
