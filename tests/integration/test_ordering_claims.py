"""Claims of docs/ordering.md checked end to end, on the embedded broker with a real tracker,
where the existing tests (test_ordered_queues.py) do not reach."""

from __future__ import annotations

import json
import urllib.request

import pytest

import kmq
from kmq.protocol.placement import partition_for_key, queue_partitions
from tests.conftest import wait_for
from tests.integration.views import tracker_sees

pytestmark = pytest.mark.usefixtures("tracker")


@pytest.fixture
def client(shared_settings):
    with kmq.Client(settings=shared_settings) as c:
        yield c


def deduplicated(tracker) -> int:
    """The dispatcher's count of dropped duplicates since the tracker started."""
    with urllib.request.urlopen(tracker.url + "/kmq/stats", timeout=10) as r:
        return json.loads(r.read())["dispatcher"]["deduplicated"]


def test_a_delayed_send_is_deduplicated_against_a_direct_one_on_a_spread_queue(client, queue, tracker):
    # README: "(on a queue with spread > 1, only if sent with the same group, or none)";
    # docs/ordering.md: a delayed send "is deduplicated when it comes due".
    client.configure_queue(queue, spread=4, dispatch="shared")
    tracker_sees(tracker, queue, spread=4, dispatch="shared")
    spread = len(queue_partitions(queue, client.partition_count(client.settings.queue_topic), 4))
    assert spread > 1
    # A dedup id whose partition is not the queue's first one.
    dedup_id = next(f"txn-{i}" for i in range(100) if partition_for_key(f"txn-{i}".encode(), spread) != 0)
    before = deduplicated(tracker)
    first = client.send(queue, b"now", dedup_id=dedup_id)
    client.flush()
    again = client.send(queue, b"later", dedup_id=dedup_id, delay_s=1)
    client.flush()
    assert again == first
    got = []
    with client.consumer(queue, max_in_flight=10, visibility_timeout_s=30) as c:
        def settled():
            for m in c.receive_batch(10, timeout_s=0.2):
                got.append(m.value)
                m.ack()
            return got.count(b"now") + got.count(b"later") >= 2 or (
                got and deduplicated(tracker) > before)
        wait_for(settled, 60, interval_s=0, what="the delayed copy dropped or delivered")
    assert got == [b"now"]


@pytest.fixture
def ordered(client, queue, tracker):
    client.configure_queue(queue, ordering="group", dispatch="shared")
    tracker_sees(tracker, queue, ordering="group", dispatch="shared")
    return queue


def receive_values(consumer, n, what):
    got = []

    def step():
        for m in consumer.receive_batch(n, timeout_s=0.2):
            got.append(m.value)
            m.ack()
        return len(got) >= n
    wait_for(step, 60, interval_s=0, what=what)
    return got


def test_a_dedup_id_sent_again_after_a_purge_inside_its_window_is_still_a_duplicate(client, ordered):
    # docs/ordering.md, 7. Purge: dedup state is kept for what the dispatcher read before
    # the purge. (A first purged unread is never seen: its repeat is delivered, as the doc
    # now says; the dispatcher reads a queue only while it has consumers.)
    first = client.send(ordered, b"first", group="g", dedup_id="txn-1")
    client.flush()
    with client.consumer(ordered, max_in_flight=5, visibility_timeout_s=30) as c:
        assert receive_values(c, 1, "the first send") == [b"first"]
    client.purge(ordered)
    again = client.send(ordered, b"again", group="g", dedup_id="txn-1")
    client.send(ordered, b"after", group="g")  # same group: it can only come after "again"
    client.flush()
    assert again == first
    with client.consumer(ordered, max_in_flight=5, visibility_timeout_s=30) as c:
        assert receive_values(c, 1, "the message after") == [b"after"]


def test_a_dropped_duplicate_is_not_counted_in_the_queues_depth(client, queue, tracker):
    # Depth is what nobody fetched yet. A dropped duplicate at the queue's tail was counted
    # until a later message was handed out: no marker moved the queue's position past it.
    from tests.integration.views import queue_detail

    client.send(queue, b"first", dedup_id="order-17")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=30) as c:
        got = []
        wait_for(lambda: got.extend(c.receive_batch(10, 0.5)) or got, 30, what="the first send")
        before = deduplicated(tracker)
        client.send(queue, b"again", dedup_id="order-17")
        client.flush()
        wait_for(lambda: deduplicated(tracker) > before, 30, what="the duplicate dropped")
        assert [m.value for m in got] == [b"first"] and c.receive_batch(10, 0.5) == []
        for m in got:
            m.ack()
        c.flush()
    wait_for(lambda: (lambda d: d is not None and d["depth"] == 0 and d["in_flight"] == 0)(
        queue_detail(tracker, queue)), 30, what="depth 0 once the duplicate is dropped")
