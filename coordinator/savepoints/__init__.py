"""Savepoints at the coordinator: requests (`requests`, sans-IO), writing one from a completed
checkpoint, and restoring a savepoint or rescaling a checkpoint (`restoring`)."""
