"""`@kmq.handler` and `kmq worker` on a real broker: concurrency, retries and dead letters,
and a SIGTERM mid-run that loses nothing and acks nothing twice. Sync and async handlers;
shared and partition queues."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

import kmq
from kmq.dev.devstack import settings_env
from kmq.settings import DEFAULT_MAX_PROCESSING_S
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal
from tests.conftest import partition_mode, wait_for
from tests.integration.dlq import dead_letters
from tests.integration.views import all_acked

pytestmark = pytest.mark.usefixtures("tracker")
ROOT = Path(__file__).resolve().parents[2]
BARRIER_S = 30.0  # a barrier that is never full fails the test instead of hanging it


@pytest.fixture
def settings(shared_settings):
    # The real defaults: a 5-minute max_processing_s and a 30 s visibility, not the suite's
    # 2 s. With 2 s a worker stalled for 2 s on a loaded machine let a message lapse and come
    # back, handled twice (test_sigterm_mid_run's fresh-clone run: 8 of 600). The test of
    # the visibility timeout sets a short one itself.
    return shared_settings.replace(max_processing_s=DEFAULT_MAX_PROCESSING_S, visibility_timeout_s=30.0)


@pytest.fixture
def client(settings):
    with kmq.Client(settings=settings) as c:
        yield c


@pytest.fixture(params=["shared", "partition"])
def mode(request, client, queue):
    if request.param == "partition":
        partition_mode(client, queue)
    else:
        client.configure_queue(queue, dispatch="shared")
    return request.param


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


def start_worker(settings, queue, ledger, *, kind, extra=(), handler_s=0.05):
    env = {**os.environ, **settings_env(settings), "PYTHONPATH": str(ROOT), "KMQ_TEST_QUEUE": queue,
           "KMQ_TEST_LEDGER": str(ledger), "KMQ_TEST_ASYNC": "1" if kind == "async" else "0",
           "KMQ_TEST_HANDLER_S": str(handler_s)}
    p = subprocess.Popen([sys.executable, "-m", "kmq.cli", "worker", "tests.integration.helpers.worker_jobs",
                          "--log-level", "warning", *extra], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", "the worker did not start"
    except BaseException:  # (a pytest timeout too) the caller never gets the handle to stop it
        p.kill()
        p.wait(10)
        raise
    return p


def started_ids(ledger: Path) -> list[str]:
    return ledger_ids(Path(str(ledger) + ".started"))


def ledger_ids(ledger: Path) -> list[str]:
    return [line.split()[0] for line in ledger.read_text().splitlines()] if ledger.exists() else []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sigterm_mid_run_loses_nothing_and_acks_nothing_twice(client, queue, mode, kind, settings, tmp_path,
                                                               tracker):
    # 30 s (the settings fixture), not the suite's 2 s: a worker process stalled for 2 s on a
    # loaded machine let a held range lapse, and it came back as a second delivery (a
    # fresh-clone run: 8 of 600). What a lapse would show is checked below without waiting for one.
    n = 600
    ids = client.send_batch(queue, [b"m%d" % i for i in range(n)])
    client.flush()
    ledger = tmp_path / "ledger"
    first = start_worker(settings, queue, ledger, kind=kind)
    try:
        wait_for(lambda: len(ledger_ids(ledger)) >= 40, 60, what="some messages handled")
        first.send_signal(signal.SIGTERM)  # mid-run: 8 handlers running, more prefetched
        assert first.wait(60) == 0
    finally:
        if first.poll() is None:
            first.kill()
    handled_by_first = len(ledger_ids(ledger))
    assert 40 <= handled_by_first < n
    second = start_worker(settings, queue, ledger, kind=kind)
    try:
        wait_for(lambda: len(set(ledger_ids(ledger))) >= n, 120, what="every message handled")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        if second.poll() is None:
            second.kill()
    counts = Counter(ledger_ids(ledger))
    assert sorted(counts) == sorted(ids), "lost or foreign messages"
    assert [i for i, c in counts.items() if c != 1] == [], "handled (and acked) twice"
    # Every handling was a first delivery: the running ones finished within the grace, and
    # the prefetched ones were given back uncounted at close (left to time out, they would
    # have come back as second deliveries within the wait above).
    assert {line.split()[1] for line in ledger.read_text().splitlines()} == {"1"}
    # Every ack reached the tracker: nothing is left in flight to come back.
    wait_for(lambda: all_acked(tracker, queue, n), 30, what=f"{n} acks at the tracker, nothing in flight")


def receive_n(client, queue, n, timeout_s=60.0):
    with client.consumer(queue, visibility_timeout_s=30) as c:
        back = []
        wait_for(lambda: back.extend(c.receive_batch(n, 0.2)) or len(back) >= n, timeout_s,
                 what=f"{n} messages back")
        for m in back:
            m.ack()
        c.flush()
        return back


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_handlers_still_running_after_the_grace_are_released_and_the_worker_exits_0(
        client, queue, kind, settings, tmp_path):
    ids = client.send_batch(queue, [b"stuck%d" % i for i in range(3)])
    client.flush()
    ledger = tmp_path / "ledger"
    p = start_worker(settings, queue, ledger, kind=kind, extra=("--grace-s", "0.5"), handler_s=3600)
    try:
        wait_for(lambda: len(started_ids(ledger)) >= 3, 60, what="3 handlers running")
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    # Released at close: back at once, the delivery counted. Within 20 s: held past the grace
    # (keepalives every 5 s) they would time out 25 s or more after the exit at the earliest.
    back = receive_n(client, queue, 3, timeout_s=20.0)
    assert sorted(m.id for m in back) == sorted(ids) and {m.delivery_count for m in back} == {2}


def test_a_second_signal_exits_at_once_and_the_messages_come_back_after_the_visibility_timeout(
        client, queue, settings, tmp_path):
    # A dead shared consumer keeps its lease (5 s) after its last credit: the dispatcher may
    # hand a message back to it (observed: 1 of 3) and the visibility timeout must pass again,
    # a delivery each time; room for those, so none reaches max_deliveries meanwhile.
    client.configure_queue(queue, max_deliveries=10)
    ids = client.send_batch(queue, [b"stuck%d" % i for i in range(3)])
    client.flush()
    ledger = tmp_path / "ledger"
    settings = settings.replace(visibility_timeout_s=2.0)  # the timeout this test waits out
    p = start_worker(settings, queue, ledger, kind="sync", handler_s=3600)  # grace 30 s
    try:
        wait_for(lambda: len(started_ids(ledger)) >= 3, 60, what="3 handlers running")
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGINT)
        assert p.wait(20) == 1  # well before the 30 s grace
    finally:
        if p.poll() is None:
            p.kill()
    back = receive_n(client, queue, 3)  # nothing released: they come back after their visibility
    assert sorted(m.id for m in back) == sorted(ids) and min(m.delivery_count for m in back) >= 2


def test_two_processes_drain_the_queue_and_stop_on_one_sigterm_and_metrics_count_outcomes(
        client, queue, settings, tmp_path):
    from kmq.dev.embedded import free_port
    import re
    import urllib.request

    n = 200
    ids = client.send_batch(queue, [b"m%d" % i for i in range(n)])
    client.flush()
    ledger = tmp_path / "ledger"
    p = start_worker(settings, queue, ledger, kind="sync", extra=("--processes", "2"))
    try:
        wait_for(lambda: len(set(ledger_ids(ledger))) >= n, 120, what="every message handled")
        p.send_signal(signal.SIGTERM)  # the parent passes it on to both children
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    counts = Counter(ledger_ids(ledger))
    assert sorted(counts) == sorted(ids) and set(counts.values()) == {1}
    # One process with --metrics-port: what it handled, by outcome.
    more = client.send_batch(queue, [b"x%d" % i for i in range(20)])
    client.flush()
    ledger2 = tmp_path / "ledger2"
    for attempt in range(3):  # a port picked free can be taken before the worker binds it
        port = free_port()
        try:
            q = start_worker(settings, queue, ledger2, kind="sync", extra=("--metrics-port", str(port)))
            break
        except AssertionError:  # it did not start ("error: ... port"): another pick
            if attempt == 2:
                raise
    try:
        wait_for(lambda: len(ledger_ids(ledger2)) >= 20, 60, what="20 more handled")

        def acked():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                page = r.read().decode()
            found = re.search(r'kmq_worker_messages_total\{queue="%s",handler="[^"]+",outcome="acked"\} (\d+)'
                              % re.escape(queue), page)
            return found and int(found.group(1)) == 20 and "kmq_worker_handler_seconds_bucket" in page
        wait_for(acked, 30, what="20 acked in /metrics")
        q.send_signal(signal.SIGTERM)
        assert q.wait(60) == 0
    finally:
        if q.poll() is None:
            q.kill()
    assert sorted(ledger_ids(ledger2)) == sorted(more)


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
