"""The agents' HTTP routes, mounted on the coordinator's API: `runs` (list, show, history,
fork), `approvals` (a person's decisions), `rollback` (undo a run's effects after a step)."""
