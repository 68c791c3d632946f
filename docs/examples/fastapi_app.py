"""kmq.aio in a FastAPI service (tested by tests/integration/test_aio.py).

    POST /orders/<queue>   body = the payload  -> 202 {"id": ...}, once the broker has it
                           (404 for a queue other than the app's)
    a background task consumes <queue> and acks each message, counting what it saw

Run: ``pip install uvicorn``, then from docs/examples,
``QUEUE=orders uvicorn --factory fastapi_app:make_app`` (KMQ_* variables say where Kafka
is), or call ``make_app(queue)`` from your own code.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request

import kmq
import kmq.aio


async def consume(app: FastAPI, queue: str) -> None:
    async with app.state.client.consumer(queue) as c:
        async for msg in c:
            app.state.seen[msg.id] = msg.value
            await msg.ack()


def make_app(queue: str | None = None, settings: kmq.Settings | None = None) -> FastAPI:
    queue = app_queue = queue or os.environ["QUEUE"]

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
        if queue != app_queue:  # nothing here would consume it
            raise HTTPException(404, f"this service enqueues on {app_queue!r} only")
        client = request.app.state.client
        # Its own delivery report, awaited (no flush of other requests' sends): durable when we answer.
        msg_id = await client.send_and_wait(queue, await request.body())
        return {"id": msg_id}

    return app
