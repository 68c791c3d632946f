"""Reading a topic to its true end in tests (what an operator would do with kcat -e).

One way for every test: librdkafka's end-of-partition event per partition
(:func:`kmq.kafka.offsets.read_to_end`), never any other error taken for the
end, and a failure, never a short list, when the end is not reached in time.

The fetch wait starts at 100 ms, not 10, and rises while fetches bring nothing
(:class:`kmq.kafka.patient_reader.PatientReader`): the embedded broker returns what it
gathers within the wait, and on a partition of tens of thousands of small batches (a
tracker's set-aside flood) a 10 ms fetch brings one batch or none (docs/shared-queues.md).
"""

from __future__ import annotations

from kmq.kafka import profiles
from kmq.kafka.offsets import read_to_end
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol import envelope
from kmq.settings import Settings


def records_to_end(settings: Settings, topic: str, partitions: list[int] | None = None,
                   timeout_s: float = 30.0) -> list:
    """Every record of ``topic``'s ``partitions`` (all if None), partition by partition.

    Raises :class:`kmq.errors.BrokerUnavailableError` if a partition's end is not
    reached within ``timeout_s``.
    """
    c = PatientReader(profiles.reader_config(settings, "kmq-test-reader", fetch_wait_ms=100, eof=True))
    try:
        if partitions is None:
            partitions = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        return [rec for p in partitions for _, rec in read_to_end(c, topic, p, 0, timeout_s=timeout_s)]
    finally:
        c.close()


def ids_on_the_broker(settings: Settings, queue: str) -> set[str]:
    """The ``kmq.id`` of every record of ``queue`` on the queue topic now, read to its true end."""
    return {dict(rec.headers() or [])[envelope.ID].decode()
            for rec in records_to_end(settings, settings.queue_topic) if rec.key() == queue.encode()}
