"""Closing a subtask's parts: each close runs to its end, and one that fails is logged
without stopping the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

__all__ = ["close_quietly"]

logger = logging.getLogger(__name__)


async def close_quietly(subtask: str, what: str, closing: Awaitable[None]) -> None:
    """Await a close step, shielded from cancellation; log (not raise) what it raises."""
    try:
        await asyncio.shield(closing)
    except Exception:  # a failed close must not stop the others
        logger.warning("%s: closing the %s failed", subtask, what, exc_info=True)
