"""A queue's settings record is written whole (read, change, write) by clients and by the
tracker (purge points, handovers): a change made just before the tracker's write must stay
(docs/shared-queues.md, "Changing the mode at run time")."""

from __future__ import annotations

import pytest

import kmq
from tests.integration.views import tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")


@pytest.fixture
def client(shared_settings):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def test_a_setting_changed_right_before_a_purge_stays(client, queue, tracker):
    """The tracker records a purge point by writing the queue's whole configuration: it must
    build on the change written just before the purge (it wrote it away: max_deliveries back
    to the default, in 3 of 3 tries)."""
    client.send(queue, b"x")
    client.flush()
    client.configure_queue(queue, max_deliveries=2)
    point = client.purge(queue)
    assert point and client.queue_config(queue).purged_before == point
    assert client.queue_config(queue).max_deliveries == 2
    tracker_sees(tracker, queue, max_deliveries=2)


def test_a_setting_changed_right_after_a_switch_to_partition_stays(client, queue, tracker):
    """A change right after a switch to partition mode waits for the tracker's handover and
    builds on it (before, the handover, written from the switch's record, took the change
    away: max_deliveries back to the default in 2 of 3 tries, 3 of 3 without the wait)."""
    client.configure_queue(queue, dispatch="partition")
    client.configure_queue(queue, max_deliveries=4)
    tracker_sees(tracker, queue, max_deliveries=4, dispatch="partition")
    cfg = client.queue_config(queue)
    assert (cfg.max_deliveries, cfg.handover_pending) == (4, False)
