"""The markers' binary codec: with :mod:`kmq.protocol.marker_decode`, the only place markers
are encoded and decoded.

A marker record on the markers topic is a *batch*: one version byte, then a
list of markers, so a consumer writes one record per fetch (its START plus
any acks gathered since the last record) instead of one per message. The
marker types themselves and their limits are :mod:`kmq.protocol.markers`;
this module turns them into bytes.

The format is :mod:`kmq.protocol.marker_format`'s; decoding is
:mod:`kmq.protocol.marker_decode`'s (``decode``, ``decode_lenient`` and ``Decoded`` are
re-exported here, so ``marker_codec.decode`` reads as before).
"""

from __future__ import annotations

from kmq.protocol.limits import MAX_MARKERS_PER_RECORD, MAX_RECORD_OFFSETS
from kmq.protocol.marker_decode import Decoded, decode, decode_lenient
from kmq.protocol.marker_format import CREDIT_TAIL, I64, RANGE_TAIL, U8, U16, U32, U64, VERSION, MarkerType
from kmq.protocol.markers import (Ack, Acquire, Begin, Credit, Extend, Floor, Marker, Purge, RangeRef, Reject,
                                  Release, Schedule, Start, Tick, range_offsets, violation)

__all__ = ["VERSION", "MarkerType", "Decoded", "decode", "decode_lenient", "encode", "encode_records"]


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
        self.parts.append(U16.pack(len(raw)))
        self.parts.append(raw)

    def bytes32(self, b: bytes) -> None:
        self.parts.append(U32.pack(len(b)))
        self.parts.append(bytes(b))

    def range(self, r: RangeRef) -> None:
        self.str16(r.queue)
        self.parts.append(RANGE_TAIL.pack(r.partition, r.start, r.end))

    def mask(self, r: RangeRef, mask: int, *, allow_full_shorthand: bool = False) -> None:
        if allow_full_shorthand and mask == r.full_mask:
            self.parts.append(U32.pack(0))
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
    w.parts.append(U8.pack(VERSION))
    w.parts.append(U16.pack(len(markers)))
    for m in markers:
        why = violation(m)
        if why:
            raise TypeError(why) if why.startswith("not a marker") else ValueError(why)
        if isinstance(m, Start):
            w.parts.append(U8.pack(MarkerType.START))
            w.range(m.range)
            w.parts.append(U32.pack(m.timeout_ms))
            w.mask(m.range, m.mask, allow_full_shorthand=True)
        elif isinstance(m, Ack):
            w.parts.append(U8.pack(MarkerType.ACK))
            w.range(m.range)
            w.mask(m.range, m.mask)
        elif isinstance(m, Extend):
            w.parts.append(U8.pack(MarkerType.EXTEND))
            w.range(m.range)
            w.mask(m.range, m.mask)
            w.parts.append(U32.pack(m.timeout_ms))
        elif isinstance(m, Release):
            w.parts.append(U8.pack(MarkerType.RELEASE))
            w.range(m.range)
            w.mask(m.range, m.mask)
            w.parts.append(I64.pack(m.delay_ms))
            w.parts.append(U8.pack(1 if m.counted else 0))
        elif isinstance(m, Reject):
            w.parts.append(U8.pack(MarkerType.REJECT))
            w.range(m.range)
            w.mask(m.range, m.mask)
            w.str16(m.reason)
        elif isinstance(m, Schedule):
            w.parts.append(U8.pack(MarkerType.SCHEDULE))
            w.str16(m.queue)
            w.str16(m.message_id)
            w.parts.append(I64.pack(m.due_ms))
            w.bytes32(m.value)
            w.parts.append(U16.pack(len(m.headers)))
            for k, v in m.headers:
                w.str16(k)
                w.bytes32(v)
        elif isinstance(m, Tick):
            w.parts.append(U8.pack(MarkerType.TICK))
            w.parts.append(I64.pack(m.now_ms))
        elif isinstance(m, Purge):
            w.parts.append(U8.pack(MarkerType.PURGE))
            w.str16(m.queue)
        elif isinstance(m, Credit):
            w.parts.append(U8.pack(MarkerType.CREDIT))
            w.str16(m.queue)
            w.str16(m.consumer_id)
            w.parts.append(CREDIT_TAIL.pack(m.lane, m.epoch, m.seq, m.free, m.lease_ms, m.timeout_ms))
        elif isinstance(m, Acquire):
            w.parts.append(U8.pack(MarkerType.ACQUIRE_ORDERED if m.ordered else MarkerType.ACQUIRE))
            w.range(m.range)
            w.parts.append(U32.pack(m.timeout_ms))
            w.mask(m.range, m.mask, allow_full_shorthand=True)
            w.parts.append(U64.pack(m.epoch))
        elif isinstance(m, Begin):
            w.parts.append(U8.pack(MarkerType.BEGIN))
            w.parts.append(U64.pack(m.epoch))
        elif isinstance(m, Floor):
            w.parts.append(U8.pack(MarkerType.FLOOR))
            w.str16(m.queue)
            w.parts.append(U32.pack(m.partition))
            w.parts.append(I64.pack(m.offset))
            w.parts.append(U64.pack(m.epoch))
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


def encode_units(units: list[list[Marker]], max_markers: int = MAX_MARKERS_PER_RECORD) -> list[bytes]:
    """Encode groups of markers, in order, as as few records as the record limits allow,
    never one group across two records (a marker record is applied whole: an ACQUIRE and
    the RELEASE that gives it back, apart, let a TICK between them count a delivery). A
    group larger than one record allows is split (:func:`encode_records`)."""
    out: list[bytes] = []
    chunk: list[Marker] = []
    offsets = 0
    for unit in units:
        n = sum(range_offsets(m) for m in unit)
        if chunk and (len(chunk) + len(unit) > max_markers or offsets + n > MAX_RECORD_OFFSETS):
            out.append(encode(chunk))
            chunk, offsets = [], 0
        if len(unit) > max_markers or n > MAX_RECORD_OFFSETS:
            out += encode_records(unit, max_markers)
            continue
        chunk += unit
        offsets += n
    if chunk:
        out.append(encode(chunk))
    return out
