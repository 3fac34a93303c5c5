"""Keyed state of a subtask: RocksDB rows separable per input partition, and local snapshots.

* :mod:`operators.state.store`: the :class:`StateStore` contract a process function sees.
* :mod:`operators.state.rocksdb`: the rocksdict implementation, one database per subtask.
* :mod:`operators.state.local_checkpoint`: local checkpoints and the inventory the uploader reads.
* :mod:`operators.state.codec`: the on-disk format (key layout, RocksDB tuning); raw bytes.
* :mod:`operators.state.exceptions`: the error tree.
"""
