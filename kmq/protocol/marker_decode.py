"""Decoding marker records (:mod:`kmq.protocol.marker_codec` encodes them; the format is
:mod:`kmq.protocol.marker_format`'s).

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

from kmq.errors import MarkerDecodeError
from kmq.protocol.limits import MAX_MARKERS_PER_RECORD, MAX_RECORD_OFFSETS
from kmq.protocol.marker_format import (CREDIT_TAIL, I64, RANGE_TAIL, U8, U16, U32, U64, VERSION,
                                        MarkerType)
from kmq.protocol.markers import (Ack, Acquire, Begin, Credit, Extend, Floor, Marker, Purge, RangeRef, Reject,
                                  Release, Schedule, Start, Tick, range_violation, violation)


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
        raw = self.take(self.unpack(U16))
        try:
            return raw.decode()
        except UnicodeDecodeError:
            self.problem = self.problem or f"invalid UTF-8 before byte {self.pos}"
            return ""

    def bytes32(self) -> bytes:
        return self.take(self.unpack(U32))

    def range(self) -> RangeRef:
        queue = self.str16()
        partition, start, end = RANGE_TAIL.unpack(self.take(RANGE_TAIL.size))
        r = RangeRef(queue, partition, start, end)
        why = range_violation(r)
        if why:
            self.problem = self.problem or why
        return r

    def mask(self, r: RangeRef, *, allow_full_shorthand: bool = False) -> int:
        n = self.unpack(U32)
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
        timeout_ms = r.unpack(U32)
        return Start(rng, timeout_ms, r.mask(rng, allow_full_shorthand=True))
    if kind == MarkerType.ACK:
        rng = r.range()
        return Ack(rng, r.mask(rng))
    if kind == MarkerType.EXTEND:
        rng = r.range()
        mask = r.mask(rng)
        return Extend(rng, mask, r.unpack(U32))
    if kind == MarkerType.RELEASE:
        rng = r.range()
        mask = r.mask(rng)
        delay_ms = r.unpack(I64)
        counted = r.unpack(U8)
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
        due_ms = r.unpack(I64)
        value = r.bytes32()
        headers = tuple((r.str16(), r.bytes32()) for _ in range(r.unpack(U16)))
        return Schedule(queue, message_id, due_ms, value, headers)
    if kind == MarkerType.TICK:
        return Tick(r.unpack(I64))
    if kind == MarkerType.PURGE:
        return Purge(r.str16())
    if kind == MarkerType.CREDIT:
        queue = r.str16()
        consumer_id = r.str16()
        return Credit(queue, consumer_id, *CREDIT_TAIL.unpack(r.take(CREDIT_TAIL.size)))
    if kind in (MarkerType.ACQUIRE, MarkerType.ACQUIRE_ORDERED):
        rng = r.range()
        timeout_ms = r.unpack(U32)
        mask = r.mask(rng, allow_full_shorthand=True)
        return Acquire(rng, timeout_ms, mask, r.unpack(U64), kind == MarkerType.ACQUIRE_ORDERED)
    if kind == MarkerType.BEGIN:
        return Begin(r.unpack(U64))
    if kind == MarkerType.FLOOR:
        queue = r.str16()
        partition = r.unpack(U32)
        offset = r.unpack(I64)
        return Floor(queue, partition, offset, r.unpack(U64))
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
    version = r.unpack(U8) if data else None
    if version != VERSION:
        raise MarkerDecodeError(
            "empty record" if version is None else f"unsupported marker version {version}", data)
    count = r.unpack(U16)
    if count == 0:
        raise MarkerDecodeError("record holds no markers", data)
    if count > MAX_MARKERS_PER_RECORD:
        raise MarkerDecodeError(f"record holds {count} markers, more than {MAX_MARKERS_PER_RECORD} "
                                "(MAX_MARKERS_PER_RECORD)", data)
    out: list[Marker] = []
    aside: list[str] = []
    for i in range(count):
        r.problem = None
        marker = _read_marker(r, r.unpack(U8))
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
