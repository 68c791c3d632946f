"""The kmq record envelope: header names on queue and dead-letter records, and
the pure decision of what an expired message becomes.

Queue records carry the payload as value, key = queue id, and these headers
(all optional, so plain Kafka producers can enqueue)::

    kmq.id                 message id, kept across redeliveries
    kmq.deliveries         deliveries that happened before this record (absent: 0)
    kmq.first-delivery-ms  when the message was first delivered
    kmq.enqueued-ms        when it was first enqueued (set on redelivery)
    kmq.group              ordered message group (docs/ordering.md), kept across redeliveries
    kmq.dedup-id           deduplication id of a send (not carried by redeliveries: they
                           are the same message, not a new send)

Dead-letter records add ``kmq.dlq.reason`` (``max-deliveries``, ``rejected``,
``payload-expired``, ``payload-too-large``), ``kmq.dlq.detail``, ``kmq.dlq.last-delivery-ms``,
``kmq.dlq.at-ms`` and ``kmq.source`` (partition:offset of the expired record).
Numbers are ASCII decimal so kcat and Spark can read them as they are.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from kmq.backoff import Backoff, compute_backoff
from kmq.protocol.entries import Cause

ID = "kmq.id"
DELIVERIES = "kmq.deliveries"
FIRST_DELIVERY_MS = "kmq.first-delivery-ms"
ENQUEUED_MS = "kmq.enqueued-ms"
GROUP = "kmq.group"
DEDUP_ID = "kmq.dedup-id"
RUN = "kmq.run"  # on a lane copy of an ordered queue's record: its group's run (docs/ordering.md)
DLQ_REASON = "kmq.dlq.reason"
DLQ_DETAIL = "kmq.dlq.detail"
DLQ_LAST_DELIVERY_MS = "kmq.dlq.last-delivery-ms"
DLQ_AT_MS = "kmq.dlq.at-ms"
DLQ_CONTROL = "kmq.dlq.control"  # a redrive's or purge's event on the dead-letter topic: redriven | purged
SOURCE = "kmq.source"
RESERVED_PREFIX = "kmq."

REASON_MAX_DELIVERIES = "max-deliveries"
REASON_REJECTED = "rejected"
REASON_PAYLOAD_EXPIRED = "payload-expired"
REASON_TOO_LARGE = "payload-too-large"  # the broker took it, but it cannot be written again

HeaderList = list[tuple[str, bytes]]


def derived_id(partition: int, offset: int) -> str:
    """Id of a record enqueued without ``kmq.id`` (a plain Kafka producer)."""
    return f"{partition}:{offset}"


MAX_KEPT_ID_BYTES = 255  # a kmq.id kept as it is in the tracker's state (the SDK's are ~20 bytes)


def kept_id(raw: bytes | None, partition: int, offset: int) -> str:
    """The id the tracker keeps in its state for a record's ``kmq.id`` header: as it is, its
    place (:func:`derived_id`) without one, or a digest of one over ``MAX_KEPT_ID_BYTES``
    (any producer may write 1 MB there: the dedup state kept 50 MB for 50 such records).
    The same for a record and its redeliveries, which carry the same header."""
    if not raw:
        return derived_id(partition, offset)
    if len(raw) > MAX_KEPT_ID_BYTES:
        return "h-" + hashlib.sha256(raw).hexdigest()[:32]
    return raw.decode(errors="replace")


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
        value = int(raw)
    except ValueError:
        return default
    # Counts and epoch ms: a negative one, or one past an i64 (a delivery count of 10**40
    # reached user code: an audit), is forged.
    return value if 0 <= value < 1 << 63 else default


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


@dataclass(frozen=True, slots=True)
class Defer:
    """Wait ``delay_ms`` (the queue's backoff) before redelivering."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class Discard:
    """Drop the message: rejected, or at its last delivery, on a queue whose dead-lettering
    is off."""

    reason: str


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
    backoff: Backoff | None = None,
    dead_letter: bool = True,
    uniform: Callable[[float, float], float] = random.uniform,
) -> Republish | DeadLetter | Defer | Discard:
    """Decide what an expired delivery of one record becomes (5. in the README flow).

    The delivery that just ended counts (unless the message was returned
    unprocessed): at ``max_deliveries`` the message is dead-lettered, as is
    any rejected message. A timeout or a release without a delay first waits
    out the queue's backoff (:class:`Defer`); when that wait is over
    (``DEFERRED``) it is republished. With ``dead_letter=False`` nothing is
    dead-lettered: what would be is dropped (:class:`Discard`), as a RabbitMQ
    quorum queue's delivery limit without a dead-letter exchange.
    """
    ours, user = split(headers)
    deliveries = int_header(ours, DELIVERIES, 0) + (0 if cause == Cause.RETURNED else 1)
    if cause == Cause.REJECTED and not dead_letter:
        return Discard(reason)
    exhausted = cause != Cause.RETURNED and deliveries >= max_deliveries
    if exhausted and not dead_letter:
        return Discard(REASON_MAX_DELIVERIES)
    if not exhausted and cause in (Cause.TIMEOUT, Cause.RELEASED_BACKOFF) and backoff is not None:
        delay_ms = int(compute_backoff(backoff, deliveries, uniform) * 1000)
        if delay_ms > 0:
            return Defer(delay_ms)
    msg_id = ours.get(ID) or derived_id(partition, offset).encode()
    enqueued_ms = ours.get(ENQUEUED_MS) or str(record_timestamp_ms).encode()
    base: HeaderList = [(ID, msg_id), (DELIVERIES, str(deliveries).encode())]
    if deliveries:  # a message returned before its first delivery has none yet
        base.append((FIRST_DELIVERY_MS, ours.get(FIRST_DELIVERY_MS) or str(started_ms).encode()))
    base.append((ENQUEUED_MS, enqueued_ms))
    if GROUP in ours:  # the group waits for this message: it must come back as its member
        base.append((GROUP, ours[GROUP]))
    if cause == Cause.REJECTED or exhausted:
        code = REASON_REJECTED if cause == Cause.REJECTED else REASON_MAX_DELIVERIES
        detail = reason if cause == Cause.REJECTED else (
            f"{_CAUSE_WORDS.get(cause, 'timed out')} on delivery {deliveries} of {max_deliveries}")
        return DeadLetter(base + dead_letter_headers(
            code, detail, started_ms, now_ms, partition, offset) + user, code, deliveries)
    return Republish(base + user, deliveries)


_CAUSE_WORDS = {Cause.RELEASED: "released", Cause.RELEASED_BACKOFF: "released",
                Cause.DEFERRED: "timed out"}


def dead_letter_headers(reason: str, detail: str, last_delivery_ms: int, now_ms: int,
                        partition: int, offset: int) -> HeaderList:
    return [(DLQ_REASON, reason.encode()), (DLQ_DETAIL, detail.encode()),
            (DLQ_LAST_DELIVERY_MS, str(last_delivery_ms).encode()),
            (DLQ_AT_MS, str(now_ms).encode()), (SOURCE, f"{partition}:{offset}".encode())]
