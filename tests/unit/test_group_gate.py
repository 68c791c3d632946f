"""The group gate (kmq.consumer.group_gate, kmq.consumer.gated_receive): a consumer of an
ordered queue hands user code a group one message at a time, gives back the rest of a
run whose earlier message failed, and messages whose visibility is nearly out."""

from __future__ import annotations

import threading
import time

import pytest

from kmq.consumer import group_gate as G
from kmq.message import ACKED, HELD, RELEASED, REJECTED
from kmq.worker.chains import by_group
from tests.gate_harness import consumer, deliver, returned


# -- the pure rules ---------------------------------------------------------------------

@pytest.mark.parametrize("state, lapsed, hold, expected", [
    (HELD, False, False, G.PENDING), (ACKED, False, False, G.DONE), (RELEASED, False, False, G.FAILED),
    (REJECTED, False, False, G.DONE), (REJECTED, False, True, G.FAILED), (HELD, True, False, G.FAILED),
    (ACKED, True, False, G.FAILED)])
def test_what_became_of_an_earlier_message(state, lapsed, hold, expected):
    assert G.fate(state, lapsed, hold) == expected


def test_the_margin_is_a_second_or_a_tenth_of_the_visibility_at_most_half_of_it():
    assert G.margin_s(30) == 3.0 and G.margin_s(5) == 1.0 and G.margin_s(1) == 0.5


def test_remaining_visibility_runs_from_the_last_extend_and_ends_with_processing_time():
    assert G.remaining_s(110, extended_at=100, visibility_s=30) == 20
    assert G.remaining_s(110, extended_at=109, visibility_s=30, handed_at=0, max_processing_s=115) == 5


@pytest.mark.parametrize("previous, remaining, expected", [
    ([], 10, G.HAND), ([(G.DONE, True)], 10, G.HAND), ([(G.PENDING, True)], 10, G.WAIT),
    ([(G.FAILED, True)], 10, G.GIVE_BACK), ([(G.FAILED, False)], 10, G.HAND),
    ([(G.PENDING, False)], 0.5, G.GIVE_BACK), ([(G.FAILED, True), (G.PENDING, True)], 10, G.GIVE_BACK)])
def test_the_verdict(previous, remaining, expected):
    assert G.verdict(previous, remaining, margin=1.0) == expected


# -- receive ---------------------------------------------------------------------------

def test_a_run_reaches_user_code_one_message_at_a_time():
    c = consumer()
    deliver(c, ["a", "a", "a"])
    m0 = c.receive(0)
    assert c.receive(0) is None  # a0 is held: a1 waits
    m0.ack()
    m1 = c.receive(0)
    assert (m0.value, m1.value) == (b"0", b"1")


def test_a_receive_waits_for_the_earlier_message_until_it_is_settled_or_the_timeout():
    c = consumer()
    deliver(c, ["a", "a"])
    m0 = c.receive(0)
    t = time.monotonic()
    assert c.receive(0.1) is None and time.monotonic() - t >= 0.1
    got = []
    waiting = threading.Thread(target=lambda: got.append(c.receive(30)))
    waiting.start()
    m0.ack()
    waiting.join(30)
    assert got[0].value == b"1"


def test_messages_without_a_group_are_never_held_back_and_a_held_group_holds_the_front():
    c = consumer()
    deliver(c, [None, None, "a", "a", "b"])
    assert [c.receive(0).value for _ in range(3)] == [b"0", b"1", b"2"]
    assert c.receive(0) is None  # a's next is at the front: b behind it waits too


@pytest.mark.parametrize("fail", ["release", "release-later", "lapse", "reject-hold"])
def test_a_failed_message_gives_back_the_rest_of_its_run_uncounted(fail):
    c = consumer(dead_letter_head="hold" if fail == "reject-hold" else "continue")
    run = deliver(c, ["a", "a", "b", "a"])
    a0 = c.receive(0)
    if fail == "release":
        a0.release(0)
    elif fail == "release-later":
        a0.release(60)
    elif fail == "lapse":
        run.lapsed.add(a0[2])  # as the keepalive marks it
    else:
        a0.reject("bad")
    assert c.receive(0).value == b"2"  # b; a1 was given back on the way
    assert c.receive(0) is None  # a3 given back too: nothing left
    assert returned(c) == [(run, 1), (run, 3)] and c.stats["returned-unhandled"] == 2
    assert run.state[1] == run.state[3] == RELEASED


def test_a_rejected_message_lets_its_group_go_on_unless_the_queue_holds_it():
    c = consumer()
    deliver(c, ["a", "a"])
    c.receive(0).reject("bad")
    assert c.receive(0).value == b"1" and not returned(c)


def test_a_later_run_of_the_group_is_handed_out_normally():
    c = consumer()
    first = deliver(c, ["a", "a"])
    later = deliver(c, ["a"])
    c.receive(0).release(0)
    m = c.receive(0)
    assert returned(c) == [(first, 1)] and m[1] is later


def test_a_message_whose_visibility_is_nearly_out_is_given_back_with_the_rest_of_its_run():
    c = consumer(visibility_s=30)
    stale = deliver(c, ["a", "a", "b"])
    fresh = deliver(c, ["a"])
    stale.extended_at = time.monotonic() - 28  # 2 s left, the margin is 3
    assert c.receive(0)[1] is fresh  # a0, a1 and b0 all too late: given back on the way
    assert returned(c) == [(stale, 0), (stale, 1), (stale, 2)]


def test_an_unordered_queues_consumer_has_no_gate():
    c = consumer(ordering="none")
    assert c._gate is None
    deliver(c, ["a", "a"])
    assert c.receive(0) is not None and c.receive(0) is not None


def test_the_gate_follows_the_queues_ordering_setting():
    c = consumer(ordering="none")
    c._queue_config = consumer()._queue_config
    c._follow_ordering()
    assert c._gate is not None


# -- receive_batch ---------------------------------------------------------------------

def test_a_batch_holds_one_message_of_a_group_and_stops_at_a_held_one():
    c = consumer()
    deliver(c, ["a", "a", "b", "a"])
    batch = c.receive_batch(10, 0)
    assert [m.value for m in batch] == [b"0"]  # a1 waits for a0, and the front waits
    batch.ack()
    batch = c.receive_batch(10, 0)
    assert [m.value for m in batch] == [b"1", b"2"]  # a3 waits for a1
    deliver(c, [None, "c"])
    batch.ack()
    assert [m.value for m in c.receive_batch(10, 0)] == [b"3", b"14", b"15"]


def test_a_batch_gives_back_what_is_nearly_out_and_acks_around_it():
    c = consumer(visibility_s=30)
    deliver(c, ["a", "b"])
    first = c.receive_batch(10, 0)
    late = deliver(c, ["a", "c", "a"])
    first.ack()
    late.extended_at = time.monotonic() - 28
    assert len(c.receive_batch(10, 0)) == 0 and len(returned(c)) == 3


def test_a_batch_ack_skips_the_given_back_messages():
    c = consumer()
    run = deliver(c, ["a", "b", "a", "b"])
    c.receive(0).release(0)  # a0: a2 will be given back
    batch = c.receive_batch(10, 0)
    assert [m.value for m in batch] == [b"1"]  # a2 given back; b3 waits for b1
    assert batch.ack() == 1
    batch = c.receive_batch(10, 0)
    assert [m.value for m in batch] == [b"3"] and batch.ack() == 1
    assert bytes(run.state) == bytes([RELEASED, ACKED, RELEASED, ACKED])


def test_groups_of_settled_runs_are_forgotten():
    c = consumer()
    for i in range(3000):
        deliver(c, [f"g{i}"])
        m = c.receive(0)
        m.ack()
        c._held.pop(m[1].ref)  # what the flusher does once a range is all settled
    assert len(c._gate) < 2100


# -- what a worker uses ------------------------------------------------------------------

def test_a_worker_chains_a_batch_by_group_in_order():
    msgs = [("a", 0), (None, 1), ("b", 2), ("a", 3), (None, 4), ("b", 5), ("a", 6)]
    assert by_group(msgs, lambda m: m[0]) == [
        [("a", 0), ("a", 3), ("a", 6)], [(None, 1)], [("b", 2), ("b", 5)], [(None, 4)]]


def test_admit_after_lets_the_next_go_only_after_an_earlier_done_one():
    c = consumer(visibility_s=30)
    run = deliver(c, ["a", "a", "a"])
    c._ready.remove(run)
    a0, a1, a2 = run.hand_out(3)  # as a runner holding a run would have them
    assert not c.admit_after(a0, a1)  # a0 still held: a1 goes back
    assert not c.admit_after(a1, a2)  # a1 given back: so is a2
    assert returned(c) == [(run, 1), (run, 2)]
    a0.ack()
    copies = deliver(c, ["a", "a"])
    c._ready.remove(copies)
    b0, b1 = copies.hand_out(2)  # the copies' run
    b0.ack()
    assert c.admit_after(b0, b1)
    b1.ack()
    late = deliver(c, ["a", "a"])
    c._ready.remove(late)
    c0, c1 = late.hand_out(2)
    c0.ack()
    late.extended_at = time.monotonic() - 28  # 2 s left, the margin is 3
    assert not c.admit_after(c0, c1) and c1.settled == "released" and len(returned(c)) == 3


# -- looking past a waiting run ----------------------------------------------------------

def test_other_groups_deliveries_go_while_a_groups_run_waits_for_its_head():
    c = consumer()
    deliver(c, ["a", "a", "a"])           # a's run: a0 goes, a1 waits for it
    deliver(c, ["b", "c"])                # singles of other groups, delivered after
    a0 = c.receive(0)
    assert a0.value == b"0"
    assert [c.receive(0).value, c.receive(0).value] == [b"13", b"14"]  # b, c do not wait for a0
    assert c.receive(0) is None           # a1 still waits
    a0.ack()
    assert c.receive(0).value == b"1"


def test_a_mixed_delivery_that_waits_holds_back_what_comes_after_it():
    c = consumer()
    deliver(c, ["a", "a", "b"])           # not one group's run: b must not overtake ...
    deliver(c, ["b"])                     # ... nor this later b go before it
    a0 = c.receive(0)
    assert c.receive(0) is None
    a0.ack()
    assert [c.receive(0).value, c.receive(0).value] == [b"1", b"2"]
    assert c.receive(0) is None           # the later b waits for the earlier one


def test_a_receive_that_waits_reads_what_arrives_meanwhile():
    c = consumer()
    deliver(c, ["a", "a"])
    a0 = c.receive(0)
    fetched = []
    c._fetch_waiting = lambda now: fetched.append(deliver(c, ["b"])) if not fetched else None
    assert c.receive(0.2).value == b"12"  # held while a1 waited, then handed out
    assert len(fetched) == 1 and a0.settled is None


def test_a_run_that_goes_on_in_a_later_delivery_is_given_back_whole():
    c = consumer()
    first = deliver(c, ["a", "a"], run=b"7")
    more = deliver(c, ["a", "a"], run=b"7")   # the dispatcher handed more of the run
    deliver(c, ["a"], run=b"24")              # a run after the copies came back
    c.receive(0).release(0)
    assert c.receive(0).value == b"24"        # the rest of run 7 went back first
    assert returned(c) == [(first, 1), (more, 0), (more, 1)]


def test_the_lane_is_read_while_a_run_is_handled_not_only_when_nothing_is_ready():
    c = consumer()
    deliver(c, ["a", "a", "a"])
    reads = []
    c._fetch_waiting = lambda now: reads.append(now)
    c._lane_read_at = time.monotonic() - 1.0   # last read long ago
    a0 = c.receive(0)
    assert len(reads) == 1                     # read although a run was ready
    c._lane_read_at = time.monotonic()         # just read
    a0.ack()
    c.receive(0)
    assert len(reads) == 1


def test_groups_whose_bytes_are_not_utf8_are_told_apart():
    # b"\xff" and b"\xfe" both read as "\ufffd" in Message.group: the gate goes by the bytes
    c = consumer()
    deliver(c, [b"\xff"])
    deliver(c, [b"\xfe"])
    first = c.receive(0)
    second = c.receive(0)
    assert second is not None and (first.group_bytes, second.group_bytes) == (b"\xff", b"\xfe")
    assert first.group == second.group == "\ufffd"  # what user code is shown, decoded



def test_a_groups_runs_given_back_are_trimmed_once_many_and_their_ranges_gone():
    gate = G.GroupGate()
    ranges = [object() for _ in range(G.TRIM_RETURNED_AT + 10)]
    for i, r in enumerate(ranges):
        gate.given_back(b"hot", r, 0, i)
    kept = set(ranges[-3:])
    gate.prune(lambda r: r in kept)
    assert gate.decide(b"hot", len(ranges) - 1, 10.0, 1.0, lambda h, rel: G.DONE) == G.GIVE_BACK
    assert gate.decide(b"hot", 0, 10.0, 1.0, lambda h, rel: G.DONE) == G.HAND  # its range is gone
