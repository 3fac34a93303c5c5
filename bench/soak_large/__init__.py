"""``make soak-large``: reliability at scale, measured (issue 28, item 5).

Thousands of agent runs whose tools write to a real HTTP service (`ledger.SoakLedger`) of every
kind, on a coordinator and workers that are SIGKILLed about a hundred times (some mid-write,
some mid-checkpoint, some during a savepoint), with one broker restart and one checkpoint
storage outage; then every run, effect and event is checked and a table printed
(`checks`). Run with ``python -m bench.soak_large --help``; not part of any test run.
"""
