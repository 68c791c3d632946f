"""What came due becomes a plan of writes (5. in the README flow): the tracker's decisions, pure.

The state machine (:mod:`kmq.protocol.state`) says *what* is due; this module
decides what each of it becomes, given what the tracker read back:

- the time a TICK runs at (:func:`tick_time`: its own, so the log's order
  decides between an ack and a deadline);
- which offsets of a START are tracked at all (:func:`admit_start`: none on a
  queue-topic partition that does not exist, none below a purge floor);
- for each expired offset (:func:`plan`): its record found -> the queue's
  rules via :func:`kmq.protocol.envelope.after_expiry` (republish, dead-letter,
  wait out a backoff rounded to a grain, discard); found already written by an
  attempt before a crash -> nothing; gone from the log -> a payload-expired
  dead letter; past the partition's end (never written: a forged or broken
  START) -> nothing, counted; each write carries the headers-only dead letter
  to write instead if it proves too large to write again;
- a due scheduled send -> published, unless an attempt before a crash did.

Time, randomness and everything read from Kafka are arguments; the tracker
(``agents/redeliver.py``) only reads, carries the plan out and settles.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from kmq.backoff import Backoff
from kmq.protocol import envelope
from kmq.protocol.limits import DEAD_LETTER_HEADROOM_BYTES, QUEUE_RECORD_HEADROOM_BYTES
from kmq.protocol.markers import Acquire, RangeRef, Start
from kmq.protocol.masks import mask_offsets
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import Due, DueSend, Expiry

# Backoff deadlines are rounded up to this share of the delay (and at least
# BACKOFF_GRAIN_MS), so jittered deferrals of one range share a few groups.
BACKOFF_GRAIN_MS = 100
BACKOFF_GRAIN_SHARE = 50

QUEUE, DLQ = "queue", "dlq"  # which topic a write goes to


def tick_time(clock_ms: int, tick_ms: int) -> int:
    """The time a TICK proposed at ``tick_ms`` runs at, the partition clock reading ``clock_ms``:
    its own, however late it is read.

    The log decides: a settlement that reaches the markers partition before the
    first TICK stamped at or after its deadline wins, whether that TICK is read at
    once, from a backlog after a crash or handover, or by a loaded worker. (Running
    a TICK read within a second at the clock's later time let a TICK proposed just
    before a deadline expire a message whose ack came right behind it in the log:
    the ack lost to processing lag.) Deadlines that pass while a TICK travels are
    the next one's: the timer proposes a TICK as soon as something is due.
    """
    return min(clock_ms, tick_ms)


def admit_start(start: Start | Acquire, queue_partitions: int,
                purged_before: int) -> Start | Acquire | Outcome | None:
    """What of a START (or a dispatcher's ACQUIRE) is tracked: itself, a narrower one, or nothing.

    ``UNKNOWN_PARTITION`` for a partition the queue topic does not have
    (nothing could ever be read back there); None when a purge of its queue
    (records below ``purged_before`` on that partition) dropped every offset
    (a START can reach the tracker after the purge it raced with).
    """
    r = start.range
    if not 0 <= r.partition < queue_partitions:
        return Outcome.UNKNOWN_PARTITION
    if purged_before <= r.start:
        return start
    keep = start.mask & ~((1 << min(purged_before - r.start, r.length)) - 1)
    return replace(start, mask=keep) if keep else None


# A switch to shared mode: STARTs of the group's members are still taken this long after
# it (they advance the cursor the dispatcher starts from); twice the dispatcher's grace.
START_GRACE_MS = 6000


def start_allowed(cfg: Any, settings: Any, now_ms: int) -> bool:
    """Whether a consumer's START is tracked: always in partition mode; in shared mode only
    within ``START_GRACE_MS`` of the switch (a group member that had not seen it yet).

    ``cfg`` is the queue's :class:`kmq.queue_config.QueueConfig`, ``now_ms`` when the START
    was written (kmq.protocol.clock.written_at_ms).
    """
    if cfg.dispatch_mode(settings) != "shared":
        return True
    return bool(cfg.dispatch_since_ms) and now_ms - cfg.dispatch_since_ms < START_GRACE_MS


def backoff_deadline(now_ms: int, delay_ms: int) -> int:
    """When a backoff of ``delay_ms`` ends, rounded up to its grain (a few groups per range)."""
    grain = max(BACKOFF_GRAIN_MS, delay_ms // BACKOFF_GRAIN_SHARE)
    return -(-(now_ms + delay_ms) // grain) * grain


@dataclass(frozen=True, slots=True)
class QueueRules:
    """What the queue's settings say about an expired delivery."""

    max_deliveries: int
    backoff: Backoff | None = None
    dead_letter: bool = True
    ordered: bool = False  # ordering="group": the dispatcher must hear what left for good


@dataclass(frozen=True, slots=True)
class Record:
    """A queue-topic record read back: value, headers as the client gives them, timestamp,
    and its key (the queue it was sent to; None: not known)."""

    value: bytes
    headers: Any
    timestamp_ms: int
    key: bytes | None = None


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """What reading wanted offsets of one queue partition found.

    ``end``: an offset at or past which nothing existed when it was read (the
    reader reached the partition's end there), or None if it did not get that far.
    """

    records: Mapping[int, Record]
    end: int | None = None


@dataclass(frozen=True, slots=True)
class Write:
    """One record to write: to the queue or dead-letter topic, counted as ``outcome``.

    ``if_too_large``: the headers-only dead letter to write instead when the
    record proves too large to write again (counted ``TOO_LARGE``). ``ends``: an ordered
    queue's (queue, partition, offset) whose group hears it was dead-lettered if that
    happens to a redelivery (else the group would wait for a copy that never comes).
    """

    topic: str  # QUEUE or DLQ
    queue: str
    partition: int
    value: bytes
    headers: list
    outcome: Outcome
    if_too_large: "Write | None" = None
    ends: tuple[str, int, int] | None = None


@dataclass
class Plan:
    """What to write for one due list, and what to count and defer without writing."""

    writes: list[Write] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)  # (queue, Outcome) -> messages
    # range -> [(mask, deadline_ms)]: expired offsets that wait out a backoff
    deferred: dict[RangeRef, list[tuple[int, int]]] = field(default_factory=dict)
    # (queue, partition, offset, dead_lettered) of ordered queues' messages that were not
    # republished: dead-lettered (their groups go on or hold, docs/ordering.md), or dropped
    # or gone (settled: nothing could bring them back, so a group never holds for them)
    ended: list[tuple[str, int, int, bool]] = field(default_factory=list)


def offsets_to_read(due: Sequence[Due]) -> dict[int, list[int]]:
    """Queue partition -> the offsets whose records the due list needs, ascending."""
    wanted: dict[int, set[int]] = {}
    for d in due:
        if isinstance(d, Expiry):
            wanted.setdefault(d.range.partition, set()).update(mask_offsets(d.range.start, d.mask))
    return {p: sorted(offs) for p, offs in wanted.items()}


def written_key(topic: str, headers: Any) -> tuple[str, str, int]:
    """How a republished or dead-lettered record is recognised when found: (topic, id, deliveries)."""
    ours, _ = envelope.split(headers)
    return (topic, (ours.get(envelope.ID) or b"").decode(errors="replace"),
            envelope.int_header(ours, envelope.DELIVERIES, 0))


def plan(due: Sequence[Due], reads: Mapping[int, PartitionRead], *, now_ms: int,
         rules: Callable[[str], QueueRules], target_partition: Callable[[DueSend], int],
         dlq_partition: Callable[[str], int], max_message_bytes: int,
         found: Mapping[RangeRef, set] | None = None, found_sends: set[tuple[str, str]] = frozenset(),
         uniform: Callable[[float, float], float] = random.uniform) -> Plan:
    """Decide what every item of ``due`` becomes (module docstring).

    ``found``: per range an earlier attempt began on, the ``written_key`` of
    what it wrote; ``found_sends``: (queue, message id) of scheduled sends it
    published. Neither is written again.
    """
    out = Plan()
    found = found or {}
    for d in due:
        if isinstance(d, DueSend):
            _plan_send(out, d, now_ms, target_partition, dlq_partition, max_message_bytes, found_sends)
        elif isinstance(d, Expiry):
            _plan_expiry(out, d, reads.get(d.range.partition, PartitionRead({})), now_ms, rules(d.range.queue),
                         dlq_partition(d.range.queue), max_message_bytes, found.get(d.range), uniform)
    return out


def _plan_send(out: Plan, d: DueSend, now_ms: int, target_partition, dlq_partition, max_message_bytes: int,
               found_sends) -> None:
    if (d.queue, d.message_id) in found_sends:
        out.counts[(d.queue, Outcome.SCHEDULED_FOUND)] += 1
        return
    headers = [(envelope.ID, d.message_id.encode()), (envelope.ENQUEUED_MS, str(d.due_ms).encode()),
               *d.headers]
    out.writes.append(Write(QUEUE, d.queue, target_partition(d), d.value, headers,
                            Outcome.SCHEDULED_DELIVERED,
                            _too_large(d.queue, dlq_partition(d.queue), d.value, headers, -1, -1, d.due_ms,
                                       now_ms, max_message_bytes)))


def _plan_expiry(out: Plan, d: Expiry, read: PartitionRead, now_ms: int, rules: QueueRules, dlq_part: int,
                 max_message_bytes: int, found: set | None, uniform) -> None:
    queue, partition = d.range.queue, d.range.partition
    waits: dict[int, int] = {}
    for off in mask_offsets(d.range.start, d.mask):
        rec = read.records.get(off)
        if rules.ordered and (rec is None or (rec.key is not None and rec.key != queue.encode())):
            out.ended.append((queue, partition, off, False))  # never republished: its group goes on
        if rec is None:
            if read.end is not None and off >= read.end:
                out.counts[(queue, Outcome.BEYOND_END)] += 1  # never written: nothing to dead-letter
                continue
            headers = [(envelope.ID, envelope.derived_id(partition, off).encode())]
            headers += envelope.dead_letter_headers(
                envelope.REASON_PAYLOAD_EXPIRED, "the record left the queue topic before it could be redelivered",
                d.started_ms, now_ms, partition, off)
            out.writes.append(Write(DLQ, queue, dlq_part, b"", headers, Outcome.DEAD_LETTERED))
            out.counts[(queue, Outcome.PAYLOAD_EXPIRED)] += 1
            continue
        if rec.key is not None and rec.key != queue.encode():
            # Another queue's record at an offset a (forged) marker named: never republished
            # under this queue's name, nor dead-lettered as this queue's.
            out.counts[(queue, Outcome.FOREIGN_RECORD)] += 1
            continue
        step = envelope.after_expiry(
            rec.headers, partition=partition, offset=off, record_timestamp_ms=rec.timestamp_ms, cause=d.cause,
            reason=d.reason, started_ms=d.started_ms, now_ms=now_ms, max_deliveries=rules.max_deliveries,
            backoff=rules.backoff, dead_letter=rules.dead_letter, uniform=uniform)
        if rules.ordered and not isinstance(step, (envelope.Republish, envelope.Defer)):
            out.ended.append((queue, partition, off, isinstance(step, envelope.DeadLetter)))
        if isinstance(step, (envelope.Republish, envelope.DeadLetter)):
            republish = isinstance(step, envelope.Republish)
            topic = QUEUE if republish else DLQ
            if found and written_key(topic, step.headers) in found:
                out.counts[(queue, Outcome.FOUND_AFTER_CRASH)] += 1
                continue
            out.writes.append(Write(
                topic, queue, partition if republish else dlq_part, rec.value, step.headers,
                Outcome.REDELIVERED if republish else Outcome.DEAD_LETTERED,
                _too_large(queue, dlq_part, rec.value, step.headers, partition, off, d.started_ms, now_ms,
                           max_message_bytes),
                (queue, partition, off) if rules.ordered and republish else None))
        elif isinstance(step, envelope.Defer):
            deadline = backoff_deadline(now_ms, step.delay_ms)
            waits[deadline] = waits.get(deadline, 0) | (1 << (off - d.range.start))
            out.counts[(queue, Outcome.BACKOFF)] += 1
        else:
            out.counts[(queue, Outcome.DISCARDED)] += 1
    if waits:
        out.deferred.setdefault(d.range, []).extend((mask, deadline) for deadline, mask in waits.items())


def fits(w: Write, max_message_bytes: int) -> bool:
    """Whether ``w`` is within its topic's limit (kmq.kafka.admin makes the topics with
    them): checked before it is offered, so a broker that enforces the topic's limit and not
    the producer's never refuses it after the fact (a refusal the next TICK retried for ever)."""
    headroom = DEAD_LETTER_HEADROOM_BYTES if w.topic == DLQ else QUEUE_RECORD_HEADROOM_BYTES
    size = len(w.value) + len(w.queue.encode()) + sum(len(k.encode()) + len(v or b"") for k, v in w.headers)
    return size <= max_message_bytes + headroom


def _too_large(queue: str, dlq_part: int, value: bytes, headers: list, partition: int, offset: int,
               started_ms: int, now_ms: int, max_message_bytes: int) -> Write:
    """The dead letter for a record the broker took but that cannot be written again: its
    headers, no payload (the payload stays at the source offset)."""
    ours, user = envelope.split(headers)
    detail = (f"{len(value)} bytes: above what may be written again (KMQ_MAX_MESSAGE_BYTES="
              f"{max_message_bytes}); the payload stays at the source offset")
    kept = [(k, v) for k, v in ours.items() if not k.startswith("kmq.dlq.") and k != envelope.SOURCE]
    return Write(DLQ, queue, dlq_part, b"", kept + envelope.dead_letter_headers(
        envelope.REASON_TOO_LARGE, detail, started_ms, now_ms, partition, offset) + user, Outcome.TOO_LARGE)
