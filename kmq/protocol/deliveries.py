"""What a shared queue's dispatcher writes on a consumer's lane, and its codec.

A *lane* is a partition of the deliveries topic that one consumer reads (it picks one
at random and says which in its CREDIT markers). A delivery is one ACQUIREd range
handed to one consumer, written as

- a *header* record, key ``b"\\x00" + consumer_id``: the range, the offsets of it that
  are handed out (mask), the dispatcher's epoch and this delivery's sequence number;
- then, for ``kind = COPY``, one record per handed-out offset, key ``consumer_id``,
  in offset order: the queue record's value, headers and timestamp, copied;
  for ``kind = REFERENCE`` nothing more: the consumer reads the offsets from the queue
  topic itself. The dispatcher refers when the queue's records make up most of what the
  consumer's reader fetches (:data:`REFERENCE_MIN_SHARE` of the range and of the
  :data:`REFERENCE_READ_AHEAD_BYTES` after it), so reading the range costs the consumer
  little beyond its own records; it copies when other queues' records would dominate it.

The consumer pairs the copies with the header by order (one dispatcher writes all of a
consumer's deliveries, each with one idempotent producer on one partition, so they stay
in order and contiguous per key). Records of other consumers sharing the lane are told
apart by their keys and skipped without being decoded.

A consumer that leaves says goodbye (a CREDIT without lease); the dispatcher answers
with a FAREWELL header naming the last delivery it sent, so the consumer can give back
everything that was already on its way instead of leaving it to its visibility timeout.

Wire format of the header's value (version 1, big-endian)::

    COPY     := u8 version=1, u8 kind=1, u64 epoch, u64 seq, u32 timeout_ms,
                str16 queue, u32 partition, i64 start, i64 end, u32 mask_bytes, mask (0 bytes: every offset)
    REFERENCE:= as COPY, with kind=3
    FAREWELL := u8 version=1, u8 kind=2, u64 epoch, u64 seq (the last delivery sent; 0: none)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kmq.errors import KmqError
from kmq.protocol.limits import MAX_TIMEOUT_MS
from kmq.protocol.markers import MAX_RANGE_LEN, RangeRef

VERSION = 1
COPY = 1
FAREWELL = 2
REFERENCE = 3
# Refer to a range (no copy) when the queue's records are at least this share of its bytes:
# the consumer then reads at most 1.5 bytes per byte it is delivered.
REFERENCE_MIN_SHARE = 2 / 3
# A consumer's reference reader fetches this far ahead of a range (its librdkafka queue, one
# fetch), so the share is judged over the range and what follows it up to this many bytes.
# 256 KiB, not 1 MiB: what a reader fetches past a short range is waste (consumer and broker
# CPU 15-25% lower at the same rates, docs/shared-queues.md), and a range of at least this
# many bytes is referred whatever follows it.
REFERENCE_READ_AHEAD_BYTES = 256 * 1024
HEADER_KEY_PREFIX = b"\x00"  # consumer ids are printable: a header key can never be a copy's

_HEAD = struct.Struct(">BBQQI")
_FAREWELL = struct.Struct(">BBQQ")
_RANGE = struct.Struct(">Iqq")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
MAX_PARTITION = (1 << 31) - 1  # Kafka's partitions are int32: librdkafka raises OverflowError past it


class DeliveryDecodeError(KmqError):
    """A lane record that claims to be a delivery header but is not one."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One range of a shared queue handed to one consumer (``count`` copies follow)."""

    kind: int
    epoch: int
    seq: int
    timeout_ms: int
    range: RangeRef
    mask: int

    @property
    def count(self) -> int:
        return self.mask.bit_count()


@dataclass(frozen=True, slots=True)
class Farewell:
    """The dispatcher's answer to a goodbye: ``seq`` is the last delivery it sent."""

    epoch: int
    seq: int


def encode_farewell(f: Farewell) -> bytes:
    return _FAREWELL.pack(VERSION, FAREWELL, f.epoch, f.seq)


def header_key(consumer_id: str) -> bytes:
    return HEADER_KEY_PREFIX + consumer_id.encode()


def encode(d: Delivery) -> bytes:
    """The header record's value."""
    q = d.range.queue.encode()
    r = d.range
    if not 0 < r.end - r.start <= MAX_RANGE_LEN or d.mask <= 0 or d.mask > r.full_mask:
        raise ValueError(f"delivery of {r} with a mask outside it")
    mask = b"" if d.mask == r.full_mask else d.mask.to_bytes((r.length + 7) // 8, "little")
    return b"".join((_HEAD.pack(VERSION, d.kind, d.epoch, d.seq, d.timeout_ms), _U16.pack(len(q)), q,
                     _RANGE.pack(r.partition, r.start, r.end), _U32.pack(len(mask)), mask))


def decode(data: bytes | None) -> Delivery | Farewell:
    """Decode a header record's value; raise :class:`DeliveryDecodeError` if it is not one."""
    try:
        if data is not None and len(data) == _FAREWELL.size and data[1] == FAREWELL:
            version, _, epoch, seq = _FAREWELL.unpack(data)
            if version != VERSION:
                raise DeliveryDecodeError(f"unsupported delivery version {version}")
            return Farewell(epoch, seq)
        version, kind, epoch, seq, timeout_ms = _HEAD.unpack_from(data, 0)
        if version != VERSION or kind not in (COPY, REFERENCE):
            raise DeliveryDecodeError(f"unsupported delivery version {version} or kind {kind}")
        pos = _HEAD.size
        n = _U16.unpack_from(data, pos)[0]
        queue = bytes(data[pos + 2:pos + 2 + n]).decode()
        pos += 2 + n
        partition, start, end = _RANGE.unpack_from(data, pos)
        pos += _RANGE.size
        if start < 0 or not 0 < end - start <= MAX_RANGE_LEN:
            raise DeliveryDecodeError(f"bad range {start}..{end}")
        # Anyone may write a lane: a partition no client can name (a reference to it raised
        # out of every receive), or a wait for a referred range of up to 49 days, is refused.
        if partition > MAX_PARTITION or timeout_ms > MAX_TIMEOUT_MS:
            raise DeliveryDecodeError(f"partition {partition} or timeout {timeout_ms} ms out of bounds")
        r = RangeRef(queue, partition, start, end)
        nbytes = _U32.unpack_from(data, pos)[0]
        pos += 4
        raw = bytes(data[pos:pos + nbytes])
        if len(raw) != nbytes or pos + nbytes != len(data):
            raise DeliveryDecodeError("truncated or trailing bytes")
        if not raw:
            mask = r.full_mask
        elif nbytes != (r.length + 7) // 8:
            raise DeliveryDecodeError(f"mask of {nbytes} bytes for a range of {r.length}")
        else:
            mask = int.from_bytes(raw, "little")
        if mask == 0 or mask > r.full_mask:
            raise DeliveryDecodeError("mask selects no offset or offsets outside its range")
        return Delivery(kind, epoch, seq, timeout_ms, r, mask)
    except (struct.error, TypeError, UnicodeDecodeError) as exc:
        raise DeliveryDecodeError(f"not a delivery header: {exc}") from exc
