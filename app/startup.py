"""Start-up steps that must end in success, however slow the broker is at first.

A worker's start-up reads (the queue settings view, the redeliverer's clients, the
routing metadata) give up after their own timeouts. Done once, a broker that answered
late left the worker for good without its settings view (never ready, the dispatcher
never started) while everything else ran. Each step is tried again instead, with a
growing pause, and every failure is logged with what is waited for.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import Callable, TypeVar

from kmq.backoff import Backoff, compute_backoff

log = logging.getLogger("kmq.tracker.startup")

T = TypeVar("T")

RETRY = Backoff.exponential(base_s=0.5, max_s=10.0, jitter="equal")


async def until_done(what: str, step: Callable[[], T], executor: Executor | None = None,
                     policy: Backoff = RETRY) -> T:
    """Run the blocking ``step`` in ``executor`` until it returns; its result."""
    loop = asyncio.get_running_loop()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await loop.run_in_executor(executor, step)
        except Exception as exc:  # a broker not answering yet: anything it raises
            pause_s = compute_backoff(policy, attempt)
            log.warning("%s failed (attempt %d: %s); trying again in %.1f s", what, attempt, exc, pause_s)
            await asyncio.sleep(pause_s)
