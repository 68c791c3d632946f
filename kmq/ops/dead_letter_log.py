"""A queue's dead letters as a log of events, and the one fold of that log.

A queue's dead letters live on one partition of the dead-letter topic (the
murmur2 placement of its id). That partition is read as a log of events per
queue, folded into the current state (:class:`LetterLog`):

- a dead letter (the tracker wrote it);
- ``redriven``: the dead letter at ``kmq.dlq.offset`` went back to its queue;
- ``purged``: every dead letter below ``kmq.dlq.offset`` is gone.

The operations on them (list, redrive, purge) are :mod:`kmq.ops.deadletters`;
the tracker's views fold the same events incrementally (``web/dead_letter_fold.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from kmq.kafka import profiles
from kmq.kafka.offsets import read_to_end
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol import envelope
from kmq.protocol.placement import partition_for_key
from kmq.settings import Settings

CONTROL = envelope.DLQ_CONTROL  # header naming a control event: redriven | purged
CONTROL_OFFSET = "kmq.dlq.offset"


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered message, as read from the dead-letter topic."""

    queue: str
    offset: int                # offset on the dead-letter partition
    id: str
    value: bytes
    headers: dict[str, bytes]  # the user's headers
    reason: str                # max-deliveries, rejected, payload-expired
    detail: str
    deliveries: int
    first_delivery_ms: int
    last_delivery_ms: int
    dead_lettered_ms: int
    raw_headers: list = field(repr=False, default_factory=list)

    def age_s(self, now_s: float | None = None) -> float:
        return (now_s if now_s is not None else time.time()) - self.dead_lettered_ms / 1000

    def summary(self, preview_bytes: int = 200) -> dict:
        """What a view shows of it: everything but the payload, of which a preview."""
        return {"offset": self.offset, "id": self.id, "reason": self.reason, "detail": self.detail,
                "deliveries": self.deliveries, "first_delivery_ms": self.first_delivery_ms,
                "last_delivery_ms": self.last_delivery_ms, "dead_lettered_ms": self.dead_lettered_ms,
                "value_preview": self.value[:preview_bytes].decode("utf-8", errors="replace"),
                "value_bytes": len(self.value)}


def dlq_partition(settings: Settings, queue: str) -> int:
    return partition_for_key(queue.encode(), settings.dlq_partitions)


def _reader(settings: Settings) -> PatientReader:
    return PatientReader({
        **profiles.reader_config(settings, f"{settings.app_id}-dlq-reader", fetch_wait_ms=100, eof=True),
        "isolation.level": "read_committed",  # an aborted redrive never happened
    })


def _read_partition(settings: Settings, topic: str, partition: int,
                    timeout_s: float = 60.0) -> Iterator[object]:
    """Every committed record of one partition, to its true end (EOF, not ListOffsets)."""
    c = _reader(settings)
    try:
        for _offset, rec in read_to_end(c, topic, partition, 0, timeout_s):
            yield rec
    finally:
        c.close()


@dataclass
class LetterLog:
    """One queue's dead-letter events folded into the letters still there (the one fold:
    the dead-letter operations use it, and the tracker's views count ``len(live)``)."""

    live: dict[int, object] = field(default_factory=dict)  # offset -> what the caller keeps of it
    end: int = 0  # one past the last record seen

    def fold(self, offset: int, headers, letter: Callable[[], object] = lambda: None) -> None:
        """Fold the queue's record at ``offset``: a letter (``letter()`` is kept) or a control event."""
        control = offset_arg = None
        for k, v in headers or ():
            if k == CONTROL:
                control = v
            elif k == CONTROL_OFFSET:
                offset_arg = v
        if control is None:
            self.live[offset] = letter()
            return
        try:
            arg = int(offset_arg)
        except (TypeError, ValueError):
            return  # a control event without its offset changes nothing
        if control == b"redriven":
            self.live.pop(arg, None)
        elif control == b"purged":
            self.live = {o: d for o, d in self.live.items() if o >= arg}

    def pending(self) -> list:
        """What the letters still there kept, in offset order."""
        return [d for _off, d in sorted(self.live.items())]


def read_letter_log(settings: Settings, queue: str) -> LetterLog:
    """The queue's dead-letter partition read to its end and folded (its letters: :class:`DeadLetter`)."""
    key = queue.encode()
    out = LetterLog()
    for rec in _read_partition(settings, settings.dlq_topic, dlq_partition(settings, queue)):
        out.end = rec.offset() + 1
        if rec.key() == key:
            out.fold(rec.offset(), rec.headers(), lambda rec=rec: letter_of(queue, rec))
    return out


def letter_of(queue: str, rec) -> DeadLetter:
    """The dead letter a record of the dead-letter topic holds (not a control event)."""
    ours, user = envelope.split(rec.headers())
    return DeadLetter(
        queue=queue, offset=rec.offset(),
        id=(ours.get(envelope.ID) or b"").decode(errors="replace"),
        value=rec.value() or b"", headers=dict(user),
        reason=(ours.get(envelope.DLQ_REASON) or b"").decode(errors="replace"),
        detail=(ours.get(envelope.DLQ_DETAIL) or b"").decode(errors="replace"),
        deliveries=envelope.int_header(ours, envelope.DELIVERIES, 0),
        first_delivery_ms=envelope.int_header(ours, envelope.FIRST_DELIVERY_MS, 0),
        last_delivery_ms=envelope.int_header(ours, envelope.DLQ_LAST_DELIVERY_MS, 0),
        dead_lettered_ms=envelope.int_header(ours, envelope.DLQ_AT_MS, rec.timestamp()[1]),
        raw_headers=list(rec.headers() or []))
