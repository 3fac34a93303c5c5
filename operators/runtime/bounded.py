"""Bounded text of record-derived data for log lines, dead-letter headers and failure reports.

A record's key or value, and the message of an exception raised on it, can be megabytes (the
``repr`` of a `UnicodeDecodeError` holds the whole undecodable value). Whatever carries such
text to a log line goes through `bounded_text`, `bounded_repr` or `error_text`, which keep the
first `MAX_LOGGED_CHARS` characters and say how long the whole was::

    b'\\xff\\xfe...'… (921600 bytes)
"""

from __future__ import annotations

__all__ = ["MAX_LOGGED_CHARS", "bounded_repr", "bounded_text", "error_text"]

MAX_LOGGED_CHARS = 300
"""Characters of record-derived text kept in one log line."""


def bounded_text(text: str, limit: int = MAX_LOGGED_CHARS) -> str:
    """``text`` if at most ``limit`` characters, else its head and ``… (N bytes)``: N is the
    size of the whole in UTF-8."""
    if len(text) <= limit:
        return text
    size = len(text.encode(errors="replace"))
    return f"{text[:limit]}… ({size} bytes)"


def bounded_repr(value: object, limit: int = MAX_LOGGED_CHARS) -> str:
    """``repr(value)``, bounded; bytes and text are cut before the ``repr`` is built, so a large
    value is never copied whole."""
    if isinstance(value, bytes | bytearray):
        if len(value) <= limit:
            return repr(value)
        return f"{repr(value[:limit])[:limit]}… ({len(value)} bytes)"
    if isinstance(value, str) and len(value) > limit:
        return f"{repr(value[:limit])[:limit]}… ({len(value.encode(errors='replace'))} bytes)"
    if isinstance(value, BaseException):
        return error_text(value, limit)
    return bounded_text(repr(value), limit)


def error_text(error: BaseException, limit: int = MAX_LOGGED_CHARS) -> str:
    """``"<Type>: <message>"`` of ``error``, bounded; never its ``repr``, which for a
    `UnicodeDecodeError` holds the whole value it failed on."""
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break the report of the error
        message = "<unprintable>"
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return bounded_text(text, limit)
