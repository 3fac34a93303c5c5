"""The blob commands: payloads agents stored by reference (``docs/blobs.md``).

They read and delete in the blob store directly (the job's checkpoint storage,
``SLUICEGATE_STORAGE_URL``, or ``--storage URL``), so they work whether or not a job runs:

* ``sluicegate blobs list [--subject S] [--json]``: every blob (of subject ``S``), with its
  scope, size and expiry;
* ``sluicegate blobs erase --subject S``: delete every blob of subject ``S`` (one prefix);
  no snapshot or journal entry is rewritten: the handles they hold resolve as ``erased``;
* ``sluicegate blobs gc [--json]``: delete the blobs past their TTL and say how many.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime

from sluicegate.cli.settings import CliSettings
from sluicegate.cli.text import bytes_text, table
from sluicegate.operators.storage import Storage, StorageError, open_storage
from sluicegate.operators.storage.blobs import BlobListing, BlobStore, subject_digest

__all__ = ["register", "render_blobs"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``blobs list|erase|gc``."""
    blobs = subparsers.add_parser("blobs", help="payloads agents stored by reference")
    what = blobs.add_subparsers(required=True, metavar="WHAT")
    listing = what.add_parser("list", help="blobs in the blob store")
    listing.add_argument("--subject", default=None, help="only the blobs of this subject")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_list)
    erase = what.add_parser("erase", help="delete every blob of a subject")
    erase.add_argument("--subject", required=True, help="whom the payloads are about")
    erase.set_defaults(run=_erase)
    gc = what.add_parser("gc", help="delete the blobs past their TTL")
    gc.add_argument("--json", action="store_true", help="print JSON")
    gc.set_defaults(run=_gc)
    for command in (listing, erase, gc):
        command.add_argument(
            "--storage", default=None, help="blob store URL (default: SLUICEGATE_STORAGE_URL)"
        )


def render_blobs(listings: list[BlobListing]) -> str:
    if not listings:
        return "no blobs"
    rows = []
    for item in listings:
        meta = item.meta
        if meta is None:
            rows.append([item.path, "", "", "", f"unreadable: {item.problem}"])
            continue
        expires = (
            "never"
            if meta.expires_at is None
            else datetime.fromtimestamp(meta.expires_at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        )
        rows.append([item.path, meta.scope, bytes_text(meta.size), expires, ""])
    return table(["blob", "scope", "size", "expires", "problem"], rows)


def _store(args: argparse.Namespace) -> BlobStore:
    url: str = args.storage or CliSettings().storage_url
    storage: Storage = open_storage(url)
    return BlobStore(storage)


def _fail(message: str, what_to_do: str = "") -> int:
    print(f"sluicegate: {message}", file=sys.stderr)
    if what_to_do:
        print(what_to_do, file=sys.stderr)
    return 1


def _list(args: argparse.Namespace) -> int:
    subject = None if args.subject is None else subject_digest(args.subject)
    try:
        listings = asyncio.run(_store(args).list(subject))
    except StorageError as exc:
        return _fail(f"cannot list the blob store: {exc}", "Check --storage")
    if args.json:
        rows = [
            {
                "path": item.path,
                "meta": None if item.meta is None else item.meta.model_dump(mode="json"),
                "problem": item.problem,
            }
            for item in listings
        ]
        print(json.dumps(rows, indent=2))
    else:
        print(render_blobs(listings))
    sys.stdout.flush()
    return 0


def _erase(args: argparse.Namespace) -> int:
    if not args.subject:
        return _fail("--subject must not be empty")
    try:
        files = asyncio.run(_store(args).erase(subject_digest(args.subject)))
    except StorageError as exc:
        return _fail(f"erasure incomplete: {exc}", "Run the same command again")
    print(f"erased subject {args.subject!r}: {files} files deleted")
    sys.stdout.flush()
    return 0


def _gc(args: argparse.Namespace) -> int:
    try:
        report = asyncio.run(_store(args).collect_expired(time.time()))
    except StorageError as exc:
        return _fail(f"garbage collection incomplete: {exc}", "Run the same command again")
    if args.json:
        print(json.dumps(asdict(report)))
    else:
        print(
            f"{report.scanned} blobs scanned, {report.deleted} deleted "
            f"({bytes_text(report.deleted_bytes)}), {report.invalid} unreadable"
        )
    sys.stdout.flush()
    return 0
