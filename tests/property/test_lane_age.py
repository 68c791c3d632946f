"""A delivery's age on its lane, from its header's timestamp on another clock (kmq.consumer.lane_age).

Against the obvious model: with a constant skew, the age is the delivery's latency minus
the least latency of the window, so never above the true age, and a delivery that waited
out a stall after a quick one shows that wait whatever the skew.
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from kmq.consumer.lane_age import MAX_SKEW_MS, WINDOW, LaneAge

SKEW_MS = st.integers(-MAX_SKEW_MS // 2, MAX_SKEW_MS // 2)
LATENCIES_MS = st.lists(st.integers(0, 60_000), min_size=1, max_size=5 * WINDOW)


def ages(skew_ms: int, latencies_ms: list[int], start_ms: int = 1_800_000_000_000) -> list[float]:
    """Ages of deliveries stamped one second apart on the dispatcher's clock, each read
    ``latency`` later on ours (ahead of it by ``skew_ms``)."""
    lane = LaneAge()
    out = []
    for i, latency in enumerate(latencies_ms):
        stamped = start_ms + 1000 * i
        out.append(lane.age_s(stamped + latency + skew_ms, stamped))
    return out


@given(SKEW_MS, LATENCIES_MS)
def test_a_constant_skew_cancels_and_no_age_is_above_the_true_one(skew_ms, latencies_ms):
    got = ages(skew_ms, latencies_ms)
    assert got == ages(0, latencies_ms)
    for age, latency in zip(got, latencies_ms):
        assert 0 <= age <= latency / 1000


@given(SKEW_MS, st.lists(st.integers(0, 500), min_size=1, max_size=WINDOW - 1), st.integers(2_000, 600_000))
def test_a_wait_after_quick_deliveries_shows_whatever_the_skew(skew_ms, quick_ms, waited_ms):
    got = ages(skew_ms, [*quick_ms, waited_ms])
    assert got[-1] >= (waited_ms - min(quick_ms)) / 1000


@given(st.integers(1, MAX_SKEW_MS // 2), st.integers(0, 2 * WINDOW))
def test_a_clock_stepped_forward_is_forgotten_within_two_windows(step_ms, before):
    lane = LaneAge()
    t = 1_800_000_000_000
    for i in range(before):
        lane.age_s(t + 1000 * i + 5, t + 1000 * i)
    t += 1000 * before
    after = [lane.age_s(t + 1000 * i + 5 + step_ms, t + 1000 * i) for i in range(2 * WINDOW + 1)]
    assert after[-1] == 0.0  # the window holds only deliveries after the step by then
    assert all(a <= step_ms / 1000 for a in after)


@given(st.lists(st.one_of(st.none(), st.integers(-(1 << 62), 0), st.integers(1 << 50, 1 << 62)),
                min_size=1, max_size=3 * WINDOW))
def test_a_missing_or_absurd_timestamp_is_age_zero_and_no_baseline(stamps):
    # Anyone may write a lane: a forged header's timestamp must not make real deliveries look old.
    lane = LaneAge()
    t = 1_800_000_000_000
    assert all(lane.age_s(t, s) == 0.0 for s in stamps)
    assert lane.age_s(t + 5, t) == 0.0 and lane.age_s(t + 3005, t + 1000) == 2.0


def test_a_stall_longer_than_any_skew_still_shows():
    # Hypothesis found it: a delivery that waited 10 minutes (and 1 ms of skew) was age 0,
    # taken for a forged timestamp; a suspended VM's deliveries then looked fresh.
    lane = LaneAge()
    t = 1_800_000_000_000
    assert lane.age_s(t + 7, t) == 0.0
    assert lane.age_s(t + 7 + 900_000, t + 1000) == 899.0  # 15 minutes on the lane
    assert lane.age_s(t + 2007, t + 2000) == 0.0  # and it did not become the baseline
