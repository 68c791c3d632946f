"""The SDK for asyncio services: ``kmq.aio.Client``, with no blocking call on the event loop.

::

    async with kmq.aio.Client() as client:
        await client.send("orders", b"payload")
        async with client.consumer("orders") as c:
            async for msg in c:
                await msg.ack()

How it stays off the loop: librdkafka's blocking calls (metadata, flush, a consumer's
receive, close, admin calls) run on helper threads (one for the client, one per
consumer, so a consumer's calls stay on one thread as its contract asks) and are awaited
as futures; ``flush()`` awaits the delivery reports of what was sent. A send is
``Producer.produce`` (enqueue only) on the loop once the queue's placement is known (the
first send to a queue looks it up off the loop), giving the loop a turn every
``YIELD_EVERY_SENDS``; a local queue with no room (records or bytes) is waited on off the
loop, as are large batches. A receive waits in slices, so a cancelled one frees its
consumer at once and what it took goes to the next (:mod:`kmq.aio.consumer`). ``send_and_wait`` awaits its own record's delivery report: librdkafka's reports
are served on a helper thread while any send waits, each resolving its future on the loop
(a request that must answer "durable" waits for its record only, not for a flush of every
send in flight). Verbs only record locally (the consumer's flusher sends them), so they
are instant; they are coroutines for symmetry.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping

from kmq.aio.consumer import Consumer, Message, off_loop
from kmq.client import Client as SyncClient
from kmq.consumer.arguments import wait_s
from kmq.consumer.options import check_options
from kmq.errors import DeliveryError
from kmq.kafka.delivery_reports import DeliveryReports
from kmq import send_args, send_delay
from kmq.protocol.placement import validate_queue_name
from kmq.queue_config import QueueConfig
from kmq.settings import Settings

__all__ = ["Client", "Consumer", "Message"]

# librdkafka's local queue holds 1M records (kmq.client); past this many waiting, a send
# could block on room: it is made off the loop. (It holds at most 1 GiB too: a send that
# finds no room for its bytes is made again off the loop, see Client.send.)
OFF_LOOP_ABOVE = 900_000
# A batch this large, or this many bytes, is enqueued off the loop: 50,000 records inline
# held the loop 123 ms (an audit), and a batch cannot be taken back half enqueued.
INLINE_BATCH_RECORDS = 2_000
INLINE_BATCH_BYTES = 4 << 20
YIELD_EVERY_SENDS = 256  # the inline send gives the loop a turn this often (20,000 awaited sends held it 84 ms)


class _SyncClient(SyncClient):
    """The sync client with a delivery report for every record: per-send futures need them."""

    DELIVERY_REPORT_ONLY_ERROR = False


def _resolve(delivered: "asyncio.Future[None]", err: Any, queue: str) -> None:
    if delivered.done():  # the sender stopped waiting (cancelled)
        return
    if err is None:
        delivered.set_result(None)
    else:
        delivered.set_exception(DeliveryError(
            f"a message of queue {queue!r} was not written: {err}; send it again"))


class Client:
    """:class:`kmq.Client` for asyncio: the same arguments, awaitable methods."""

    def __init__(self, bootstrap_servers: str | None = None, *, settings: Settings | None = None,
                 **setting_overrides: Any) -> None:
        self.sync = _SyncClient(bootstrap_servers, settings=settings, **setting_overrides)
        self.settings = self.sync.settings
        self._io: ThreadPoolExecutor | None = None
        self._placed: set[str] = set()
        self._reports: DeliveryReports | None = None
        self._closing: asyncio.Future | None = None
        self._inline_sends = 0

    def _executor(self) -> ThreadPoolExecutor:
        """The helper thread (again after close(): the client may be used again, as the sync
        one may; a closed one raised RuntimeError, and a send then was never flushed)."""
        if self._io is None:
            self._io = ThreadPoolExecutor(1, thread_name_prefix="kmq-aio")
            self._closing = None
        return self._io

    async def _ready_to_send(self, queue: str) -> bool:
        """True when a send of ``queue`` cannot block (placement known, room left)."""
        if queue not in self._placed:
            await off_loop(self._executor(), self._look_up, queue)
            self._placed.add(queue)
        producer = self.sync._get_producer()
        return len(producer) < OFF_LOOP_ABOVE

    def _look_up(self, queue: str) -> None:
        s = self.sync
        s._get_producer()
        s._slot(queue)  # queue configs and queue-topic partitions, cached
        s.partition_count(s.settings.markers_topic)  # delayed sends' markers partition

    async def send(self, queue: str, value: bytes, *, headers: Mapping[str, bytes | str] | None = None,
                   delay_s: float | None = None, deliver_at: float | None = None,
                   group: str | bytes | None = None, dedup_id: str | bytes | None = None) -> str:
        """Enqueue ``value`` (see :meth:`kmq.Client.send`); returns the message id at once
        (``await flush()``, or :meth:`send_and_wait`, to know the broker has it)."""
        producer = self.sync._producer
        if producer is not None and queue in self._placed and len(producer) < OFF_LOOP_ABOVE:
            # The common case inline, no coroutine of its own: a send costs ~1.1x the sync
            # client's CPU instead of ~1.2x (thread CPU of 50k sends: 3.3 against 3.6-4.1 us).
            try:
                msg_id = self.sync._send(queue, value, headers, delay_s, deliver_at, group, dedup_id, None, False)
            except BufferError:  # no room for its bytes: waited for off the loop, below
                pass
            else:
                self._inline_sends += 1
                if self._inline_sends % YIELD_EVERY_SENDS == 0:
                    await asyncio.sleep(0)
                return msg_id
        args = (queue, value, headers, delay_s, deliver_at, group, dedup_id, None)
        self._check_send(*args[:7])
        if await self._ready_to_send(queue):
            try:
                return self.sync._send(*args, False)
            except BufferError:
                pass
        return await off_loop(self._executor(), self.sync._send, *args)

    def _check_send(self, queue: Any, value: Any, headers: Any, delay_s: Any, deliver_at: Any,
                    group: Any, dedup_id: Any) -> None:
        """Every argument of a send checked before the placement is looked up: with the broker
        down, the broker's error was said instead, after its timeout."""
        send_args.check_send(queue, value, headers, group, dedup_id)
        send_delay.due_ms(delay_s, deliver_at, self.sync.settings.max_delay_s)

    async def send_and_wait(self, queue: str, value: bytes, *,
                            headers: Mapping[str, bytes | str] | None = None,
                            delay_s: float | None = None, deliver_at: float | None = None,
                            group: str | bytes | None = None, dedup_id: str | bytes | None = None) -> str:
        """:meth:`send`, then wait for this message's own delivery report (aiokafka's name);
        returns its id once the broker has it, raises :class:`kmq.DeliveryError` if it was
        not written (at the latest after ``KMQ_DELIVERY_TIMEOUT_MS``)."""
        loop = asyncio.get_running_loop()
        delivered: asyncio.Future[None] = loop.create_future()

        def report(err: Any, _record: Any) -> None:  # on whichever thread polled
            try:
                loop.call_soon_threadsafe(_resolve, delivered, err, queue)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        args = (queue, value, headers, delay_s, deliver_at, group, dedup_id, report)
        self._check_send(*args[:7])  # an audit: named after 15 s, by the broker's error, with it down
        msg_id = None
        if await self._ready_to_send(queue):
            try:
                msg_id = self.sync._send(*args, False)
            except BufferError:  # no room for its bytes: waited for off the loop
                pass
        if msg_id is None:
            msg_id = await off_loop(self._executor(), self.sync._send, *args)
        if self._reports is None:
            self._reports = DeliveryReports(self.sync._get_producer())
        self._reports.expect()
        try:
            await delivered
        finally:
            self._reports.done()
        return msg_id

    async def send_batch(self, queue: str, values: Iterable[bytes],
                         headers: Mapping[str, bytes | str] | None = None, **unsupported: Any) -> list[str]:
        """Enqueue many values on one queue (see :meth:`kmq.Client.send_batch`)."""
        send_args.refuse_batch_options(unsupported)
        values = send_args.check_values(values)  # one bytes value, listed, was a batch of ints
        validate_queue_name(queue)  # before the broker is asked, as for send()
        send_args.check_headers(headers)
        if (await self._ready_to_send(queue) and len(values) <= INLINE_BATCH_RECORDS
                and sum(map(len, values)) <= INLINE_BATCH_BYTES
                and len(self.sync._producer or ()) + len(values) < OFF_LOOP_ABOVE):
            return self.sync.send_batch(queue, values, headers)
        return await off_loop(self._executor(), self.sync.send_batch, queue, values, headers)

    async def flush(self, timeout_s: float = 30.0) -> None:
        """Wait (off the loop) until every sent message is acknowledged; raise if any was lost."""
        await off_loop(self._executor(), self.sync.flush, timeout_s)

    async def configure_queue(self, queue: str, **changes: Any) -> QueueConfig:
        return await off_loop(self._executor(), self.sync.configure_queue, queue, **changes)

    async def queue_config(self, queue: str) -> QueueConfig:
        return await off_loop(self._executor(), self.sync.queue_config, queue)

    async def dead_letters(self, queue: str, **filters: Any) -> list:
        return await off_loop(self._executor(), self.sync.dead_letters, queue, **filters)

    async def redrive(self, queue: str, **options: Any) -> Any:
        return await off_loop(self._executor(), self.sync.redrive, queue, **options)

    async def purge(self, queue: str, timeout_s: float = 30.0) -> dict[int, int]:
        return await off_loop(self._executor(), self.sync.purge, queue, timeout_s)

    async def purge_dead_letters(self, queue: str) -> int:
        return await off_loop(self._executor(), self.sync.purge_dead_letters, queue)

    def consumer(self, queue: str, **options: Any) -> "Consumer":
        """A consumer of ``queue`` to use with ``async with`` (options as :meth:`kmq.Client.consumer`)."""
        # Refused here, as the sync client.consumer(...) refuses them (it waited for the open).
        queue = validate_queue_name(queue)
        check_options(options, f"client.consumer({queue!r})")
        return Consumer(self, queue, options)

    async def close(self, timeout_s: float = 30.0) -> None:
        """Flush what was sent (off the loop) and let go of the connections. Once asked, it
        closes even if the task asking is cancelled; closing again waits for the same close."""
        wait_s(timeout_s, "close()")  # before anything: a bad one left the client half closed
        io = self._executor()
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(io, timeout_s))
        await asyncio.shield(self._closing)

    async def _close(self, io: ThreadPoolExecutor, timeout_s: float) -> None:
        try:
            await off_loop(io, self.sync.close, timeout_s)
        finally:
            if self._reports is not None:
                await off_loop(io, self._reports.close)
                self._reports = None
            self._placed.clear()  # the sync client forgot its placements' producer with it
            io.shutdown(wait=False)
            if self._io is io:
                self._io = None

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
