"""Keys of the tracker's table: which entry a key names, and the order RocksDB keeps them in.

Entries and the deadline index share one table (one changelog, so a crash leaves a
prefix of one ordered write log, never two logs cut at different places). Index keys
start with ``D`` and the big-endian deadline, so RocksDB iterates them in time order.
The values the keys name are kmq.protocol.entries' (which re-exports these names).

Formats (big-endian)::

    range key     := b"R", str16 queue, u32 partition, i64 start, i64 end
    schedule key  := b"S", str16 queue, str16 message_id
    index key     := b"D", i64 deadline_ms, entry key
    applied key   := b"A", u32 markers partition  -> i64 offset of the last marker record applied
    cursor key    := b"C", str16 queue, u32 partition -> i64 fetched-upto: the queue's records
                     below it on that queue partition were fetched (START) or dispatched (ACQUIRE)
    epoch key     := b"E", u32 markers partition  -> u64 epoch of its current dispatcher (BEGIN)
    handed key    := b"H", str16 queue, u32 partition -> handed-out: an ordered queue's offsets
                     handed out above its floor (kmq.protocol.handed)
"""

from __future__ import annotations

import struct

from kmq.protocol.markers import RangeRef

_RANGE_KEY = struct.Struct(">Iqq")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def range_key(r: RangeRef) -> bytes:
    q = r.queue.encode()
    return b"R" + _U16.pack(len(q)) + q + _RANGE_KEY.pack(r.partition, r.start, r.end)


def queue_prefixes(queue: str) -> tuple[bytes, bytes]:
    """Key prefixes of every range entry and every scheduled send of ``queue``."""
    q = queue.encode()
    head = _U16.pack(len(q)) + q
    return b"R" + head, b"S" + head


def schedule_key(queue: str, message_id: str) -> bytes:
    q = queue.encode()
    m = message_id.encode()
    return b"S" + _U16.pack(len(q)) + q + _U16.pack(len(m)) + m


def is_range_key(key: bytes) -> bool:
    return key[:1] == b"R"


def is_schedule_key(key: bytes) -> bool:
    return key[:1] == b"S"


def decode_range_key(key: bytes) -> RangeRef:
    if key[:1] != b"R":
        raise ValueError(f"not a range key: {key[:16]!r}")
    n = _U16.unpack_from(key, 1)[0]
    queue = key[3:3 + n].decode()
    partition, start, end = _RANGE_KEY.unpack_from(key, 3 + n)
    return RangeRef(queue, partition, start, end)


def decode_schedule_key(key: bytes) -> tuple[str, str]:
    if key[:1] != b"S":
        raise ValueError(f"not a schedule key: {key[:16]!r}")
    n = _U16.unpack_from(key, 1)[0]
    queue = key[3:3 + n].decode()
    m = _U16.unpack_from(key, 3 + n)[0]
    return queue, key[5 + n:5 + n + m].decode()


def applied_key(markers_partition: int) -> bytes:
    """Key of the markers partition's last applied record offset (written after each record's
    changes, in the same changelog: a restored table knows which records it already holds)."""
    return b"A" + struct.pack(">I", markers_partition)


def is_applied_key(key: bytes) -> bool:
    return key[:1] == b"A"


def cursor_key(queue: str, partition: int) -> bytes:
    q = queue.encode()
    return b"C" + _U16.pack(len(q)) + q + _U32.pack(partition)


CURSOR_PREFIX = b"C"


def decode_cursor_key(key: bytes) -> tuple[str, int]:
    n = _U16.unpack_from(key, 1)[0]
    return key[3:3 + n].decode(), _U32.unpack_from(key, 3 + n)[0]


HANDED_PREFIX = b"H"


def handed_key(queue: str, partition: int) -> bytes:
    q = queue.encode()
    return HANDED_PREFIX + _U16.pack(len(q)) + q + _U32.pack(partition)


def decode_handed_key(key: bytes) -> tuple[str, int]:
    if key[:1] != HANDED_PREFIX:
        raise ValueError(f"not a handed-out key: {key[:16]!r}")
    n = _U16.unpack_from(key, 1)[0]
    return key[3:3 + n].decode(), _U32.unpack_from(key, 3 + n)[0]


def range_partition_prefix(queue: str, partition: int) -> bytes:
    """Key prefix of every range entry of ``queue`` on one queue partition."""
    return queue_prefixes(queue)[0] + _U32.pack(partition)


def epoch_key(markers_partition: int) -> bytes:
    return b"E" + _U32.pack(markers_partition)


INDEX_PREFIX = b"D"


def index_key(deadline_ms: int, entry_key: bytes) -> bytes:
    # Deadlines are epoch milliseconds (positive), so big-endian bytes sort by time.
    return INDEX_PREFIX + _I64.pack(max(0, deadline_ms)) + entry_key


def is_index_key(key: bytes) -> bool:
    return key[:1] == INDEX_PREFIX


def decode_index_key(key: bytes) -> tuple[int, bytes]:
    return _I64.unpack_from(key, 1)[0], key[9:]


def index_bound(deadline_ms: int) -> bytes:
    """Smallest index key with a deadline above ``deadline_ms`` (scan end, exclusive)."""
    return INDEX_PREFIX + _I64.pack(max(0, deadline_ms) + 1)
