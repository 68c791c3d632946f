"""Reading the dead-letter topic in tests (what an operator would do with kcat)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from kmq.protocol import envelope
from kmq.settings import Settings


def read_topic(settings: Settings, topic: str, timeout_s: float = 5.0) -> list:
    """Every record of ``topic`` (all partitions), read to the true end (EOF)."""
    c = Consumer({**settings.client_config(), "group.id": "kmq-test-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 50, "fetch.queue.backoff.ms": 10})
    try:
        md = c.list_topics(topic, timeout=5)
        parts = list(md.topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out, eof = [], set()
        deadline = time.monotonic() + timeout_s
        while len(eof) < len(parts) and time.monotonic() < deadline:
            for rec in c.consume(1000, 0.1):
                if rec.error() is not None:
                    eof.add(rec.partition())
                else:
                    out.append(rec)
        return out
    finally:
        c.close()


def dead_letters(settings: Settings, queue: str) -> list[dict]:
    """This queue's dead letters: value, kmq headers and user headers."""
    out = []
    for rec in read_topic(settings, settings.dlq_topic):
        if rec.key() == queue.encode():
            ours, user = envelope.split(rec.headers())
            out.append({"value": rec.value(), "kmq": ours, "user": dict(user)})
    return out
