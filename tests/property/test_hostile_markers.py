"""Adversarial marker records: decoding and applying any of them costs bounded memory and work.

Deterministic measures, not wall-clock: tracemalloc's peak for the decoder,
bytes of table entries read and written (``PartitionState.work_bytes``) for
the state machine.
"""

from __future__ import annotations

import struct
import tracemalloc

from hypothesis import given, settings, strategies as st

from kmq.errors import MarkerDecodeError
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.entries import Cause
from kmq.protocol.limits import MAX_GROUPS_PER_RANGE, MAX_RECORD_WORK_BYTES
from kmq.protocol.outcomes import Outcome
from kmq.protocol.state import PartitionState
from kmq.protocol.store import MemoryStore

# The largest in-flight entry the limits allow: header, every group with the
# longest reason and the widest mask, attempt offsets.
MAX_ENTRY_BYTES = 31 + (MAX_GROUPS_PER_RANGE + len(Cause)) * (
    9 + 2 + M.MAX_REASON_BYTES + 4 + M.MAX_RANGE_LEN // 8) + 16
PER_MARKER_OBJECT_BYTES = 1024  # a decoded marker's Python objects, generously

names = st.one_of(st.sampled_from(["orders", "q", "o" * 128]), st.text(max_size=200))
lengths = st.one_of(st.integers(1, 64), st.integers(1, 1 << 23), st.sampled_from(
    [M.MAX_RANGE_LEN, M.MAX_RANGE_LEN + 1, 1 << 22, 0, -5]))
i64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-1, 0, 2**63 - 1, M.MAX_DELAY_MS + 1]))
u32 = st.integers(0, 2**32 - 1)


@st.composite
def raw_range(draw, kind: int) -> tuple[bytes, int]:
    q = draw(names).encode()[:0xFFFF]
    start = draw(st.integers(0, 2**40))
    length = draw(lengths)
    body = struct.pack(">BH", kind, len(q)) + q + struct.pack(">Iqq", draw(u32), start,
                                                          max(-(2**63), min(2**63 - 1, start + length)))
    return body, length


@st.composite
def raw_mask(draw, length: int, shorthand: bool) -> bytes:
    if shorthand and draw(st.booleans()):
        return struct.pack(">I", 0)
    right = (max(length, 0) + 7) // 8
    n = draw(st.one_of(st.just(right), st.integers(0, 300))) if right <= 8192 else draw(st.integers(0, 300))
    fill = draw(st.sampled_from([b"\xff", b"\x00", b"\x80", b"\x01"]))
    return struct.pack(">I", n) + fill * n


@st.composite
def raw_marker(draw) -> bytes:
    kind = draw(st.sampled_from(list(marker_codec.MarkerType)))
    if kind in (marker_codec.MarkerType.START, marker_codec.MarkerType.ACK, marker_codec.MarkerType.EXTEND, marker_codec.MarkerType.RELEASE,
                marker_codec.MarkerType.REJECT):
        head, length = draw(raw_range(kind))
        if kind == marker_codec.MarkerType.START:
            return head + struct.pack(">I", draw(u32)) + draw(raw_mask(length, True))
        body = head + draw(raw_mask(length, False))
        if kind == marker_codec.MarkerType.EXTEND:
            return body + struct.pack(">I", draw(u32))
        if kind == marker_codec.MarkerType.RELEASE:
            return body + struct.pack(">qB", draw(i64), draw(st.integers(0, 2)))
        if kind == marker_codec.MarkerType.REJECT:
            reason = draw(st.one_of(st.binary(max_size=50), st.just(b"r" * 5000)))
            return body + struct.pack(">H", len(reason)) + reason
        return body
    if kind == marker_codec.MarkerType.TICK:
        return struct.pack(">Bq", kind, draw(i64))
    if kind == marker_codec.MarkerType.PURGE:
        q = draw(names).encode()[:0xFFFF]
        return struct.pack(">BH", kind, len(q)) + q
    q, mid = draw(names).encode()[:0xFFFF], draw(st.binary(max_size=300))
    return (struct.pack(">BH", kind, len(q)) + q + struct.pack(">H", len(mid)) + mid
            + struct.pack(">qI", draw(i64), 3) + b"val" + struct.pack(">H", 0))


@st.composite
def raw_records(draw) -> bytes:
    bodies = draw(st.lists(raw_marker(), min_size=1, max_size=40))
    if draw(st.booleans()):  # many copies of one marker: the widest shorthand STARTs, say
        bodies = bodies[:1] * draw(st.integers(1, 2000))
    return struct.pack(">BH", marker_codec.VERSION, len(bodies)) + b"".join(bodies)


@settings(max_examples=150, deadline=None)
@given(raw_records())
def test_any_record_decodes_in_memory_bounded_by_its_size_and_the_mask_limit(data):
    tracemalloc.start()
    try:
        try:
            got = marker_codec.decode_lenient(data)
        except MarkerDecodeError:
            got = None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    count = struct.unpack_from(">H", data, 1)[0]
    assert peak <= 2 * len(data) + M.MAX_RECORD_OFFSETS // 8 + count * PER_MARKER_OBJECT_BYTES + 64 * 1024
    if got is not None:
        assert all(M.violation(m) is None for m in got.markers)
        assert len(got.markers) + len(got.set_aside) == count
        assert sum(M.range_offsets(m) for m in got.markers) <= M.MAX_RECORD_OFFSETS


weird_ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([-1, 0, 2**63 - 1, 2**64]))
any_range = st.builds(M.RangeRef, names, weird_ints, weird_ints, weird_ints)
in_process = st.one_of(  # markers built in-process skip the decoder: the state machine checks again
    st.builds(M.Start, any_range, weird_ints, weird_ints), st.builds(M.Ack, any_range, weird_ints),
    st.builds(M.Extend, any_range, weird_ints, weird_ints),
    st.builds(M.Release, any_range, weird_ints, weird_ints, st.booleans()),
    st.builds(M.Reject, any_range, weird_ints, st.text(max_size=20)),
    st.builds(M.Schedule, names, st.text(max_size=300), weird_ints, st.binary(max_size=10), st.just(())),
    st.builds(M.Tick, weird_ints), st.builds(M.Purge, names))


@settings(max_examples=150, deadline=None)
@given(st.lists(raw_records(), min_size=1, max_size=4), st.lists(in_process, max_size=20))
def test_the_state_machine_never_raises_and_each_records_work_is_bounded(records, built):
    s = PartitionState(MemoryStore())
    now = 1_000_000
    for data in records:
        try:
            markers = marker_codec.decode_lenient(data).markers
        except MarkerDecodeError:
            continue
        s.begin_record()
        for m in markers:
            s.apply(m, now)
        assert s.work_bytes <= MAX_RECORD_WORK_BYTES + MAX_ENTRY_BYTES
        now += 10
    s.begin_record()
    for m in built:
        applied = s.apply(m, now)
        if M.violation(m) is not None:
            assert applied.what == Outcome.MALFORMED_MARKER
    due = s.due(M.MAX_TIME_MS, limit=5000)
    assert sum(d.count for d in due) <= 5000
    s.settle(due)
