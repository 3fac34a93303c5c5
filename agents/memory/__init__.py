"""Memory per key across an agent's runs, kept in the agent operator's keyed state
(``docs/memory.md``): `Memory` (what a run's key is and what it reads), `MemoryEntry` (one
versioned entry), `MemoryRows` (the entries of a partition's state), the built-in ``remember``
tool."""
