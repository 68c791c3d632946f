"""An ordered queue's consumers (docs/ordering.md, "What a consumer of an ordered queue
sees"), on the embedded broker with a real tracker: a hung handler holds its group no
longer than its processing time; a consumer whose view of the settings is behind still
keeps the order; a consumer holding a hot group's head still gets other groups."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.integration.test_ordered_queues import client, ordered, send_groups  # noqa: F401 - fixtures
from tests.integration.views import tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")


def test_a_hung_handler_holds_its_group_no_longer_than_its_processing_time(client, ordered):
    # docs/ordering.md: the rest of a head's run times out with it. The hung consumer's
    # keepalive extended that rest for ever, so no copy of the group went anywhere else.
    # Then it asked for work all the same, and was handed the group's copies (the head's
    # first) until each was dead-lettered at max_deliveries 3 (4 of 16 runs at once):
    # user code away asks for nothing (docs/shared-queues.md).
    sent = send_groups(client, ordered, ["g"], 3)
    with client.consumer(ordered, visibility_timeout_s=2, max_processing_s=2) as hung:
        head = wait_for(lambda: hung.receive(0.2), 30, what="the head")
        assert head.id == sent["g"][0]  # ... and its user code never returns
        with client.consumer(ordered, visibility_timeout_s=30) as other:
            for want in sent["g"]:
                m = wait_for(lambda: other.receive(0.2), 60, what=f"{want} at the other consumer")
                assert m.id == want
                m.ack()


def test_a_hung_heads_run_comes_back_uncounted_and_is_not_dead_lettered_unhandled(client, ordered, tracker):
    # An audit: with max_deliveries 1, user code hung on a0 past its processing time, and
    # a1..a3, read ahead and never handed to user code, lapsed with it and were dead-lettered
    # as max-deliveries. Now a consumer found away gives its read-ahead back uncounted.
    client.configure_queue(ordered, max_deliveries=1)
    tracker_sees(tracker, ordered, max_deliveries=1)
    sent = send_groups(client, ordered, ["a"], 4)["a"]
    with client.consumer(ordered, visibility_timeout_s=2, max_processing_s=2) as hung:
        head = wait_for(lambda: hung.receive(0.2), 30, what="the head")
        assert head.id == sent[0]  # ... and its user code never returns
        wait_for(lambda: hung.stats.get("returned-away", 0) >= 1, 30, what="the read-ahead given back")
        with client.consumer(ordered, visibility_timeout_s=30) as other:
            for want in sent[1:]:
                m = wait_for(lambda: other.receive(0.2), 60, what=f"{want} at the other consumer")
                assert (m.id, m.delivery_count) == (want, 1)
                m.ack()
    # The head reached user code once, its one delivery: dead-lettered, alone.
    letters = wait_for(lambda: client.dead_letters(ordered), 30, what="the head's dead letter")
    assert [(d.id, d.reason) for d in letters] == [(sent[0], "max-deliveries")]


def test_a_consumer_that_has_not_read_the_ordering_change_yet_keeps_the_order(client, queue, tracker):
    # docs/ordering.md: every message sent after configure_queue returned is ordered. A
    # consumer that had not read the change (another Client's, a moment behind) handed the
    # rest of a run past a released head: the dispatcher's runs came, ungated.
    client.configure_queue(queue, dispatch="shared")
    with client.consumer(queue, visibility_timeout_s=30) as c:
        c._follow_config = lambda: None  # its view of the settings stays behind, for good
        assert c.receive(0.1) is None
        client.configure_queue(queue, ordering="group")
        tracker_sees(tracker, queue, ordering="group")
        sent = send_groups(client, queue, ["d"], 5)["d"]
        head = wait_for(lambda: c.receive(0.2), 30, what="the head")
        assert head.id == sent[0]
        head.release(delay_s=1)
        seen = []
        while len(seen) < 5:
            m = wait_for(lambda: c.receive(0.2), 30, what=f"the next after {seen}")
            seen.append(m.id)
            m.ack()
        assert seen == sent


def test_a_consumer_holding_a_hot_groups_head_still_gets_other_groups(client, ordered):
    # README: different groups run in parallel on every consumer. A run of the hot group
    # filled the read-ahead behind the head in user code, the consumer asked for nothing
    # more, and b's message waited as long as the head was held.
    hot = [client.send(ordered, f"a-{i}".encode(), group="a") for i in range(40)]
    other = client.send(ordered, b"b-0", group="b")
    client.flush()
    with client.consumer(ordered, visibility_timeout_s=30) as c:
        head = wait_for(lambda: c.receive(0.2), 30, what="the hot group's head")
        assert head.id == hot[0]
        m = wait_for(lambda: c.receive(0.2), 30, what="b's message while a's head is held")
        assert m.id == other
        m.ack()
        head.ack()
        acks_in_send_order(c, hot[1:])


def acks_in_send_order(c, ids: list[str]) -> None:
    """Receive ``ids`` one at a time, in this order, acking each."""
    for want in ids:
        got = wait_for(lambda: c.receive(0.2), 30, what=f"{want}")
        assert got.id == want
        got.ack()


@pytest.mark.parametrize("open_first", [True, False], ids=["opened-before-sends", "opened-after"])
def test_a_consumer_holding_a_hot_groups_head_gets_other_groups_at_a_small_max_in_flight(
        client, ordered, open_first):
    # docs/ordering.md (audit): at max_in_flight 10 the first CREDIT (10) went whole to a's
    # run, the rest of it waited behind the head in user code and filled max_in_flight, so
    # the consumer asked for nothing and b's message waited: a receive of 10 s got None.
    c = client.consumer(ordered, max_in_flight=10, visibility_timeout_s=30) if open_first else None
    if open_first:
        assert c.receive(0.2) is None  # it asked for work before the sends
    hot = [client.send(ordered, f"a-{i}".encode(), group="a") for i in range(20)]
    other = client.send(ordered, b"b-0", group="b")
    client.flush()
    c = c or client.consumer(ordered, max_in_flight=10, visibility_timeout_s=30)
    with c:
        head = wait_for(lambda: c.receive(0.2), 30, what="the hot group's head")
        assert head.id == hot[0]
        m = c.receive(timeout_s=10)  # one receive, as the audit did: None before the fix
        assert m is not None and m.id == other
        assert c.in_flight <= 10
        m.ack()
        head.ack()
        acks_in_send_order(c, hot[1:])
