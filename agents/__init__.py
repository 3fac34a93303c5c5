"""Agent runs as operators: RunState, tools, model clients, effect journal, approvals."""
