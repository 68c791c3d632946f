"""Retry backoff: the pure compute_backoff with its randomness passed in."""

import pytest
from hypothesis import given, strategies as st

from kmq.backoff import Backoff, compute_backoff
from kmq.errors import ConfigError


def upper(lo, hi):  # an injected "random" that always picks the top of the range
    return hi


def lower(lo, hi):
    return lo


def test_fixed_is_the_same_every_attempt():
    b = Backoff.fixed(2.5)
    assert [compute_backoff(b, a) for a in (1, 2, 10)] == [2.5, 2.5, 2.5]


def test_exponential_doubles_then_caps():
    b = Backoff.exponential(base_s=1, max_s=10, jitter="none")
    assert [compute_backoff(b, a) for a in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_full_jitter_spans_zero_to_the_delay():
    b = Backoff.exponential(base_s=1, max_s=100, jitter="full")
    assert compute_backoff(b, 4, uniform=upper) == 8
    assert compute_backoff(b, 4, uniform=lower) == 0


def test_equal_jitter_keeps_half():
    b = Backoff.exponential(base_s=1, max_s=100, jitter="equal")
    assert compute_backoff(b, 4, uniform=lower) == 4
    assert compute_backoff(b, 4, uniform=upper) == 8


def test_huge_attempts_do_not_overflow():
    b = Backoff.exponential(base_s=0.5, max_s=3600, multiplier=10, jitter="none")
    assert compute_backoff(b, 10_000) == 3600


def test_no_backoff_is_zero():
    assert compute_backoff(Backoff.none(), 5) == 0


@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="weekly"), "kind"), (dict(kind="fixed", base_s=-1), "base_s"),
    (dict(kind="exponential", base_s=10, max_s=1), "below base_s"),
    (dict(kind="exponential", base_s=1, max_s=2, multiplier=0.5), "multiplier"),
    (dict(jitter="lots"), "jitter"),
])
def test_bad_policies_name_the_field(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        Backoff(**kwargs)


@given(base=st.floats(0.001, 100), cap=st.floats(100, 100_000), mult=st.floats(1, 10),
       attempt=st.integers(1, 10_000), r=st.floats(0, 1))
def test_a_delay_never_exceeds_the_cap_and_never_goes_negative(base, cap, mult, attempt, r):
    b = Backoff.exponential(base, cap, multiplier=mult, jitter="full")
    d = compute_backoff(b, attempt, uniform=lambda lo, hi: lo + r * (hi - lo))
    assert 0 <= d <= cap


def test_round_trips_as_a_dict():
    b = Backoff.exponential(1, 60, 3, "equal")
    assert Backoff.from_dict(b.to_dict()) == b
