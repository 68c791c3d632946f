"""A jobs module for `kmq worker` tests: one handler of $KMQ_TEST_QUEUE.

Each handler call appends "<id> <delivery count>" to $KMQ_TEST_LEDGER once it returns (the
message is then acked), and to $KMQ_TEST_LEDGER.started when it starts; $KMQ_TEST_ASYNC=1 makes it an ``async def``; $KMQ_TEST_HANDLER_S is
how long one call takes (I/O: a sleep). Started with `python -m kmq.cli worker
tests.integration.helpers.worker_jobs`.
"""

import asyncio
import os
import threading
import time

import kmq

QUEUE = os.environ["KMQ_TEST_QUEUE"]
LEDGER = os.environ["KMQ_TEST_LEDGER"]
HANDLER_S = float(os.environ.get("KMQ_TEST_HANDLER_S", "0.05"))
_lock = threading.Lock()


def _record(msg: kmq.Message, suffix: str = "") -> None:
    with _lock, open(LEDGER + suffix, "a") as f:
        f.write(f"{msg.id} {msg.delivery_count}\n")
        f.flush()


if os.environ.get("KMQ_TEST_ASYNC") == "1":
    @kmq.handler(QUEUE, concurrency=8)
    async def handle(msg: kmq.Message) -> None:
        _record(msg, ".started")
        await asyncio.sleep(HANDLER_S)
        _record(msg)
else:
    @kmq.handler(QUEUE, concurrency=8)
    def handle(msg: kmq.Message) -> None:
        _record(msg, ".started")
        time.sleep(HANDLER_S)
        _record(msg)
