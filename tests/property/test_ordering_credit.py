"""Runs against a consumer's credit (kmq.protocol.ordering.run_room, ``GroupOrder.take``):
the rest of a run, which waits at the consumer while its user code holds the message
before, never fills its ``max_in_flight``, so a consumer whose user code holds a hot
group's head still gets other groups' messages at any ``max_in_flight`` >= 2
(docs/ordering.md, "What a consumer of an ordered queue sees").

The model: one consumer of ``max_in_flight`` m whose user code takes every message it
may (a group's first at the consumer) and holds it until a rule acks it; it asks for any
part of its free room (its read-ahead may cap it), and the dispatcher gives it runs as
long as the credit (``take(n, run=n)``, as agents.dispatch.ordered does). Another
consumer takes and acks at once, so groups move about.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq.protocol.ordering import GroupOrder, run_room

GROUPS = [b"a", b"b", b"c", b"d"]


@given(left=st.integers(1, 10_000), others_wait=st.booleans())
def test_the_rest_of_a_run_never_takes_the_last_of_a_credit(left, others_wait):
    new, going_on = run_room(left, others_wait), run_room(left, others_wait, going_on=True)
    assert 1 <= new <= max(1, left - 1)         # a run's first may take the last; its rest never
    assert 0 <= going_on <= left - 1
    if others_wait:                             # ... and at most half while other groups wait
        assert new <= max(1, left // 2) and going_on <= left // 2


class HeldHead(RuleBasedStateMachine):
    """A consumer holding its groups' heads, against GroupOrder (see the module docstring)."""

    @initialize(max_in_flight=st.integers(1, 12))
    def setup(self, max_in_flight):
        self.m = max_in_flight
        self.order = GroupOrder()
        self.offset = 0
        self.at: dict[bytes, list[int]] = {}  # group -> its offsets at the consumer, in order

    def _in_flight(self) -> int:
        return sum(map(len, self.at.values()))

    def _rest(self) -> int:
        """Messages behind an unsettled one of their group: user code cannot take them."""
        return sum(len(offsets) - 1 for offsets in self.at.values() if offsets)

    @rule(g=st.sampled_from(GROUPS), k=st.integers(1, 30))
    def send(self, g, k):
        for _ in range(k):
            self.order.offer(self.offset, f"m{self.offset}", g, 0)
            self.offset += 1

    @rule(data=st.data())
    def ask(self, data):
        room = self.m - self._in_flight()
        n = data.draw(st.integers(0, room), label="credit")
        held = [g for g, offsets in self.at.items() if offsets]
        # The claim: user code holds one group's head (and the rest of its run waits), other
        # groups wait, the consumer asks for all its room: it gets another group's message.
        claim = self.m >= 2 and len(held) == 1 and n == room and self.order.ready() > 0
        taken = self.order.take(n, 0, run=max(1, n), consumer="c")
        assert len(taken) <= n
        for offset, group in taken:
            self.at.setdefault(group, []).append(offset)
        if claim:
            assert room >= 1 and any(group != held[0] for _, group in taken), (room, taken)

    @rule(data=st.data())
    def ack_a_head(self, data):
        held = sorted(g for g, offsets in self.at.items() if offsets)
        if held:
            g = data.draw(st.sampled_from(held), label="group")
            assert self.order.settled(self.at[g].pop(0))

    @rule(n=st.integers(1, 6))
    def another_consumer_takes_and_acks(self, n):
        for offset, _ in self.order.take(n, 0, run=n, consumer="other"):
            assert self.order.settled(offset)

    @invariant()
    def never_more_than_max_in_flight(self):
        assert self._in_flight() <= self.m

    @invariant()
    def the_rest_of_runs_leaves_room_for_another_group(self):
        # With one head in user code, room for one more; none of it at max_in_flight 1.
        assert self._rest() <= max(0, self.m - 2)


HeldHead.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_a_consumer_holding_a_head_gets_other_groups = HeldHead.TestCase
