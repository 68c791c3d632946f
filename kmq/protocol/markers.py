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

CREDIT, ACQUIRE and BEGIN belong to shared queues (docs/shared-queues.md): a consumer
asks for work with CREDIT; the tracker's dispatcher records what it hands out with
ACQUIRE (a START written by the tracker itself) and announces itself with BEGIN.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Union

from kmq.errors import MarkerDecodeError

VERSION = 1
MAX_RANGE_LEN = 1 << 22  # bounds what a garbage record can make us allocate


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


Marker = Union[Start, Ack, Extend, Release, Reject, Schedule, Tick, Purge, Credit, Acquire, Begin]
RANGE_MARKERS = (Start, Ack, Extend, Release, Reject, Acquire)

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_CREDIT_TAIL = struct.Struct(">IQQIII")
_RANGE_TAIL = struct.Struct(">Iqq")


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
        if not 0 < r.end - r.start <= MAX_RANGE_LEN:
            raise ValueError(f"range {r.start}..{r.end} must hold 1..{MAX_RANGE_LEN} offsets")
        self.str16(r.queue)
        self.parts.append(_RANGE_TAIL.pack(r.partition, r.start, r.end))

    def mask(self, r: RangeRef, mask: int, *, allow_full_shorthand: bool = False) -> None:
        if mask <= 0 or mask > r.full_mask:
            raise ValueError(f"mask does not select offsets inside {r.start}..{r.end}")
        if allow_full_shorthand and mask == r.full_mask:
            self.parts.append(_U32.pack(0))
        else:
            self.bytes32(_mask_bytes(mask, r.length))


def encode(markers: list[Marker] | tuple[Marker, ...]) -> bytes:
    """Encode a batch of markers as one record value."""
    if not markers:
        raise ValueError("a marker record needs at least one marker")
    if len(markers) > 0xFFFF:
        raise ValueError("at most 65535 markers fit one record")
    w = _Writer()
    w.parts.append(_U8.pack(VERSION))
    w.parts.append(_U16.pack(len(markers)))
    for m in markers:
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
        else:
            raise TypeError(f"not a marker: {m!r}")
    return b"".join(w.parts)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise MarkerDecodeError(f"truncated at byte {self.pos} (wanted {n} more)", self.data)
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def unpack(self, s: struct.Struct) -> int:
        return s.unpack(self.take(s.size))[0]

    def str16(self) -> str:
        raw = self.take(self.unpack(_U16))
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise MarkerDecodeError(f"invalid UTF-8 at byte {self.pos}", self.data) from exc

    def bytes32(self) -> bytes:
        return self.take(self.unpack(_U32))

    def range(self) -> RangeRef:
        queue = self.str16()
        partition, start, end = _RANGE_TAIL.unpack(self.take(_RANGE_TAIL.size))
        if start < 0 or not 0 < end - start <= MAX_RANGE_LEN:
            raise MarkerDecodeError(f"bad offset range {start}..{end}", self.data)
        return RangeRef(queue, partition, start, end)

    def mask(self, r: RangeRef, *, allow_full_shorthand: bool = False) -> int:
        raw = self.bytes32()
        if not raw and allow_full_shorthand:
            return r.full_mask
        if len(raw) != (r.length + 7) // 8:
            raise MarkerDecodeError(f"mask of {len(raw)} bytes for a range of {r.length}", self.data)
        mask = int.from_bytes(raw, "little")
        if mask == 0 or mask > r.full_mask:
            raise MarkerDecodeError("mask selects no offset or offsets outside its range", self.data)
        return mask


def decode(data: bytes) -> list[Marker]:
    """Decode one record value; raise :class:`MarkerDecodeError` (keeping the bytes) if malformed."""
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
    out: list[Marker] = []
    for _ in range(count):
        kind = r.unpack(_U8)
        if kind == MarkerType.START:
            rng = r.range()
            timeout_ms = r.unpack(_U32)
            out.append(Start(rng, timeout_ms, r.mask(rng, allow_full_shorthand=True)))
        elif kind == MarkerType.ACK:
            rng = r.range()
            out.append(Ack(rng, r.mask(rng)))
        elif kind == MarkerType.EXTEND:
            rng = r.range()
            mask = r.mask(rng)
            out.append(Extend(rng, mask, r.unpack(_U32)))
        elif kind == MarkerType.RELEASE:
            rng = r.range()
            mask = r.mask(rng)
            delay_ms = r.unpack(_I64)
            counted = r.unpack(_U8)
            if counted > 1:
                raise MarkerDecodeError(f"bad RELEASE flag {counted}", data)
            out.append(Release(rng, mask, delay_ms, bool(counted)))
        elif kind == MarkerType.REJECT:
            rng = r.range()
            mask = r.mask(rng)
            out.append(Reject(rng, mask, r.str16()))
        elif kind == MarkerType.SCHEDULE:
            queue = r.str16()
            message_id = r.str16()
            due_ms = r.unpack(_I64)
            value = r.bytes32()
            headers = tuple((r.str16(), r.bytes32()) for _ in range(r.unpack(_U16)))
            out.append(Schedule(queue, message_id, due_ms, value, headers))
        elif kind == MarkerType.TICK:
            out.append(Tick(r.unpack(_I64)))
        elif kind == MarkerType.PURGE:
            out.append(Purge(r.str16()))
        elif kind == MarkerType.CREDIT:
            queue = r.str16()
            consumer_id = r.str16()
            out.append(Credit(queue, consumer_id, *_CREDIT_TAIL.unpack(r.take(_CREDIT_TAIL.size))))
        elif kind == MarkerType.ACQUIRE:
            rng = r.range()
            timeout_ms = r.unpack(_U32)
            mask = r.mask(rng, allow_full_shorthand=True)
            out.append(Acquire(rng, timeout_ms, mask, r.unpack(_U64)))
        elif kind == MarkerType.BEGIN:
            out.append(Begin(r.unpack(_U64)))
        else:
            raise MarkerDecodeError(f"unknown marker type {kind} at byte {r.pos - 1}", data)
    if r.pos != len(data):
        raise MarkerDecodeError(f"{len(data) - r.pos} trailing bytes", data)
    return out


def mask_offsets(start: int, mask: int) -> list[int]:
    """The absolute offsets a mask selects, ascending (linear in the mask's size)."""
    out: list[int] = []
    raw = mask.to_bytes((mask.bit_length() + 7) // 8, "little")
    for byte_index, byte in enumerate(raw):
        if byte:
            base = start + 8 * byte_index
            out.extend(base + bit for bit in _BITS[byte])
    return out


def offsets_mask(start: int, offsets) -> int:
    """The mask selecting ``offsets`` relative to ``start``."""
    m = 0
    for o in offsets:
        m |= 1 << (o - start)
    return m


_BITS = tuple(tuple(b for b in range(8) if v >> b & 1) for v in range(256))
