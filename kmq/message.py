"""A received message and the verbs that settle it.

Contract of each verb (each settles the message once; a second verb raises
:class:`~kmq.errors.MessageSettledError`, except :meth:`Message.extend`,
which keeps it held):

- ``ack()``: processed; it is never delivered again.
- ``release(delay_s=0)``: not processed; deliver it again after the delay,
  counting this delivery.
- ``reject(reason)``: never deliver again; dead-letter it with the reason.
- ``extend(seconds)``: keep it invisible for ``seconds`` more from now.

A message held past its visibility (and ``max_processing_s``) lapses: the
tracker delivers it again, and a verb on the stale copy changes nothing
(like SQS with an old receipt handle); :attr:`Message.lapsed` tells.

Verbs are recorded locally and sent in batches (one marker per range) by the
consumer, within its flush interval and on close.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from kmq import envelope
from kmq.errors import ConfigError, MessageSettledError

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer import Consumer, HeldRange

_HELD, _ACKED, _RELEASED, _REJECTED = None, "acked", "released", "rejected"


class Message:
    """One delivery of a queued message."""

    __slots__ = ("queue", "_record", "_range", "_rel", "_consumer", "_settled", "_handed_at",
                 "_hold_until", "_lapsed", "_kmq_headers", "_user_headers")

    def __init__(self, queue: str, record: Any, held: "HeldRange", rel: int,
                 consumer: "Consumer") -> None:
        self.queue = queue
        self._record = record
        self._range = held
        self._rel = rel
        self._consumer = consumer
        self._settled: str | None = _HELD
        self._handed_at = -1.0  # monotonic time it reached user code; -1: still prefetched
        self._hold_until = 0.0  # monotonic end of an explicit extend()
        self._lapsed = False  # visibility ran out while held: the tracker took it back
        self._kmq_headers: dict[str, bytes] | None = None

    # -- content ---------------------------------------------------------------

    @property
    def value(self) -> bytes:
        """The payload."""
        return self._record.value()

    @property
    def partition(self) -> int:
        return self._record.partition()

    @property
    def offset(self) -> int:
        return self._record.offset()

    def _split_headers(self) -> dict[str, bytes]:
        if self._kmq_headers is None:
            self._kmq_headers, self._user_headers = envelope.split(self._record.headers())
        return self._kmq_headers

    @property
    def headers(self) -> dict[str, bytes]:
        """The user's headers (kmq's own ``kmq.*`` headers left out)."""
        self._split_headers()
        return dict(self._user_headers)

    @property
    def id(self) -> str:
        """The message id: the sender's, or ``partition:offset`` of a plain Kafka record."""
        raw = self._split_headers().get(envelope.ID)
        if raw:
            return raw.decode()
        return envelope.derived_id(self._record.partition(), self._record.offset())

    @property
    def delivery_count(self) -> int:
        """Deliveries of this message including this one (1 on first receipt)."""
        return envelope.int_header(self._split_headers(), envelope.DELIVERIES, 0) + 1

    @property
    def enqueued_at_ms(self) -> int:
        """When the message was first enqueued (epoch ms)."""
        ours = self._split_headers()
        return envelope.int_header(ours, envelope.ENQUEUED_MS, self._record.timestamp()[1])

    @property
    def settled(self) -> str | None:
        """None while held; else 'acked', 'released' or 'rejected'."""
        return self._settled

    @property
    def lapsed(self) -> bool:
        """True once this delivery's visibility ran out; the message comes again."""
        return self._lapsed

    def __repr__(self) -> str:
        return (f"<Message queue={self.queue!r} id={self.id!r} "
                f"partition={self.partition} offset={self.offset} "
                f"delivery_count={self.delivery_count} settled={self._settled}>")

    # -- verbs -----------------------------------------------------------------

    def _settle(self, state: str) -> None:
        if self._settled is not _HELD:
            raise MessageSettledError(
                f"message {self.id} of queue {self.queue!r} was already {self._settled}; "
                f"it cannot be {state} too")
        self._settled = state

    def ack(self) -> None:
        """Processed: never deliver this message again."""
        if self._settled is not _HELD:
            self._settle(_ACKED)  # raises MessageSettledError
        self._settled = _ACKED  # inline: this is the hot path
        self._consumer._acks.append(self)

    def release(self, delay_s: float = 0.0) -> None:
        """Not processed: deliver again after ``delay_s`` seconds, counting this delivery."""
        delay_ms = _seconds_to_ms("delay_s", delay_s, self._consumer.max_delay_s)
        self._settle(_RELEASED)
        self._consumer._verbs.append((self, "release", delay_ms))

    def reject(self, reason: str = "") -> None:
        """Never deliver again: dead-letter this message with ``reason``."""
        if not isinstance(reason, str):
            raise ConfigError(f"reason={reason!r} must be a string")
        if len(reason.encode()) > 4096:
            raise ConfigError("reason is longer than 4096 bytes: shorten it")
        self._settle(_REJECTED)
        self._consumer._verbs.append((self, "reject", reason))

    def extend(self, seconds: float) -> None:
        """Keep this message invisible for ``seconds`` from now (it stays held)."""
        timeout_ms = _seconds_to_ms("seconds", seconds, self._consumer.max_extend_s)
        if self._settled is not _HELD:
            raise MessageSettledError(
                f"message {self.id} of queue {self.queue!r} was already {self._settled}; "
                "it cannot be extended")
        self._hold_until = time.monotonic() + timeout_ms / 1000
        self._consumer._verbs.append((self, "extend", timeout_ms))


def _seconds_to_ms(name: str, value: Any, limit_s: float) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}={value!r} must be a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name}={value!r} must be a finite number >= 0")
    if value > limit_s:
        raise ConfigError(f"{name}={value!r} is above the limit of {limit_s:g} s")
    return int(round(value * 1000))

