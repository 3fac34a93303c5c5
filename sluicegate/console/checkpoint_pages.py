"""The console's checkpoint detail and stop-with-savepoint confirmation, as pure functions.

A checkpoint's detail is what its committed `CheckpointManifest` records per subtask and
nothing else: the three phase durations the subtask acked, the bytes of its snapshot (all of
them, and the part this checkpoint uploaded), its files and its changelog segments. How the
state was written is read from those, by one rule (`snapshot_kind`):

============  ==========================================================================
kind          the subtask's `StateHandle`
============  ==========================================================================
changelog     it lists changelog segments, replayed onto an earlier materialization
full          every byte of its files was uploaded by this checkpoint
incremental   some files are shared with an earlier checkpoint (uploaded < total)
empty         no file at all (a database not materialized yet)
============  ==========================================================================
"""

from __future__ import annotations

from sluicegate.console.markup import Safe, hidden_csrf, join, seconds, size, table, tag, text, when
from sluicegate.operators.protocol.messages import StateHandle
from sluicegate.operators.storage.manifest import CheckpointManifest

__all__ = ["checkpoint_body", "snapshot_kind", "stop_confirmation_body"]


def snapshot_kind(handle: StateHandle) -> str:
    """How a subtask's state was written in a checkpoint (the table of the module docstring)."""
    if handle.changelog:
        return "changelog"
    if not handle.files:
        return "empty"
    return "full" if handle.uploaded_bytes >= handle.full_bytes else "incremental"


def checkpoint_body(manifest: CheckpointManifest) -> Safe:
    """One completed checkpoint: its summary, then a row per subtask."""
    duration = (
        seconds(manifest.completed_at - manifest.triggered_at)
        if manifest.triggered_at is not None
        else "—"
    )
    summary = tag(
        "dl",
        join(
            join([tag("dt", k), tag("dd", v)])
            for k, v in [
                ("Checkpoint", manifest.checkpoint_id),
                ("Attempt", manifest.attempt),
                ("Triggered", when(manifest.triggered_at)),
                ("Completed", when(manifest.completed_at)),
                ("Duration", duration),
                ("State size", size(manifest.full_bytes)),
                ("Uploaded", size(manifest.uploaded_bytes)),
                ("Subtasks", len(manifest.subtasks)),
            ]
        ),
        class_="facts",
    )
    rows = [
        (
            subtask,
            seconds(s.alignment_seconds),
            seconds(s.sync_seconds),
            seconds(s.async_seconds),
            size(s.handle.full_bytes),
            size(s.handle.uploaded_bytes),
            snapshot_kind(s.handle),
            len(s.handle.files),
            len(s.handle.changelog),
            f"#{s.handle.checkpoint_id}",
        )
        for subtask, s in sorted(manifest.subtasks.items())
    ]
    subtasks = table(
        "Subtasks",
        [
            "Subtask",
            "Alignment",
            "Sync",
            "Async (upload)",
            "State size",
            "Uploaded",
            "Written as",
            "Files",
            "Changelog segments",
            "Materialized in",
        ],
        rows,
    )
    note = tag(
        "p",
        "What the checkpoint's manifest records. Written as: full (every byte uploaded now), "
        "incremental (files shared with an earlier checkpoint), changelog (segments replayed "
        "onto the materialization of the checkpoint named), empty (nothing materialized yet).",
        class_="muted",
    )
    return join([summary, tag("h2", "Per subtask"), note, subtasks])


def stop_confirmation_body(
    pipeline: str, name: str | None, *, csrf: str | None, prefix: str
) -> Safe:
    """The confirmation of a stop-with-savepoint: what will happen, and the one button."""
    called = f"named {name}" if name else "with the default name (pipeline and UTC time)"
    steps = tag(
        "ol",
        join(
            tag("li", step)
            for step in [
                "A final checkpoint is taken and every sink publishes what it holds.",
                f"Every subtask of {pipeline} stops: the job ends and processes nothing more.",
                f"A savepoint {called} is written from that checkpoint.",
                "To carry on, start the pipeline again from the savepoint.",
            ]
        ),
    )
    form = join(
        [
            Safe(f'<form method="post" action="{text(prefix)}savepoints/stop">'),
            hidden_csrf(csrf),
            Safe(f'<input type="hidden" name="name" value="{text(name or "")}">'),
            Safe('<input type="hidden" name="confirm" value="stop">'),
            tag(
                "div",
                join(
                    [
                        tag(
                            "button",
                            "Stop the job with a savepoint",
                            type="submit",
                            class_="danger",
                        ),
                        tag("a", "Cancel", href=f"{prefix}checkpoints"),
                    ],
                    " ",
                ),
                class_="actions",
            ),
            Safe("</form>"),
        ]
    )
    return join([tag("p", "This stops the job. In order:"), steps, form])
