"""EndLowerBounds: recent ends reused as lower bounds, re-read once older than the bound."""

from hypothesis import given, strategies as st

from kmq.kafka.offsets import EndLowerBounds


def test_an_end_is_reused_until_it_is_older_than_max_age_then_read_again():
    reads = []
    ends = {("q", 0): 10, ("q", 1): 50}

    def read_end(topic, partition):
        reads.append((topic, partition))
        return ends[(topic, partition)]

    cache = EndLowerBounds(max_age_s=1.0)
    assert cache.get("q", 0, 100.0, read_end) == 10
    ends[("q", 0)] = 20  # the partition grew
    assert cache.get("q", 0, 100.9, read_end) == 10, "fresh enough: still a lower bound"
    assert cache.get("q", 1, 100.9, read_end) == 50, "another partition is read on its own"
    assert cache.get("q", 0, 101.1, read_end) == 20
    assert reads == [("q", 0), ("q", 1), ("q", 0)]


def test_a_negative_answer_counts_as_zero():
    assert EndLowerBounds(1.0).get("q", 0, 0.0, lambda t, p: -1001) == 0


@given(st.lists(st.tuples(st.floats(0, 5), st.integers(0, 100)), min_size=1, max_size=30))
def test_an_answer_never_exceeds_the_true_end(steps):
    """Ends only grow; whatever the timing, the answer is at most the end at asking time."""
    cache = EndLowerBounds(max_age_s=1.0)
    now, end = 0.0, 0
    for dt, growth in steps:
        now += dt
        end += growth
        assert cache.get("q", 0, now, lambda t, p, e=end: e) <= end
