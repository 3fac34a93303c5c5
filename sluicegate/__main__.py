"""``python -m sluicegate``: the same as the ``sluicegate`` command."""

import sys

from sluicegate.cli.main import main

sys.exit(main())
