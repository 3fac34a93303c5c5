"""`markup`: everything that is not `Safe` is escaped, in content and in attributes alike."""

from __future__ import annotations

from sluicegate.console.inbox import WaitingCall
from sluicegate.console.markup import Safe, join, seconds, size, table, tag, text
from sluicegate.console.pages import approvals_body

EVIL = '"><script>alert(1)</script><a x="'


def test_text_escapes_markup_and_quotes() -> None:
    assert text(EVIL) == "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;a x=&quot;"
    assert text(None) == ""
    assert text(Safe("<b>")) == "<b>"


def test_attributes_and_content_are_escaped() -> None:
    made = tag("a", EVIL, href=EVIL, class_="x", hidden=True, title=None)
    assert "<script>" not in made
    assert made.startswith('<a href="&quot;&gt;&lt;script&gt;')
    assert ' class="x" hidden>' in made
    assert "title" not in made


def test_joining_plain_strings_escapes_them() -> None:
    assert join(["<i>", tag("b", "<i>")]) == "&lt;i&gt;<b>&lt;i&gt;</b>"


def test_a_table_escapes_cells_and_says_when_it_is_empty() -> None:
    assert "&lt;script&gt;" in table("t", ["a"], [[EVIL]])
    assert ">none</td>" in table("t", ["a", "b"], [])


def test_a_waiting_call_from_hostile_names_renders_inert() -> None:
    call = WaitingCall(EVIL, EVIL, EVIL, EVIL, {EVIL: EVIL}, None, EVIL, 1)
    page = approvals_body(
        [call], 0.0, can_approve=True, csrf=EVIL, prefix="/console/", message=EVIL, error=EVIL
    )
    assert "<script>" not in page
    assert "<script" not in page


def test_durations_and_sizes_read_as_a_person_would() -> None:
    assert [seconds(0.42), seconds(12), seconds(185), seconds(7260)] == [
        "0.42 s", "12 s", "3 min 5 s", "2 h 1 min",
    ]  # fmt: skip
    assert [size(512), size(1536), size(3 * 1024 * 1024)] == ["512 B", "1.5 KiB", "3.0 MiB"]
