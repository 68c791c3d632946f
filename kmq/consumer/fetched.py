"""What one fetch of a ``dispatch="partition"`` queue returned, sorted out (step 2).

A queue's partition may hold other queues' records too (a queue lives where murmur2 of its
name puts it), and librdkafka mixes error events in: :func:`split` takes the queue's own
records per partition, in offset order, and leaves everything else (other queues', purged
ones, errors) to be committed past. :func:`within_range_len` cuts a partition's records
where one START could not cover them. Keys are compared in C (``map``, ``count``,
``compress`` over confluent-kafka's unbound methods): no Python step per record on the
path every message takes. Pure: records in, lists out.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import eq, ne, sub

from confluent_kafka import Message as KafkaMessage

from kmq.protocol import markers as M

# Unbound: map() calls them in C.
_key, _offset, _partition = KafkaMessage.key, KafkaMessage.offset, KafkaMessage.partition


def split(recs: list, qkey: bytes, assigned: set[int],
          purged_before: dict[int, int]) -> tuple[dict[int, list], list]:
    """The queue's records (key ``qkey``) per partition, and every other record.

    Records below a partition's purge floor count as others: never delivered, committed
    past like other queues' records.
    """
    keys = list(map(_key, recs))
    if keys.count(qkey) == len(recs):
        ours, others = recs, []
    else:
        ours = list(compress(recs, map(eq, keys, repeat(qkey))))
        others = list(compress(recs, map(ne, keys, repeat(qkey))))
    if len(assigned) == 1:  # spread 1: every record is from that partition
        ours_by_part = {next(iter(assigned)): ours}
    else:
        parts = list(map(_partition, ours))
        if parts and parts.count(parts[0]) == len(parts):
            ours_by_part = {parts[0]: ours}
        else:  # several partitions in one fetch: each one's records keep their order
            ours_by_part = {}
            for p, rec in zip(parts, ours):
                lst = ours_by_part.get(p)
                if lst is None:
                    ours_by_part[p] = [rec]
                else:
                    lst.append(rec)
    if purged_before:
        for p, ours in list(ours_by_part.items()):
            floor = purged_before.get(p, 0)
            if ours and ours[0].offset() < floor:
                others += [r for r in ours if r.offset() < floor]
                ours_by_part[p] = [r for r in ours if r.offset() >= floor]
    return ours_by_part, others


def rels_of(ours: list, start: int) -> list[int]:
    """The offsets of ``ours`` relative to ``start`` (a range with gaps: others' records)."""
    return list(map(sub, map(_offset, ours), repeat(start)))


def within_range_len(recs: list) -> list[list]:
    """``recs`` (one partition, offset order) cut where their offsets would span more than one
    range may hold (M.MAX_RANGE_LEN): aborted transactions or other queues' records between them."""
    if not recs:
        return []
    if recs[-1].offset() - recs[0].offset() < M.MAX_RANGE_LEN:
        return [recs]
    out: list[list] = [[]]
    first = recs[0].offset()
    for rec in recs:
        if rec.offset() - first >= M.MAX_RANGE_LEN:
            out.append([])
            first = rec.offset()
        out[-1].append(rec)
    return out
