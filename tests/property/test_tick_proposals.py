"""kmq.protocol.tick_proposals against a model: TICKs go out while something is due, a few
at most on their way, and a partition is never left without one for long."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kmq.protocol.tick_proposals import MAX_IN_FLIGHT, RETRY_MS, TickProposals

IDLE_MS = 1000
STEP_MS = 20  # the timer's interval


def test_a_deadline_that_passes_while_a_tick_travels_gets_its_own_at_the_next_round():
    t = TickProposals()
    assert t.propose(1000, 1000, IDLE_MS)  # due: out at once
    assert not t.propose(1010, 2000, IDLE_MS)  # nothing more due
    assert t.propose(1020, 1015, IDLE_MS)  # passed after the first's stamp: another
    assert t.in_flight == 2 and t.sent_ms == 1020
    t.ran(1030)
    t.ran(1040)
    assert t.in_flight == 0 and t.ran_ms == 1040


def test_an_idle_partition_gets_one_tick_a_second_and_no_more():
    t = TickProposals(ran_ms=0)
    assert t.propose(1000, None, IDLE_MS)
    assert not t.propose(1020, None, IDLE_MS)  # one on its way, nothing due
    t.ran(1100)
    assert not t.propose(1500, None, IDLE_MS)
    assert t.propose(2100, None, IDLE_MS)


def test_ticks_lost_in_a_rebalance_are_given_up_after_the_retry_time():
    t = TickProposals()
    for now in range(0, 10 * STEP_MS, STEP_MS):
        t.propose(now, 0, IDLE_MS)
    assert t.in_flight == MAX_IN_FLIGHT
    assert not t.propose(RETRY_MS - 1, 0, IDLE_MS)
    assert t.propose(RETRY_MS + 3 * STEP_MS, 0, IDLE_MS) and t.in_flight == 1


@given(st.lists(st.tuples(st.integers(0, 3000), st.booleans(), st.booleans()), max_size=300))
def test_never_more_than_the_cap_on_their_way_and_a_due_deadline_is_never_ignored(rounds):
    """Each round: the timer fires (``STEP_MS`` later), the next deadline is ``offset`` ms from
    now or none, and the agent may run a TICK first."""
    t = TickProposals()
    now = 10_000
    for offset, has_deadline, agent_ran in rounds:
        now += STEP_MS
        if agent_ran and t.in_flight:
            t.ran(now)
        deadline = now - offset if has_deadline else None
        before = t.in_flight
        went = t.propose(now, deadline, IDLE_MS)
        assert 0 <= t.in_flight <= MAX_IN_FLIGHT
        if deadline is not None and before < MAX_IN_FLIGHT:
            assert went  # due, room on the way: out now
        if went:
            assert t.sent_ms == now and t.in_flight == before + 1
