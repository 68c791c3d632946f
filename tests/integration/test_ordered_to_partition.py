"""An ordered queue switched to partition mode while messages wait in the dispatcher for
their group's head: its consumer group reads them (2026-11-29: the handover was at the
dispatcher's read position, above them, so they were not delivered while partition mode
lasted: 1 of 10 in this test, delivered only once the queue was shared again)."""

from __future__ import annotations

from tests.conftest import wait_for


def test_messages_held_back_for_their_group_reach_the_partition_group(tracker, shared_settings, make_client, queue):
    client = make_client(shared_settings)
    client.configure_queue(queue, dispatch="shared", ordering="group", visibility_timeout_s=60)
    values = [b"%d" % i for i in range(10)]
    for v in values:
        client.send(queue, v, group="g")
    client.flush()
    first = client.consumer(queue, max_in_flight=10)
    head = wait_for(lambda: first.receive(0.5), 60, what="the group's head")
    assert head.value == b"0"
    # The rest of g waits for the head (a run of it may be on its way to this consumer).
    client.configure_queue(queue, dispatch="partition", ordering="none")
    head.ack()
    first.close()  # gives back what it held unhanded: the tracker puts it back on the queue
    seen: set[bytes] = set()
    with client.consumer(queue) as group:
        def all_nine():
            m = group.receive(0.5)
            if m is not None:
                seen.add(m.value)
                m.ack()
            return seen >= set(values[1:])
        wait_for(all_nine, 60, what=f"messages 1-9 in partition mode (got {sorted(seen)})")
        assert group.mode == "partition"
