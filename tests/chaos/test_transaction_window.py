"""A transactional consumer killed while its marker transaction is open.

Its open transaction holds back every read_committed reader of its markers
partition, the tracker included: no marker of any queue on that partition is
seen until the transaction ends. The broker ends it when the transaction times
out (Apache Kafka; Tansu never does) or when a producer with the same
transactional id starts: the consumer's successor, given a stable
``transactional_id``, unblocks the partition at once.
"""

from __future__ import annotations

import time
from pathlib import Path

from kmq.protocol.placement import markers_partition
from tests.conftest import kill_when_ready, partition_mode, wait_for

HELPER = Path(__file__).parent / "helpers" / "open_transaction_then_die.py"


def neighbour(queue: str, partitions: int) -> str:
    """Another queue on the same markers partition."""
    return next(q for q in (f"{queue}-n{i}" for i in range(1000))
                if markers_partition(q, partitions) == markers_partition(queue, partitions))


def test_a_successor_with_the_same_transactional_id_unblocks_the_tracker_at_once(
        make_client, shared_settings, tracker, queue):
    s = shared_settings
    client = make_client(s)
    partition_mode(client, queue)  # transactional STARTs: a group consumer's
    ids = client.send_batch(queue, [b"m%d" % i for i in range(10)])
    client.flush()
    tid = f"{queue}-instance-0"
    kill_when_ready(HELPER, [queue, "10", tid], s)
    # The successor (same instance id) fences the dead one's transaction when it starts.
    with client.consumer(queue, visibility_timeout_s=30, transactional=True, transactional_id=tid) as c:
        other = neighbour(queue, s.markers_partitions)
        sent = client.send(other, b"on the same markers partition")
        client.flush()
        with client.consumer(other, visibility_timeout_s=1.5) as o:
            first = wait_for(lambda: o.receive(0.2), 30, what="the neighbour's message")
            started = time.monotonic()
            again = wait_for(lambda: o.receive(0.2), 30, what="its redelivery (the tracker reads on)")
            assert again.id == first.id == sent and again.delivery_count == 2
            assert time.monotonic() - started < 10
            again.ack()
        # And the dead consumer's messages are all still delivered.
        seen = set()
        def all_back():
            batch = c.receive_batch(20, 0.2)
            seen.update(m.id for m in batch)
            batch.ack()
            return seen >= set(ids)
        wait_for(all_back, 60, what="the dead consumer's messages")
