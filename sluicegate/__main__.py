"""``python -m sluicegate``: the same as the ``sluicegate`` command."""

from sluicegate.cli.main import console

console()
