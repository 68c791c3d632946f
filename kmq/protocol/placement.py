"""Where a logical queue lives: queue-topic partitions and markers partition.

Placement follows the Java client's default partitioner (murmur2 of the key,
made positive, modulo the partition count), so a plain Kafka producer writing
key = queue id lands on the same partition as the SDK, and Faust routes web
requests for a queue to the worker that owns its markers partition.
"""

from __future__ import annotations

import re
from functools import lru_cache

from kmq.errors import ConfigError, InvalidQueueNameError

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

# \Z, not $: $ also matches before a final newline, so "jobs\n" was a valid queue id.
QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,127}\Z")


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` as a signed 32-bit int (Java semantics)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - (length % 4)
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java default partitioner picks for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def validate_queue_name(queue: object) -> str:
    """Return ``queue`` if it is a valid queue id, else raise with the rule."""
    if not isinstance(queue, str) or not QUEUE_NAME_RE.match(queue):
        raise InvalidQueueNameError(
            f"queue={queue!r} is not a valid queue id: use 1-128 characters from "
            "A-Z a-z 0-9 . _ ~ - starting with a letter or digit"
        )
    return queue


def _check_placement_args(queue: object, num_partitions: object, spread: object = 1) -> None:
    """A ConfigError naming the argument (these are public: docs/scaling.md checks a placement
    with them), not a ZeroDivisionError or a silently odd tuple."""
    if not isinstance(queue, str):
        raise ConfigError(f"queue={queue!r} must be a queue id (str)")
    for name, value in (("num_partitions", num_partitions), ("spread", spread)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a whole number of at least 1")


# typed: 8.0 and True must not find the cache entries of 8 and 1 (they are refused).
@lru_cache(maxsize=65536, typed=True)
def queue_partitions(queue: str, num_partitions: int, spread: int = 1) -> tuple[int, ...]:
    """The queue-topic partitions that hold ``queue``: ``spread`` consecutive ones (at most
    ``num_partitions``: the SDK refuses to spread a queue wider than its topic).

    The first is where a plain producer's key = queue id lands; consecutive
    partitions spread evenly over a round-robin-assigned consumer group.
    """
    _check_placement_args(queue, num_partitions, spread)
    first = partition_for_key(queue.encode(), num_partitions)
    spread = max(1, min(spread, num_partitions))
    return tuple((first + i) % num_partitions for i in range(spread))


@lru_cache(maxsize=65536, typed=True)
def markers_partition(queue: str, num_partitions: int) -> int:
    """The markers partition (and tracker table partition) of ``queue``."""
    _check_placement_args(queue, num_partitions)
    return partition_for_key(queue.encode(), num_partitions)


def keyed_partition(parts: tuple[int, ...], group: bytes | None, dedup_id: bytes | None) -> int | None:
    """The partition of ``parts`` (a queue's) for a send with a group or dedup id, else None.

    By the group, else the dedup id: every send of a group, or of a dedup id without a
    group, meets one dispatcher (the one place that orders and deduplicates them), whether
    the client writes it or the tracker publishes it when a delayed send comes due.
    """
    key = group or dedup_id
    return parts[partition_for_key(key, len(parts))] if key else None
