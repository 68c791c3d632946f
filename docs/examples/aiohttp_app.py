"""kmq.aio in an aiohttp web service (tested by tests/integration/test_aio.py).

    POST /orders/<queue>   body = the payload  -> 202 {"id": ...}, once the broker has it
                           (404 for a queue other than the app's)
    a background task consumes <queue> and acks each message, counting what it saw

Run: ``python docs/examples/aiohttp_app.py QUEUE`` (KMQ_* variables say where Kafka is).
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web

import kmq.aio

CLIENT = web.AppKey("kmq_client", kmq.aio.Client)
SEEN = web.AppKey("seen", dict)
QUEUE = web.AppKey("queue", str)


async def enqueue(request: web.Request) -> web.Response:
    queue = request.match_info["queue"]
    if queue != request.app[QUEUE]:  # nothing here would consume it
        raise web.HTTPNotFound(text=f"this service enqueues on {request.app[QUEUE]!r} only")
    client = request.app[CLIENT]
    # Its own delivery report, awaited (no flush of other requests' sends): durable when we answer.
    msg_id = await client.send_and_wait(queue, await request.read())
    return web.json_response({"id": msg_id}, status=202)


async def consume(app: web.Application, queue: str) -> None:
    async with app[CLIENT].consumer(queue) as c:
        async for msg in c:
            app[SEEN][msg.id] = msg.value
            await msg.ack()


def make_app(queue: str, settings: kmq.Settings | None = None) -> web.Application:
    app = web.Application()
    app[SEEN] = {}
    app[QUEUE] = queue

    async def lifespan(app: web.Application):
        app[CLIENT] = kmq.aio.Client(settings=settings)
        task = asyncio.create_task(consume(app, queue))
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await app[CLIENT].close()

    app.cleanup_ctx.append(lifespan)
    app.router.add_post("/orders/{queue}", enqueue)
    return app


if __name__ == "__main__":  # pragma: no cover
    web.run_app(make_app(sys.argv[1]), host="127.0.0.1", port=8080)
