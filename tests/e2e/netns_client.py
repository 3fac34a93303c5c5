"""What the multi-host test does on a host of its lab, as a command run inside a namespace:

    python -m tests.e2e.netns_client bucket ENDPOINT BUCKET
    python -m tests.e2e.netns_client produce BOOTSTRAP TAG LINES_FILE
    python -m tests.e2e.netns_client sink BOOTSTRAP TAG EXPECTED TIMEOUT_S

``produce`` creates the word count's topics (as the coordinator would) and writes one record
per line of the file; ``sink`` prints the committed records of the counts sink as JSON
``[[word, count], ...]`` in partition order, once ``EXPECTED`` have arrived or the time is up.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import boto3  # type: ignore[import-untyped]

from sluicegate.operators.runtime.topics import ensure_topics
from sluicegate.testing import produce_lines, read_committed, word_count


def _bucket(endpoint: str, name: str) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    s3.create_bucket(Bucket=name)


async def _produce(bootstrap: str, tag: str, lines: list[str]) -> None:
    await ensure_topics(bootstrap, word_count(tag))
    await produce_lines(bootstrap, f"lines-{tag}", lines)


async def _sink(bootstrap: str, tag: str, expected: int, timeout_s: float) -> None:
    records = await read_committed(bootstrap, f"counts-{tag}", expected, timeout_s)
    pairs = [[(r.key or b"").decode(), int(r.value or b"0")] for r in records]
    json.dump(pairs, sys.stdout)


def main(argv: list[str]) -> None:
    match argv:
        case ["bucket", endpoint, name]:
            _bucket(endpoint, name)
        case ["produce", bootstrap, tag, lines_file]:
            asyncio.run(_produce(bootstrap, tag, Path(lines_file).read_text().splitlines()))
        case ["sink", bootstrap, tag, expected, timeout_s]:
            asyncio.run(_sink(bootstrap, tag, int(expected), float(timeout_s)))
        case _:
            raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
