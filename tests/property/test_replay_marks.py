"""The applied mark and replays: a record of ACKs only needs no mark (state.replay_safe).

The markers agent writes, after a record that changed the table, the record's offset
(the applied mark), so a worker that restores the table skips what it already holds. A
record of ACKs only is not marked: a successor applies it again. Property: whatever
records came, restoring the table at any record boundary and applying again every record
after the mark ends in exactly the table the worker had there.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings, strategies as st

from kmq.protocol import entries as E
from kmq.protocol.markers import Ack, Credit, Extend, RangeRef, Reject, Release, Start
from kmq.protocol.state import PartitionState, replay_safe
from kmq.protocol.store import MemoryStore

RANGES = [RangeRef("a", 0, 0, 8), RangeRef("a", 0, 8, 16), RangeRef("b", 1, 0, 4)]
MARK = E.applied_key(0)


def _marker(draw, kind: str, r: RangeRef):
    mask = draw(st.integers(1, r.full_mask))
    if kind == "start":
        return Start(r, draw(st.integers(0, 5000)), mask)
    if kind == "ack":
        return Ack(r, mask)
    if kind == "extend":
        return Extend(r, mask, draw(st.integers(0, 5000)))
    if kind == "release":
        return Release(r, mask, draw(st.sampled_from([-1, 0, 300])), draw(st.booleans()))
    if kind == "reject":
        return Reject(r, mask, "x")
    return Credit(r.queue, "c", 0, 0, 0, 5, 5000, 1000)


@st.composite
def marker_logs(draw):
    # ACKs most often: the records the rule leaves unmarked, in runs between the others.
    kinds = st.sampled_from(["ack"] * 4 + ["start", "extend", "release", "reject", "credit"])
    log = []
    for _ in range(draw(st.integers(1, 25))):
        n = draw(st.integers(1, 3))
        log.append([_marker(draw, draw(kinds), draw(st.sampled_from(RANGES))) for _ in range(n)])
    return log


def _apply_record(s: PartitionState, offset: int, record: list, now_ms: int) -> None:
    """What the markers agent does with one record (agents/track_markers._apply_once)."""
    raw = s.store.get(MARK)
    if raw is not None and offset <= E.decode_offset(raw):
        return  # the table holds it
    writes = s.store.writes
    for m in record:
        s.apply(m, now_ms)
    if s.store.writes != writes and not replay_safe(record):
        s.store.put(MARK, E.encode_offset(offset))


@settings(max_examples=300, deadline=None)
@given(marker_logs(), st.data())
def test_a_restored_table_applies_again_what_it_may_and_ends_where_it_was(log, data):
    s = PartitionState(MemoryStore())
    snapshots = []
    for offset, record in enumerate(log):
        _apply_record(s, offset, record, now_ms=1000 * offset)
        snapshots.append(copy.deepcopy((s.store.entries, s.store.index)))
    crash = data.draw(st.integers(0, len(log) - 1))  # the changelog holds records up to here
    entries, index = copy.deepcopy(snapshots[crash])
    restored = PartitionState(MemoryStore())
    restored.store.entries, restored.store.index = entries, index
    for offset, record in enumerate(log[:crash + 1]):  # a successor reads on from the mark
        _apply_record(restored, offset, record, now_ms=1000 * offset)
    assert (restored.store.entries, restored.store.index) == snapshots[crash]


def test_only_acks_and_credits_are_replay_safe():
    r = RANGES[0]
    assert replay_safe([Ack(r, 1), Credit("a", "c", 0, 0, 0, 1, 5000, 1000)])
    for other in (Start(r, 1, 1), Extend(r, 1, 1), Release(r, 1, 0), Reject(r, 1, "x")):
        assert not replay_safe([Ack(r, 1), other])
