"""`@kmq.handler` run by a HandlerRunner in the test's process on a real broker: 32 concurrent
handlers drain a queue; exceptions retry, then dead-letter with the reason, each failed call
logged and counted in the metrics; a handler past max_processing_s is reported and its
message delivered again; a send inside a span is handled in the same trace. Sync and async
handlers; shared and partition queues.

`kmq worker` as a process (signals, --processes, --metrics-port): test_worker_process.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from contextlib import contextmanager

import pytest

import kmq
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal
from tests.conftest import wait_for
from tests.integration.dlq import dead_letters
from tests.integration.views import all_acked
from tests.integration.worker_fixtures import client, mode, settings  # noqa: F401 - the module's fixtures

pytestmark = pytest.mark.usefixtures("tracker")
BARRIER_S = 30.0  # a barrier that is never full fails the test instead of hanging it


class Running:
    """A runner on its own thread, stopped like a first SIGTERM would."""

    def __init__(self, client, handler, grace_s=30.0, metrics=None):
        self.shutdown = ShutdownSignal(grace_s)
        self.runner = HandlerRunner(client, handler, self.shutdown, metrics)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.runner.run()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.errors.append(exc)

    def stop(self):
        self.shutdown.signal(time.monotonic())
        self.thread.join(60)
        assert not self.thread.is_alive(), "the runner did not stop"
        assert not self.errors, self.errors


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_worker_with_32_concurrent_handlers_drains_a_queue(client, queue, mode, kind, tracker):
    n = 400
    ids = client.send_batch(queue, [b"m%d" % i for i in range(n)])
    client.flush()
    done: Counter = Counter()
    lock = threading.Lock()
    arrivals = iter(range(n * 10))  # next() under the GIL: each call's rank, once
    running = {"now": 0, "peak": 0, "broken": 0}

    @contextmanager
    def counted(msg):
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        try:
            yield
            with lock:
                done[msg.id] += 1
        except Exception:
            with lock:
                running["broken"] += 1
            raise
        finally:
            with lock:
                running["now"] -= 1

    # The first 32 calls wait for one another: the barrier fills only if 32 run at once
    # (else it breaks: the test fails at once); the peak says no more than 32 ever ran.
    if kind == "sync":
        barrier = threading.Barrier(32)

        def work(msg):
            with counted(msg):
                if next(arrivals) < 32:
                    barrier.wait(BARRIER_S)
    else:
        state = {}

        async def work(msg):
            with counted(msg):
                if next(arrivals) < 32:
                    barrier = state.setdefault("barrier", asyncio.Barrier(32))
                    await asyncio.wait_for(barrier.wait(), BARRIER_S)

    handler = kmq.handler(queue, concurrency=32)(work)
    worker = Running(client, handler)
    try:
        wait_for(lambda: len(done) >= n or running["broken"] or worker.errors, 120,
                 what=f"{n} messages handled")
    finally:
        worker.stop()
    assert running["broken"] == 0, "32 handlers never ran at once"
    assert running["peak"] == 32, f"at most 32 at once, saw {running['peak']}"
    assert sorted(done) == sorted(ids) and set(done.values()) == {1}
    # Every ack reached the tracker: nothing is left in flight to come back.
    wait_for(lambda: all_acked(tracker, queue, n), 30, what=f"{n} acks at the tracker, nothing in flight")


class Fatal(Exception):
    pass


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_exceptions_retry_then_dead_letter_with_the_reason(client, queue, mode, kind, settings, caplog):
    sent = {client.send(queue, kind_.encode(), headers={"kind": kind_}): kind_
            for kind_ in ("ok", "flaky", "broken", "reject", "fatal")}
    client.flush()
    calls: Counter = Counter()

    def outcome(msg):
        calls[msg.id] += 1
        what = msg.value.decode()
        if what == "flaky" and msg.delivery_count < 2:
            raise TimeoutError("upstream slow")
        if what == "broken":
            raise ValueError("bad payload\nsecret line two " + "x" * 2000)
        if what == "reject":
            raise kmq.Reject("bad address")
        if what == "fatal":
            raise Fatal("never retry")

    if kind == "sync":
        fn = outcome
    else:
        async def fn(msg):
            outcome(msg)
    handler = kmq.handler(queue, concurrency=4, non_retryable=(Fatal,))(fn)
    metrics = WorkerMetrics()
    with caplog.at_level("WARNING", logger="kmq.worker"):
        running = Running(client, handler, metrics=metrics)
        try:
            dead = wait_for(lambda: len(dead_letters(settings, queue)) >= 3 and dead_letters(settings, queue),
                            60, what="three dead letters")
            wait_for(lambda: sum(calls.values()) >= 1 + 2 + 3 + 1 + 1, 30, what="every call")
        finally:
            running.stop()  # drains: every call settled, counted and logged
    by_id = {d["kmq"]["kmq.id"].decode(): d for d in dead}
    assert {sent[i] for i in by_id} == {"broken", "reject", "fatal"}
    assert {d["kmq"]["kmq.dlq.reason"] for d in dead} == {b"rejected"}  # by the handler, the why in detail
    reasons = {sent[i]: d["kmq"]["kmq.dlq.detail"].decode() for i, d in by_id.items()}
    assert reasons["reject"] == "bad address" and reasons["fatal"] == "Fatal: never retry"
    assert reasons["broken"].startswith("ValueError: bad payload secret line two xxx")
    assert reasons["broken"].endswith("...") and len(reasons["broken"].encode()) <= 512
    m = settings.max_deliveries
    assert {sent[i]: n for i, n in calls.items()} == {"ok": 1, "flaky": 2, "broken": m, "reject": 1, "fatal": 1}
    # One structured line per failed call, with what became of the message and why.
    failed = [json.loads(r.getMessage()) for r in caplog.records if "handler_failed" in r.getMessage()]
    assert sorted((sent[f["id"]], f["delivery_count"], f["outcome"]) for f in failed) == sorted(
        [("flaky", 1, "released"), ("reject", 1, "rejected"), ("fatal", 1, "rejected")]
        + [("broken", d, "released") for d in range(1, m)] + [("broken", m, "rejected")])
    assert {f["error"] for f in failed if sent[f["id"]] == "fatal"} == {"Fatal: never retry"}
    # And the worker's metrics count them by outcome.
    page = metrics.render()
    labels = f'queue="{queue}",handler="{handler.name}"'
    for outcome_, count in {"acked": 2, "released": 1 + (m - 1), "rejected": 3}.items():
        assert f'kmq_worker_messages_total{{{labels},outcome="{outcome_}"}} {count}' in page
    assert f"kmq_worker_failures_total{{{labels}}} {1 + m + 1 + 1}" in page
    assert f"kmq_worker_handler_seconds_count{{{labels}}} {2 + 1 + m + 1 + 1}" in page
    assert f"kmq_worker_in_flight{{{labels}}} 0" in page


def test_a_handler_past_max_processing_s_is_reported_and_its_message_delivered_again(
        client, queue, caplog):
    msg_id = client.send(queue, b"slow")
    client.flush()
    deliveries: list[int] = []

    def slow(msg):
        deliveries.append(msg.delivery_count)
        if msg.delivery_count == 1:  # runs until the keepalive gave up on it (no sleep: a poll)
            wait_for(lambda: msg.lapsed, 60, what="the message to lapse")

    handler = kmq.handler(queue, visibility_timeout_s=1, max_processing_s=1)(slow)
    with caplog.at_level("WARNING", logger="kmq.worker"):
        running = Running(client, handler)
        try:
            wait_for(lambda: deliveries == [1, 2], 60, what="the second delivery")
        finally:
            running.stop()
    overran = [r.getMessage() for r in caplog.records if "handler_overran" in r.getMessage()]
    assert len(overran) == 1 and msg_id in overran[0]


def test_a_send_inside_a_span_is_handled_in_the_same_trace(client, queue):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())  # once per process; test_tracing.py may have
    with trace.get_tracer("test").start_as_current_span("request") as parent:
        msg_id = client.send(queue, b"traced")
    client.flush()
    seen = {}

    def handle(msg):
        seen[msg.id] = trace.get_current_span().get_span_context().trace_id

    running = Running(client, kmq.handler(queue)(handle))
    try:
        wait_for(lambda: msg_id in seen, 60, what="the traced message")
    finally:
        running.stop()
    assert seen[msg_id] == parent.get_span_context().trace_id


class LibraryAbort(BaseException):
    """What some libraries raise: a BaseException that is no Exception."""


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_handler_raising_any_base_exception_has_its_message_released_and_reported(
        client, queue, mode, kind, caplog):
    # Before: KeyboardInterrupt, GeneratorExit or a library's own BaseException left the
    # message held, unreported, until max_processing_s (300 s by default) ran out.
    raised = {"interrupt": KeyboardInterrupt, "abort": LibraryAbort}
    sent = {client.send(queue, what.encode()): what for what in raised}
    client.flush()
    calls: Counter = Counter()

    def outcome(msg):
        calls[msg.id] += 1
        if msg.delivery_count == 1:
            raise raised[msg.value.decode()]("from user code")

    if kind == "sync":
        fn = outcome
    else:
        async def fn(msg):
            outcome(msg)
    handler = kmq.handler(queue, concurrency=2)(fn)
    with caplog.at_level("WARNING", logger="kmq.worker"):
        running = Running(client, handler)
        try:
            wait_for(lambda: sorted(calls.values()) == [2, 2], 60, what="each message delivered again")
        finally:
            running.stop()
    failed = [json.loads(r.getMessage()) for r in caplog.records if "handler_failed" in r.getMessage()]
    assert sorted((sent[f["id"]], f["outcome"], f["error"]) for f in failed) == [
        ("abort", "released", "LibraryAbort: from user code"),
        ("interrupt", "released", "KeyboardInterrupt: from user code")]
