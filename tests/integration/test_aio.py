"""kmq.aio on a real broker: awaitable sends, `async with` consumers, `async for`, the verbs;
both queue modes; the event loop keeps running while a receive waits."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter

import pytest

import kmq
import kmq.aio
from tests.topic_reads import ids_on_the_broker
from tests.conftest import await_until, wait_for
from tests.integration.views import all_acked
from tests.integration.dlq import dead_letters

pytestmark = pytest.mark.usefixtures("tracker")


def load_example(name: str):
    """A module of docs/examples, loaded from its file (docs/ is not a package to import)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


async def set_mode(client: kmq.aio.Client, queue: str, mode: str) -> None:
    await client.configure_queue(queue, dispatch=mode)
    async def handed_over():
        return not (await client.queue_config(queue)).handover_pending
    await await_until(handed_over, 30, "the handover")


def test_send_receive_and_every_verb_on_the_loop(default_settings, queue, mode):
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            await set_mode(client, queue, mode)
            one = await client.send(queue, b"one", headers={"h": "v"})
            ids = [one] + await client.send_batch(queue, [b"m%d" % i for i in range(99)])
            await client.flush()
            got: dict[str, int] = {}
            async with client.consumer(queue, visibility_timeout_s=5) as c:
                async for msg in c:
                    got[msg.id] = msg.delivery_count
                    if msg.id == one:
                        assert msg.value == b"one" and msg.headers == {"h": b"v"}
                    if msg.value == b"m1" and msg.delivery_count == 1:
                        await msg.release()          # comes back, counted
                    elif msg.value == b"m2":
                        await msg.reject("bad")      # dead-lettered
                    else:
                        await msg.extend(10)
                        await msg.ack()
                    if len(got) == 100 and got[ids[2]] == 2:  # ids[2] is m1, released once
                        break
                await c.flush()
                assert await c.receive_batch(10, timeout_s=2.0) == []
                # As on kmq.Consumer (an audit: AttributeError; the README documents both)
                assert (c.stats["acked"], c.stats["released"], c.stats["rejected"], c.in_flight) == (99, 1, 1, 0)
            assert sorted(got) == sorted(ids)
            return ids
    ids = asyncio.run(main())
    # The dead letter is written a moment after the reject's marker: wait for it, then see it alone.
    (dead,) = wait_for(lambda: dead_letters(default_settings, queue), 30, what="the dead letter")
    assert dead["kmq"]["kmq.id"].decode() == ids[3] and dead["kmq"]["kmq.dlq.detail"] == b"bad"


def test_32_tasks_drain_a_queue_and_a_consumer_cancelled_mid_run_loses_nothing_and_acks_nothing_twice(
        default_settings, queue, tracker):
    """The worker test's shape with kmq.aio by hand: tasks under a semaphore of 32, stopped
    by cancelling the consuming task (a service's shutdown), then a second consumer.
    Shared mode only: partition mode's two group joins make it 10 s, and what differs there
    is the sync consumer underneath (test_worker_process.py's SIGTERM test runs it in both modes;
    the aio verbs run in both above)."""
    mode = "shared"
    n = 300
    handled: Counter = Counter()
    running = {"now": 0, "peak": 0}
    arrivals = itertools.count()  # each call's rank
    barrier = asyncio.Barrier(32)
    hundred = asyncio.Event()

    async def consume(client, stop_when):
        slots = asyncio.Semaphore(32)
        tasks: set[asyncio.Task] = set()

        async def handle(msg):
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
            try:
                if next(arrivals) < 32:  # the first 32 wait for one another: 32 at once
                    await asyncio.wait_for(barrier.wait(), 30)
                await asyncio.sleep(0.005)  # the handler's I/O
                handled[msg.id] += 1
                if len(handled) == 100:
                    hundred.set()
                await msg.ack()
            finally:
                running["now"] -= 1
                slots.release()

        async with client.consumer(queue, max_in_flight=96) as c:
            try:
                while not stop_when():
                    await slots.acquire()
                    msg = await c.receive(0.2)
                    if msg is None:
                        slots.release()
                        continue
                    task = asyncio.create_task(handle(msg))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            finally:  # cancelled or done: let the running ones finish (and ack) before close
                await asyncio.gather(*tasks)

    # 30 s, not the suite's 2 s: a consumer stalled for 2 s on a loaded machine would let a
    # prefetched message lapse and come back, handled twice (test_worker_process.py saw 8 of 600).
    settings = default_settings.replace(visibility_timeout_s=30.0)

    async def main():
        async with kmq.aio.Client(settings=settings) as client:
            await set_mode(client, queue, mode)
            ids = await client.send_batch(queue, [b"m%d" % i for i in range(n)])
            await client.flush()
            first = asyncio.create_task(consume(client, lambda: False))
            some_handled = asyncio.create_task(hundred.wait())
            await asyncio.wait([first, some_handled], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            assert hundred.is_set(), "100 handled"
            first.cancel()  # mid-run: 32 running, more prefetched, maybe a receive waiting
            (stopped,) = await asyncio.gather(first, return_exceptions=True)
            assert isinstance(stopped, asyncio.CancelledError), stopped  # not a broken barrier
            assert running["peak"] == 32 and len(handled) < n
            await asyncio.wait_for(consume(client, lambda: len(handled) >= n), 60)
            return ids
    ids = asyncio.run(main())
    # The tracker saw every ack once (an ack lost at a close would leave its message in
    # flight, then waiting again): no consumer needed to show that none comes back.
    detail = wait_for(lambda: all_acked(tracker, queue, n), 30, what=f"{n} acks at the tracker")
    assert detail["since_start"]["acked"] == n, detail["since_start"]
    assert sorted(handled) == sorted(ids), "lost or foreign messages"
    assert [i for i, count in handled.items() if count != 1] == [], "handled (and acked) twice"


def test_send_and_wait_returns_once_the_broker_has_that_message(default_settings, queue):
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            ids = await asyncio.gather(*(client.send_and_wait(queue, b"m%d" % i) for i in range(50)))
            # Each call returned after its own delivery report, not a flush: all are on the
            # broker now (read at once, no waiting; before, the producer's queue length was
            # asked, which can hold a request of its own for a moment: a fresh-clone run saw 1).
            assert ids_on_the_broker(default_settings, queue) == set(ids)
            async with client.consumer(queue) as c:
                got = []
                async def all_back():
                    got.extend(await c.receive_batch(50, 0.2))
                    return len(got) >= 50
                await await_until(all_back, 30, "the 50 messages")
                for m in got:
                    await m.ack()
            assert sorted(m.id for m in got) == sorted(ids)
    asyncio.run(main())


def test_a_waiting_receive_does_not_block_the_event_loop(default_settings, queue):
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            async with client.consumer(queue) as c:
                ticks = []

                async def tick():
                    while True:
                        ticks.append(time.monotonic())
                        await asyncio.sleep(0.01)
                ticker = asyncio.ensure_future(tick())
                started = time.monotonic()
                assert await c.receive(timeout_s=3.0) is None  # nothing there: waits 3 s ...
                waited = time.monotonic() - started
                ticker.cancel()
                gaps = [b - a for a, b in zip(ticks, ticks[1:])]
                # ... while the loop ran other tasks all along (a blocked loop: one 3 s gap).
                assert waited >= 2.9 and len(ticks) > 10 and max(gaps) < waited / 2
    asyncio.run(main())


def test_a_delayed_send_arrives_after_its_delay(default_settings, queue):
    async def main():
        async with kmq.aio.Client(settings=default_settings) as client:
            sent_at = time.time()
            msg_id = await client.send(queue, b"later", delay_s=1.0)
            await client.flush()
            async with client.consumer(queue) as c:
                m = None
                deadline = time.monotonic() + 30
                while m is None:
                    assert time.monotonic() < deadline, "the delayed message did not arrive"
                    m = await c.receive(0.5)
                assert m.id == msg_id and time.time() - sent_at >= 1.0
                await m.ack()
    asyncio.run(main())


def test_the_aiohttp_example_enqueues_from_a_request_handler_and_consumes_in_the_background(
        default_settings, queue):
    from aiohttp.test_utils import TestClient, TestServer

    example = load_example("aiohttp_app")

    async def main():
        app = example.make_app(queue, default_settings)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            ids = []
            for i in range(10):
                r = await http.post(f"/orders/{queue}", data=b"order-%d" % i)
                assert r.status == 202
                ids.append((await r.json())["id"])
            async def all_seen():
                return len(app[example.SEEN]) >= 10
            await await_until(all_seen, 60, "the background consumer to see them all")
            assert sorted(app[example.SEEN]) == sorted(ids)
            assert sorted(app[example.SEEN].values()) == sorted(b"order-%d" % i for i in range(10))
            r = await http.post(f"/orders/{queue}-other", data=b"lost")  # nobody would consume it
            assert r.status == 404
    asyncio.run(main())


def test_the_fastapi_example_enqueues_from_a_request_handler_and_consumes_in_the_background(
        default_settings, queue):
    from fastapi.testclient import TestClient

    from tests.conftest import wait_for

    example = load_example("fastapi_app")

    app = example.make_app(queue, default_settings)
    with TestClient(app) as http:  # runs the lifespan: the client and the consumer task
        ids = []
        for i in range(10):
            r = http.post(f"/orders/{queue}", content=b"order-%d" % i)
            assert r.status_code == 202
            ids.append(r.json()["id"])
        wait_for(lambda: len(app.state.seen) >= 10, 60, what="the background consumer seeing all 10")
        assert sorted(app.state.seen) == sorted(ids)
        assert sorted(app.state.seen.values()) == sorted(b"order-%d" % i for i in range(10))
        assert http.post(f"/orders/{queue}-other", content=b"lost").status_code == 404


def test_the_faust_example_sends_and_consumes_on_fausts_own_loop(default_settings, queue, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from kmq.dev.devstack import settings_env
    from tests.conftest import wait_for

    root = Path(__file__).resolve().parents[2]
    ledger = tmp_path / "ledger"
    env = {**os.environ, **settings_env(default_settings), "PYTHONPATH": str(root), "KMQ_EXAMPLE_QUEUE": queue,
           "KMQ_EXAMPLE_LEDGER": str(ledger), "KMQ_EXAMPLE_COUNT": "10"}
    with open(tmp_path / "faust.log", "w") as out:
        p = subprocess.Popen([sys.executable, "-m", "faust", "-A", "docs.examples.faust_app",
                              "--datadir", str(tmp_path / "faust-data"), "worker", "-l", "warn",
                              "--without-web"], env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: p.poll() is not None or (ledger.exists() and len(ledger.read_text().splitlines()) >= 10),
                     120, what="the Faust app's 10 messages")
            assert p.poll() is None, (tmp_path / "faust.log").read_text()[-2000:]
        finally:
            p.terminate()
            p.wait(60)
    values = sorted(line.split()[1] for line in ledger.read_text().splitlines())
    assert values == sorted(f"order-{i}" for i in range(10))
