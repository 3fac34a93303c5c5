"""The ``sluicegate`` command: its subcommands, the `up` supervisor and the pipeline loader."""
