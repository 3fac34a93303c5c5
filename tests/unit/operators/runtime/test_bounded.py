"""Bounded text: record-derived data in a log line is cut to a few hundred characters and says
how large the whole was; short text passes unchanged."""

from __future__ import annotations

from sluicegate.operators.runtime.bounded import (
    MAX_LOGGED_CHARS,
    bounded_repr,
    bounded_text,
    error_text,
)

HUGE = b"\xff" * 900_000


def undecodable() -> UnicodeDecodeError:
    try:
        HUGE.decode()
    except UnicodeDecodeError as exc:
        return exc
    raise AssertionError("decoded")


def test_short_text_passes_unchanged() -> None:
    assert bounded_text("fine") == "fine"
    assert bounded_repr(b"k1") == "b'k1'"
    assert error_text(RuntimeError("cannot shout boom")) == "RuntimeError: cannot shout boom"
    assert error_text(RuntimeError()) == "RuntimeError"


def test_a_huge_value_is_cut_and_says_its_size() -> None:
    text = bounded_repr(HUGE)
    assert len(text) < MAX_LOGGED_CHARS + 40
    assert text.startswith("b'\\xff")
    assert text.endswith("… (900000 bytes)")
    assert bounded_repr("é" * 1000).endswith("… (2000 bytes)")


def test_a_unicode_decode_error_never_carries_its_value() -> None:
    error = undecodable()
    assert len(repr(error)) > 3_000_000  # what the dead-letter warning used to log
    assert error_text(error) == (
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    )
    assert len(bounded_repr(error)) <= MAX_LOGGED_CHARS


def test_a_huge_error_message_is_cut() -> None:
    text = error_text(ValueError("x" * 1_000_000))
    assert text.startswith("ValueError: xxx")
    assert text.endswith("… (1000012 bytes)")
    assert len(text) < MAX_LOGGED_CHARS + 40
