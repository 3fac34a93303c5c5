"""What ``runs history`` says about memory, and the ``memory`` commands' arguments."""

from __future__ import annotations

import pytest

from sluicegate.cli.main import _parser
from sluicegate.cli.run_text import event_line


def test_a_step_s_line_names_the_memory_entries_it_read_and_wrote() -> None:
    model = {"seq": 3, "at": 0.0, "step": 2, "type": "model", "message": {"content": "hi"},
             "memory_read": ["c-1#0", "c-1#1"]}  # fmt: skip
    assert event_line(model).endswith("; read 2 memory entries (c-1#0, c-1#1)")
    tool = {"seq": 4, "at": 0.0, "step": 2, "type": "tool", "tool": "remember", "call_id": "c0",
            "result": {"remembered": "x"}, "memory_written": ["c-1#2"]}  # fmt: skip
    assert event_line(tool).endswith("; wrote 1 memory entries (c-1#2)")
    many = model | {"memory_read": [f"k#{i}" for i in range(20)]}
    assert "read 20 memory entries (k#0, k#1, k#2, k#3, k#4, k#5, k#6, k#7, ...)" in event_line(
        many
    )
    assert "memory" not in event_line({"seq": 0, "at": 0.0, "step": 0, "type": "status"})


def test_memory_commands_need_a_key_where_they_act_on_one() -> None:
    args = _parser().parse_args(["memory", "erase", "--key", "c-1", "--agent", "desk"])
    assert (args.key, args.agent, args.topic) == ("c-1", "desk", None)
    assert _parser().parse_args(["memory", "list"]).agent == "refund-desk"
    with pytest.raises(SystemExit):
        _parser().parse_args(["memory", "show"])
