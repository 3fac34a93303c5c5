"""The ``sluicegate memory`` commands: an agent's memory per key (``docs/memory.md``).

* ``memory list [--agent A] [--json]``: every key with entries in the newest restorable
  checkpoint, how many and when the latest was written;
* ``memory show --key K [--agent A] [--json]``: the entries of ``K`` in that checkpoint,
  expired ones marked;
* ``memory erase --key K [--subject S] [--agent A] [--topic T] [--by WHO] [--reason WHY]``:
  write an ``erase_memory`` command to the agent's approvals topic (default
  ``<agent>.approvals``); the agent deletes every entry of the key when it reads the command,
  so the next checkpoint and every later one hold none. With ``--subject``, the blobs of
  subject ``S`` are erased too, as ``blobs erase --subject S`` does (``docs/blobs.md``): one
  command for a person's memory and payloads.

``list`` and ``show`` read the checkpoint storage (``--storage``, default
``SLUICEGATE_STORAGE_URL``), whether or not a job runs; they show what a restore would give
the runs, so a write or an erasure shows once a checkpoint after it has completed. ``erase``
needs only Kafka (``--bootstrap``, default ``SLUICEGATE_KAFKA_BOOTSTRAP``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

from sluicegate.cli.decisions import who_asks
from sluicegate.cli.settings import CliSettings
from sluicegate.cli.text import table
from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.kafka import KafkaSettings

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``memory list|show|erase``."""
    memory = subparsers.add_parser("memory", help="an agent's memory per key: list, show, erase")
    what = memory.add_subparsers(required=True, metavar="WHAT")
    listing = what.add_parser("list", help="keys with memory in the newest checkpoint")
    listing.set_defaults(run=_list)
    show = what.add_parser("show", help="the entries of a key in the newest checkpoint")
    show.add_argument("--key", required=True, help="the memory key (e.g. a customer id)")
    show.set_defaults(run=_show)
    for command in (listing, show):
        command.add_argument(
            "--storage", default=None, help="checkpoint storage (default: SLUICEGATE_STORAGE_URL)"
        )
        command.add_argument("--json", action="store_true", help="print JSON")
    erase = what.add_parser("erase", help="delete every entry of a key, through the pipeline")
    erase.add_argument("--key", required=True, help="the memory key (e.g. a customer id)")
    erase.add_argument("--topic", default=None, help="the approvals topic (<agent>.approvals)")
    erase.add_argument("--by", default=None, help="who asks (default: $USER)")
    erase.add_argument("--reason", default=None, help="why (logged by the agent)")
    erase.add_argument(
        "--subject", default=None, help="also erase this subject's blobs (blobs erase --subject)"
    )
    erase.add_argument(
        "--storage", default=None, help="the blob store for --subject (SLUICEGATE_STORAGE_URL)"
    )
    erase.add_argument("--bootstrap", default=None, metavar="HOST:PORT",
                       help="Kafka (default: $SLUICEGATE_KAFKA_BOOTSTRAP)")  # fmt: skip
    erase.set_defaults(run=_erase)
    for command in (listing, show, erase):
        command.add_argument("--agent", default="refund-desk", help="the agent's name")


def _stored(args: argparse.Namespace, key: str | None) -> Any:
    from sluicegate.agents.memory.stored import memory_in_checkpoint
    from sluicegate.operators.storage import open_storage

    storage = open_storage(args.storage or CliSettings().storage_url)
    return asyncio.run(memory_in_checkpoint(storage, args.agent, key=key))


def _when(at: float | None) -> str:
    if at is None:
        return "never"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _list(args: argparse.Namespace) -> int:
    stored = _stored(args, None)
    keys = {
        key: {"entries": len(found), "latest_written_at": max(e.written_at for e in found)}
        for key, found in sorted(stored.entries.items())
    }
    if args.json:
        doc = {"checkpoint": stored.checkpoint_id, "unreadable": stored.unreadable, "keys": keys}
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    if stored.checkpoint_id is None:
        print("no completed checkpoint: no memory stored yet")
        return 0
    print(f"memory of {args.agent} in checkpoint {stored.checkpoint_id}:")
    rows = [[k, str(v["entries"]), _when(v["latest_written_at"])] for k, v in keys.items()]
    print(table(["KEY", "ENTRIES", "LATEST"], rows) if rows else "no keys")
    if stored.unreadable:
        print(f"{stored.unreadable} entries could not be read (skipped)")
    return 0


def _show(args: argparse.Namespace) -> int:
    stored = _stored(args, args.key)
    found = stored.entries.get(args.key, [])
    if args.json:
        doc = {
            "checkpoint": stored.checkpoint_id,
            "key": args.key,
            "entries": [e.model_dump(mode="json") for e in found],
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    where = f"checkpoint {stored.checkpoint_id}" if stored.checkpoint_id else "no checkpoint"
    if not found:
        print(f"no memory of {args.key!r} in {where}")
        return 0
    now = time.time()
    print(f"memory of {args.key!r} in {where}:")
    rows = [
        [e.entry_id, e.kind, e.run_id, _when(e.written_at),
         "expired" if e.expired(now) else _when(e.expires_at), e.text[:200]]
        for e in found
    ]  # fmt: skip
    print(table(["ENTRY", "KIND", "RUN", "WRITTEN", "EXPIRES", "TEXT"], rows))
    return 0


def _erase(args: argparse.Namespace) -> int:
    from sluicegate.agents.client import send_command
    from sluicegate.agents.messages import EraseMemory

    topic = args.topic or f"{args.agent}.approvals"
    command = EraseMemory(key=args.key, by=args.by or who_asks(), reason=args.reason)
    if args.subject is not None and not args.subject:
        raise ConfigError("--subject", "a subject is not empty")
    asyncio.run(send_command(KafkaSettings.from_env(args.bootstrap), topic, command))
    print(f"erase of the memory of {args.key!r} written to {topic}; the agent deletes its "
          "entries when it reads it, and checkpoints from then on hold none")  # fmt: skip
    if args.subject:
        from sluicegate.operators.storage import open_storage
        from sluicegate.operators.storage.blobs import BlobStore, subject_digest

        store = BlobStore(open_storage(args.storage or CliSettings().storage_url))
        files = asyncio.run(store.erase(subject_digest(args.subject)))
        print(f"erased the blobs of subject {args.subject!r}: {files} files deleted")
    return 0
