"""The coordinator's HTTP API: what it shows (`view`) and how it serves it."""
