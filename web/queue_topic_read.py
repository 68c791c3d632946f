"""One depth-scan pass's read of the queue topic: where each partition is read from,
and the read itself, to each partition's true end, counting records by queue.

Many queues share a queue-topic partition, so the read counts keys: a queue's
records at or above its position are its depth; records past what was already
counted as sent come back with their timestamps, for :class:`~web.queue_scan.QueueScanner`
to count once each. The read ends at the end-of-partition event, not at ListOffsets'
end, which may undercount (docs/embedded-broker.md) and serves only as a bound for
the scan limit. A batch nobody can read is stepped over (``kmq/kafka/batch_skips.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kmq.kafka.batch_skips import BatchSkips, unreadable_at
from kmq.protocol.placement import QUEUE_NAME_RE, markers_partition

PASS_TIMEOUT_S = 60.0
MAX_KEY_CACHE = 100_000
MAX_QUEUE_KEY_BYTES = 128  # the longest queue id (QUEUE_NAME_RE): a longer key is no queue's


@dataclass
class ReadPlan:
    """Where one pass reads each queue-topic partition from."""

    parts: set[int]
    starts: dict[int, int]   # partition -> first offset read
    lows: dict[int, int]     # partition -> its log start
    exact: dict[str, bool]   # queue -> False: the read starts above its position (depth a lower bound)


@dataclass
class ReadCounts:
    """What one read counted."""

    depth: Counter
    sent: dict[tuple[int, int], tuple[str, float]]  # (partition, offset) -> (queue, time s)
    ends: dict[int, int]  # partition -> its end, as first reached


def plan_read(reader: Consumer, topic: str, parts: set[int], positions: dict[tuple[str, int], int],
              prev_end: dict[int, int], sent_upto: dict[int, int], scan_limit: int) -> ReadPlan:
    """Read each partition from its lowest queue position (or from where the last pass
    ended), at most ``scan_limit`` records back from its end."""
    by_part: dict[int, list[int]] = {}
    for (_, p), pos in positions.items():
        by_part.setdefault(p, []).append(pos)
    starts: dict[int, int] = {}
    lows: dict[int, int] = {}
    for p in parts:
        low, high = reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
        low = max(0, low)
        prev = prev_end.get(p, sent_upto.get(p))
        if prev is None:  # the first pass: from the log start (sends are counted by time)
            want = low
        elif p in by_part:
            want = min(by_part[p] + [prev])
        else:  # no known queue here: look for new keys
            want = prev
        # ListOffsets may undercount (docs/embedded-broker.md): only a bound for the cap.
        # A position past the end (a purge point recorded on a topic since
        # recreated) is fetched from the end instead: a fetch beyond the
        # end may never report end-of-partition.
        starts[p] = min(max(low, want, high - scan_limit), max(low, high))
        lows[p] = low
    exact: dict[str, bool] = {}
    for (q, p), pos in positions.items():
        if pos < starts[p]:
            exact[q] = False
    return ReadPlan(parts, starts, lows, exact)


def read_to_ends(reader: Consumer, topic: str, plan: ReadPlan, positions: dict[tuple[str, int], int], *,
                 owned: set[int], markers_partitions: int, key_cache: dict[bytes, str | None],
                 skips: BatchSkips, sent_upto: dict[int, int]) -> ReadCounts:
    """Read every partition of ``plan`` to its end. A queue found by its key gets a position
    (its log start) in ``positions``; ``plan.exact`` says where that start was not read."""
    parts, starts, lows, exact = plan.parts, plan.starts, plan.lows, plan.exact
    depth: Counter = Counter()
    sent: dict[tuple[int, int], tuple[str, float]] = {}
    reader.assign([TopicPartition(topic, p, starts[p]) for p in parts])
    open_parts = set(parts)
    ends: dict[int, int] = {}
    reached: dict[int, int] = {}
    deadline = time.monotonic() + PASS_TIMEOUT_S
    try:
        while open_parts:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"could not read {topic} to its end within {PASS_TIMEOUT_S:g}s: "
                    + _stuck(reader, topic, open_parts, starts, reached))
            failed: dict[int, int] = {}  # a batch nobody can read, and where a search got past it
            past: set[int] = set()
            for m in reader.consume(10_000, 0.2):
                p = m.partition()
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and not skips.searching(p):
                        open_parts.discard(p)
                        ends[p] = m.offset()
                    elif err.code() == KafkaError._PARTITION_EOF:
                        past.add(p)
                    elif unreadable_at(m) is not None:
                        failed[p] = m.offset()
                    continue
                if skips.searching(p):
                    past.add(p)  # read after a seek past the probe: read again after the search
                    continue
                reached[p] = m.offset()
                key = m.key()
                if key is None or len(key) > MAX_QUEUE_KEY_BYTES:
                    continue  # no queue's: not cached (100,000 keys of 1 MB each were kept)
                q = key_cache.get(key, False)
                if q is False:
                    q = _queue_of(key, owned, markers_partitions)
                    if len(key_cache) > MAX_KEY_CACHE:
                        key_cache.clear()
                    key_cache[key] = q
                if q is None:
                    continue
                o = m.offset()
                pos = positions.get((q, p))
                if pos is None:  # found by its key: nothing known, count from the log start
                    pos = positions[(q, p)] = lows[p]
                    if starts[p] > lows[p]:
                        exact[q] = False
                if o >= pos:
                    depth[q] += 1
                if o >= sent_upto.get(p, -1):  # each record once, at its own time
                    ts_ms = m.timestamp()[1]
                    sent[(p, o)] = (q, ts_ms / 1000 if ts_ms > 0 else time.time())
            for p in set(failed) | past:  # a batch nobody can read is skipped, not read again forever
                to = skips.step(p, failed.get(p), p in past, f"offset {failed.get(p)}")
                if to is not None:
                    reader.seek(TopicPartition(topic, p, to))
    finally:
        for p in parts:
            skips.forget(p)
        reader.unassign()
    return ReadCounts(depth, sent, ends)


def _stuck(reader: Consumer, topic: str, open_parts: set[int], starts: dict[int, int],
           reached: dict[int, int]) -> str:
    """Where each partition that never reached its end stopped (for the error message)."""
    out = []
    for p in sorted(open_parts):
        low, high = reader.get_watermark_offsets(TopicPartition(topic, p), cached=True)
        out.append(f"[{p}] from {starts.get(p)} reached {reached.get(p, '-')} "
                   f"(fetch watermarks {low}..{high})")
    return ", ".join(out)


def _queue_of(key: bytes | None, owned: set[int], markers_partitions: int) -> str | None:
    """The queue id of a queue-topic key, if it is a queue this worker owns."""
    if not key:
        return None
    try:
        q = key.decode()
    except UnicodeDecodeError:
        return None
    if not QUEUE_NAME_RE.match(q) or markers_partition(q, markers_partitions) not in owned:
        return None
    return q
