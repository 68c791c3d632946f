"""Runs one :class:`~kmq.worker.registry.Handler`: receive, hand to user code, settle.

A plain function runs on a thread pool of ``concurrency`` threads; an ``async def`` runs as
at most ``concurrency`` tasks on one event loop (the runner's own thread), its consumer's
blocking calls on one helper thread off the loop. Either way the runner receives only
for free slots, as many messages as slots are free in one ``receive_batch``, so every
message handed out is one that starts at once; the consumer holds at most ``prefetch``
more, ready.

On a queue with ``ordering="group"`` a batch may hold several messages of one group: they
run one after another on one slot (kmq.worker.chains), never two of a group at once.

Shutdown (kmq.worker.shutdown): at the first signal the runner stops receiving and waits
for the running handlers until the grace is over; then ``Consumer.close()`` gives back the
prefetched messages uncounted, releases any still running (counted), and flushes every
settlement. At the second signal the process exits at once (kmq.worker.main).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from kmq.errors import ConfigError, MessageSettledError
from kmq.message import Message
from kmq.tracing import handling
from kmq.worker.async_handlers import RECEIVE_WAIT_S, AsyncHandlers
from kmq.worker.chains import ChainRunner
from kmq.worker.metrics import OUTCOME_COUNTER
from kmq.worker.outcome import decide, failure_reason
from kmq.worker.registry import Handler
from kmq.worker.shutdown import ShutdownSignal

if TYPE_CHECKING:  # pragma: no cover
    from kmq.client import Client
    from kmq.consumer import Consumer
    from kmq.worker.metrics import WorkerMetrics

log = logging.getLogger("kmq.worker")

SETTLE_TIMEOUT_S = 10.0
FLUSH_INTERVAL_S = 0.025  # a handler's consumer sends settlements this often (default 0.1)


class HandlerRunner(AsyncHandlers, ChainRunner):
    """One handler's consumer, slots and settlements; :meth:`run` returns once drained."""

    def __init__(self, client: "Client", handler: Handler, shutdown: ShutdownSignal,
                 metrics: "WorkerMetrics | None" = None) -> None:
        self.client = client
        self.handler = handler
        self.shutdown = shutdown
        self.metrics = metrics
        self.running = 0          # handlers in user code now
        self.submitted = 0        # sync calls handed to the pool and not yet returned
        self.still_running_at_close = 0
        self.max_processing_s = 0.0  # the consumer's, once open
        self.consumer: "Consumer | None" = None  # once open (bench/worker_probe.py samples it)
        self._lock = threading.Lock()
        self.ready = threading.Event()  # set once the consumer is open (tests, logs)
        # Handling begins once this is set: the worker sets it after its `ready` line (or when
        # stopping), so no handler runs, nor logs, before that line (docs/workers.md; before,
        # a handler's first lines came ahead of it). Set from the start for a runner on its own.
        self.go = threading.Event()
        self.go.set()

    # -- the consumer ----------------------------------------------------------------

    def _open(self) -> "Consumer":
        h = self.handler
        # A fixed read-ahead (shared queues: the adaptive one starts at 10 and lags a busy pool;
        # Handler.read_ahead covers the dispatcher's round trip), and settlements sent every
        # 25 ms, not 100: a shared consumer's acks free the room it asks the dispatcher to fill
        # (bench/worker.py, 32 x 20 ms handlers, one run each: 1,364 -> 1,445 msgs/s).
        options = {"batch_size": min(1000, h.max_in_flight), "prefetch": max(1, h.read_ahead),
                   "flush_interval_s": FLUSH_INTERVAL_S, **h.consumer_options,
                   "max_in_flight": h.max_in_flight}
        try:
            consumer = self.consumer = self.client.consumer(h.queue, **options)
        except ConfigError as exc:  # with many handlers, which one's options: say it
            raise ConfigError(f"handler {h.name} of queue {h.queue!r}: {exc}") from exc
        self.max_processing_s = consumer.max_processing_s
        self.ready.set()
        self.go.wait()
        return consumer

    def _max_deliveries(self, consumer: "Consumer") -> int:
        return consumer.config.deliveries(self.client.settings)

    # -- one message -----------------------------------------------------------------

    def _settle(self, msg: Message, exc: BaseException | None, max_deliveries: int,
                started: float) -> None:
        """Apply the outcome of one handler call (unless user code settled the message)."""
        h = self.handler
        elapsed_s = time.monotonic() - started
        outcome = None
        if msg.lapsed:
            # Held past max_processing_s: the tracker took it back, a verb changes nothing.
            log.warning("%s", _line("handler_overran", h, msg, elapsed_s=round(elapsed_s, 3),
                                    max_processing_s=self.max_processing_s))
        elif msg.settled is None:
            outcome = decide(exc, delivery_count=msg.delivery_count, max_deliveries=max_deliveries,
                             non_retryable=h.non_retryable)
            try:
                if outcome.verb == "ack":
                    msg.ack()
                elif outcome.verb == "release":
                    msg.release()
                else:
                    msg.reject(outcome.reason)
            except MessageSettledError:  # released by close() after the grace: already back
                outcome = None
        # One vocabulary for the log and the metrics, settled by the runner or by the handler:
        # acked, released, rejected (Message.settled's words), or lapsed.
        became = OUTCOME_COUNTER[outcome.verb] if outcome else (msg.settled or "lapsed")
        if exc is not None:
            log.warning("%s", _line("handler_failed", h, msg, elapsed_s=round(elapsed_s, 3),
                                    outcome=became, error=failure_reason(exc)))
        if self.metrics is not None:
            self.metrics.handled(h, became, failed=exc is not None, duration_s=elapsed_s)

    def _enter(self) -> float:
        with self._lock:
            self.running += 1
        if self.metrics is not None:
            self.metrics.in_flight(self.handler, +1)
        return time.monotonic()

    def _leave(self) -> None:
        with self._lock:
            self.running -= 1
        if self.metrics is not None:
            self.metrics.in_flight(self.handler, -1)

    def _call_sync(self, msg: Message, max_deliveries: int, slots: threading.Semaphore) -> None:
        try:
            self._handle_sync(msg, max_deliveries)
        finally:
            slots.release()

    def _handle_sync(self, msg: Message, max_deliveries: int) -> None:
        started = self._enter()
        try:
            try:
                with handling(msg.queue, self.handler.name, msg.id, msg.headers):
                    result = self.handler.fn(msg)
                if inspect.isawaitable(result):  # never run: an ack would lose the message
                    getattr(result, "close", lambda: None)()
                    raise TypeError(f"{self.handler.name} returned {type(result).__name__} {result!r}, not "
                                    "awaited: make the handler an async def (a decorator of one must be async too)")
                exc = None
            except BaseException as e:  # noqa: BLE001 - any failure of user code is the message's
                # SystemExit, KeyboardInterrupt, a library's own BaseException too (a pool thread
                # gets no signals): uncaught, it left the message held, unreported, for
                # max_processing_s (measured: 300 s by default).
                exc = e
            self._settle(msg, exc, max_deliveries, started)
        except Exception:  # never lose a slot to a bug of ours
            log.exception("settling a message of queue %s failed", self.handler.queue)
        finally:
            self._leave()

    # -- sync handlers -----------------------------------------------------------------

    def run(self) -> None:
        """Receive and handle until shutdown; then drain within the grace and close."""
        if self.handler.is_async:
            asyncio.run(self._run_async())
            return
        h = self.handler
        consumer = self._open()
        slots = threading.Semaphore(h.concurrency)
        pool = ThreadPoolExecutor(h.concurrency, thread_name_prefix=f"kmq-handler-{h.queue}")
        stopping = self.shutdown.stopping
        try:
            while not stopping.is_set():
                if not slots.acquire(timeout=RECEIVE_WAIT_S):
                    continue
                free = 1
                while free < h.concurrency and slots.acquire(blocking=False):
                    free += 1  # every free slot: one receive for all of them
                batch = consumer.receive_batch(free, RECEIVE_WAIT_S)
                for _ in range(free - len(batch)):
                    slots.release()
                max_deliveries = self._max_deliveries(consumer)
                if consumer.config.ordering == "group":
                    chains = self._chains(batch)
                    for _ in range(len(batch) - len(chains)):
                        slots.release()  # a chain takes one slot
                    for chain in chains:
                        self._submit(pool, self._call_chain_sync, chain, max_deliveries, slots)
                    continue
                for msg in batch:
                    self._submit(pool, self._call_sync, msg, max_deliveries, slots)
            self._drain(lambda: self.running == 0 and self.queued == 0 and self.submitted == 0)
        finally:
            self._close(consumer)
            pool.shutdown(wait=self.running == 0, cancel_futures=True)

    def _submit(self, pool: ThreadPoolExecutor, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the pool, counted from now until it returns: counted only once a
        pool thread began it, a batch received just before a signal was not waited for, and
        close() gave it back while the pool still ran it (handled twice, once by the worker
        after this one)."""
        with self._lock:
            self.submitted += 1

        def call() -> None:
            try:
                fn(*args)
            finally:
                with self._lock:
                    self.submitted -= 1
        pool.submit(call)

    def _drain(self, done: Callable[[], bool]) -> None:
        """Wait for running handlers while the grace lasts (and no second signal came)."""
        while not done() and not self.shutdown.forced.is_set():
            left = self.shutdown.state.grace_left_s(time.monotonic())
            if left <= 0:
                break
            self.shutdown.forced.wait(min(left, 0.05))

    def _close(self, consumer: "Consumer") -> None:
        self.still_running_at_close = self.running
        if self.running:
            log.warning("%s", json.dumps({"event": "grace_over", "queue": self.handler.queue,
                                          "handler": self.handler.name, "running": self.running,
                                          "then": "released (delivered again)"}))
        consumer.close(SETTLE_TIMEOUT_S)


def _line(event: str, h: Handler, msg: Message, **fields: Any) -> str:
    """One structured log line (JSON) about one message."""
    return json.dumps({"event": event, "queue": h.queue, "handler": h.name, "id": msg.id,
                       "delivery_count": msg.delivery_count, **fields}, default=str)
