"""A worker's ``async def`` handlers: at most ``concurrency`` tasks on one event loop (the
runner's own thread), the consumer's blocking calls on one helper thread off the loop.
Mixed into :class:`kmq.worker.runner.HandlerRunner` (its receiving, settling and shutdown
are described there)."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from kmq.message import Message
from kmq.tracing import handling

if TYPE_CHECKING:  # pragma: no cover
    from kmq.worker.runner import HandlerRunner

log = logging.getLogger("kmq.worker")

RECEIVE_WAIT_S = 0.2  # how long one receive waits: bounds how late a runner sees a signal


class AsyncHandlers:
    """:meth:`_run_async` and the tasks it starts, of a :class:`HandlerRunner`."""

    async def _run_async(self: "HandlerRunner") -> None:
        h = self.handler
        loop = asyncio.get_running_loop()
        # One thread for every consumer call: librdkafka's blocking calls stay off the loop,
        # and one thread at a time enters the Consumer (its receive contract).
        io = ThreadPoolExecutor(1, thread_name_prefix=f"kmq-receive-{h.queue}")
        consumer = await loop.run_in_executor(io, self._open)
        slots = Slots(h.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        stopping = self.shutdown.stopping
        try:
            while not stopping.is_set():
                if not slots.free:
                    await slots.wait_freed(RECEIVE_WAIT_S)  # bounded: a signal must still be seen
                    continue
                # Every free slot in one receive: one hop to the helper thread per batch, not
                # per message (32 x 20 ms handlers: the hop per message left slots idle with
                # messages ready; bench/worker_probe.py).
                batch = await loop.run_in_executor(io, consumer.receive_batch, slots.free, RECEIVE_WAIT_S)
                max_deliveries = self._max_deliveries(consumer)
                ordered = consumer.config.ordering == "group"
                for chain in (self._chains(batch) if ordered else batch):
                    slots.take()
                    task = loop.create_task(self._call_chain_async(chain, max_deliveries, slots)
                                            if ordered else self._call_async(chain, max_deliveries, slots))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            while tasks and not self.shutdown.forced.is_set():
                left = self.shutdown.state.grace_left_s(time.monotonic())
                if left <= 0:
                    break
                await asyncio.wait(set(tasks), timeout=min(left, 0.05))
        finally:
            await loop.run_in_executor(io, self._close, consumer)
            self._tasks_cancelled = True  # (before the cancel: what each task sees is ours)
            for task in tasks:
                task.cancel()
            io.shutdown(wait=False)

    async def _call_async(self: "HandlerRunner", msg: Message, max_deliveries: int, slots: "Slots") -> None:
        try:
            await self._handle_async(msg, max_deliveries)
        except asyncio.CancelledError:
            pass
        finally:
            slots.release()

    async def _handle_async(self: "HandlerRunner", msg: Message, max_deliveries: int) -> None:
        started = self._enter()
        try:
            try:
                with handling(msg.queue, self.handler.name, msg.id, msg.headers):
                    await self.handler.fn(msg)
                exc = None
            except asyncio.CancelledError as e:
                if getattr(self, "_tasks_cancelled", False):
                    raise  # the runner's cancel: the grace is over, close() released it
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # The handler cancelled its own task: it was taken for the runner's cancel,
                    # and the message was neither settled nor given back until shutdown (an audit).
                    task.uncancel()
                exc = e  # the handler's own await was cancelled: a failure like any other
            except BaseException as e:  # noqa: BLE001 - any BaseException, as a sync handler's
                exc = e  # (the worker's signals are the loop's handlers: never a KeyboardInterrupt here)
            self._settle(msg, exc, max_deliveries, started)
        except Exception:
            log.exception("settling a message of queue %s failed", self.handler.queue)
        finally:
            self._leave()


class Slots:
    """An async runner's free handler slots (one event loop: no lock), and a wake-up when
    one frees; unlike asyncio.Semaphore, it says how many are free at once."""

    def __init__(self, n: int) -> None:
        self.free = n
        self._freed = asyncio.Event()

    def take(self) -> None:
        self.free -= 1

    def release(self) -> None:
        self.free += 1
        self._freed.set()

    async def wait_freed(self, timeout_s: float) -> None:
        self._freed.clear()
        try:
            await asyncio.wait_for(self._freed.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
