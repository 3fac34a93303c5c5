"""A run's history: `events` reads runs from an agent's events topic, `replay` rebuilds the
`RunState` after each event from them (sans-IO, calling nothing)."""
