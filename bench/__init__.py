"""Benchmarks: runnable scripts that print tables (``make bench``); never timed tests."""
