"""The markers' wire format: its version, marker type codes and fixed-size fields.

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
"""

from __future__ import annotations

import struct
from enum import IntEnum

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


U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
U64 = struct.Struct(">Q")
CREDIT_TAIL = struct.Struct(">IQQIII")
RANGE_TAIL = struct.Struct(">Iqq")
