"""An idempotent producer whose first record goes out at once, not half a second later.

librdkafka asks for an idempotent producer's id (InitProducerId) as the producer is
made, finds no broker connected yet, and asks again on a 500 ms timer
(rdkafka_idempotence.c), so every new producer's first record waited 0.5-1.0 s.
Measured on the embedded broker (2026-11-29): a client's first send + flush 360-1,007 ms
(the second 0-1 ms), each ``configure_queue`` 504-913 ms, and a new shared consumer's
first verb ~1 s late (its ``release(delay_s=3)`` came back after 4.0 s; a partition
consumer's producer had its id long before its group joined). One metadata request as
the producer is made connects a broker, and the id mostly follows at once (librdkafka
asks again as a broker comes up; else at its timer): a bare producer's first record in
50-55 ms against 502-505 ms (6 of 6 each), and a new shared consumer's first
``release(delay_s=1)`` back late by p50 58 ms (max 521) against p50 1,015 ms (max
1,028), 12 consumers each, alternating (``python -m bench.first_verb``; an ad hoc run
before it: p50 287 against 1,019 ms).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, Producer

# How long the metadata request may take. Only a head start: when it fails (a broker
# that is down), the records themselves wait and say what is wrong as before.
CONNECT_TIMEOUT_S = 2.0


def started_producer(conf: dict[str, Any], topic: str) -> Producer:
    """``Producer(conf)``, connected to a broker (``topic``'s metadata) before it returns."""
    producer = Producer(conf)
    try:
        producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    except KafkaException:
        pass
    return producer
