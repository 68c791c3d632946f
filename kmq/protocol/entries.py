"""The tracker's table records: in-flight range entries, scheduled sends, and their byte codec.

These are what the tracker's changelog topic holds, so Spark jobs and the web
views decode them with this module too. The keys they are stored under are
kmq.protocol.entry_keys' (re-exported here: ``entries.range_key`` and so on).

Formats (big-endian)::

    in-flight     := u8 version=2, i64 started_ms, u32 timeout_ms, i64 indexed_ms,
                     u16 n, group*n, i64 attempt_offset, i64 attempt_dlq_offset
                     (version 1 had no attempt offsets)
    group         := i64 deadline_ms, u8 cause, str16 reason, bytes32 mask
    scheduled     := u8 version=1, i64 due_ms, i64 indexed_ms, bytes32 value,
                     u16 n, (str16 key, bytes32 value)*n, i64 attempt_offset
    handed-out    := u8 version=1, i64 base, u32 nbytes, bytes (little-endian bit set,
                     at most MAX_HANDED_BITS / 8 bytes)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from kmq.protocol.handed import MAX_HANDED_BITS, HandedOut
from kmq.protocol.limits import MAX_GROUPS_PER_RANGE
from kmq.protocol.entry_keys import (  # noqa: F401 (the keys, re-exported)
    range_key, queue_prefixes, schedule_key, is_range_key, is_schedule_key, decode_range_key,
    decode_schedule_key, applied_key, is_applied_key, cursor_key, decode_cursor_key, handed_key,
    decode_handed_key, range_partition_prefix, epoch_key, index_key, is_index_key, decode_index_key,
    index_bound, CURSOR_PREFIX, HANDED_PREFIX, INDEX_PREFIX)

ENTRY_VERSION = 1          # scheduled entries
INFLIGHT_VERSION = 2       # in-flight entries (v1 is still read)
HANDED_VERSION = 1         # handed-out bitmaps of ordered queues
NOT_INDEXED = -1

_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_INFLIGHT_HEAD = struct.Struct(">BqIq")
_GROUP = struct.Struct(">qB")
_SCHED_HEAD = struct.Struct(">Bqq")


class Cause(IntEnum):
    """Why an in-flight offset comes due."""

    TIMEOUT = 0           # visibility timeout (possibly extended) ran out: backoff, then redeliver
    RELEASED = 1          # released with an explicit delay: redeliver at the deadline
    REJECTED = 2          # the consumer rejected it: dead-letter now
    RETURNED = 3          # handed back unprocessed (never reached user code): not counted
    RELEASED_BACKOFF = 4  # released without a delay: the queue's backoff policy decides
    DEFERRED = 5          # its backoff wait is over: redeliver (the delivery is counted)


@dataclass(slots=True)
class Group:
    """Offsets of a range that share one deadline and cause."""

    deadline_ms: int
    cause: Cause
    reason: str
    mask: int


@dataclass(slots=True)
class InFlight:
    """One in-flight range: its unsettled offsets, grouped by deadline and cause.

    Every pending offset is in exactly one group; groups with equal
    (deadline, cause, reason) are merged, so a range keeps a handful of them.
    """

    started_ms: int
    timeout_ms: int
    groups: list[Group] = field(default_factory=list)
    indexed_ms: int = NOT_INDEXED
    # >= 0 while expired offsets are being republished: where the queue
    # partition and the dead-letter partition ended when that began. After a
    # crash the tracker looks there for what it already wrote.
    attempt_offset: int = -1
    attempt_dlq_offset: int = -1

    @property
    def pending(self) -> int:
        m = 0
        for g in self.groups:
            m |= g.mask
        return m

    def next_deadline_ms(self) -> int | None:
        """Earliest deadline among pending offsets, or None when nothing is pending."""
        return min((g.deadline_ms for g in self.groups), default=None)

    def remove(self, mask: int) -> int:
        """Settle the offsets in ``mask``; return those that were pending."""
        taken = 0
        kept = []
        for g in self.groups:
            hit = g.mask & mask
            if hit:
                taken |= hit
                g.mask &= ~hit
            if g.mask:
                kept.append(g)
        self.groups = kept
        return taken

    def move(self, mask: int, deadline_ms: int, cause: Cause, reason: str = "",
             from_causes: tuple[Cause, ...] = tuple(Cause)) -> int:
        """Give the pending offsets in ``mask`` (of groups with ``from_causes``) a new deadline."""
        taken = 0
        for g in self.groups:
            if g.cause in from_causes:
                hit = g.mask & mask
                if hit:
                    taken |= hit
                    g.mask &= ~hit
        if not taken:
            return 0
        kept = [g for g in self.groups if g.mask]
        for g in kept:
            if g.deadline_ms == deadline_ms and g.cause == cause and g.reason == reason:
                g.mask |= taken
                break
        else:
            joined = _coalesce(kept, deadline_ms, cause) if len(kept) >= MAX_GROUPS_PER_RANGE else None
            if joined is not None:
                joined.mask |= taken
            else:
                kept.append(Group(deadline_ms, cause, reason, taken))
        self.groups = kept
        return taken


def _coalesce(groups: list[Group], deadline_ms: int, cause: Cause) -> Group | None:
    """The group of ``cause`` that offsets join when a range holds MAX_GROUPS_PER_RANGE groups.

    Bounds an entry's size (groups x mask bytes) however many distinct
    deadlines or reasons markers bring. Never earlier than asked: the group
    of the same cause with the nearest deadline at or after ``deadline_ms``,
    else the latest one, moved to ``deadline_ms``. A rejected offset may so
    carry another rejected offset's reason. None when no group has ``cause``.
    """
    same = [g for g in groups if g.cause == cause]
    if not same:
        return None
    later = [g for g in same if g.deadline_ms >= deadline_ms]
    if later:
        return min(later, key=lambda g: g.deadline_ms)
    latest = max(same, key=lambda g: g.deadline_ms)
    latest.deadline_ms = deadline_ms
    return latest


@dataclass(slots=True)
class Scheduled:
    """A delayed send held by the tracker until ``due_ms``.

    ``attempt_offset`` >= 0 records that publishing was attempted when the
    target partition ended at that offset: after a crash, the tracker looks
    for the message from there instead of publishing it twice.
    """

    due_ms: int
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    indexed_ms: int = NOT_INDEXED
    attempt_offset: int = -1


# -- values -------------------------------------------------------------------

def encode_handed(h: HandedOut) -> bytes:
    mask = h.mask.to_bytes((h.mask.bit_length() + 7) // 8, "little")
    return bytes([HANDED_VERSION]) + _I64.pack(h.base) + _U32.pack(len(mask)) + mask


def decode_handed(data: bytes) -> HandedOut:
    """Strict: a wrong version, length or size raises ValueError naming it."""
    if len(data) < 13 or data[0] != HANDED_VERSION:
        raise ValueError(f"unsupported handed-out entry (version byte {data[:1]!r}, {len(data)} bytes)")
    base = _I64.unpack_from(data, 1)[0]
    n = _U32.unpack_from(data, 9)[0]
    if n > MAX_HANDED_BITS // 8 or len(data) != 13 + n or base < 0:
        raise ValueError(f"handed-out entry of {len(data)} bytes says base {base}, {n} mask bytes "
                         f"(at most MAX_HANDED_BITS / 8 = {MAX_HANDED_BITS // 8})")
    return HandedOut(base, int.from_bytes(data[13:], "little"))


def encode_epoch(epoch: int) -> bytes:
    return struct.pack(">Q", epoch)


def decode_epoch(raw: bytes) -> int:
    return struct.unpack(">Q", raw)[0]


def encode_offset(offset: int) -> bytes:
    return _I64.pack(offset)


def decode_offset(raw: bytes) -> int:
    return _I64.unpack(raw)[0]


def encode_inflight(e: InFlight) -> bytes:
    parts = [_INFLIGHT_HEAD.pack(INFLIGHT_VERSION, e.started_ms, e.timeout_ms, e.indexed_ms),
             _U16.pack(len(e.groups))]
    for g in e.groups:
        reason = g.reason.encode()
        mask = g.mask.to_bytes((g.mask.bit_length() + 7) // 8, "little")
        parts += [_GROUP.pack(g.deadline_ms, g.cause), _U16.pack(len(reason)), reason,
                  _U32.pack(len(mask)), mask]
    parts += [_I64.pack(e.attempt_offset), _I64.pack(e.attempt_dlq_offset)]
    return b"".join(parts)


def decode_inflight(data: bytes) -> InFlight:
    version, started, timeout, indexed = _INFLIGHT_HEAD.unpack_from(data, 0)
    if version not in (1, INFLIGHT_VERSION):
        raise ValueError(f"unsupported in-flight entry version {version}")
    pos = _INFLIGHT_HEAD.size
    count = _U16.unpack_from(data, pos)[0]
    pos += 2
    groups = []
    for _ in range(count):
        deadline, cause = _GROUP.unpack_from(data, pos)
        pos += _GROUP.size
        rn = _U16.unpack_from(data, pos)[0]
        pos += 2
        reason = data[pos:pos + rn].decode()
        pos += rn
        mn = _U32.unpack_from(data, pos)[0]
        pos += 4
        groups.append(Group(deadline, Cause(cause), reason, int.from_bytes(data[pos:pos + mn], "little")))
        pos += mn
    attempt = attempt_dlq = -1
    if version >= 2:
        attempt, attempt_dlq = _I64.unpack_from(data, pos)[0], _I64.unpack_from(data, pos + 8)[0]
    return InFlight(started, timeout, groups, indexed, attempt, attempt_dlq)


def encode_scheduled(s: Scheduled) -> bytes:
    parts = [_SCHED_HEAD.pack(ENTRY_VERSION, s.due_ms, s.indexed_ms),
             _U32.pack(len(s.value)), s.value, _U16.pack(len(s.headers))]
    for k, v in s.headers:
        kb = k.encode()
        parts += [_U16.pack(len(kb)), kb, _U32.pack(len(v)), v]
    parts.append(_I64.pack(s.attempt_offset))
    return b"".join(parts)


def decode_scheduled(data: bytes) -> Scheduled:
    version, due, indexed = _SCHED_HEAD.unpack_from(data, 0)
    if version != ENTRY_VERSION:
        raise ValueError(f"unsupported scheduled entry version {version}")
    pos = _SCHED_HEAD.size
    n = _U32.unpack_from(data, pos)[0]
    pos += 4
    value = data[pos:pos + n]
    pos += n
    headers = []
    count = _U16.unpack_from(data, pos)[0]
    pos += 2
    for _ in range(count):
        kn = _U16.unpack_from(data, pos)[0]
        pos += 2
        k = data[pos:pos + kn].decode()
        pos += kn
        vn = _U32.unpack_from(data, pos)[0]
        pos += 4
        headers.append((k, data[pos:pos + vn]))
        pos += vn
    attempt = _I64.unpack_from(data, pos)[0]
    return Scheduled(due, bytes(value), tuple(headers), indexed, attempt)
