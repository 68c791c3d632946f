"""When a shared consumer leaves its lane (kmq.consumer.lane_choice), against a model."""

from __future__ import annotations

import random

from hypothesis import given, strategies as st

from kmq.consumer.lane_choice import (CANDIDATES, FIRST_MOVE_AFTER_S, MAX_MOVE_GAP_S, MAX_OTHERS_SHARE,
                                      MIN_OTHER_BYTES, LaneWatch, candidates, pick_lane, quietest)


@given(st.integers(1, 600), st.data())
def test_a_lane_picked_is_a_lane_none_of_those_avoided_and_none_when_all_are(count, data):
    avoid = data.draw(st.sets(st.integers(-3, count + 3), max_size=count + 6))
    lane = pick_lane(count, avoid, random.Random(data.draw(st.integers())))
    if set(range(count)) <= avoid:
        assert lane is None
    else:
        assert 0 <= lane < count and lane not in avoid


def test_every_lane_not_avoided_can_be_picked():
    rng = random.Random(7)
    assert {pick_lane(6, {2, 4}, rng) for _ in range(500)} == {0, 1, 3, 5}
    assert pick_lane(1, {0}, rng) is None and pick_lane(1, (), rng) == 0


# (seconds later, own bytes read, others' bytes read): reads of one lane, adversarial sizes
reads = st.lists(st.tuples(st.floats(0, 200, allow_nan=False), st.integers(0, 10**9), st.integers(0, 10**9)),
                 max_size=60)


@given(reads)
def test_judged_against_a_model_of_windows_and_spaced_moves(events):
    watch = LaneWatch(taken_at_s=0.0)
    now = own = other = 0.0
    win_own = win_other = 0  # the model: the window the lane is judged on
    taken, moves = 0.0, 0
    for dt, d_own, d_other in events:
        now += dt
        own, other = own + d_own, other + d_other
        win_own, win_other = win_own + d_own, win_other + d_other
        gap = min(MAX_MOVE_GAP_S, FIRST_MOVE_AFTER_S * 2 ** moves)
        judged = win_other >= MIN_OTHER_BYTES and now - taken >= gap
        expect = judged and win_other > MAX_OTHERS_SHARE * win_own
        assert watch.judge(now, int(own), int(other)) == expect
        if expect:
            watch.moved(now)
            moves, taken = moves + 1, now
            own = other = win_own = win_other = 0  # a new lane's reader counts from 0
        elif judged:
            win_own = win_other = 0  # a good window: the next starts afresh


def test_an_idle_consumer_on_a_busy_lane_moves_once_due_and_then_waits_longer():
    first = FIRST_MOVE_AFTER_S
    watch = LaneWatch(taken_at_s=100.0)
    assert not watch.judge(100.0 + first / 2, 0, 10 * MIN_OTHER_BYTES)  # too soon after starting
    assert watch.judge(100.0 + first, 0, 10 * MIN_OTHER_BYTES)
    watch.moved(200.0)
    assert not watch.judge(200.0 + 1.5 * first, 0, 10 * MIN_OTHER_BYTES)  # the second waits twice as long
    assert watch.judge(200.0 + 2 * first, 0, 10 * MIN_OTHER_BYTES)
    for _ in range(20):
        watch.moved(0.0)
    assert watch.gap_s() == MAX_MOVE_GAP_S  # a fleet that must share lanes settles


def test_a_lane_mostly_ours_is_kept_and_a_late_neighbour_judged_on_what_came_since():
    watch = LaneWatch(taken_at_s=0.0)
    mib = 1 << 20
    assert not watch.judge(10.0, 100 * mib, MIN_OTHER_BYTES)  # ours: a window passed, kept
    # A busy neighbour arrives: over everything since start it is a small share, but the
    # window since the last judgement is mostly its records.
    assert watch.judge(20.0, 100 * mib + MIN_OTHER_BYTES, MIN_OTHER_BYTES + 4 * MIN_OTHER_BYTES)


@given(st.integers(1, 300), st.data())
def test_candidates_are_distinct_lanes_never_avoided(count, data):
    avoid = data.draw(st.sets(st.integers(0, count - 1), max_size=count))
    got = candidates(count, avoid, random.Random(data.draw(st.integers())))
    assert len(set(got)) == len(got) == min(CANDIDATES, count - len(avoid))
    assert all(0 <= lane < count and lane not in avoid for lane in got)


@given(st.dictionaries(st.integers(0, 255), st.integers(0, 10**12), max_size=8), st.data())
def test_the_quietest_lane_grew_least_and_was_looked_at_twice(before, data):
    after = {lane: end + data.draw(st.integers(0, 10**6)) for lane, end in before.items()
             if data.draw(st.booleans()) or lane == min(before, default=None)}
    lane = quietest(before, after, random.Random(data.draw(st.integers())))
    if not after:
        assert lane is None
    else:
        assert lane in after and after[lane] - before[lane] == min(after[x] - before[x] for x in after)


def test_an_idle_lane_is_preferred_to_busy_ones():
    assert quietest({1: 100, 2: 50, 3: 7}, {1: 180, 2: 50, 3: 9}) == 2
