"""Forking a run, sans-IO: `patch` makes the new run's seed from the parent's state after a step
with one change; `request` builds the `ForkRun` command from the parent's events."""
