"""The sluicegate application: the CLI that wires the three libraries (`operators`, `agents`,
`coordinator`) into processes, the demos, and the development Kafka broker.

It is the one package allowed to import all three libraries; none of them imports it.
"""
