"""kmq.aio under cancellation, concurrency and reuse (an audit's defects, each once broken):
a cancelled receive keeps what it took for the next one and frees its consumer; receives
of many tasks keep their own timeouts; close twice; racing opens; a send that finds no
room, large batches and many inline sends keep the loop turning."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import kmq.aio
from kmq.errors import ConsumerClosedError
from tests.conftest import await_until, wait_for

pytestmark = pytest.mark.usefixtures("tracker")


async def receiving(c: kmq.aio.Consumer) -> None:
    """Until a receive of ``c`` waits on its helper thread."""
    async def waits():
        return c._turn is not None and c._turn.locked()
    await await_until(waits, 10, "a receive waiting")


@pytest.mark.parametrize("timeout_s", [5.0, None])
def test_a_cancelled_receive_gives_what_it_took_to_the_next_and_close_does_not_wait_for_it(
        default_settings, queue, timeout_s):
    # Before: the helper thread went on waiting (for ever with None: close() never ran),
    # and a message it took went to a future nobody read, held for max_processing_s.
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            async with client.consumer(queue) as c:
                waiting = asyncio.ensure_future(c.receive(timeout_s=timeout_s))
                await receiving(c)
                waiting.cancel()
                await client.send_and_wait(queue, b"one")
                m = await c.receive(timeout_s=20)
                assert m is not None and m.value == b"one" and m.delivery_count == 1
                await m.ack()
                started = time.monotonic()
                await asyncio.wait_for(c.close(), 10)
                return time.monotonic() - started

    assert asyncio.run(main()) < 10


def test_receives_of_many_tasks_on_one_consumer_each_keep_their_timeout(default_settings, queue):
    # Before: they queued on the consumer's one thread, 12 x 0.5 s: the last returned after 6 s.
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            async with client.consumer(queue) as c:
                async def one():
                    started = time.monotonic()
                    assert await c.receive(timeout_s=0.5) is None
                    return time.monotonic() - started
                return await asyncio.gather(*(one() for _ in range(12)))

    assert max(asyncio.run(main())) < 3.0


def test_closing_twice_is_one_close_and_a_closed_consumer_says_so(default_settings, queue):
    # Before: a second close(), or a receive after close, raised RuntimeError from the executor.
    async def main():
        client = kmq.aio.Client(settings=default_settings)
        c = client.consumer(queue)
        with pytest.raises(ConsumerClosedError, match="not open yet"):
            await c.receive(0)
        async with c:
            pass
        await c.close()
        with pytest.raises(ConsumerClosedError, match="is closed: open another"):
            await c.receive(0)
        with pytest.raises(ConsumerClosedError, match="is closed"):
            await c.open()
        await client.close()
        await client.close()
        # Used again after close, as the sync client may be: the send is flushed, not lost.
        msg_id = await client.send(queue, b"after")
        await client.flush()
        await client.close()
        return msg_id

    assert asyncio.run(main())


def test_consumers_opened_at_once_share_one_view_of_the_queues_topic(default_settings, queue):
    # Before: 10 racing opens started 10 views (threads with a Kafka consumer each); 9 were
    # never closed.
    def views() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "kmq-queue-configs"}

    before = views()

    async def main():
        client = kmq.aio.Client(settings=default_settings)
        consumers = [client.consumer(queue) for _ in range(10)]
        await asyncio.gather(*(c.open() for c in consumers))
        opened = views() - before
        for c in consumers:
            await c.close()
        await client.close()
        return opened

    opened = asyncio.run(main())
    assert len(opened) == 1
    wait_for(lambda: not any(t.is_alive() for t in opened), 20, what="the view's thread ended")


def test_a_send_that_finds_no_room_waits_off_the_loop_and_is_written(default_settings, queue):
    # librdkafka's local queue is full by bytes long before 900,000 records (1 GiB): the send
    # waited for room on the loop, 30 s with the broker stopped (an audit).
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            await client.send(queue, b"first")  # the placement, looked up
            real, threads = client.sync._send, []

            def full_then_room(*args):
                threads.append(threading.current_thread().name)
                if len(args) == 9 and args[8] is False:
                    raise BufferError("Local: Queue full")
                return real(*args)

            client.sync._send = full_then_room
            msg_id = await client.send(queue, b"second")
            await client.flush()
            return msg_id, threads

    msg_id, threads = asyncio.run(main())
    assert msg_id and threads[0] == "MainThread" and threads[-1].startswith("kmq-aio")


def test_a_large_batch_is_enqueued_off_the_loop_and_inline_sends_give_the_loop_turns(
        default_settings, queue):
    # 50,000 records inline held the loop 123 ms; 20,000 awaited sends never yielded (84 ms).
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            await client.send(queue, b"first")
            real, threads = client.sync.send_batch, []

            def recorded(*args):
                threads.append(threading.current_thread().name)
                return real(*args)

            client.sync.send_batch = recorded
            await client.send_batch(queue, [b"x"] * 10)
            await client.send_batch(queue, [b"x"] * 50_000)
            turns = 0

            async def ticker():
                nonlocal turns
                while True:
                    turns += 1
                    await asyncio.sleep(0)

            tick = asyncio.ensure_future(ticker())
            await asyncio.sleep(0)
            at_start = turns
            for _ in range(1024):
                await client.send(queue, b"y")
            during = turns - at_start
            tick.cancel()
            await client.flush()
            return threads, during

    threads, during = asyncio.run(main())
    assert threads[0] == "MainThread" and threads[1].startswith("kmq-aio")
    assert during >= 3
