"""One agent run: its state and the state machine that moves it.

Modules: `machine` (what a run does next and the state after each safe point, sans-IO),
`actions` (the actions it returns), `state` (`RunState`, `Budget`: the versioned document),
`versions` (its schema versions and upgraders), `encoding` (encoding a state again without
what did not change), `cache` (decoded states kept between wake-ups), `tracker` (a subtask's
runs by status, as gauges), `directory` (which runs exist, read from the events sink).
"""
