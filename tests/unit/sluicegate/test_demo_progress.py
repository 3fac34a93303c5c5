"""The agent demo's progress: outside a terminal (a log, CI) a line at each tenth of the runs,
not a carriage-return redraw every 300 ms on one endless line."""

from __future__ import annotations

import pytest

from sluicegate.demos.refund_desk.run import _Progress


def test_outside_a_terminal_a_line_at_each_tenth(capsys: pytest.CaptureFixture[str]) -> None:
    progress = _Progress(60)
    assert not progress.terminal  # pytest captures stdout: not a terminal
    for done in [0, 0, 3, 6, 6, 7, 30, 59, 60, 60]:
        progress(done)
    out = capsys.readouterr().out
    assert "\r" not in out
    assert out.splitlines() == [
        "0/60 runs done", "6/60 runs done", "30/60 runs done", "59/60 runs done",
        "60/60 runs done",
    ]  # fmt: skip
