"""Two settings of Faust's worker consumer that faust-streaming 0.15.3 hard-codes.

- ``fetch_max_wait_ms`` is fixed at 1500 ms. The embedded broker answers a
  fetch only when that wait is over (BROKER.md), so a TICK would sit up to
  1.5 s before the markers agent saw it; we set it from
  ``KMQ_TRACKER_FETCH_WAIT_MS``. On Apache Kafka a fetch returns as soon as
  records arrive, so the value only bounds idle polling.
- ``isolation_level`` is read_committed only under Faust's exactly_once. kmq
  consumers may write START markers in transactions (with their offset
  commit): the tracker must never act on an aborted one.

Both are private attributes of aiokafka's consumer, read when it starts;
this module is the one place that reaches them.
"""

from __future__ import annotations

from typing import Any

from kmq.settings import Settings


def apply(settings: Settings) -> None:
    """Patch Faust's worker-consumer factory once per process."""
    from faust.transport.drivers import aiokafka as driver

    thread_cls = driver.AIOKafkaConsumerThread
    if getattr(thread_cls, "_kmq_tuned", False):
        return
    original = thread_cls._create_worker_consumer

    def _create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = settings.effective_tracker_fetch_wait_ms
        consumer._isolation_level = "read_committed"
        return consumer

    thread_cls._create_worker_consumer = _create_worker_consumer
    thread_cls._kmq_tuned = True
