"""Dead-letter operations: list a queue's dead letters, redrive them, purge them.

A queue's dead letters live on one partition of the dead-letter topic (the
murmur2 placement of its id). That partition is read as a log of events per
queue, folded into the current state:

- a dead letter (the tracker wrote it);
- ``redriven``: the dead letter at ``kmq.dlq.offset`` went back to its queue;
- ``purged``: every dead letter below ``kmq.dlq.offset`` is gone.

A redrive moves each dead letter and appends its ``redriven`` event in one
Kafka transaction (the anchor is SQS's StartMessageMoveTask): an interrupted
redrive leaves no half-moved message, and a rerun, which folds the log
again, moves each remaining one exactly once. The transactional id is per
queue, so a second concurrent redrive of the same queue fences the first.
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from confluent_kafka import Producer

from kmq.kafka.broker_checks import redrive_transaction_timeout_ms
from kmq.kafka import profiles
from kmq.kafka.offsets import read_to_end
from kmq.kafka.patient_reader import PatientReader
from kmq.protocol import envelope
from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.protocol.placement import partition_for_key, queue_partitions, validate_queue_name
from kmq.settings import Settings

CONTROL = envelope.DLQ_CONTROL  # header naming a control event: redriven | purged
CONTROL_OFFSET = "kmq.dlq.offset"
REDRIVEN_FROM = "kmq.redriven-from"  # on a redriven queue record: its dead-letter offset


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
    dead-letter operations here, and the tracker's views count ``len(live)``)."""

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


def _fold(settings: Settings, queue: str) -> LetterLog:
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


# Every reason the tracker and the SDK write (kmq.dlq.reason).
REASONS = (envelope.REASON_MAX_DELIVERIES, envelope.REASON_REJECTED,
           envelope.REASON_PAYLOAD_EXPIRED, envelope.REASON_TOO_LARGE)


def check_options(where: str, given: dict, operation: Callable) -> None:
    """Raise naming the first keyword of ``given`` that ``operation`` (list_dead_letters or
    redrive) does not take, or a ``reason`` no dead letter carries: a typo is an error that
    says what there is, not a TypeError or an empty answer."""
    known = sorted(set(inspect.signature(operation).parameters) - {"settings", "queue"})
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(f"{where}: no option {unknown[0]!r}; use one of {', '.join(known)}")
    reason = given.get("reason")
    if reason is not None and reason not in REASONS:
        raise ConfigError(f"{where}: reason={reason!r}: use one of {', '.join(REASONS)}")
    _check_ages(given.get("min_age_s"), given.get("max_age_s"))
    if "batch_size" in given:
        _check_batch_size(given["batch_size"])


def _check_ages(min_age_s: object, max_age_s: object) -> None:
    """The age filters: None, or seconds from 0 (a string failed only once a dead letter was
    there to compare; nan matched nothing, an empty answer)."""
    for name, value in (("min_age_s", min_age_s), ("max_age_s", max_age_s)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not (math.isfinite(value) and value >= 0)):
            raise ConfigError(f"{name}={value!r} must be a number of seconds, 0 or more (or None: any age)")


def _check_batch_size(batch_size: object) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size={batch_size!r} must be a whole number >= 1 (dead letters a transaction)")


def _matches(d: DeadLetter, reason: str | None, min_age_s: float | None,
             max_age_s: float | None, now_s: float) -> bool:
    if reason is not None and d.reason != reason:
        return False
    age = d.age_s(now_s)
    if min_age_s is not None and age < min_age_s:
        return False
    if max_age_s is not None and age > max_age_s:
        return False
    return True


def list_dead_letters(settings: Settings, queue: str, *, reason: str | None = None,
                      min_age_s: float | None = None, max_age_s: float | None = None,
                      limit: int | None = None) -> list[DeadLetter]:
    """The queue's current dead letters (not redriven, not purged), oldest first."""
    validate_queue_name(queue)
    _check_limit(limit)
    _check_ages(min_age_s, max_age_s)
    now = time.time()
    found = [d for d in _fold(settings, queue).pending() if _matches(d, reason, min_age_s, max_age_s, now)]
    return found if limit is None else found[:limit]


def _check_limit(limit: int | None) -> None:
    """A limit slices the dead letters: a negative one (``[:-1]``) took all but the last."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit={limit!r} must be a whole number, 0 or more (or None: all)")


@dataclass(frozen=True)
class RedriveResult:
    moved: int
    remaining: int  # dead letters of the queue still there (filtered out or past the limit)


def redrive(settings: Settings, queue: str, *, reason: str | None = None,
            min_age_s: float | None = None, max_age_s: float | None = None,
            limit: int | None = None, rate_per_s: float = 500.0, batch_size: int = 100,
            progress: Callable[[int, int], None] | None = None) -> RedriveResult:
    """Move dead letters back to ``queue``, delivery count reset, exactly once each.

    At most ``rate_per_s`` messages a second, in transactions of ``batch_size``.
    ``progress(done, total)`` is called after each transaction.
    """
    validate_queue_name(queue)
    _check_limit(limit)
    # nan passed `<= 0` and made the rate limit never wait.
    if isinstance(rate_per_s, bool) or not isinstance(rate_per_s, (int, float)) or not (
            math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ConfigError(f"rate_per_s={rate_per_s!r} must be a finite number above 0 (messages a second)")
    _check_ages(min_age_s, max_age_s)
    _check_batch_size(batch_size)

    conf = profiles.producer_config(settings)
    producer = Producer({**conf,
                         "transactional.id": f"{settings.app_id}-redrive-{queue}",
                         # librdkafka wants message.timeout.ms <= transaction.timeout.ms;
                         # the tracker checks it against the brokers' bound at start.
                         "transaction.timeout.ms": redrive_transaction_timeout_ms(settings),
                         "linger.ms": 5})
    try:
        # Fences an earlier redrive of this queue and settles its last transaction,
        # so the fold below sees everything that was moved.
        producer.init_transactions(30)
    except Exception as exc:
        if "INVALID_TRANSACTION_TIMEOUT" in str(exc).upper():
            raise ConfigError(
                f"KMQ_DELIVERY_TIMEOUT_MS={settings.delivery_timeout_ms} asks for transactions of "
                f"{redrive_transaction_timeout_ms(settings)} ms, above the brokers' "
                "transaction.max.timeout.ms (900000 by default): lower KMQ_DELIVERY_TIMEOUT_MS "
                "or raise transaction.max.timeout.ms") from exc
        raise BrokerUnavailableError(
            f"could not start a transaction on {settings.bootstrap_servers}: {exc}") from exc
    folded = _fold(settings, queue)
    now = time.time()
    todo = [d for d in folded.pending() if _matches(d, reason, min_age_s, max_age_s, now)]
    if limit is not None:
        todo = todo[:limit]
    queue_parts = _partition_count(producer, settings.queue_topic)
    target = queue_partitions(queue, queue_parts)[0]
    dlq_part = dlq_partition(settings, queue)
    moved = 0
    started = time.monotonic()
    for i in range(0, len(todo), batch_size):
        chunk = todo[i:i + batch_size]
        producer.begin_transaction()
        for d in chunk:
            producer.produce(settings.queue_topic, d.value, queue.encode(), partition=target,
                             headers=_redriven_headers(d))
            producer.produce(settings.dlq_topic, b"", queue.encode(), partition=dlq_part,
                             headers=[(CONTROL, b"redriven"), (CONTROL_OFFSET, str(d.offset).encode())])
        producer.commit_transaction(60)
        moved += len(chunk)
        if progress is not None:
            progress(moved, len(todo))
        # Bounded rate: wait until this many messages are due at rate_per_s.
        wait = started + moved / rate_per_s - time.monotonic()
        if wait > 0 and moved < len(todo):
            time.sleep(wait)
    return RedriveResult(moved=moved, remaining=len(folded.pending()) - moved)


def _redriven_headers(d: DeadLetter) -> list[tuple[str, bytes]]:
    """The message as first sent: its id and user headers; delivery history reset."""
    ours, user = envelope.split(d.raw_headers)
    headers: list[tuple[str, bytes]] = [(envelope.ID, d.id.encode()),
                                        (REDRIVEN_FROM, str(d.offset).encode())]
    if envelope.ENQUEUED_MS in ours:
        headers.append((envelope.ENQUEUED_MS, ours[envelope.ENQUEUED_MS]))
    if envelope.GROUP in ours:  # a held group waits for it (dead_letter_head="hold")
        headers.append((envelope.GROUP, ours[envelope.GROUP]))
    return headers + user


def purge_dead_letters(settings: Settings, queue: str) -> int:
    """Drop every current dead letter of ``queue``; returns how many were dropped."""
    validate_queue_name(queue)
    folded = _fold(settings, queue)
    dropped = len(folded.pending())

    p = Producer(profiles.producer_config(settings))
    p.produce(settings.dlq_topic, b"", queue.encode(), partition=dlq_partition(settings, queue),
              headers=[(CONTROL, b"purged"), (CONTROL_OFFSET, str(folded.end).encode())])
    if p.flush(15):
        raise BrokerUnavailableError(f"purge of {queue!r} dead letters not acknowledged")
    return dropped


def _partition_count(producer: Producer, topic: str) -> int:
    md = producer.list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise ConfigError(f"topic {topic!r} does not exist: create kmq's topics first")
    return len(t.partitions)
