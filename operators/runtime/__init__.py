"""The subtask runtime: Kafka I/O, state and the protocol cores put together."""
