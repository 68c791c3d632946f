"""The kmq record envelope: header names on queue and dead-letter records, and
the pure decision of what an expired message becomes.

Queue records carry the payload as value, key = queue id, and these headers
(all optional, so plain Kafka producers can enqueue)::

    kmq.id                 message id, kept across redeliveries
    kmq.deliveries         deliveries that happened before this record (absent: 0)
    kmq.first-delivery-ms  when the message was first delivered
    kmq.enqueued-ms        when it was first enqueued (set on redelivery)

Dead-letter records add ``kmq.dlq.reason`` (``max-deliveries``, ``rejected``,
``payload-expired``), ``kmq.dlq.detail``, ``kmq.dlq.last-delivery-ms``,
``kmq.dlq.at-ms`` and ``kmq.source`` (partition:offset of the expired record).
Numbers are ASCII decimal so kcat and Spark can read them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from kmq.entries import Cause

ID = "kmq.id"
DELIVERIES = "kmq.deliveries"
FIRST_DELIVERY_MS = "kmq.first-delivery-ms"
ENQUEUED_MS = "kmq.enqueued-ms"
DLQ_REASON = "kmq.dlq.reason"
DLQ_DETAIL = "kmq.dlq.detail"
DLQ_LAST_DELIVERY_MS = "kmq.dlq.last-delivery-ms"
DLQ_AT_MS = "kmq.dlq.at-ms"
SOURCE = "kmq.source"
RESERVED_PREFIX = "kmq."

REASON_MAX_DELIVERIES = "max-deliveries"
REASON_REJECTED = "rejected"
REASON_PAYLOAD_EXPIRED = "payload-expired"

HeaderList = list[tuple[str, bytes]]


def derived_id(partition: int, offset: int) -> str:
    """Id of a record enqueued without ``kmq.id`` (a plain Kafka producer)."""
    return f"{partition}:{offset}"


def split(headers: Iterable[tuple[str, bytes | None]] | None) -> tuple[dict[str, bytes], HeaderList]:
    """Split record headers into kmq's (by name) and the user's (in order)."""
    ours: dict[str, bytes] = {}
    user: HeaderList = []
    for k, v in headers or ():
        if k.startswith(RESERVED_PREFIX):
            ours[k] = v or b""
        else:
            user.append((k, v if v is not None else b""))
    return ours, user


def int_header(ours: dict[str, bytes], name: str, default: int) -> int:
    raw = ours.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        return default


@dataclass(frozen=True, slots=True)
class Republish:
    """Put the message back on the queue topic with these headers."""

    headers: HeaderList
    delivery_count: int  # deliveries so far, including the one that just ended


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Write the message to the dead-letter topic with these headers."""

    headers: HeaderList
    reason: str
    delivery_count: int


def after_expiry(
    headers: Sequence[tuple[str, bytes | None]] | None,
    *,
    partition: int,
    offset: int,
    record_timestamp_ms: int,
    cause: Cause,
    reason: str,
    started_ms: int,
    now_ms: int,
    max_deliveries: int,
) -> Republish | DeadLetter:
    """Decide what an expired delivery of one record becomes (5. in the README flow).

    The delivery that just ended counts (unless the message was returned
    unprocessed): at ``max_deliveries`` the message is dead-lettered, as is
    any rejected message.
    """
    ours, user = split(headers)
    # A returned message never reached user code: that delivery does not count.
    deliveries = int_header(ours, DELIVERIES, 0) + (0 if cause == Cause.RETURNED else 1)
    msg_id = ours.get(ID) or derived_id(partition, offset).encode()
    first_ms = ours.get(FIRST_DELIVERY_MS) or str(started_ms).encode()
    enqueued_ms = ours.get(ENQUEUED_MS) or str(record_timestamp_ms).encode()
    base: HeaderList = [(ID, msg_id), (DELIVERIES, str(deliveries).encode()),
                        (FIRST_DELIVERY_MS, first_ms), (ENQUEUED_MS, enqueued_ms)]
    if cause == Cause.REJECTED or (cause != Cause.RETURNED and deliveries >= max_deliveries):
        code = REASON_REJECTED if cause == Cause.REJECTED else REASON_MAX_DELIVERIES
        detail = reason if cause == Cause.REJECTED else (
            f"{'released' if cause == Cause.RELEASED else 'timed out'} "
            f"on delivery {deliveries} of {max_deliveries}")
        return DeadLetter(base + dead_letter_headers(
            code, detail, started_ms, now_ms, partition, offset) + user, code, deliveries)
    return Republish(base + user, deliveries)


def dead_letter_headers(reason: str, detail: str, last_delivery_ms: int, now_ms: int,
                        partition: int, offset: int) -> HeaderList:
    return [(DLQ_REASON, reason.encode()), (DLQ_DETAIL, detail.encode()),
            (DLQ_LAST_DELIVERY_MS, str(last_delivery_ms).encode()),
            (DLQ_AT_MS, str(now_ms).encode()), (SOURCE, f"{partition}:{offset}".encode())]
