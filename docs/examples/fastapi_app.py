"""kmq.aio in a FastAPI service (tested by tests/integration/test_aio.py).

    POST /orders/<queue>   body = the payload  -> 202 {"id": ...}, once the broker has it
    a background task consumes <queue> and acks each message, counting what it saw

Run: ``uvicorn --factory 'fastapi_app:make_app'`` after setting QUEUE (KMQ_* variables say
where Kafka is), or call ``make_app(queue)`` from your own code.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

import kmq
import kmq.aio


async def consume(app: FastAPI, queue: str) -> None:
    async with app.state.client.consumer(queue) as c:
        async for msg in c:
            app.state.seen[msg.id] = msg.value
            await msg.ack()


def make_app(queue: str | None = None, settings: kmq.Settings | None = None) -> FastAPI:
    queue = queue or os.environ["QUEUE"]

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.client = kmq.aio.Client(settings=settings)
        app.state.seen = {}
        task = asyncio.create_task(consume(app, queue))
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await app.state.client.close()

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders/{queue}", status_code=202)
    async def enqueue(queue: str, request: Request) -> dict:
        client = request.app.state.client
        # Its own delivery report, awaited (no flush of other requests' sends): durable when we answer.
        msg_id = await client.send_and_wait(queue, await request.body())
        return {"id": msg_id}

    return app
