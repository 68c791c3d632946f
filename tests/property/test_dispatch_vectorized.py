"""The dispatcher's per-read work done as slices and C-level passes decides exactly what the
record-by-record rules did (kmq.protocol.chunk, dispatch.select, read_index,
kmq.consumer.referred).

Each test keeps the record-by-record rule as its reference and compares on any chunk:
several queues or one, offset gaps, records of zero bytes, windows of any size (negative
and past the end included), cursors anywhere, spans of one offset.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kmq.consumer.referred import in_range, ours
from kmq.protocol.chunk import Chunk
from kmq.protocol.dispatch import Want, select
from kmq.protocol.markers import RangeRef
from kmq.protocol.read_index import OTHER, ReadIndex
from tests.fake_records import Rec


def select_by_record(records, chunk_end, wants, max_span):
    """The rule as it was written record by record (the reference)."""
    for rec in records:
        w = wants.get(rec.key())
        if w is None or w.demand <= 0:
            continue
        o = rec.offset()
        if o < w.cursor:
            continue
        if w.taken and o - w.taken[0].offset() >= max_span:
            w.cursor = o
            w.demand = 0
            continue
        w.taken.append(rec)
        w.demand -= 1
        if w.demand == 0:
            w.cursor = o + 1
    for w in wants.values():
        if w.demand > 0 and chunk_end > w.cursor:
            w.cursor = chunk_end


keys = st.sampled_from([b"a", b"b", b"x", None])
logs = st.lists(st.tuples(keys, st.integers(1, 3), st.integers(0, 40)), max_size=120)


def build(log, start=0):
    out, off = [], start
    for k, gap, n in log:
        out.append(Rec(off, k, n))
        off += gap
    return out


@settings(max_examples=400, deadline=None)
@given(log=logs, single=st.booleans(), cursors=st.lists(st.integers(0, 400), min_size=2, max_size=2),
       demands=st.lists(st.integers(-1, 150), min_size=2, max_size=2),
       taken_first=st.lists(st.one_of(st.none(), st.integers(0, 400)), min_size=2, max_size=2),
       extra_end=st.integers(0, 5), max_span=st.integers(1, 300))
def test_select_takes_what_the_record_by_record_rule_took(log, single, cursors, demands, taken_first,
                                                          extra_end, max_span):
    records = build([(b"a", g, n) for _, g, n in log] if single else log)
    chunk_end = (records[-1].offset() + 1 if records else 0) + extra_end

    def wants():
        out = {}
        for key, cursor, demand, first in zip((b"a", b"b"), cursors, demands, taken_first):
            w = Want(key.decode(), cursor, demand)
            if first is not None:  # taken earlier from what was held (serve), below the cursor
                w.taken = [Rec(min(first, cursor), key)]
            out[key] = w
        return out

    mine, ref = wants(), wants()
    select(Chunk(records), chunk_end, mine, max_span)
    select_by_record(records, chunk_end, ref, max_span)
    for key in mine:
        a, b = mine[key], ref[key]
        assert (a.cursor, a.demand, [r.offset() for r in a.taken]) == \
               (b.cursor, b.demand, [r.offset() for r in b.taken])


@settings(max_examples=300, deadline=None)
@given(log=logs)
def test_a_chunk_splits_records_by_queue_in_offset_order(log):
    records = build(log)
    chunk = Chunk(records)
    for key in (b"a", b"b", b"x", None, b"nobody"):
        recs, offsets = chunk.own(key)
        assert recs == [r for r in records if r.key() == key]
        assert offsets == [r.offset() for r in recs]
    assert chunk.sizes == [len(r) for r in records]
    assert chunk.single == (records[0].key() if records and records[0].key() is not None
                            and all(r.key() == records[0].key() for r in records) else None)


def bytes_from_by_record(entries, start, owner, window):
    own = total = 0
    for o, n, who in entries:
        if o < start:
            continue
        if total >= window:
            break
        total += n
        if who == owner:
            own += n
    return own, total


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(st.tuples(st.integers(0, 60), logs), min_size=1, max_size=4),
       max_records=st.integers(1, 200), probes=st.lists(st.tuples(st.integers(-5, 900), st.integers(-50, 2000),
                                                                    st.sampled_from([0, 1, 2, OTHER, None])),
                                                          min_size=1, max_size=10))
def test_the_read_index_counts_what_a_walk_over_its_records_counted(chunks, max_records, probes):
    """Chunks read at any starts (contiguous, overlapping, jumping ahead): the index keeps
    the last ``max_records`` records of its current window and answers like a walk."""
    idx = ReadIndex(max_records)
    entries: list[tuple[int, int, int]] = []  # what it should hold: (offset, bytes, owner)
    start = end = 0
    owner_of = {b"a": 0, b"b": 1, b"x": 2}
    for at, log in chunks:
        records = build(log, at)
        chunk_end = records[-1].offset() + 1 if records else at
        if not (start <= at <= end) or not entries:
            entries, start, end = [], at, at
        new = [(r.offset(), len(r), owner_of.get(r.key(), OTHER)) for r in records if r.offset() >= end]
        entries += new
        end = max(end, chunk_end)
        if len(entries) > max_records:
            entries = entries[-max_records:]
            start = entries[0][0]
        c = Chunk(records)
        idx.extend(at, chunk_end, c.offsets, c.sizes, [owner_of.get(k, OTHER) for k in c.keys])
        assert list(idx.offsets) == [o for o, _, _ in entries] and (idx.start, idx.end) == (start, end)
        for probe, window, owner in probes:
            assert idx.bytes_from(probe, owner, window) == (
                bytes_from_by_record(entries, probe, owner, window) if window > 0 else (0, 0))
            hi = probe + abs(window) // 10
            assert idx.bytes_between(probe, hi) == sum(n for o, n, _ in entries if probe <= o < hi)
            assert idx.spans(probe) == (bool(entries) and start <= probe < end)


def in_range_by_record(recs, r, got):
    for i, rec in enumerate(recs):
        if rec.error() is not None or rec.partition() != r.partition:
            continue
        o = rec.offset()
        if o < r.start:
            continue
        if o >= r.end:
            return recs[i:]
        got.append(rec)
    return []


@settings(max_examples=300, deadline=None)
@given(log=logs, lo=st.integers(0, 200), length=st.integers(1, 200),
       odd=st.lists(st.tuples(st.integers(0, 119), st.sampled_from(["partition", "error", "swap"])), max_size=3),
       mask_seed=st.integers(0, (1 << 200) - 1))
def test_a_reference_read_keeps_what_the_record_by_record_rule_kept(log, lo, length, odd, mask_seed):
    records = build(log)
    for i, what in odd:  # a record of another partition, an error, records out of order
        if i < len(records):
            if what == "partition":
                records[i] = Rec(records[i].offset(), records[i].key(), partition=1)
            elif what == "error":
                records[i] = Rec(records[i].offset(), None, error="boom")
            elif i + 1 < len(records):
                records[i], records[i + 1] = records[i + 1], records[i]
    r = RangeRef("a", 0, lo, lo + length)
    earlier = Rec(-1, b"a")  # what an earlier read of the range got
    mine, ref = [earlier], [earlier]
    assert in_range(records, r, mine) == in_range_by_record(records, r, ref)
    assert mine == ref
    got = mine[1:]
    mask = (mask_seed & r.full_mask) or 1
    for m in (mask, r.full_mask):
        keep, rels = ours(got, r, m, b"a")
        want = [rec for rec in got if m >> (rec.offset() - r.start) & 1 and rec.key() == b"a"]
        assert keep == want and list(rels) == [rec.offset() - r.start for rec in want]
