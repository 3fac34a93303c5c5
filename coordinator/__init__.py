"""Checkpoint coordinator, recovery, savepoints, HTTP API and the ``sluicegate`` CLI."""
