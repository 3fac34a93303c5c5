"""faust-streaming applications written as faust's own documentation and examples write them,
run unchanged by sluicegate (``sluicegate faust run``) and by faust (``faust -A ... worker``)."""
