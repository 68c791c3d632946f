"""Producing into librdkafka's bounded local queue.

``Producer.produce`` raises BufferError when the local queue is full
(``queue.buffering.max.messages`` / ``.kbytes``); serving delivery reports
frees room. Every kmq writer waits the same way instead of failing a send.
"""

from __future__ import annotations

from typing import Any

POLL_WHEN_FULL_S = 0.01  # poll() returns as soon as a delivery report frees room


def produce_when_room(producer: Any, topic: str, value: bytes | None, key: bytes | str | None = None,
                      **kwargs: Any) -> None:
    """``producer.produce(...)``, waiting on deliveries while the local queue is full.

    Other errors (e.g. KafkaException for a record above the size limit) propagate.
    """
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            producer.poll(POLL_WHEN_FULL_S)
