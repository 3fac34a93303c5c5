"""The checkpoint coordinator: checkpoints, recovery, retention, stop, savepoints and its HTTP
API. Installed as `sluicegate.coordinator`; the ``sluicegate`` CLI is `sluicegate.cli`."""
