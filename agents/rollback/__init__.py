"""Rolling a run back to a step: `machine` decides which effects to undo, in which order, and
what blocks (sans-IO); `actions` are what it returns; `compensation` performs them."""
