"""A shared consumer's liveness (kmq.protocol.liveness), time passed in: how often it asks,
how long its dispatcher hands it work, and that a dead consumer's lapsed messages are
never handed back to it while it is still a member."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kmq.consumer.keepalive import keepalive_interval_s
from kmq.protocol.dispatch import Roster
from kmq.protocol.limits import MAX_TIMEOUT_MS
from kmq.protocol.liveness import (HEARTBEAT_MAX_S, HEARTBEAT_MIN_S, LEASE_MS, MAX_LEASE_MS,
                                   handout_window_ms, heartbeat_s)
from kmq.protocol.markers import Credit

READ_DELAY_MS = 250  # a CREDIT's trip to the dispatcher that the window leaves to spare


def credit(consumer: str, free: int, timeout_ms: int, lease_ms: int = LEASE_MS) -> Credit:
    return Credit("q", consumer, 0, 0, 0, free, lease_ms, timeout_ms)


@given(timeout_ms=st.integers(1, MAX_TIMEOUT_MS), lease_ms=st.integers(1, 2**32 - 1))
def test_the_window_lies_within_the_lease_and_spans_two_heartbeats(timeout_ms, lease_ms):
    beat = heartbeat_s(timeout_ms)
    window = handout_window_ms(timeout_ms, lease_ms)
    assert HEARTBEAT_MIN_S <= beat <= HEARTBEAT_MAX_S
    assert window <= lease_ms
    assert window >= min(lease_ms, int(2000 * beat))


@given(timeout_ms=st.integers(1000, MAX_TIMEOUT_MS))
def test_a_dead_consumers_messages_lapse_after_its_window(timeout_ms):
    """It asked (CREDIT read at ``READ_DELAY_MS`` after its death at 0) and extended its
    messages a keepalive interval before dying at the earliest: they lapse a visibility
    timeout after that, past its window, where it is handed nothing more."""
    last_extension_ms = -1000 * keepalive_interval_s(timeout_ms / 1000)
    earliest_lapse_ms = last_extension_ms + timeout_ms
    assert READ_DELAY_MS + handout_window_ms(timeout_ms, LEASE_MS) <= earliest_lapse_ms


def test_a_silent_consumer_is_handed_nothing_until_it_asks_again_but_stays_a_member():
    r = Roster(epoch=1)
    r.credit(credit("dead", 10, 4000), now_ms=0)
    r.credit(credit("live", 10, 4000), now_ms=0)
    window = handout_window_ms(4000, LEASE_MS)
    assert window == 2000
    r.expire(window - 1)
    assert r.demand() == 20 and {s.consumer_id for s, _ in r.share(20)} == {"dead", "live"}
    r.credit(credit("live", 10, 4000), now_ms=window - 1)
    assert r.expire(window) == []
    assert sorted(r.slots) == ["dead", "live"]  # the queue's view still counts both
    assert r.demand() == 10 and [s.consumer_id for s, _ in r.share(10)] == ["live"]
    r.credit(credit("dead", 10, 4000), now_ms=window + 1)  # it was slow, not dead
    r.expire(window + 1)
    assert {s.consumer_id for s, _ in r.share(10)} == {"dead", "live"}
    assert r.expire(window + 1 + LEASE_MS) == ["dead", "live"]


def test_a_long_visibility_timeout_keeps_the_whole_lease():
    assert handout_window_ms(30_000, LEASE_MS) == LEASE_MS
    assert heartbeat_s(30_000) == HEARTBEAT_MAX_S
    assert heartbeat_s(1000) == HEARTBEAT_MIN_S and handout_window_ms(1000, LEASE_MS) == 500


@given(lease_ms=st.integers(1, 2**32 - 1), now_ms=st.integers(0, 10**12))
def test_no_credit_keeps_a_consumer_longer_than_the_longest_lease(lease_ms, now_ms):
    # An audit: 16,384 made-up consumers with 12 h leases kept a markers partition's slots for
    # 12 h; a real consumer asks every heartbeat with LEASE_MS, far below the cap.
    r = Roster(epoch=1)
    r.credit(credit("c", 10, 4000, lease_ms), now_ms=now_ms)
    gone = r.expire(now_ms + min(lease_ms, MAX_LEASE_MS))
    assert gone == ["c"]
    assert LEASE_MS < MAX_LEASE_MS
