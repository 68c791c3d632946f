"""The cursors a dispatcher begins from stay within the queue topic (kmq.protocol.cursor_bounds):
a forged ACQUIRE at 10**15 stopped its queue for good at the next BEGIN; FLOORs of made-up
partitions were all loaded."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kmq.protocol.cursor_bounds import CURSOR_SLACK_OFFSETS, bounded_cursors


def test_a_cursor_far_past_its_end_begins_at_the_end_and_others_stay():
    got = bounded_cursors({("q", 0): 10**15, ("q", 1): 40, ("r", 0): 95}, {0: 100, 1: 50}, 8)
    assert got.cursors == {("q", 0): 100, ("q", 1): 40, ("r", 0): 95}
    assert got.moved == {("q", 0): 100} and got.dropped == []


def test_within_the_slack_a_cursor_is_kept_as_listoffsets_may_undercount():
    end = 1_000
    got = bounded_cursors({("q", 0): end + CURSOR_SLACK_OFFSETS}, {0: end}, 1)
    assert got.cursors == {("q", 0): end + CURSOR_SLACK_OFFSETS} and not got.moved


def test_a_partition_the_topic_lacks_is_dropped_and_unknown_ends_check_partitions_only():
    got = bounded_cursors({("q", 4_000_000_000): 5, ("q", -1): 5, ("q", 2): 10**15}, None, 8)
    assert got.cursors == {("q", 2): 10**15}
    assert sorted(got.dropped) == [("q", -1), ("q", 4_000_000_000)]


@given(cursors=st.dictionaries(st.tuples(st.sampled_from(["a", "b"]), st.integers(-2, 12)),
                               st.integers(0, 2**63 - 1), max_size=30),
       ends=st.none() | st.dictionaries(st.integers(0, 9), st.integers(0, 2**40), max_size=10),
       parts=st.integers(0, 10))
def test_every_cursor_is_kept_moved_to_its_end_or_dropped(cursors, ends, parts):
    got = bounded_cursors(cursors, ends, parts)
    assert set(got.cursors) | set(got.dropped) == set(cursors)
    assert not set(got.cursors) & set(got.dropped)
    for (q, p), offset in got.cursors.items():
        assert 0 <= p < parts
        end = None if ends is None else ends.get(p)
        if end is not None:
            assert offset <= end + CURSOR_SLACK_OFFSETS
        assert offset == cursors[(q, p)] or got.moved[(q, p)] == offset == end
