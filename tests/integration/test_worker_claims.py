"""docs/workers.md, "What a handler's result does", the row tests/integration/test_worker_handlers.py
leaves out: a handler that settles its message itself. Its verb stands; the return or the
exception then only counts in the metrics and the `handler_failed` log line."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

import kmq
from kmq.settings import DEFAULT_MAX_PROCESSING_S
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.runner import HandlerRunner
from kmq.worker.shutdown import ShutdownSignal
from tests.conftest import wait_for
from tests.integration.dlq import dead_letters

pytestmark = pytest.mark.usefixtures("tracker")


@pytest.fixture
def settings(shared_settings):
    return shared_settings.replace(max_processing_s=DEFAULT_MAX_PROCESSING_S, visibility_timeout_s=30.0)


def test_a_handler_that_settles_its_message_itself_has_its_verb_kept(settings, queue, caplog):
    calls: Counter = Counter()
    lock = threading.Lock()

    def work(msg):
        with lock:
            calls[msg.value] += 1
        if msg.value == b"ack-then-raise":
            msg.ack()
            raise RuntimeError("after the ack")
        if msg.value == b"reject-then-raise":
            msg.reject("my own reason")
            raise RuntimeError("after the reject")
        if msg.value == b"release-then-return" and msg.delivery_count == 1:
            msg.release(delay_s=0.5)  # again, once: the return does not ack it

    with kmq.Client(settings=settings) as client:
        client.send_batch(queue, [b"ack-then-raise", b"reject-then-raise", b"release-then-return"])
        client.flush()
        handler = kmq.handler(queue, concurrency=3)(work)
        metrics = WorkerMetrics()
        shutdown = ShutdownSignal(30.0)
        runner = HandlerRunner(client, handler, shutdown, metrics)
        thread = threading.Thread(target=runner.run, daemon=True)
        with caplog.at_level("WARNING", logger="kmq.worker"):
            thread.start()
            try:
                dead = wait_for(lambda: dead_letters(settings, queue), 60, what="the rejected message's dead letter")
                wait_for(lambda: calls[b"release-then-return"] >= 2, 60, what="the released message again")
            finally:
                shutdown.signal(time.monotonic())
                thread.join(60)
    assert not thread.is_alive()
    assert [d["kmq"]["kmq.dlq.detail"] for d in dead] == [b"my own reason"]  # the handler's, not the error
    assert calls == {b"ack-then-raise": 1, b"reject-then-raise": 1, b"release-then-return": 2}
    failed = sorted((f["outcome"], f["error"]) for f in (json.loads(r.getMessage()) for r in caplog.records
                                                         if "handler_failed" in r.getMessage()))
    assert failed == [("acked", "RuntimeError: after the ack"), ("rejected", "RuntimeError: after the reject")]
    page = metrics.render()
    labels = f'queue="{queue}",handler="{handler.name}"'
    for outcome, n in {"acked": 2, "rejected": 1, "released": 1}.items():
        assert f'kmq_worker_messages_total{{{labels},outcome="{outcome}"}} {n}' in page
    assert f"kmq_worker_failures_total{{{labels}}} 2" in page
