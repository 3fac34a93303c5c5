"""The coordinator's checkpoint decisions, sans-IO: pending checkpoints, the tracker and the
backoff after storage failures."""
