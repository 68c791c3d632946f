"""Typed marker records: what consumers and the tracker write to the markers topic.

One frozen dataclass per marker type, and :func:`violation`, the limits every marker
must keep, whoever built it. Their bytes on the topic are
:mod:`kmq.protocol.marker_codec`'s concern: the state machine and the agents work
with these types and never see the wire format.

Offsets are tracked by *range*: ``RangeRef(queue, partition, start, end)``
names the half-open offset range ``[start, end)`` of one queue-topic
partition that one fetch returned. A ``mask`` is a bit set over that range:
bit ``i`` stands for offset ``start + i``.

CREDIT, ACQUIRE and BEGIN belong to shared queues (docs/shared-queues.md): a consumer
asks for work with CREDIT; the tracker's dispatcher records what it hands out with
ACQUIRE (a START written by the tracker itself) and announces itself with BEGIN.
FLOOR (added with ordered queues, docs/ordering.md; records without it decode as
before) sets an ordered queue's cursor back to its oldest message not handed out; an
ordered queue's ACQUIRE (``ordered=True``, its own marker type, so older records decode
as before) also marks its offsets handed out above that floor.

Limits. Anything on the markers topic may be hostile (every consumer can
write to it), so markers are bounded by what the SDK itself can produce, and
a marker outside these limits is never handed to the state machine:

- ``MAX_RANGE_LEN`` offsets in one range: the SDK's largest fetch of one
  partition (``batch_size`` is at most ``MAX_BATCH_SIZE``; a fetch whose offsets
  span more, across aborted transactions or other queues' records, is split);
- ``MAX_RECORD_OFFSETS`` offsets over all range markers of one record (so one
  record decodes into at most 32 KiB of masks; the SDK splits its records at
  this), and at most ``MAX_MARKERS_PER_RECORD`` markers;
- ``MAX_TIMEOUT_MS`` for a START's or EXTEND's timeout (the 12 h visibility
  ceiling), ``MAX_DELAY_MS`` for a RELEASE's delay (``KMQ_MAX_DELAY_S`` cannot
  exceed it), times (SCHEDULE due, TICK) within ``0..MAX_TIME_MS``;
- queue names by ``kmq.protocol.placement.QUEUE_NAME_RE``, reasons up to
  ``MAX_REASON_BYTES`` and message ids up to ``MAX_MESSAGE_ID_BYTES``;
- a CREDIT's consumer id up to ``MAX_MESSAGE_ID_BYTES``, its ``free`` up to
  ``MAX_CREDIT`` and its lease and timeout up to ``MAX_TIMEOUT_MS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

# The limits (see the module docstring) and mask helpers, re-exported for users of the markers.
from kmq.protocol.limits import (MAX_BATCH_SIZE, MAX_CREDIT, MAX_DELAY_MS, MAX_MARKERS_PER_RECORD,  # noqa: F401
                                 MAX_MESSAGE_ID_BYTES, MAX_RANGE_LEN, MAX_REASON_BYTES, MAX_RECORD_OFFSETS,
                                 MAX_TIME_MS, MAX_TIMEOUT_MS, int_in, name_violation, offsets_violation,
                                 utf8_len)
from kmq.protocol.masks import first_offsets, lowest_bits, mask_offsets, mask_of, offsets_mask  # noqa: F401


@dataclass(frozen=True, slots=True)
class RangeRef:
    """Offsets ``[start, end)`` of one queue-topic partition, fetched for one queue."""

    queue: str
    partition: int
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def full_mask(self) -> int:
        return (1 << (self.end - self.start)) - 1


@dataclass(frozen=True, slots=True)
class Start:
    """A consumer fetched ``range``; the offsets in ``mask`` are this queue's and now in flight."""

    range: RangeRef
    timeout_ms: int
    mask: int


@dataclass(frozen=True, slots=True)
class Ack:
    """The offsets in ``mask`` were processed: never deliver them again."""

    range: RangeRef
    mask: int


@dataclass(frozen=True, slots=True)
class Extend:
    """Push the deadline of the offsets in ``mask`` to ``timeout_ms`` from now."""

    range: RangeRef
    mask: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Release:
    """Give the offsets back: deliver again after ``delay_ms`` (-1: backoff policy).

    ``counted=False`` returns messages that never reached user code (a closing
    consumer's prefetch), so their delivery count does not grow.
    """

    range: RangeRef
    mask: int
    delay_ms: int
    counted: bool = True


@dataclass(frozen=True, slots=True)
class Reject:
    """Dead-letter the offsets in ``mask`` with ``reason``; no further delivery."""

    range: RangeRef
    mask: int
    reason: str


@dataclass(frozen=True, slots=True)
class Schedule:
    """A delayed send: publish ``value`` to ``queue`` at or after ``due_ms``."""

    queue: str
    message_id: str
    due_ms: int
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Tick:
    """Tracker-internal: check deadlines of this partition at ``now_ms``."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class Purge:
    """Forget everything in flight or scheduled for ``queue`` (a queue purge)."""

    queue: str


@dataclass(frozen=True, slots=True)
class Credit:
    """A shared queue's consumer asks for work and says it is alive.

    As of having received delivery ``seq`` of dispatcher ``epoch`` (0, 0: none yet), it can
    take ``free`` more messages, on lane ``lane`` (a partition of the deliveries topic),
    and stays alive ``lease_ms`` unless it asks again (``lease_ms = 0``: it is leaving). What
    it is handed stays invisible ``timeout_ms`` (its visibility timeout).
    """

    queue: str
    consumer_id: str
    lane: int
    epoch: int
    seq: int
    free: int
    lease_ms: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Acquire:
    """Tracker-internal: the dispatcher of ``epoch`` handed the offsets in ``mask`` out.

    Applied like a START (the offsets are in flight from then on); an ACQUIRE of another
    epoch than the partition's current one (a dispatcher that lost its partition) is fenced.
    ``ordered``: an ordered queue's (docs/ordering.md): the state machine also keeps its
    offsets as handed out above the floor, for a successor (``kmq.protocol.handed``).
    """

    range: RangeRef
    timeout_ms: int
    mask: int
    epoch: int
    ordered: bool = False


@dataclass(frozen=True, slots=True)
class Begin:
    """Tracker-internal: a dispatcher starts on this markers partition with ``epoch``.

    Everything before it in the partition is applied by the time the agent reaches it, so
    the dispatcher's starting positions are final; later ACQUIREs of other epochs are fenced.
    """

    epoch: int


@dataclass(frozen=True, slots=True)
class Floor:
    """Tracker-internal: a dispatcher that begins reads ``queue``'s ``partition`` from
    ``offset`` on. An ordered queue's records above it are not all handed out (some wait
    for their group); an unordered queue's below it were handed out or dropped as
    duplicates. Written by the dispatcher of ``epoch`` after its ACQUIREs, fenced like them."""

    queue: str
    partition: int
    offset: int
    epoch: int


Marker = Union[Start, Ack, Extend, Release, Reject, Schedule, Tick, Purge, Credit, Acquire, Begin, Floor]
RANGE_MARKERS = (Start, Ack, Extend, Release, Reject, Acquire)

_U64_MAX = (1 << 64) - 1


def range_violation(r: object) -> str | None:
    """Why ``r`` is not a usable :class:`RangeRef`, or None (the codec checks it as it reads)."""
    if not isinstance(r, RangeRef):
        return f"range is {type(r).__name__}, not a RangeRef"
    return name_violation("queue", r.queue) or offsets_violation(r.partition, r.start, r.end)


def violation(m: object) -> str | None:
    """Why ``m`` is outside the codec's limits (module docstring), or None when it is within.

    The decoder never returns a marker with a violation, and the state machine
    checks again (a marker built in-process skips the decoder).
    """
    if isinstance(m, RANGE_MARKERS):
        why = range_violation(m.range)
        if why:
            return why
        if not isinstance(m.mask, int) or not 0 < m.mask <= m.range.full_mask:
            return "mask selects no offset or offsets outside its range"
        if isinstance(m, (Start, Extend, Acquire)) and not int_in(m.timeout_ms, 0, MAX_TIMEOUT_MS):
            return f"timeout_ms {m.timeout_ms!r} is not 0..{MAX_TIMEOUT_MS} (MAX_TIMEOUT_MS)"
        if isinstance(m, Release) and not int_in(m.delay_ms, -1, MAX_DELAY_MS):
            return f"delay_ms {m.delay_ms!r} is not -1..{MAX_DELAY_MS} (MAX_DELAY_MS)"
        if isinstance(m, Release) and not isinstance(m.counted, bool):
            return f"counted {m.counted!r} is not a bool"
        if isinstance(m, Reject) and not 0 <= utf8_len(m.reason) <= MAX_REASON_BYTES:
            return f"reason is not UTF-8 text of at most {MAX_REASON_BYTES} bytes (MAX_REASON_BYTES)"
        if isinstance(m, Acquire) and m.ordered not in (True, False):
            return f"ordered {m.ordered!r} is not a bool"
        if isinstance(m, Acquire) and not int_in(m.epoch, 0, _U64_MAX):
            return f"epoch {m.epoch!r} is not a u64"
        return None
    if isinstance(m, Credit):
        if not 0 < utf8_len(m.consumer_id) <= MAX_MESSAGE_ID_BYTES:
            return f"consumer id is not UTF-8 text of 1..{MAX_MESSAGE_ID_BYTES} bytes (MAX_MESSAGE_ID_BYTES)"
        if not (int_in(m.lane, 0, 0xFFFFFFFF) and int_in(m.epoch, 0, _U64_MAX) and int_in(m.seq, 0, _U64_MAX)):
            return "lane, epoch or seq out of their u32/u64 ranges"
        if not int_in(m.free, 0, MAX_CREDIT):
            return f"free {m.free!r} is not 0..{MAX_CREDIT} (MAX_CREDIT)"
        if not (int_in(m.lease_ms, 0, MAX_TIMEOUT_MS) and int_in(m.timeout_ms, 0, MAX_TIMEOUT_MS)):
            return f"lease_ms or timeout_ms is not 0..{MAX_TIMEOUT_MS} (MAX_TIMEOUT_MS)"
        return name_violation("queue", m.queue)
    if isinstance(m, Begin):
        return None if int_in(m.epoch, 0, _U64_MAX) else f"epoch {m.epoch!r} is not a u64"
    if isinstance(m, Floor):
        if not (int_in(m.epoch, 0, _U64_MAX) and int_in(m.partition, 0, 0xFFFFFFFF)
                and int_in(m.offset, 0, 2**63 - 1)):
            return "epoch, partition or offset out of their u64/u32/i64 ranges"
        return name_violation("queue", m.queue)
    if isinstance(m, Schedule):
        if not 0 < utf8_len(m.message_id) <= MAX_MESSAGE_ID_BYTES:
            return f"message id is not UTF-8 text of 1..{MAX_MESSAGE_ID_BYTES} bytes (MAX_MESSAGE_ID_BYTES)"
        if not int_in(m.due_ms, 0, MAX_TIME_MS):
            return f"due_ms {m.due_ms!r} is not 0..{MAX_TIME_MS} (MAX_TIME_MS)"
        if not isinstance(m.value, bytes) or not isinstance(m.headers, tuple) or not all(
                isinstance(h, tuple) and len(h) == 2 and 0 <= utf8_len(h[0]) <= 0xFFFF
                and isinstance(h[1], bytes) for h in m.headers) or len(m.headers) > 0xFFFF:
            return "value or headers are not bytes and (str, bytes) pairs"
        return name_violation("queue", m.queue)
    if isinstance(m, Tick):
        return None if int_in(m.now_ms, 0, MAX_TIME_MS) else \
            f"now_ms {m.now_ms!r} is not 0..{MAX_TIME_MS} (MAX_TIME_MS)"
    if isinstance(m, Purge):
        return name_violation("queue", m.queue)
    return f"not a marker: {type(m).__name__}"


def range_offsets(m: Marker) -> int:
    """Offsets a marker spans (its range's length; 0 for markers without a range)."""
    return m.range.length if isinstance(m, RANGE_MARKERS) else 0
