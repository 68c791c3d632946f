"""kmq.consumer.receipts against a model: a CREDIT never claims a delivery whose messages are
not held yet (the dispatcher would stop counting them: more than max_in_flight), and claims
every delivery that is (else the consumer would be offered too little, for ever)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kmq.consumer.receipts import Receipts


def test_a_header_read_is_not_claimed_until_its_messages_are_held():
    r = Receipts()
    r.header(7, 1)
    r.held(7, 1)
    r.header(7, 2)  # a reference: its range is still being read from the queue topic
    assert r.claim() == (7, 1) and r.read == (7, 2) and r.pending() == 1
    r.header(7, 3)  # copies, held first
    r.held(7, 3)
    assert r.claim() == (7, 1)
    r.held(7, 2)
    assert r.claim() == (7, 3) and r.pending() == 0


def test_a_new_epoch_is_claimed_like_any_delivery():
    r = Receipts()
    r.header(7, 4)
    r.held(7, 4)
    r.header(9, 1)  # a successor's first delivery
    assert r.claim() == (7, 4)
    r.held(9, 1)
    assert r.claim() == (9, 1)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=200))
def test_the_claim_is_the_last_delivery_before_the_first_one_not_held(steps):
    r = Receipts()
    read: list[tuple[int, int]] = []
    held: set[tuple[int, int]] = set()
    for new_header, pick in steps:
        unheld = [x for x in read if x not in held]
        if new_header or not unheld:
            x = (1 + len(read) // 20, len(read) % 20 + 1)  # epochs change now and then
            r.header(*x)
            read.append(x)
        else:
            x = unheld[pick % len(unheld)]
            r.held(*x)
            held.add(x)
        first_unheld = next((i for i, x in enumerate(read) if x not in held), len(read))
        want = read[first_unheld - 1] if first_unheld else (0, 0)
        assert r.claim() == want
        assert r.pending() == len(read) - len(held)


def test_a_header_older_than_the_last_of_its_epoch_does_not_set_the_claim_back():
    # Forged (anyone who may write the lanes may), or read late from the lane being left: a
    # receipt set back made the dispatcher count every later delivery against the consumer,
    # which then got nothing (an audit: 0 of 160 in 150 s).
    r = Receipts()
    r.header(7, 5)
    r.held(7, 5)
    r.header(7, 0)
    assert r.claim() == (7, 5)
    r.held(7, 0)
    assert r.claim() == (7, 5) and r.read == (7, 5)
    r.header(7, 6)
    r.held(7, 6)
    assert r.claim() == (7, 6)
    r.header(8, 1)  # a successor's epoch starts low: taken
    r.held(8, 1)
    assert r.claim() == (8, 1)
