"""HTML for the console: escaping by default, and the frame every page shares.

Every value a page shows comes from a topic, a run, a tool's arguments or a request, and is
hostile: `text` escapes it (quotes included, so it is safe in an attribute too). The only way
to put markup into a page is `Safe`, which the functions of this module and `pages` return;
everything else that reaches `join`, `table` or `tag` is escaped. No template engine, no
script, no asset from elsewhere: one stylesheet served by the console itself.
"""

from __future__ import annotations

import datetime
import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "Safe",
    "ago",
    "frame",
    "hidden_csrf",
    "join",
    "pretty_json",
    "seconds",
    "size",
    "table",
    "tag",
    "text",
    "when",
]


class Safe(str):
    """Markup built by this package: inserted as is. Anything else is escaped."""

    __slots__ = ()


def text(value: object) -> Safe:
    """``value`` as text in HTML (``<script>`` shows as ``<script>``, never runs)."""
    if isinstance(value, Safe):
        return value
    return Safe(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], separator: str = "") -> Safe:
    return Safe(separator.join(text(part) for part in parts))


def tag(element: str, content: object = "", /, **attributes: object) -> Safe:
    """``<element attr="...">content</element>``; attribute values and content are escaped, a
    trailing ``_`` is dropped from an attribute's name (``class_``), ``True`` is a bare one."""
    attrs = "".join(
        f" {key.rstrip('_').replace('_', '-')}" + ("" if value is True else f'="{text(value)}"')
        for key, value in attributes.items()
        if value is not None and value is not False
    )
    return Safe(f"<{element}{attrs}>{text(content)}</{element}>")


def table(caption: str, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> Safe:
    """A data table with a caption (what screen readers announce) and column headers."""
    head = join(tag("th", h, scope="col") for h in headers)
    body = join(tag("tr", join(tag("td", cell) for cell in row)) for row in rows)
    if not body:
        body = tag("tr", tag("td", "none", colspan=len(headers), class_="empty"))
    return tag(
        "table", join([tag("caption", caption), tag("thead", tag("tr", head)), tag("tbody", body)])
    )


def pretty_json(value: Any) -> Safe:
    """``value`` as indented JSON in a ``<pre>``, escaped."""
    return tag("pre", json.dumps(value, indent=2, sort_keys=True, default=str))


def when(unix: float | None) -> str:
    """A unix time as UTC, e.g. ``2026-12-03 14:30:02Z``; an em dash for none."""
    if unix is None:
        return "—"
    moment = datetime.datetime.fromtimestamp(unix, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def seconds(value: float | None) -> str:
    """A duration for a person: ``0.42 s``, ``12 s``, ``3 min 5 s``, ``2 h 1 min``."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f} s"
    whole = int(value)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def ago(unix: float | None, now: float) -> str:
    return "—" if unix is None else seconds(max(0.0, now - unix))


def size(count: int | None) -> str:
    """Bytes for a person: ``512 B``, ``1.5 KiB``, ``3.2 MiB``."""
    if count is None:
        return "—"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def frame(
    title: str,
    body: Safe,
    *,
    active: str,
    prefix: str,
    who: str | None,
    csrf: str | None,
    pages: Sequence[tuple[str, str]],
    refresh_seconds: int | None = None,
) -> str:
    """A whole page: the skip link, the navigation (``pages``: path, label), who is signed
    in with a sign-out button, then ``body`` under an ``<h1>`` of ``title``; with
    ``refresh_seconds``, the browser reloads it that often (a ``<meta http-equiv="refresh">``:
    no script)."""
    links = join(
        tag(
            "li",
            tag(
                "a",
                label,
                href=f"{prefix}{path}",
                aria_current="page" if path == active else None,
            ),
        )
        for path, label in pages
    )
    account: Safe = Safe("")
    if who is not None:
        sign_out = join(
            [
                Safe(f'<form method="post" action="{text(prefix)}sign-out" class="inline">'),
                hidden_csrf(csrf),
                tag("button", "Sign out", type="submit"),
                Safe("</form>"),
            ]
        )
        account = tag("div", join([tag("span", f"Signed in as {who}"), sign_out]), class_="who")
    header = tag(
        "header",
        join(
            [
                tag("span", "sluicegate", class_="brand"),
                tag("nav", tag("ul", links), aria_label="Console"),
                account,
            ]
        ),
    )
    main = tag("main", join([tag("h1", title), body]), id="main", tabindex="-1")
    head = join(
        [
            Safe('<meta charset="utf-8">'),
            Safe('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            tag("title", f"{title} · sluicegate console"),
            Safe(f'<link rel="stylesheet" href="{text(prefix)}console.css">'),
            Safe(f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">')
            if refresh_seconds
            else Safe(""),
        ]
    )
    skip = tag("a", "Skip to content", href="#main", class_="skip")
    return "<!doctype html>" + tag(
        "html", join([tag("head", head), tag("body", join([skip, header, main]))]), lang="en"
    )


def hidden_csrf(csrf: str | None) -> Safe:
    """The anti-forgery field every state-changing form carries."""
    if csrf is None:
        return Safe("")
    return Safe(f'<input type="hidden" name="csrf" value="{text(csrf)}">')
