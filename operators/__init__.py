"""The engine: records, Kafka I/O, barrier protocol, RocksDB state, snapshots, sinks."""
