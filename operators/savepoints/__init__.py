"""Savepoints: self-contained, portable snapshots of a pipeline's state in a canonical format.

* :mod:`operators.savepoints.rows`: the binary rows file (sans-IO encode/decode, checksummed).
* :mod:`operators.savepoints.manifest`: the savepoint manifest (per operator uid, per input
  partition: rows file, source offset; schema versions), validated as untrusted input.
* :mod:`operators.savepoints.exceptions`: the error tree.

The format is documented in ``docs/savepoints.md``.
"""
