"""The membership lease (app/membership.py): what the dispatcher of shared queues may write."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.membership import LEASE_SHARE, Membership, of_group


def test_no_heartbeat_no_lease():
    assert Membership().valid_until() == 0.0


def test_a_heartbeat_answered_ok_holds_the_lease_for_a_share_of_the_removal_bound():
    m = Membership()
    m.heartbeat_ok(100.0, session_ms=6000, rebalance_ms=60000)
    assert m.valid_until() == 100.0 + LEASE_SHARE * 6.0
    m.heartbeat_ok(101.0, session_ms=60000, rebalance_ms=6000)  # the shorter bound counts
    assert m.valid_until() == 101.0 + LEASE_SHARE * 6.0


@given(st.lists(st.tuples(st.floats(0, 1e6), st.integers(100, 600_000), st.integers(100, 600_000)),
                max_size=50))
def test_the_lease_never_goes_back_and_never_outlasts_the_bound_of_the_latest_heartbeat(beats):
    m = Membership()
    last = 0.0
    for sent, session, rebalance in beats:  # answers may arrive out of order
        m.heartbeat_ok(sent, session, rebalance)
        assert m.valid_until() >= last
        last = m.valid_until()
    # Inside the removal bound of the heartbeat that set it (a member is removed no earlier).
    if beats:
        assert m.valid_until() < max(s + min(a, b) / 1000 for s, a, b in beats)


def test_each_group_has_one_lease():
    assert of_group("a-test-group") is of_group("a-test-group")
    assert of_group("a-test-group") is not of_group("another-test-group")
