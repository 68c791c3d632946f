"""An ordered queue switched to partition mode while records wait in the dispatcher for
their group's head (agents.dispatch.handover, ``give_back_waiting``; docs/ordering.md).

Before, they stayed in the dispatcher while partition mode lasted: the group began at the
handover, above them (measured: 9 of 10 never delivered in partition mode), and a
dispatcher that began anew meanwhile forgot them. Now they go to the tracker at the
handover, given back uncounted, and it writes them again where the group reads."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.integration.test_ordered_queues import client, ordered, send_groups  # noqa: F401 - fixtures
from tests.integration.views import dispatcher_stats

pytestmark = pytest.mark.usefixtures("tracker")


def test_records_waiting_for_their_group_reach_the_group_after_a_switch_to_partition_mode(client, ordered, tracker):
    given_back = dispatcher_stats(tracker)["given-back"]
    sent = send_groups(client, ordered, ["g"], 10)["g"]
    with client.consumer(ordered, max_in_flight=1, visibility_timeout_s=60) as c:
        head = wait_for(lambda: c.receive(0.2), 30, what="the head")  # the other 9 wait for it
        assert head.id == sent[0]
        client.configure_queue(ordered, dispatch="partition", ordering="none")
        head.ack()
    got: dict[str, int] = {}
    with client.consumer(ordered, max_in_flight=10) as group:
        def step() -> bool:
            for m in group.receive_batch(10, timeout_s=0.2):
                got[m.id] = m.delivery_count
                m.ack()
            return len(got) >= 9
        wait_for(step, 60, interval_s=0, what="the nine that waited, in partition mode")
        assert group.mode == "partition"
    assert sorted(got) == sorted(sent[1:])
    assert set(got.values()) == {1}  # given back uncounted: none reached user code before
    assert dispatcher_stats(tracker)["given-back"] - given_back == 9
