"""Typed, versioned marker records and their codec (the only place markers are encoded).

A marker record on the markers topic is a *batch*: one version byte, then a
list of markers, so a consumer writes one record per fetch (its START plus
any acks gathered since the last record) instead of one per message.

Offsets are tracked by *range*: ``RangeRef(queue, partition, start, end)``
names the half-open offset range ``[start, end)`` of one queue-topic
partition that one fetch returned. A ``mask`` is a bit set over that range:
bit ``i`` stands for offset ``start + i``.

Wire format (version 1, big-endian)::

    record   := u8 version=1, u16 count, marker*count
    marker   := u8 type, body
    range    := str16 queue, u32 partition, i64 start, i64 end
    mask     := u32 nbytes, bytes (little-endian bit set; START: 0 bytes = every offset)
    START    := range, u32 timeout_ms, mask
    ACK      := range, mask
    EXTEND   := range, mask, u32 timeout_ms
    RELEASE  := range, mask, i64 delay_ms (-1: the queue's backoff policy), u8 counted
    REJECT   := range, mask, str16 reason
    SCHEDULE := str16 queue, str16 message_id, i64 due_ms, bytes32 value, u16 n, (str16 key, bytes32 value)*n
    TICK     := i64 now_ms
    PURGE    := str16 queue
    CREDIT   := str16 queue, str16 consumer_id, u32 lane, u64 epoch, u64 seq, u32 free, u32 lease_ms,
                u32 timeout_ms
    ACQUIRE  := range, u32 timeout_ms, mask (0 bytes = every offset), u64 epoch
    BEGIN    := u64 epoch
    FLOOR    := str16 queue, u32 partition, i64 offset, u64 epoch

CREDIT, ACQUIRE and BEGIN belong to shared queues (docs/shared-queues.md): a consumer
asks for work with CREDIT; the tracker's dispatcher records what it hands out with
ACQUIRE (a START written by the tracker itself) and announces itself with BEGIN.
FLOOR (added with ordered queues, docs/ordering.md; records without it decode as
before) sets an ordered queue's cursor back to its oldest message not handed out.

Limits. Anything on the markers topic may be hostile (every consumer can
write to it), so decoding is bounded by what the SDK itself can produce, and
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

A record that does not frame (truncated, unknown type, too many offsets) is
one :class:`MarkerDecodeError`; :func:`decode_lenient` additionally sets apart
single markers that frame but break a limit, keeping the rest of the record.
Decoding costs time and memory linear in the record's bytes plus at most
``MAX_RECORD_OFFSETS / 8`` bytes of masks, whatever the record says.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Union

from kmq.errors import MarkerDecodeError
# The limits (see the module docstring) and mask helpers, re-exported for callers of this codec.
from kmq.protocol.limits import (MAX_BATCH_SIZE, MAX_CREDIT, MAX_DELAY_MS, MAX_MARKERS_PER_RECORD,  # noqa: F401
                                 MAX_MESSAGE_ID_BYTES, MAX_RANGE_LEN, MAX_REASON_BYTES, MAX_RECORD_OFFSETS,
                                 MAX_TIME_MS, MAX_TIMEOUT_MS, int_in, name_violation, offsets_violation,
                                 utf8_len)
from kmq.protocol.masks import first_offsets, lowest_bits, mask_offsets, mask_of, offsets_mask  # noqa: F401

VERSION = 1


class MarkerType(IntEnum):
    START = 1
    ACK = 2
    EXTEND = 3
    RELEASE = 4
    REJECT = 5
    SCHEDULE = 6
    TICK = 7
    PURGE = 8
    CREDIT = 9
    ACQUIRE = 10
    BEGIN = 11
    FLOOR = 12


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
    """

    range: RangeRef
    timeout_ms: int
    mask: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Begin:
    """Tracker-internal: a dispatcher starts on this markers partition with ``epoch``.

    Everything before it in the partition is applied by the time the agent reaches it, so
    the dispatcher's starting positions are final; later ACQUIREs of other epochs are fenced.
    """

    epoch: int


@dataclass(frozen=True, slots=True)
class Floor:
    """Tracker-internal: an ordered queue's records on ``partition`` from ``offset`` on are
    not all handed out (some wait for their group), so a dispatcher that begins reads from
    there; written by the dispatcher of ``epoch`` after its ACQUIREs, fenced like them."""

    queue: str
    partition: int
    offset: int
    epoch: int


Marker = Union[Start, Ack, Extend, Release, Reject, Schedule, Tick, Purge, Credit, Acquire, Begin, Floor]
RANGE_MARKERS = (Start, Ack, Extend, Release, Reject, Acquire)

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_CREDIT_TAIL = struct.Struct(">IQQIII")
_U64_MAX = (1 << 64) - 1
_RANGE_TAIL = struct.Struct(">Iqq")


def _range_violation(r: object) -> str | None:
    if not isinstance(r, RangeRef):
        return f"range is {type(r).__name__}, not a RangeRef"
    return name_violation("queue", r.queue) or offsets_violation(r.partition, r.start, r.end)


def violation(m: object) -> str | None:
    """Why ``m`` is outside the codec's limits (module docstring), or None when it is within.

    The decoder never returns a marker with a violation, and the state machine
    checks again (a marker built in-process skips the decoder).
    """
    if isinstance(m, RANGE_MARKERS):
        why = _range_violation(m.range)
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


def _mask_bytes(mask: int, length: int) -> bytes:
    return mask.to_bytes((length + 7) // 8, "little")


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def str16(self, s: str) -> None:
        raw = s.encode()
        if len(raw) > 0xFFFF:
            raise ValueError(f"string of {len(raw)} bytes does not fit a marker field (max 65535)")
        self.parts.append(_U16.pack(len(raw)))
        self.parts.append(raw)

    def bytes32(self, b: bytes) -> None:
        self.parts.append(_U32.pack(len(b)))
        self.parts.append(bytes(b))

    def range(self, r: RangeRef) -> None:
        self.str16(r.queue)
        self.parts.append(_RANGE_TAIL.pack(r.partition, r.start, r.end))

    def mask(self, r: RangeRef, mask: int, *, allow_full_shorthand: bool = False) -> None:
        if allow_full_shorthand and mask == r.full_mask:
            self.parts.append(_U32.pack(0))
        else:
            self.bytes32(_mask_bytes(mask, r.length))


def encode(markers: list[Marker] | tuple[Marker, ...]) -> bytes:
    """Encode a batch of markers as one record value (ValueError if one breaks a limit)."""
    if not markers:
        raise ValueError("a marker record needs at least one marker")
    if len(markers) > MAX_MARKERS_PER_RECORD:
        raise ValueError(f"at most {MAX_MARKERS_PER_RECORD} markers fit one record")
    if sum(range_offsets(m) for m in markers) > MAX_RECORD_OFFSETS:
        raise ValueError(f"the markers span more than {MAX_RECORD_OFFSETS} offsets "
                         "(MAX_RECORD_OFFSETS): split them with encode_records")
    w = _Writer()
    w.parts.append(_U8.pack(VERSION))
    w.parts.append(_U16.pack(len(markers)))
    for m in markers:
        why = violation(m)
        if why:
            raise TypeError(why) if why.startswith("not a marker") else ValueError(why)
        if isinstance(m, Start):
            w.parts.append(_U8.pack(MarkerType.START))
            w.range(m.range)
            w.parts.append(_U32.pack(m.timeout_ms))
            w.mask(m.range, m.mask, allow_full_shorthand=True)
        elif isinstance(m, Ack):
            w.parts.append(_U8.pack(MarkerType.ACK))
            w.range(m.range)
            w.mask(m.range, m.mask)
        elif isinstance(m, Extend):
            w.parts.append(_U8.pack(MarkerType.EXTEND))
            w.range(m.range)
            w.mask(m.range, m.mask)
            w.parts.append(_U32.pack(m.timeout_ms))
        elif isinstance(m, Release):
            w.parts.append(_U8.pack(MarkerType.RELEASE))
            w.range(m.range)
            w.mask(m.range, m.mask)
            w.parts.append(_I64.pack(m.delay_ms))
            w.parts.append(_U8.pack(1 if m.counted else 0))
        elif isinstance(m, Reject):
            w.parts.append(_U8.pack(MarkerType.REJECT))
            w.range(m.range)
            w.mask(m.range, m.mask)
            w.str16(m.reason)
        elif isinstance(m, Schedule):
            w.parts.append(_U8.pack(MarkerType.SCHEDULE))
            w.str16(m.queue)
            w.str16(m.message_id)
            w.parts.append(_I64.pack(m.due_ms))
            w.bytes32(m.value)
            w.parts.append(_U16.pack(len(m.headers)))
            for k, v in m.headers:
                w.str16(k)
                w.bytes32(v)
        elif isinstance(m, Tick):
            w.parts.append(_U8.pack(MarkerType.TICK))
            w.parts.append(_I64.pack(m.now_ms))
        elif isinstance(m, Purge):
            w.parts.append(_U8.pack(MarkerType.PURGE))
            w.str16(m.queue)
        elif isinstance(m, Credit):
            w.parts.append(_U8.pack(MarkerType.CREDIT))
            w.str16(m.queue)
            w.str16(m.consumer_id)
            w.parts.append(_CREDIT_TAIL.pack(m.lane, m.epoch, m.seq, m.free, m.lease_ms, m.timeout_ms))
        elif isinstance(m, Acquire):
            w.parts.append(_U8.pack(MarkerType.ACQUIRE))
            w.range(m.range)
            w.parts.append(_U32.pack(m.timeout_ms))
            w.mask(m.range, m.mask, allow_full_shorthand=True)
            w.parts.append(_U64.pack(m.epoch))
        elif isinstance(m, Begin):
            w.parts.append(_U8.pack(MarkerType.BEGIN))
            w.parts.append(_U64.pack(m.epoch))
        elif isinstance(m, Floor):
            w.parts.append(_U8.pack(MarkerType.FLOOR))
            w.str16(m.queue)
            w.parts.append(_U32.pack(m.partition))
            w.parts.append(_I64.pack(m.offset))
            w.parts.append(_U64.pack(m.epoch))
    return b"".join(w.parts)


def encode_records(markers: list[Marker] | tuple[Marker, ...],
                   max_markers: int = MAX_MARKERS_PER_RECORD) -> list[bytes]:
    """Encode markers, in order, as as few records as the record limits allow."""
    out: list[bytes] = []
    chunk: list[Marker] = []
    offsets = 0
    for m in markers:
        n = range_offsets(m)
        if chunk and (len(chunk) >= max_markers or offsets + n > MAX_RECORD_OFFSETS):
            out.append(encode(chunk))
            chunk, offsets = [], 0
        chunk.append(m)
        offsets += n
    if chunk:
        out.append(encode(chunk))
    return out


class _Reader:
    """Reads fields in order; a field that frames but is unusable sets :attr:`problem`."""

    __slots__ = ("data", "pos", "offsets", "problem")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.offsets = 0  # offsets of the record's range markers so far
        self.problem: str | None = None  # of the marker being read

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise MarkerDecodeError(f"truncated at byte {self.pos} (wanted {n} more)", self.data)
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def unpack(self, s: struct.Struct) -> int:
        end = self.pos + s.size
        if end > len(self.data):
            raise MarkerDecodeError(f"truncated at byte {self.pos} (wanted {s.size} more)", self.data)
        value = s.unpack_from(self.data, self.pos)[0]
        self.pos = end
        return value

    def str16(self) -> str:
        raw = self.take(self.unpack(_U16))
        try:
            return raw.decode()
        except UnicodeDecodeError:
            self.problem = self.problem or f"invalid UTF-8 before byte {self.pos}"
            return ""

    def bytes32(self) -> bytes:
        return self.take(self.unpack(_U32))

    def range(self) -> RangeRef:
        queue = self.str16()
        partition, start, end = _RANGE_TAIL.unpack(self.take(_RANGE_TAIL.size))
        r = RangeRef(queue, partition, start, end)
        why = _range_violation(r)
        if why:
            self.problem = self.problem or why
        return r

    def mask(self, r: RangeRef, *, allow_full_shorthand: bool = False) -> int:
        n = self.unpack(_U32)
        if self.problem:  # the range is unusable: skip its mask without building it
            self.take(n)
            return 0
        self.offsets += r.length
        if self.offsets > MAX_RECORD_OFFSETS:
            raise MarkerDecodeError(f"the record's ranges span more than {MAX_RECORD_OFFSETS} offsets "
                                    "(MAX_RECORD_OFFSETS)", self.data)
        if n == 0 and allow_full_shorthand:
            return r.full_mask
        if n != (r.length + 7) // 8:
            self.take(n)
            self.problem = f"mask of {n} bytes for a range of {r.length}"
            return 0
        mask = int.from_bytes(self.take(n), "little")
        if mask == 0 or mask > r.full_mask:
            self.problem = "mask selects no offset or offsets outside its range"
        return mask


def _read_marker(r: _Reader, kind: int) -> Marker:
    """One marker's fields, read in order (framing errors raise; see _Reader.problem)."""
    if kind == MarkerType.START:
        rng = r.range()
        timeout_ms = r.unpack(_U32)
        return Start(rng, timeout_ms, r.mask(rng, allow_full_shorthand=True))
    if kind == MarkerType.ACK:
        rng = r.range()
        return Ack(rng, r.mask(rng))
    if kind == MarkerType.EXTEND:
        rng = r.range()
        mask = r.mask(rng)
        return Extend(rng, mask, r.unpack(_U32))
    if kind == MarkerType.RELEASE:
        rng = r.range()
        mask = r.mask(rng)
        delay_ms = r.unpack(_I64)
        counted = r.unpack(_U8)
        if counted > 1:
            r.problem = r.problem or f"bad RELEASE flag {counted}"
        return Release(rng, mask, delay_ms, bool(counted))
    if kind == MarkerType.REJECT:
        rng = r.range()
        mask = r.mask(rng)
        return Reject(rng, mask, r.str16())
    if kind == MarkerType.SCHEDULE:
        queue = r.str16()
        message_id = r.str16()
        due_ms = r.unpack(_I64)
        value = r.bytes32()
        headers = tuple((r.str16(), r.bytes32()) for _ in range(r.unpack(_U16)))
        return Schedule(queue, message_id, due_ms, value, headers)
    if kind == MarkerType.TICK:
        return Tick(r.unpack(_I64))
    if kind == MarkerType.PURGE:
        return Purge(r.str16())
    if kind == MarkerType.CREDIT:
        queue = r.str16()
        consumer_id = r.str16()
        return Credit(queue, consumer_id, *_CREDIT_TAIL.unpack(r.take(_CREDIT_TAIL.size)))
    if kind == MarkerType.ACQUIRE:
        rng = r.range()
        timeout_ms = r.unpack(_U32)
        mask = r.mask(rng, allow_full_shorthand=True)
        return Acquire(rng, timeout_ms, mask, r.unpack(_U64))
    if kind == MarkerType.BEGIN:
        return Begin(r.unpack(_U64))
    if kind == MarkerType.FLOOR:
        queue = r.str16()
        partition = r.unpack(_U32)
        offset = r.unpack(_I64)
        return Floor(queue, partition, offset, r.unpack(_U64))
    raise MarkerDecodeError(f"unknown marker type {kind} at byte {r.pos - 1}", r.data)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A record's usable markers, and why each of the others was set apart."""

    markers: list[Marker]
    set_aside: list[str]  # "marker <i> of <n>: <reason>"


def decode_lenient(data: bytes) -> Decoded:
    """Decode one record, setting apart single markers that frame but break a limit.

    Raises :class:`MarkerDecodeError` (keeping the bytes) when the record as a
    whole is unusable: not bytes, truncated, trailing bytes, an unknown marker
    type, more than ``MAX_MARKERS_PER_RECORD`` markers or ``MAX_RECORD_OFFSETS`` offsets.
    """
    if data is None:
        raise MarkerDecodeError("null record value", b"")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MarkerDecodeError(f"record value is {type(data).__name__}, not bytes", b"")
    data = bytes(data)
    r = _Reader(data)
    version = r.unpack(_U8) if data else None
    if version != VERSION:
        raise MarkerDecodeError(
            "empty record" if version is None else f"unsupported marker version {version}", data)
    count = r.unpack(_U16)
    if count == 0:
        raise MarkerDecodeError("record holds no markers", data)
    if count > MAX_MARKERS_PER_RECORD:
        raise MarkerDecodeError(f"record holds {count} markers, more than {MAX_MARKERS_PER_RECORD} "
                                "(MAX_MARKERS_PER_RECORD)", data)
    out: list[Marker] = []
    aside: list[str] = []
    for i in range(count):
        r.problem = None
        marker = _read_marker(r, r.unpack(_U8))
        why = r.problem or violation(marker)
        if why:
            aside.append(f"marker {i + 1} of {count}: {why}")
        else:
            out.append(marker)
    if r.pos != len(data):
        raise MarkerDecodeError(f"{len(data) - r.pos} trailing bytes", data)
    return Decoded(out, aside)


def decode(data: bytes) -> list[Marker]:
    """Decode one record value; raise :class:`MarkerDecodeError` (keeping the bytes) if any
    of it is malformed or outside the limits."""
    got = decode_lenient(data)
    if got.set_aside:
        raise MarkerDecodeError(got.set_aside[0], bytes(data))
    return got.markers
