"""The web console: the job, its checkpoints, the runs and an approvals inbox, served by the
coordinator's HTTP API under ``/console/`` (docs/console.md).

Application code (it reads the coordinator and the agents): `routes` mounts the pages (one
module per page), `pages` and `checkpoint_pages` render them from the API's own values,
`markup` escapes every value they show, `job` is what they read of the coordinator, `inbox`
what they read and write of the agents, `run_filter` which runs the Runs page lists.
"""

from sluicegate.console.inbox import AgentDesk
from sluicegate.console.job import ConsoleJob
from sluicegate.console.routes import COOKIE, PREFIX, console_router

__all__ = ["COOKIE", "PREFIX", "AgentDesk", "ConsoleJob", "console_router"]
