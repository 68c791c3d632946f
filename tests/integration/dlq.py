"""Reading the dead-letter topic in tests (what an operator would do with kcat)."""

from __future__ import annotations

from kmq.ops.deadletters import dlq_partition
from kmq.protocol import envelope
from kmq.settings import Settings
from tests.topic_reads import records_to_end


def letters_of(settings: Settings, *queues: str) -> list:
    """The dead-letter partitions where ``queues``' letters live, read to their true end
    (only those: a test's topic may hold 100,000 set-aside records elsewhere)."""
    keys = {q.encode() for q in queues}
    parts = sorted({dlq_partition(settings, q) for q in queues})
    return [rec for rec in records_to_end(settings, settings.dlq_topic, parts) if rec.key() in keys]


def dead_letters(settings: Settings, queue: str) -> list[dict]:
    """This queue's dead letters: value, kmq headers and user headers."""
    out = []
    for rec in letters_of(settings, queue):
        ours, user = envelope.split(rec.headers())
        out.append({"value": rec.value(), "kmq": ours, "user": dict(user)})
    return out
