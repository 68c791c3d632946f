"""A received message and the verbs that settle it.

Contract of each verb (each settles the message once; a second verb raises
:class:`~kmq.errors.MessageSettledError`, except :meth:`Message.extend`,
which keeps it held):

- ``ack()``: processed; it is never delivered again.
- ``release(delay_s=None)``: not processed; deliver it again after the delay
  (none given: the queue's backoff policy), counting this delivery.
- ``reject(reason)``: never deliver again; dead-letter it with the reason.
- ``extend(seconds)``: keep it invisible for ``seconds`` more from now.

Verbs are recorded locally and sent in batches (one marker per range) by the
consumer, within its flush interval and on close.

A message held past its visibility (and ``max_processing_s``) lapses: the
tracker delivers it again, and a verb on the stale copy changes nothing
(like SQS with an old receipt handle); :attr:`Message.lapsed` tells.
"""

from __future__ import annotations

import math
import time
from enum import Enum
from typing import Any

from kmq.protocol import envelope
from kmq.protocol.limits import MAX_TIMEOUT_MS
from kmq.protocol.ordering import valid_group
from kmq.errors import ConfigError, MessageSettledError


class Verb(Enum):
    """What a consumer said of a message, besides ``ack`` (kept apart: it is the hot path)."""

    RELEASE = "release"   # argument: delay in ms (-1: the queue's backoff)
    RETURN = "return"     # never reached user code: released uncounted
    REJECT = "reject"     # argument: the reason
    EXTEND = "extend"     # argument: timeout in ms; the message stays held


# Settlement states, one byte per offset of a range (HeldRange.state).
HELD, ACKED, RELEASED, REJECTED = 0, 1, 2, 3
STATE_NAMES = {ACKED: "acked", RELEASED: "released", REJECTED: "rejected"}


class Message(tuple):
    """One delivery of a queued message.

    An immutable ``(record, range, rel)`` triple: a tuple subclass because one
    is built per received message, and that is the hot path (measured: 208 ns
    against 349 ns for a slotted class). Its settlement state lives in its
    range's ``state`` bytes; use the properties and verbs, not the items.
    """

    __slots__ = ()

    # -- content ---------------------------------------------------------------

    @property
    def queue(self) -> str:
        return self[1].ref.queue

    @property
    def value(self) -> bytes:
        """The payload (``b""`` for a record with a null value, as on its redeliveries)."""
        return self[0].value() or b""

    @property
    def partition(self) -> int:
        """The queue-topic partition of the message (a shared queue's copy says where it came from)."""
        return self[1].ref.partition

    @property
    def offset(self) -> int:
        """The message's offset on its queue-topic partition."""
        return self[1].ref.start + self[2]

    def _split_headers(self) -> tuple[dict[str, bytes], list]:
        meta = self[1].meta
        got = meta.get(self[2])
        if got is None:
            got = meta[self[2]] = envelope.split(self[0].headers())
        return got

    @property
    def headers(self) -> dict[str, bytes]:
        """The user's headers (kmq's own ``kmq.*`` headers left out)."""
        return dict(self._split_headers()[1])

    @property
    def id(self) -> str:
        """The message id: the sender's, or ``partition:offset`` of a plain Kafka record."""
        raw = self._split_headers()[0].get(envelope.ID)
        if raw:
            # Any producer can write this header: bytes that are not UTF-8 still name one id.
            return raw.decode(errors="replace")  # as the tracker and dead-letter reads do
        return envelope.derived_id(self[1].ref.partition, self[1].ref.start + self[2])

    @property
    def group(self) -> str | None:
        """The message's ordered group (``kmq.group``), None without one, or with one the
        dispatcher does not take as a group (empty, or over 128 bytes: ``bad-group``)."""
        raw = self.group_bytes
        return raw.decode(errors="replace") if raw else None

    @property
    def group_bytes(self) -> bytes | None:
        """The message's ordered group as the header's bytes (``group`` decodes them as
        UTF-8, so groups of other bytes may read alike there; order goes by these)."""
        return valid_group(self._split_headers()[0].get(envelope.GROUP))

    @property
    def run(self) -> bytes | None:
        """Which run of its group the dispatcher handed this message in (``kmq.run``; an
        ordered queue's, docs/ordering.md), None without one."""
        return self._split_headers()[0].get(envelope.RUN)

    @property
    def delivery_count(self) -> int:
        """Deliveries of this message including this one (1 on first receipt)."""
        return envelope.int_header(self._split_headers()[0], envelope.DELIVERIES, 0) + 1

    @property
    def enqueued_at_ms(self) -> int:
        """When the message was first enqueued (epoch ms)."""
        return envelope.int_header(self._split_headers()[0], envelope.ENQUEUED_MS,
                                   self[0].timestamp()[1])

    @property
    def settled(self) -> str | None:
        """None while held; else 'acked', 'released' or 'rejected'."""
        return STATE_NAMES.get(self[1].state[self[2]])

    @property
    def lapsed(self) -> bool:
        """True once this delivery's visibility ran out; the message comes again."""
        return self[2] in self[1].lapsed

    def __repr__(self) -> str:
        return (f"<Message queue={self.queue!r} id={self.id!r} "
                f"partition={self.partition} offset={self.offset} "
                f"delivery_count={self.delivery_count} settled={self.settled}>")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    # -- verbs -----------------------------------------------------------------

    def _settle(self, state: int) -> None:
        held, rel = self[1], self[2]
        if held.state[rel]:
            raise MessageSettledError(self._settled_already(f"be {STATE_NAMES[state]} too"))
        held.state[rel] = state

    def _settled_already(self, cannot: str) -> str:
        held, rel = self[1], self[2]
        said = f"message {self.id} of queue {self.queue!r} was already {STATE_NAMES[held.state[rel]]}"
        if getattr(held.consumer, "_closed", False):  # close() gives back what is not settled
            said += " (by you, or by its consumer's close(): settle messages before close(); it comes again)"
        return f"{said}; it cannot {cannot}"

    def ack(self) -> None:
        """Processed: never deliver this message again."""
        held = self[1]
        state = held.state
        rel = self[2]
        if state[rel]:
            self._settle(ACKED)  # raises MessageSettledError
        state[rel] = ACKED  # inline: this is the hot path
        acks = held.acks
        n = len(acks)
        if not n or n == held.log.wake_at:
            # The first since the last flush (the flusher counts from now), or enough to
            # ask for more work now (a shared consumer's refill).
            held.log.wake.set()
        # The range, not this message: the state byte says which offset, and the message
        # dies with user code's reference (kept here, it lived to the next flush and
        # cost cyclic-GC passes over every message in flight).
        acks.append(held)

    def release(self, delay_s: float | None = None) -> None:
        """Not processed: deliver again after ``delay_s`` seconds, counting this delivery.

        Without ``delay_s`` the queue's backoff policy decides (at once if it has none).
        """
        held = self[1]
        delay_ms = -1 if delay_s is None else _seconds_to_ms("delay_s", delay_s, held.consumer.max_delay_s,
                                                             "KMQ_MAX_DELAY_S", "or raise the limit")
        self._settle(RELEASED)
        held.log.add(self, Verb.RELEASE, delay_ms)

    def reject(self, reason: str = "") -> None:
        """Never deliver again: dead-letter this message with ``reason``."""
        if not isinstance(reason, str):
            raise ConfigError(f"reason={reason!r} must be a string")
        try:
            size = len(reason.encode())
        except UnicodeEncodeError:  # lone surrogates: the REJECT marker carries UTF-8 text
            raise ConfigError(f"reason={reason[:40]!r} is not UTF-8 text: drop the lone surrogates") from None
        if size > 4096:
            raise ConfigError("reason is longer than 4096 bytes: shorten it")
        self._settle(REJECTED)
        self[1].log.add(self, Verb.REJECT, reason)

    def extend(self, seconds: float) -> None:
        """Keep this message invisible for at least ``seconds`` from now (it stays held); at
        most the queue's ``max_processing_s`` where one is set, and never more than 12 hours
        at once (one EXTEND's limit: call it again later for more). Never less than the
        consumer's visibility timeout: the keepalive renews that much every quarter of it, and
        a shorter extension let the message go to another consumer between two rounds while
        user code still held it (an audit: ``extend(1)`` under a 30 s timeout, redelivered
        after 1.6 s). To give a message back sooner, ``release()`` it. An extension counts as
        a fresh hand-out for ``max_processing_s``."""
        held = self[1]
        limit_s = held.consumer.max_extend_s
        if limit_s < MAX_TIMEOUT_MS / 1000:
            source, fix = "the queue's max_processing_s", "or raise it (configure_queue)"
        else:  # a queue's max_processing_s may be up to 7 days; one extension is not
            source, fix = "12 h, the most one extend() asks", "and extend() again later for more"
        timeout_ms = _seconds_to_ms("seconds", seconds, limit_s, source, fix)
        if held.state[self[2]]:
            raise MessageSettledError(self._settled_already("be extended"))
        timeout_ms = max(timeout_ms, held.consumer._timeout_ms)
        held.holds[self[2]] = time.monotonic() + timeout_ms / 1000
        held.log.add(self, Verb.EXTEND, timeout_ms)


def _seconds_to_ms(name: str, value: Any, limit_s: float, limit_source: str, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}={value!r} must be a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name}={value!r} must be a finite number >= 0")
    if value > limit_s:
        raise ConfigError(f"{name}={value!r} is above the limit of {limit_s:g} s ({limit_source}): "
                          f"give at most {limit_s:g}, {fix}")
    return int(round(value * 1000))
