"""``python -m bench.soak_large``: the soak at the issue's sizes, or at ``--quick`` ones."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from pathlib import Path

from bench.soak_large.run import Sizes, soak


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak_large", description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--outage", type=float, default=20.0, help="storage outage, seconds")
    parser.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds for every run")
    parser.add_argument("--window", type=int, default=40, help="runs in flight at most")
    parser.add_argument("--quick", action="store_true", help="400 runs, 10 kills, a 10 s outage")
    parser.add_argument("--dir", type=Path, default=None, help="keep logs here (default: temp)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.kills, args.outage, args.timeout = 400, 10, 10.0, 1800.0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # The broker's restart and storage's outage make the clients log an error a poll.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    sizes = Sizes(args.runs, args.kills, args.workers, args.seed, args.partitions,
                  args.outage, args.timeout, args.window)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="soak-") as temp:
        root = args.dir or Path(temp)
        root.mkdir(parents=True, exist_ok=True)
        findings = asyncio.run(soak(sizes, root))
    print("\n".join(findings.table()))
    return 1 if findings.violations else 0


if __name__ == "__main__":
    sys.exit(main())
