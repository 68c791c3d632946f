"""The markers' binary codec: the only place markers are encoded and decoded.

A marker record on the markers topic is a *batch*: one version byte, then a
list of markers, so a consumer writes one record per fetch (its START plus
any acks gathered since the last record) instead of one per message. The
marker types themselves and their limits are :mod:`kmq.protocol.markers`;
this module only turns them into bytes and back.

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
    ACQUIRE_ORDERED := ACQUIRE's body (an ordered queue's ACQUIRE; added after FLOOR, so
                records of ACQUIREs before it decode as before, with ordered=False)

Decoding is bounded by the markers' limits (:func:`kmq.protocol.markers.violation`):
a record that does not frame (truncated, unknown type, too many offsets) is
one :class:`MarkerDecodeError`; :func:`decode_lenient` additionally sets apart
single markers that frame but break a limit, keeping the rest of the record.
Decoding costs time and memory linear in the record's bytes plus at most
``MAX_RECORD_OFFSETS / 8`` bytes of masks, whatever the record says.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kmq.errors import MarkerDecodeError
from kmq.protocol.limits import MAX_MARKERS_PER_RECORD, MAX_RECORD_OFFSETS
from kmq.protocol.markers import (Ack, Acquire, Begin, Credit, Extend, Floor, Marker, Purge, RangeRef, Reject,
                                  Release, Schedule, Start, Tick, range_offsets, range_violation, violation)

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
    ACQUIRE_ORDERED = 13


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
            w.parts.append(_U8.pack(MarkerType.ACQUIRE_ORDERED if m.ordered else MarkerType.ACQUIRE))
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
        why = range_violation(r)
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
    if kind in (MarkerType.ACQUIRE, MarkerType.ACQUIRE_ORDERED):
        rng = r.range()
        timeout_ms = r.unpack(_U32)
        mask = r.mask(rng, allow_full_shorthand=True)
        return Acquire(rng, timeout_ms, mask, r.unpack(_U64), kind == MarkerType.ACQUIRE_ORDERED)
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
