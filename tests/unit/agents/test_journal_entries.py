"""Journal entries: the JSON round trip, refusal of what cannot be read, and record keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from sluicegate.agents.journal import (
    SCHEMA_VERSION,
    EffectKind,
    JournalCorruptError,
    JournalEntry,
    effect_key,
    record_key,
)
from sluicegate.agents.journal.entries import UPGRADERS
from sluicegate.operators.exceptions import FatalError

FIXTURES = Path(__file__).parents[2] / "fixtures" / "journal"

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
    settled_by=st.sampled_from([None, "retry", "lookup", "call_after_lookup"]),
)
def test_an_entry_round_trips(
    status: str,
    kind: EffectKind,
    request: dict[str, object],
    result: object,
    error: str | None,
    settled_by: str | None,
) -> None:
    entry = make_entry(
        status=status, kind=kind, request=request, result=result, error=error,
        settled_by=settled_by,
    )  # fmt: skip
    assert JournalEntry.decode(entry.encode()) == entry


def test_the_encoding_is_versioned_json() -> None:
    data = json.loads(make_entry().encode())
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert data["kind"] == "tool"
    assert data["status"] == "done"
    assert data["settled_by"] is None


def test_every_version_below_the_current_one_has_an_upgrader() -> None:
    assert sorted(UPGRADERS) == list(range(1, SCHEMA_VERSION))


@pytest.mark.parametrize("status", ["issued", "done"])
def test_version_1_entries_of_the_fixtures_read_as_the_current_version(status: str) -> None:
    raw = (FIXTURES / f"entry-v1-{status}.json").read_bytes()
    assert json.loads(raw)["schema_version"] == 1
    entry = JournalEntry.decode(raw)
    assert (entry.schema_version, entry.status, entry.settled_by) == (2, status, None)
    assert entry.key == "refund-7/2/call_1"
    if status == "done":
        assert entry.result == {"refund_id": "r-7", "amount": 12.5}
    else:
        assert entry.request == {"order_id": "o-7", "amount": 12.5}


def test_version_2_entries_of_the_fixtures_read_and_keep_how_a_call_was_settled() -> None:
    done = JournalEntry.decode((FIXTURES / "entry-v2-done-retried.json").read_bytes())
    assert (done.status, done.settled_by, done.attempt) == ("done", "retry", 2)
    issued = JournalEntry.decode((FIXTURES / "entry-v2-issued.json").read_bytes())
    assert (issued.status, issued.settled_by) == ("issued", None)
    # The current code writes what the fixture holds, byte for byte.
    assert done.encode() + b"\n" == (FIXTURES / "entry-v2-done-retried.json").read_bytes()


def test_an_unknown_settlement_is_refused() -> None:
    raw = make_entry(settled_by="retry").encode().replace(b'"retry"', b'"guess"')
    with pytest.raises(JournalCorruptError, match="invalid entry"):
        JournalEntry.decode(raw)


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
    data["schema_version"] = 3
    data["new_field"] = "from the future"
    with pytest.raises(
        JournalCorruptError, match=r"schema_version 3 is newer than this code's \(2\)"
    ) as caught:
        JournalEntry.decode(json.dumps(data).encode())
    assert "run the code that wrote it, or newer" in caught.value.problem


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
