"""kmq.aio inside a Faust app (tested by tests/integration/test_aio.py).

A Faust task enqueues on a kmq queue and consumes it with ``async for``, on Faust's own
event loop; a line per acked message goes to $KMQ_EXAMPLE_LEDGER.

Run: ``KMQ_EXAMPLE_QUEUE=orders faust -A docs.examples.faust_app worker -l info``
(KMQ_* variables say where Kafka is).
"""

from __future__ import annotations

import os

import faust

import kmq.aio

QUEUE = os.environ.get("KMQ_EXAMPLE_QUEUE", "orders")
LEDGER = os.environ.get("KMQ_EXAMPLE_LEDGER", "faust-example.ledger")
COUNT = int(os.environ.get("KMQ_EXAMPLE_COUNT", "10"))

app = faust.App(f"kmq-example-{QUEUE}",
                broker="kafka://" + os.environ.get("KMQ_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
                store="memory://", web_enabled=False, topic_replication_factor=1)


@app.task
async def enqueue_and_consume() -> None:
    async with kmq.aio.Client() as client:
        for i in range(COUNT):
            await client.send(QUEUE, b"order-%d" % i)
        await client.flush()
        seen = 0
        async with client.consumer(QUEUE) as c:
            async for msg in c:
                await msg.ack()
                with open(LEDGER, "a") as f:
                    f.write(f"{msg.id} {msg.value.decode()}\n")
                seen += 1
                if seen == COUNT:
                    break
