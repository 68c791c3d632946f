"""A dispatcher's read-back of dedup ids after BEGIN (agents/dispatch/dedup_replay.py), on
fake records: where it starts, what it feeds, and that it never takes what lies past its end."""

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.dispatch.dedup_replay import (REPLAY_MAX_RECORDS, REPLAY_WINDOWS, Replay,
                                          replays_at_begin)
from agents.dispatch.ordered import OrderedQueues
from kmq.protocol import envelope as V
from kmq.protocol.dispatch import Want, select_own
from tests.fake_records import StampedRec as Rec

KEY = (0, "q", 3)


def test_a_read_back_starts_two_windows_back_within_its_bounds():
    asked = []

    def offset_at(wall_ms):
        asked.append(wall_ms)
        return 400

    r = Replay(until=1_000, begun_wall_ms=1_000_000)
    assert r.start(floor=0, window_ms=300_000, offset_at=offset_at) == 400
    assert asked == [1_000_000 - REPLAY_WINDOWS * 300_000]
    assert r.start(0, 300_000, offset_at) == 400 and len(asked) == 1  # placed once
    assert Replay(1_000, 0).start(floor=700, window_ms=1, offset_at=lambda ms: 0) == 700  # where the queue begins
    far = Replay(10 * REPLAY_MAX_RECORDS, 0)
    assert far.start(0, 1, lambda ms: 0) == 9 * REPLAY_MAX_RECORDS  # bounded (the embedded broker says 0)
    assert Replay(1_000, 0).start(0, 1, lambda ms: 1 << 62) is None  # nothing that recent: done


def test_nothing_to_read_back_for_a_queue_that_never_went_out():
    assert set(replays_at_begin({("a", 0): 0, ("b", 1): 5}, 0)) == {("b", 1)}


@settings(max_examples=300, deadline=None)
@given(offsets=st.lists(st.integers(0, 300), unique=True, max_size=80).map(sorted),
       until=st.integers(0, 320), demand=st.integers(1, 50), chunk_end=st.integers(0, 400))
def test_a_read_back_feeds_only_what_lies_below_its_end_and_leaves_the_rest(offsets, until, demand, chunk_end):
    chunk_end = max(chunk_end, offsets[-1] + 1 if offsets else 0)
    r = Replay(until, 0, at=0)
    w = Want("q", 0, demand)
    select_own(w, [Rec(o) for o in offsets], offsets, chunk_end)
    fed = r.took(w)
    assert all(rec.offset() < until for rec in fed)
    assert [rec.offset() for rec in fed] == [o for o in offsets if o < until][:len(fed)]
    assert w.cursor <= until and r.at == w.cursor
    # everything below the new cursor was fed: nothing below ``until`` is skipped
    assert [rec.offset() for rec in fed] == [o for o in offsets if o < w.cursor]


def test_ids_read_back_make_a_later_send_a_duplicate_and_count_nothing():
    oq = OrderedQueues(wall_ms=lambda: 10_000)
    before = [Rec(5, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=9_000), Rec(6, [(V.ID, b"p")])]
    assert oq.remember_sends(KEY, before, 300_000) == 1
    assert oq.stats == {"bad-group": 0, "bad-dedup-id": 0, "deduplicated": 0, "held-heads-let-go": 0,
                        "given-back": 0}
    again = Rec(9, [(V.ID, b"d-1"), (V.DEDUP_ID, b"txn")], ts=9_500)
    assert oq.drop_duplicates(KEY, [again], 300_000) == []
    assert oq.stats["deduplicated"] == 1
