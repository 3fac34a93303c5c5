"""A faust app using what sluicegate does not run yet: each is refused by name and line."""

from __future__ import annotations

from typing import Any

import faust

app = faust.App("faust-refused", broker="kafka://127.0.0.1:1", topic_partitions=2)
clicks = app.topic("clicks-refused", value_type=str)
per_minute = app.Table("per_minute", default=int, on_window_close=print).tumbling(60.0)  # line 11
everywhere = app.GlobalTable("everywhere", default=int)  # line 12


@app.agent(clicks)
async def batches(stream: Any) -> None:
    async for value in stream.through("elsewhere"):  # line 17: stream.through
        print(value)


@app.timer(interval=5.0)  # type: ignore[untyped-decorator] # line 21: reads a table
async def every_five_seconds() -> None:
    print(everywhere["x"])


@app.task  # type: ignore[untyped-decorator] # line 26
async def on_start() -> None:
    pass


@app.page("/counts/")  # line 31
async def counts(web: Any, request: Any) -> Any:
    return web.json({})


sliding = app.Table("sliding", default=int)  # line 36
sliding.using_window(faust.windows.SlidingWindow(10, 10, 60))
indexed = app.Table("indexed", default=int).tumbling(60.0, key_index=True)  # line 38


@app.crontab("every hour")  # line 41: not a crontab
async def hourly() -> None:
    pass
