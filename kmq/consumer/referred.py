"""What a shared consumer keeps of a range it reads from the queue topic (a reference); pure.

A delivery by reference names a range of the queue topic; the consumer's reference reader
returns it, perhaps with records fetched before a seek, and those past the range that
begin the next one. Most reads are one partition's records in offset order with no
errors, and most referred ranges are the queue's own records, every one handed out: then
both steps are slices and a count, nothing done per record in Python.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import islice
from operator import lt

from kmq.protocol import markers as M


def in_range(recs: list, r: M.RangeRef, got: list) -> list:
    """Append to ``got`` the records of ``recs`` inside range ``r`` (older ones were fetched
    before a seek); return those from the first past its end on (the next range's)."""
    if not recs:
        return []
    t = type(recs[0])
    offsets = list(map(t.offset, recs))
    # The usual read: one partition, no errors, in offset order: slices, nothing per record.
    if (not any(map(t.error, recs)) and list(map(t.partition, recs)).count(r.partition) == len(recs)
            and all(map(lt, offsets, islice(offsets, 1, None)))):
        i, j = bisect_left(offsets, r.start), bisect_left(offsets, r.end)
        got += recs[i:j]
        return recs[j:]
    for i, rec in enumerate(recs):
        if rec.error() is not None or rec.partition() != r.partition:
            continue
        o = offsets[i]
        if o < r.start:
            continue  # fetched before a seek
        if o >= r.end:
            return recs[i:]
        got.append(rec)
    return []


def ours(got: list, r: M.RangeRef, mask: int, qkey: bytes) -> tuple[list, range | list[int]]:
    """The records of a referred range that were handed out (``mask``) and are the queue's,
    and their offsets relative to the range's start."""
    if not got:
        return [], []
    t = type(got[0])
    if mask == r.full_mask and len(got) == r.length and list(map(t.key, got)).count(qkey) == len(got):
        return got, range(r.length)  # the whole range, all ours: nothing per record
    bits = mask.to_bytes((r.length + 7) // 8, "little")
    keep, rels = [], []
    for rec in got:
        rel = rec.offset() - r.start
        if bits[rel >> 3] >> (rel & 7) & 1 and rec.key() == qkey:
            keep.append(rec)
            rels.append(rel)
    return keep, rels
