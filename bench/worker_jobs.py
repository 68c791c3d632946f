"""The jobs module of bench/worker.py: one handler of $BENCH_QUEUE doing $BENCH_WORK_MS of
I/O (a sleep), a plain function or, with $BENCH_ASYNC=1, an ``async def``."""

import asyncio
import os
import time

import kmq

QUEUE = os.environ["BENCH_QUEUE"]
WORK_S = float(os.environ.get("BENCH_WORK_MS", "20")) / 1000

if os.environ.get("BENCH_ASYNC") == "1":
    @kmq.handler(QUEUE)
    async def handle(msg: kmq.Message) -> None:
        await asyncio.sleep(WORK_S)
else:
    @kmq.handler(QUEUE)
    def handle(msg: kmq.Message) -> None:
        time.sleep(WORK_S)
