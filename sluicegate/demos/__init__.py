"""Demos on the embedded defaults (local broker, local checkpoint folder, no API key):
`wordcount` (in-process, crashed and recovered) and `refund_desk` (an agent under `up`)."""
