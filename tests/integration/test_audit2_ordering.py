"""docs/ordering.md read as a user (a second audit), end to end on the embedded broker with
a real tracker: what the unit tests (tests/unit/test_audit2_ordering.py) cannot reach."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.integration.views import tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")


def test_a_message_waiting_for_its_group_is_delivered_after_the_queue_goes_unordered(
        shared_settings, make_client, queue, tracker):
    # Given an ordered queue whose group g has its head in hand and its next message read and
    # waiting for it (held back by the dispatcher, past its read cursor)
    client = make_client(shared_settings)
    client.configure_queue(queue, ordering="group", dispatch="shared")
    tracker_sees(tracker, queue, ordering="group", dispatch="shared")
    client.send(queue, b"head", group="g")
    client.flush()
    with client.consumer(queue, max_in_flight=1, visibility_timeout_s=30) as a, \
            client.consumer(queue, max_in_flight=1, visibility_timeout_s=30) as b:
        head, holder, other = wait_for(lambda: next(((m, c, d) for c, d in ((a, b), (b, a))
                                                     if (m := c.receive(0.1))), None),
                                       30, interval_s=0, what="the head")
        client.send(queue, b"next", group="g")
        client.send(queue, b"other", group="h")  # read after "next": once it is out, "next" waits
        client.flush()
        got = wait_for(lambda: other.receive(0.2), 30, interval_s=0, what="group h's message")
        assert (head.value, got.value) == (b"head", b"other")
        # When the queue's ordering is set back to its default, and the head is acked
        client.configure_queue(queue, ordering=None)
        tracker_sees(tracker, queue, ordering="none")
        head.ack()
        # Then the message that waited is delivered (it was lost: read past, never handed out)
        waited = wait_for(lambda: holder.receive(0.2), 30, interval_s=0,
                          what="the message that waited for its group")
        assert waited.value == b"next"
        waited.ack()
        got.ack()
