"""bench.chaos_unseen: a START no process logged receiving counts as held by a consumer
killed while it had that partition, and only then (bench.chaos_ledger rule 2).

The shape is the CI failure of 2026-11-28: a consumer assigned partition 2 STARTed 4
records and was killed before logging them; its successor acked the re-fetched copies,
then received the tracker's copies of them."""

import json

from hypothesis import given, strategies as st

from bench.chaos_ledger import account, parse_log
from bench.chaos_unseen import Ended, held_by_the_dead, unseen_starts

Q = "q0"


def start(off, ts_s, offsets, qp=2):
    return {"p": 2, "off": off, "ts": int(ts_s * 1000), "k": "Start", "q": Q, "qp": qp,
            "s": min(offsets), "e": max(offsets) + 1, "o": list(offsets), "timeout_ms": 4000}


def killed(at_s, assigned=((861.627, (2,)),)):
    return Ended(Q, at_s, tuple(assigned))


def test_a_start_nobody_logged_is_unseen_and_one_answered_is_not():
    dump = [start(453, 861.626, [1448, 1449]), start(471, 867.067, [1448])]
    received = {(Q, 2, 1448): [867.0675]}  # the successor's receipt answers the second START
    assert sorted(unseen_starts(dump, received)) == [((Q, 2, 1448), 861.626), ((Q, 2, 1449), 861.626)]


def test_a_receipt_logged_just_before_the_brokers_timestamp_answers_its_start():
    assert unseen_starts([start(1, 10.5, [7])], {(Q, 2, 7): [10.2]}) == []


def test_the_unseen_copy_counts_as_held_by_a_consumer_killed_while_it_had_the_partition():
    unseen = [((Q, 2, 1448), 861.626)]
    id_of = {(Q, 2, 1448): "m1"}
    assert held_by_the_dead(unseen, id_of, [killed(861.750)]) == {"m1"}
    # Not: killed well before the START, or never assigned that partition, or another queue's.
    assert held_by_the_dead(unseen, id_of, [killed(850.0)]) == set()
    assert held_by_the_dead(unseen, id_of, [killed(861.750, [(861.627, (0, 1))])]) == set()
    assert held_by_the_dead(unseen, id_of, [Ended("other", 861.75, ((861.627, (2,)),))]) == set()
    # Its partition taken away before the START: not the one that held it.
    assert held_by_the_dead(unseen, id_of, [killed(870.0, [(800.0, (2,)), (855.0, ())])]) == set()
    # A copy nobody ever received names no id.
    assert held_by_the_dead(unseen, {}, [killed(861.750)]) == set()


def test_the_ledger_excuses_a_delivery_after_an_ack_when_a_killed_consumer_held_the_copy_unseen():
    succ = parse_log("succ", [json.dumps(e) for e in (
        {"e": "assigned", "p": [2], "g": [2], "t": 866.0},
        {"e": "recv", "m": [["m1", 2, 2, 1448]], "t": 867.0675},
        {"e": "acking", "ids": ["m1"], "t": 867.068},
        {"e": "settled", "acked": ["m1"], "t": 867.071},
        {"e": "recv", "m": [["m1", 3, 2, 1471]], "t": 870.358})])
    assert succ.assigned == [(866.0, (2,))] and succ.copies[0] == (867.0675, "m1", 2, 1448)
    strict = account(["m1"], [succ], {})
    assert strict.unexplained_after_ack == ["m1"]
    excused = account(["m1"], [succ], {}, held_unseen={"m1"})
    assert excused.violations == [] and excused.duplicates_after_kill == 1
    assert (strict.held_unseen, excused.held_unseen) == (0, 1)  # reported, so a run shows how often


@given(st.lists(st.floats(0, 100), min_size=1, max_size=8), st.lists(st.floats(0, 100), max_size=8))
def test_each_receipt_answers_at_most_one_start_and_unseen_ones_are_starts(starts_s, receipts_s):
    dump = [start(i, t, [5]) for i, t in enumerate(starts_s)]
    unseen = unseen_starts(dump, {(Q, 2, 5): receipts_s})
    assert len(unseen) >= len(starts_s) - len(receipts_s)
    assert all(any(abs(ts - int(t * 1000) / 1000) < 1e-9 for t in starts_s) for _, ts in unseen)
    if not receipts_s:
        assert len(unseen) == len(starts_s)
