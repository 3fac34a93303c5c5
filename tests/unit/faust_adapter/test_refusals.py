"""What the adapter does not run is refused at start, naming the feature and the user's line;
nothing is silently left out."""

from __future__ import annotations

import pytest

from sluicegate.faust_adapter import UnsupportedFeatureError, pipeline_of, read_app
from tests.faust_apps import refused


def test_every_unsupported_feature_is_listed_with_its_line() -> None:
    plan = read_app(refused.app, modules=[refused])
    found = {(r.feature, r.where.rsplit(":", 1)[1]) for r in plan.refusals}
    assert found == {
        ("table 'per_minute' on_window_close", "11"),
        ("app.GlobalTable('everywhere')", "12"),
        ("stream.through", "17"),
        ("table 'everywhere' used in app.timer every_five_seconds", "21"),
        ("app.task on_start", "26"),
        (
            "app.crontab hourly with a schedule sluicegate cannot read ('every hour' is not a "
            "crontab schedule)",
            "41",
        ),
        ("app.page('/counts/')", "31"),
        ("table 'sliding' with a SlidingWindow", "36"),
        ("windowed table 'indexed' with key_index=True (keys(), items(), values())", "38"),
    }
    assert all(r.where.startswith(refused.__file__) for r in plan.refusals)


def test_building_the_pipeline_raises_the_first_and_names_the_others() -> None:
    with pytest.raises(UnsupportedFeatureError) as caught:
        pipeline_of(refused.app, modules=[refused])
    text = str(caught.value)
    assert "is not supported by sluicegate's faust adapter" in text
    for feature in (
        "stream.through",
        "app.timer",
        "app.task",
        "app.crontab",
        "app.page",
        "GlobalTable",
    ):
        assert feature in text
