"""How an ordered queue's records go out (agents.dispatch.ordered, agents.dispatch.lanes): each run of
a group a delivery of its own, every record carrying its run's id, always as copies."""

from __future__ import annotations

from agents.dispatch.lanes import delivery_of
from agents.dispatch.ordered import OrderedQueues
from kmq.protocol import deliveries as D
from kmq.protocol import envelope as V
from kmq.protocol.dispatch import ConsumerSlot
from kmq.protocol.lookahead import Lookahead

KEY = (0, "q", 0)


class Rec:
    """A queue record as confluent-kafka gives it."""

    def __init__(self, offset: int, group: bytes) -> None:
        self._o, self._h = offset, [(V.ID, f"m{offset}".encode()), (V.GROUP, group)]

    def offset(self):
        return self._o

    def headers(self):
        return self._h

    def key(self):
        return b"q"

    def value(self):
        return b"x" * 100

    def timestamp(self):
        return (1, 1000)

    def __len__(self):
        return 100


def fed(groups: list[bytes]) -> tuple[OrderedQueues, list[Rec]]:
    oq = OrderedQueues()
    recs = [Rec(o, g) for o, g in enumerate(groups)]
    oq.feed(KEY, recs, 300_000, 0)
    return oq, recs


def run_ids(part: list) -> set[bytes]:
    return {dict(r.headers())[V.RUN] for r in part}


def test_runs_are_deliveries_of_their_own_and_singles_go_together():
    oq, _ = fed([b"a", b"b", b"a", b"c", b"a"])
    parts = oq.take_parts(KEY, 10, 0, run=10, consumer="c1")
    assert [[r.offset() for r in part] for part in parts] == [[0, 2, 4], [1, 3]]
    assert run_ids(parts[0]) == {b"0"}                       # a's run: its first offset
    assert [dict(r.headers())[V.RUN] for r in parts[1]] == [b"1", b"3"]


def test_a_run_goes_on_at_its_consumer_with_the_same_id_and_nowhere_else():
    oq, recs = fed([b"a", b"a", b"a", b"a"])
    [first] = oq.take_parts(KEY, 3, 0, run=3, consumer="c1")  # the last of a credit: another group's
    assert [r.offset() for r in first] == [0, 1]
    assert oq.take_parts(KEY, 3, 0, run=3, consumer="c2") == []  # a is at c1
    [more] = oq.take_parts(KEY, 3, 0, run=3, consumer="c1")
    assert [r.offset() for r in more] == [2, 3] and run_ids(first) == run_ids(more) == {b"0"}


def test_one_more_of_a_run_going_on_is_a_delivery_of_its_own():
    # It waits at the consumer while user code holds the run's head: together with other
    # groups' single records it held them up (kmq.consumer.gated_receive hands a delivery's
    # records in order), and b's head waited as long as a's did.
    oq, _ = fed([b"a", b"a", b"a"])
    [first] = oq.take_parts(KEY, 3, 0, run=3, consumer="c1")
    oq.feed(KEY, [Rec(3, b"b")], 300_000, 0)
    parts = oq.take_parts(KEY, 3, 0, run=3, consumer="c1")
    assert [[r.offset() for r in part] for part in parts] == [[2], [3]]
    assert run_ids(parts[0]) == run_ids(first) == {b"0"} and run_ids(parts[1]) == {b"3"}


def test_an_ordered_queues_records_always_go_out_as_copies():
    oq, recs = fed([b"a"] * 8)
    ahead = Lookahead()
    ahead.plan([0])
    ahead.add(recs, {b"q"})  # the queue dominates what was read: an unordered queue's would go by reference
    [part] = oq.take_parts(KEY, 9, 0, run=9, consumer="c1")  # the last of the credit: another group's
    slot = ConsumerSlot("c1", 0, 30_000)
    assert delivery_of(list(recs), "q", 0, 1, slot, 1, ahead).delivery.kind == D.REFERENCE
    batch = delivery_of(part, "q", 0, 1, slot, 1, ahead, copy=True)
    assert batch.delivery.kind == D.COPY and len(batch.records) == 8
    assert all(dict(r.headers())[V.RUN] == b"0" for r in batch.records)


def test_a_rounds_deliveries_are_in_offset_order_across_consumers():
    from kmq.protocol.dispatch import Roster, Want
    from kmq.protocol.markers import Credit
    for turn in (0, 1):  # whichever consumer is served first
        oq = OrderedQueues()
        roster = Roster(1)
        roster.credit(Credit("q", "c1", 0, 1, 0, 3, 30_000, 30_000), 0)  # room for three
        roster.credit(Credit("q", "c2", 0, 1, 0, 3, 30_000, 30_000), 0)
        # c1 takes a's first record, c2 b's; then b's next (2) and a's next (3) are read.
        # (A run going on never takes the last of a credit: another group's first may.)
        roster._turn = 0
        oq.hand_out(KEY, Want("q", 0, 6, [Rec(0, b"a")]), roster, 300_000, 0)
        roster._turn = 1
        oq.hand_out(KEY, Want("q", 1, 5, [Rec(1, b"b")]), roster, 300_000, 0)
        roster._turn = turn
        runs = oq.hand_out(KEY, Want("q", 2, 4, [Rec(2, b"b"), Rec(3, b"a")]), roster, 300_000, 0)
        got = [(slot.consumer_id, [r.offset() for r in part]) for slot, _, part in runs]
        assert sorted(got, key=lambda x: x[1]) == got and ("c1", [3]) in got and ("c2", [2]) in got


def test_a_consumer_with_nothing_to_take_does_not_end_the_round_for_the_next():
    # c1 has the last of its credit left, kept for another group's head, and none waits:
    # it takes nothing; c2's run going on still gets its next records in the same round.
    from kmq.protocol.dispatch import Roster, Want
    from kmq.protocol.markers import Credit
    oq, roster = OrderedQueues(), Roster(1)
    roster.credit(Credit("q", "c1", 0, 1, 0, 3, 30_000, 30_000), 0)
    roster.credit(Credit("q", "c2", 0, 1, 0, 4, 30_000, 30_000), 0)
    roster._turn = 0
    oq.hand_out(KEY, Want("q", 0, 3, [Rec(o, b"a") for o in range(3)]), roster, 300_000, 0)
    roster._turn = 1
    oq.hand_out(KEY, Want("q", 3, 5, [Rec(o, b"b") for o in range(3, 8)]), roster, 300_000, 0)
    roster.credit(Credit("q", "c2", 0, 1, 1, 4, 30_000, 30_000), 0)  # b3..b5 received, room for 4
    roster._turn = 0  # c1 first
    runs = oq.hand_out(KEY, Want("q", 8, 5, []), roster, 300_000, 0)
    assert [(slot.consumer_id, [r.offset() for r in part]) for slot, _, part in runs] == [("c2", [6, 7])]
