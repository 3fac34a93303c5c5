"""StopSequence: the phases of a graceful stop, driven by hand."""

from __future__ import annotations

from sluicegate.coordinator.stopping import (
    Finish,
    SendStop,
    StopPhase,
    StopSequence,
    TriggerFinal,
    still_running,
)
from sluicegate.operators.protocol.messages import Heartbeat

NOTHING: frozenset[str] = frozenset()
RUNNING = frozenset({"count#0", "tokenize#0"})


def stop(**kwargs: object) -> StopSequence:
    options: dict[str, object] = {
        "final_checkpoint": True,
        "in_flight": None,
        "running_attempt": True,
        "timeout_seconds": 60.0,
        "resend_seconds": 2.0,
    }
    options.update(kwargs)
    return StopSequence(**options)  # type: ignore[arg-type]


def test_a_final_checkpoint_then_stop_then_done() -> None:
    s = stop()
    assert s.on_tick(1.0, checkpoint_in_flight=False, running=RUNNING) == TriggerFinal()
    s.final_triggered(7)
    assert s.phase is StopPhase.CHECKPOINTING
    assert s.on_tick(1.1, checkpoint_in_flight=True, running=RUNNING) is None
    s.checkpoint_ended(7, completed=True)
    assert s.on_tick(1.2, checkpoint_in_flight=False, running=RUNNING) == SendStop()
    assert s.on_tick(1.3, checkpoint_in_flight=False, running=RUNNING) is None
    assert s.on_tick(1.4, checkpoint_in_flight=False, running=NOTHING) == Finish(())
    assert s.done
    assert (s.completed, s.note) == (7, "")
    assert s.on_tick(1.5, checkpoint_in_flight=False, running=NOTHING) is None


def test_a_checkpoint_in_flight_waits_or_becomes_the_final_one() -> None:
    adopted = stop(in_flight=4)
    assert adopted.phase is StopPhase.CHECKPOINTING
    assert adopted.final_checkpoint == 4
    adopted.checkpoint_ended(3, completed=True)  # not the final one: ignored
    assert adopted.phase is StopPhase.CHECKPOINTING
    adopted.checkpoint_ended(4, completed=True)
    assert adopted.completed == 4

    waiting = stop()  # the tracker still had one in flight when the first tick came
    assert waiting.on_tick(1.0, checkpoint_in_flight=True, running=RUNNING) is None
    assert waiting.on_tick(2.0, checkpoint_in_flight=False, running=RUNNING) == TriggerFinal()


def test_an_aborted_final_checkpoint_still_stops_and_says_why() -> None:
    s = stop(in_flight=5)
    s.checkpoint_ended(5, completed=False, reason="timed out after 60 s")
    assert s.on_tick(1.0, checkpoint_in_flight=False, running=RUNNING) == SendStop()
    assert s.completed is None
    assert "final checkpoint 5 aborted: timed out" in s.note


def test_no_checkpoint_wanted_or_possible_goes_straight_to_stop() -> None:
    unwanted = stop(final_checkpoint=False)
    assert unwanted.on_tick(0.1, checkpoint_in_flight=True, running=RUNNING) == SendStop()
    assert unwanted.note == ""
    recovering = stop(running_attempt=False)
    assert recovering.on_tick(0.1, checkpoint_in_flight=False, running=RUNNING) == SendStop()
    assert "recovering" in recovering.note


def test_a_failure_gives_up_the_final_checkpoint() -> None:
    s = stop()
    s.final_triggered(9)
    s.on_failure("worker w1 missed its heartbeats")
    assert s.on_tick(1.0, checkpoint_in_flight=True, running=RUNNING) == SendStop()
    s.checkpoint_ended(9, completed=True)  # too late: the stop went on without it
    assert s.completed is None
    assert "w1 missed its heartbeats" in s.note
    s.on_failure("another")  # draining: a failure changes nothing
    assert s.phase is StopPhase.DRAINING


def test_stop_is_resent_while_subtasks_run_and_given_up_at_the_deadline() -> None:
    s = stop(in_flight=3, timeout_seconds=10.0, resend_seconds=2.0)
    s.checkpoint_ended(3, completed=True)  # long after the request: the wait starts now
    assert s.on_tick(50.0, checkpoint_in_flight=False, running=RUNNING) == SendStop()
    assert s.on_tick(51.0, checkpoint_in_flight=False, running=RUNNING) is None
    assert s.on_tick(52.5, checkpoint_in_flight=False, running=RUNNING) == SendStop()
    assert s.on_tick(53.0, checkpoint_in_flight=False, running=RUNNING) is None
    assert s.on_tick(54.0, checkpoint_in_flight=False, running=RUNNING) is None
    assert s.on_tick(60.0, checkpoint_in_flight=False, running=RUNNING) == Finish(
        ("count#0", "tokenize#0")
    )
    assert s.done


def test_a_heartbeat_from_before_the_attempt_does_not_confirm_its_subtasks_stopped() -> None:
    assignment = {"w1": ("count#0",), "w2": ("tokenize#0",)}
    beats = {
        "w1": Heartbeat("w1", "i", 2, 4, ()),  # from before it took up attempt 5
        "w2": Heartbeat("w2", "j", 2, 5, ()),  # at attempt 5, running nothing: stopped
        "w3": Heartbeat("w3", "k", 2, 3, ("old#0",)),  # a zombie of attempt 3
    }
    assert still_running(beats, assignment, 5) == {"count#0", "old#0"}
    beats["w1"] = Heartbeat("w1", "i", 2, 5, ("count#0",))
    assert still_running(beats, assignment, 5) == {"count#0", "old#0"}
    beats["w1"] = Heartbeat("w1", "i", 2, 5, ())
    beats["w3"] = Heartbeat("w3", "k", 2, 5, ())  # told to stop: it took up attempt 5
    assert still_running(beats, assignment, 5) == frozenset()
