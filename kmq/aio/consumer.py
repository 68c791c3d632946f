"""``kmq.aio``'s consumer: :class:`kmq.Consumer` on a helper thread, awaited from the loop.

The sync consumer is used by one thread at a time, so each aio consumer has a helper
thread of its own, and its receives take turns (an ``asyncio.Lock``), each within its
own ``timeout_s``: twenty tasks receiving on one consumer with ``timeout_s=1`` waited up to
20 s when they queued on the thread instead (an audit).

A receive waits on the helper thread at most ``RECEIVE_SLICE_S`` at a time, so a task
cancelled while it waits (``asyncio.wait_for``, ``asyncio.timeout``, a shutdown) frees the
thread within that slice: ``close()`` no longer waited behind a cancelled
``receive(timeout_s=None)`` for ever. What the slice took after its task was cancelled
is kept for the next receive: it was lost to a future nobody read, held invisible until
``max_processing_s`` (5 min by default; an ordered queue's group with it).
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, TypeVar

from kmq.consumer import Consumer as SyncConsumer
from kmq.consumer.arguments import check_batch_count, receive_timeout_s, wait_s
from kmq.errors import ConsumerClosedError
from kmq.message import Message as SyncMessage

if TYPE_CHECKING:
    from kmq.aio import Client

T = TypeVar("T")
RECEIVE_SLICE_S = 0.25  # the longest a receive waits on the helper thread at a time


async def off_loop(executor: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on ``executor``'s thread, awaited."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))


class Consumer:
    """:class:`kmq.Consumer` for asyncio; open it with ``async with``."""

    def __init__(self, client: "Client", queue: str, options: dict[str, Any]) -> None:
        self._client = client
        self.queue = queue
        self._options = options
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"kmq-aio-{queue}")
        self.sync: SyncConsumer | None = None
        self._opening: asyncio.Future | None = None
        self._closing: asyncio.Future | None = None
        self._turn: asyncio.Lock | None = None  # made on the loop that receives
        self._kept: deque[SyncMessage] = deque()  # taken for a receive that was cancelled

    async def open(self) -> "Consumer":
        """Open it (``async with`` does); opening it again, or from two tasks, opens it once."""
        if self._closing is not None:
            raise self._closed_error()
        if self._opening is None:
            self._opening = asyncio.ensure_future(
                off_loop(self._io, self._client.sync.consumer, self.queue, **self._options))
        opening = self._opening
        try:
            self.sync = await asyncio.shield(opening)
        except Exception:
            if self._opening is opening:
                self._opening = None  # failed: the next open tries again
            raise
        return self

    async def receive(self, timeout_s: float | None = 1.0) -> "Message | None":
        """The next message, or None after ``timeout_s`` (None: wait until one comes; 0 or
        less: one look)."""
        got = await self._take(1, timeout_s, lambda c, s: _listed(c.receive(s)))
        return Message(got[0]) if got else None

    async def receive_batch(self, max_messages: int = 500, timeout_s: float | None = 1.0) -> list["Message"]:
        """Up to ``max_messages`` messages (at least one unless ``timeout_s`` passed)."""
        check_batch_count(max_messages)  # before any wait, and before kept messages are taken
        got = await self._take(max_messages, timeout_s,
                               lambda c, s: list(c.receive_batch(max_messages, s)))
        return [Message(m) for m in got]

    async def _take(self, n: int, timeout_s: float | None,
                    receive: Callable[[SyncConsumer, float], list[SyncMessage]]) -> list[SyncMessage]:
        """Messages from what cancelled receives kept, else ``receive`` in slices on the
        helper thread, one receive at a time, until one brings some or ``timeout_s`` passed."""
        consumer = self._open_sync()
        if timeout_s is not None:
            timeout_s = receive_timeout_s(timeout_s)
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None or timeout_s == math.inf else loop.time() + max(0.0, timeout_s)
        if self._turn is None:
            self._turn = asyncio.Lock()
        if not await _acquire(self._turn, None if deadline is None else deadline - loop.time()):
            return self._kept_ones(n)
        try:
            while True:
                if self._kept:
                    return self._kept_ones(n)
                self._open_sync()  # closed meanwhile: say so
                left = RECEIVE_SLICE_S if deadline is None else max(0.0, deadline - loop.time())
                got = await self._on_thread(receive, consumer, min(RECEIVE_SLICE_S, left))
                if got or (deadline is not None and loop.time() >= deadline):
                    return got
        finally:
            self._turn.release()

    async def _on_thread(self, receive: Callable[[SyncConsumer, float], list[SyncMessage]],
                         consumer: SyncConsumer, slice_s: float) -> list[SyncMessage]:
        job = self._io.submit(receive, consumer, slice_s)
        try:
            return await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            job.add_done_callback(self._keep)  # what it takes after all waits for the next receive
            raise

    def _keep(self, job: Future) -> None:
        if not job.cancelled() and job.exception() is None:
            self._kept.extend(job.result())

    def _kept_ones(self, n: int) -> list[SyncMessage]:
        out: list[SyncMessage] = []
        while self._kept and len(out) < n:
            out.append(self._kept.popleft())
        return out

    def __aiter__(self) -> AsyncIterator["Message"]:
        return self._messages()

    async def _messages(self) -> AsyncIterator["Message"]:
        self._open_sync()
        while self._closing is None:
            try:
                m = await self.receive(1.0)
            except ConsumerClosedError:
                if self._closing is not None:
                    return  # closed by another task: the iteration ends, as the sync one does
                raise
            if m is not None:
                yield m

    @property
    def stats(self) -> dict[str, int]:
        """What it did since it opened (:attr:`kmq.Consumer.stats`; reading it does not block)."""
        return self._opened().stats

    @property
    def in_flight(self) -> int:
        """How many messages it holds now (:attr:`kmq.Consumer.in_flight`)."""
        return self._opened().in_flight

    async def flush(self, timeout_s: float = 10.0) -> None:
        """Send the verbs recorded so far and wait for the broker (see :meth:`kmq.Consumer.flush`)."""
        await off_loop(self._io, self._open_sync().flush, timeout_s)

    async def close(self, timeout_s: float = 10.0) -> None:
        """Settle and give back what is held, and leave (see :meth:`kmq.Consumer.close`).

        Once asked, it closes even if the task asking is cancelled; closing again waits for
        the same close (it was a RuntimeError)."""
        wait_s(timeout_s, "close()")
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(timeout_s))
        await asyncio.shield(self._closing)

    async def _close(self, timeout_s: float) -> None:
        try:
            sync = None
            if self._opening is not None:
                try:
                    sync = await asyncio.shield(self._opening)
                except Exception:  # it never opened: nothing to close
                    pass
            if sync is not None:
                await off_loop(self._io, sync.close, timeout_s)
        finally:
            self._kept.clear()  # held by the sync consumer: its close gave them back
            self._io.shutdown(wait=False)

    def _opened(self) -> SyncConsumer:
        if self.sync is None:
            raise ConsumerClosedError(f"consumer of queue {self.queue!r} is not open yet: use "
                                      f"`async with client.consumer({self.queue!r}) as c:` (or await c.open())")
        return self.sync

    def _open_sync(self) -> SyncConsumer:
        if self._closing is not None:
            raise self._closed_error()
        return self._opened()

    def _closed_error(self) -> ConsumerClosedError:
        return ConsumerClosedError(f"consumer of queue {self.queue!r} is closed: open another "
                                   f"(`async with client.consumer({self.queue!r}) as c:`)")

    async def __aenter__(self) -> "Consumer":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _acquire(lock: asyncio.Lock, timeout_s: float | None) -> bool:
    """Take ``lock`` within ``timeout_s`` (None: however long it takes); whether it was."""
    if timeout_s is None or not lock.locked():
        await lock.acquire()  # (free: taken at once; wait_for(..., 0) cancelled it first)
        return True
    try:
        await asyncio.wait_for(lock.acquire(), max(0.0, timeout_s))
    except TimeoutError:
        return False
    return True


def _listed(m: SyncMessage | None) -> list[SyncMessage]:
    return [] if m is None else [m]


class Message:
    """A received message with awaitable verbs; everything else as :class:`kmq.Message`."""

    __slots__ = ("sync",)

    def __init__(self, message: SyncMessage) -> None:
        self.sync = message

    def __getattr__(self, name: str) -> Any:  # queue, id, value, headers, delivery_count, ...
        return getattr(self.sync, name)

    def __repr__(self) -> str:
        return repr(self.sync)

    async def ack(self) -> None:
        self.sync.ack()

    async def release(self, delay_s: float | None = None) -> None:
        self.sync.release(delay_s)

    async def reject(self, reason: str = "") -> None:
        self.sync.reject(reason)

    async def extend(self, seconds: float) -> None:
        self.sync.extend(seconds)
