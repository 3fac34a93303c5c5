"""Page views per minute, as faust's documentation writes a windowed table ("Windowing" in its
tables guide): ``app.Table(default=int).tumbling(60, expires=...).relative_to_stream()``, the
count of the view's minute ``+= 1``, and each new count (``.current()``) sent to a topic.

Also the same views in hopping windows of 2 minutes every minute (each view counts in two
windows), and per wall-clock minute (``.relative_to_now()``, read with ``.now()``).

Topics ``views-<tag>`` (json page names, keyed by the page's name, timestamped when viewed) and
``view-counts-<tag>`` (json ``PageCount``, keyed by page). No ``group_by``: a repartition
re-times the records (faust's too; docs/faust.md).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import faust


class PageCount(faust.Record, serializer="json"):
    page: str
    viewed_at: float
    minute: int
    two_minutes: int
    previous_minute: int
    clock_minute: int


def make_app(tag: str, broker: str = "kafka://127.0.0.1:9092", expires: float = 3600.0) -> Any:
    app = faust.App(f"faust-pageviews-{tag}", broker=broker, topic_partitions=4,
                    web_enabled=False)  # fmt: skip
    views = app.topic(f"views-{tag}", key_type=bytes, key_serializer="raw", value_type=str)
    counts = app.topic(f"view-counts-{tag}", key_type=str, value_type=PageCount)
    per_minute = (
        app.Table("views_per_minute", default=int)
        .tumbling(60.0, expires=timedelta(seconds=expires))
        .relative_to_stream()
    )
    per_two_minutes = (
        app.Table("views_per_two_minutes", default=int)
        .hopping(120.0, 60.0, expires=timedelta(seconds=expires))
        .relative_to_stream()
    )
    per_clock_minute = app.Table("views_per_clock_minute", default=int).tumbling(60.0)
    clock = per_clock_minute.relative_to_now()

    @app.agent(views)
    async def count_views(stream: Any) -> None:
        async for page in stream:  # keyed by page: no group_by, which would re-time them
            per_minute[page] += 1
            per_two_minutes[page] += 1
            clock[page] += 1
            await counts.send(key=page, value=PageCount(
                page=page,
                viewed_at=stream.current_event.message.timestamp,
                minute=per_minute[page].current(),
                two_minutes=per_two_minutes[page].value(),
                previous_minute=per_minute[page].delta(timedelta(minutes=1)),
                clock_minute=clock[page].now(),
            ))  # fmt: skip

    return app


app = make_app(
    os.environ.get("FAUST_APP_TAG", "demo"),
    os.environ.get("FAUST_APP_BROKER", "kafka://127.0.0.1:9092"),
)
