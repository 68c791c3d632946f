"""Dead-letter operations: list a queue's dead letters, redrive them, purge them.

Each reads the queue's dead-letter events and folds them into the letters still
there (:mod:`kmq.ops.dead_letter_log`: the events, the fold, :class:`DeadLetter`).
A redrive moves each dead letter and appends its ``redriven`` event in one
Kafka transaction (the anchor is SQS's StartMessageMoveTask): an interrupted
redrive leaves no half-moved message, and a rerun, which folds the log
again, moves each remaining one exactly once. The transactional id is per
queue, so a second concurrent redrive of the same queue fences the first.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

from confluent_kafka import KafkaError, KafkaException, Producer
from kmq.kafka.producer_start import started_producer

from kmq.kafka.broker_checks import redrive_transaction_timeout_ms, transaction_timeout_fix
from kmq.kafka import profiles
from kmq.ops.dead_letter_log import CONTROL, CONTROL_OFFSET, DeadLetter, dlq_partition, read_letter_log
from kmq.protocol import envelope
from kmq.errors import BrokerUnavailableError, ConfigError, DeliveryError, KmqError
from kmq.protocol.limits import DEAD_LETTER_HEADROOM_BYTES, MIN_RATE_PER_S
from kmq.protocol.placement import queue_partitions, validate_queue_name
from kmq.settings import Settings

REDRIVEN_FROM = "kmq.redriven-from"  # on a redriven queue record: its dead-letter offset
log = logging.getLogger("kmq.redrive")


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
    if min_age_s is not None and max_age_s is not None and min_age_s > max_age_s:
        raise ConfigError(f"min_age_s={min_age_s!r} is above max_age_s={max_age_s!r}: no dead letter is "
                          "both; give min_age_s <= max_age_s")


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
    found = [d for d in read_letter_log(settings, queue).pending() if _matches(d, reason, min_age_s, max_age_s, now)]
    return found if limit is None else found[:limit]


def _check_limit(limit: int | None) -> None:
    """A limit slices the dead letters: a negative one (``[:-1]``) took all but the last."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit={limit!r} must be a whole number, 0 or more (or None: all)")


# Dead letters that carry no payload (it had left the queue topic, or was too large to be
# written again): a redrive would put an empty message back, so they stay.
WITHOUT_PAYLOAD = (envelope.REASON_PAYLOAD_EXPIRED, envelope.REASON_TOO_LARGE)


@dataclass(frozen=True)
class RedriveResult:
    moved: int
    remaining: int  # dead letters of the queue still there (filtered out or past the limit)
    without_payload: int = 0  # of ``remaining``: never moved, they carry no payload (WITHOUT_PAYLOAD)


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
            math.isfinite(rate_per_s) and rate_per_s >= MIN_RATE_PER_S):
        raise ConfigError(f"rate_per_s={rate_per_s!r} must be a finite number of at least {MIN_RATE_PER_S:g} "
                          f"(messages a second: one every {1 / MIN_RATE_PER_S:g} s), e.g. 200")
    _check_ages(min_age_s, max_age_s)
    _check_batch_size(batch_size)
    if progress is not None and not callable(progress):
        raise ConfigError(f"progress={progress!r} must be a function of (done, total), or None")

    conf = profiles.producer_config(settings)
    lines = LibrdkafkaLines()
    producer = Producer({**conf,
                         "transactional.id": f"{settings.app_id}-redrive-{queue}",
                         # librdkafka wants message.timeout.ms <= transaction.timeout.ms;
                         # the tracker checks it against the brokers' bound at start.
                         "transaction.timeout.ms": redrive_transaction_timeout_ms(settings),
                         # A dead letter at KMQ_MAX_MESSAGE_BYTES with its headers (librdkafka's
                         # 1,000,000-byte default refused it: an audit).
                         "message.max.bytes": settings.max_message_bytes + DEAD_LETTER_HEADROOM_BYTES,
                         "linger.ms": 5, "logger": lines})
    try:
        # Fences an earlier redrive of this queue and settles its last transaction,
        # so the fold below sees everything that was moved.
        producer.init_transactions(30)
    except Exception as exc:
        lines.emit(producer)  # librdkafka's lines on it
        if "INVALID_TRANSACTION_TIMEOUT" in str(exc).upper():
            raise ConfigError(
                f"KMQ_DELIVERY_TIMEOUT_MS={settings.delivery_timeout_ms} asks for transactions of "
                f"{redrive_transaction_timeout_ms(settings)} ms, above the brokers' "
                f"transaction.max.timeout.ms (900000 by default). {transaction_timeout_fix(settings, None)}"
            ) from exc
        raise BrokerUnavailableError(
            f"could not start a transaction on {settings.bootstrap_servers}: {exc}") from exc
    folded = read_letter_log(settings, queue)
    now = time.time()
    matched = [d for d in folded.pending() if _matches(d, reason, min_age_s, max_age_s, now)]
    todo = [d for d in matched if d.reason not in WITHOUT_PAYLOAD]
    if limit is not None:
        todo = todo[:limit]
    queue_parts = _partition_count(producer, settings.queue_topic)
    target = queue_partitions(queue, queue_parts)[0]
    dlq_part = dlq_partition(settings, queue)
    moved = 0
    started = time.monotonic()
    for i in range(0, len(todo), batch_size):
        chunk = todo[i:i + batch_size]
        try:
            producer.begin_transaction()
            for d in chunk:
                producer.produce(settings.queue_topic, d.value, queue.encode(), partition=target,
                                 headers=_redriven_headers(d))
                producer.produce(settings.dlq_topic, b"", queue.encode(), partition=dlq_part,
                                 headers=[(CONTROL, b"redriven"), (CONTROL_OFFSET, str(d.offset).encode())])
            producer.commit_transaction(60)
        except KafkaException as exc:
            if not _fenced(exc):
                lines.emit(producer)
                raise DeliveryError(
                    f"redrive of {queue!r} stopped after it moved {moved}: {exc}; "
                    "nothing was lost (the unfinished transaction is void): rerun it to move what "
                    "remains") from exc
            # The transaction is void: drop its records now (left to the exit, librdkafka said
            # it was "terminating with 2 messages still in queue") and its lines, which are
            # about the fencing this one error reports (ADDPARTS, TXNERR, FATAL).
            producer.purge()
            producer.flush(0)
            lines.held.clear()
            raise KmqError(
                f"another redrive of {queue!r} took over (it fenced this one's transactional id) "
                f"after this one moved {moved}: nothing was lost (the unfinished transaction is "
                "void); rerun the redrive once the other is done to move what remains") from exc
        moved += len(chunk)
        lines.emit(producer)
        if progress is not None:
            progress(moved, len(todo))
        # Bounded rate: wait until this many messages are due at rate_per_s.
        wait = started + moved / rate_per_s - time.monotonic()
        if wait > 0 and moved < len(todo):
            time.sleep(wait)
    lines.emit(producer)
    return RedriveResult(moved=moved, remaining=len(folded.pending()) - moved,
                         without_payload=len(matched) - len(todo))


class LibrdkafkaLines:
    """The redrive producer's ``logger``: librdkafka's log lines, held until its transaction
    ends and then logged to ``kmq.redrive`` (on stderr where logging is not set up), so a
    fenced redrive can leave out what librdkafka said of the fencing (its commit serves them
    before the error is raised). Without it librdkafka printed them itself."""

    def __init__(self) -> None:
        self.held: list[tuple[int, str, tuple[object, ...]]] = []

    def log(self, level: int, msg: str, *args: object) -> None:
        self.held.append((level, msg, args))

    def emit(self, producer: Producer) -> None:
        """Log what librdkafka said so far (``producer.poll`` serves what it has not handed over)."""
        producer.poll(0)
        held, self.held = self.held, []
        for level, msg, args in held:
            log.log(level, msg, *args)


# Fenced by a newer producer of the same transactional id: librdkafka's own code, or the broker's.
_FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def _fenced(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in _FENCED_CODES


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
    folded = read_letter_log(settings, queue)
    dropped = len(folded.pending())

    p = started_producer(profiles.producer_config(settings), settings.dlq_topic)
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
