"""A markers backlog full of offsets the agent is not handed is applied to its end.

Every transaction a consumer commits leaves a commit marker in the markers partition:
an offset that carries no record. The agent reads each offset it was not handed
straight from the log before going on (agents/gap_reader.py). Its earlier way, seeking
Faust's consumer back to the gap, raced Faust's fetch loop: records of the batch already
on their way set Faust's read offset past the gap again, Faust then dropped the records
fetched anew as already seen, and the agent waited for them for good (a tracker
restarted on a backlog stopped applying that partition: no BEGIN, no TICK).
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from kmq.dev.devstack import TrackerProcess
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.placement import markers_partition
from tests.topic_reads import ids_on_the_broker
from tests.conftest import wait_for

SCHEDULED = 300


def test_a_backlog_of_transactional_markers_is_applied_to_its_end_after_a_restart(make_settings, queue,
                                                                                  artifacts):
    settings = make_settings(markers_partitions=1, dispatch="partition")
    m = markers_partition(queue, settings.markers_partitions)
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers,
                         "transactional.id": f"gaps-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(10)
    now_ms = int(time.time() * 1000)
    for i in range(SCHEDULED):  # one transaction each: a commit marker after every record
        producer.begin_transaction()
        marker = M.Schedule(queue, f"gap-{i}", now_ms, b"due", ())
        producer.produce(settings.markers_topic, marker_codec.encode([marker]), key=queue, partition=m)
        producer.commit_transaction(10)
    with TrackerProcess(settings, artifacts / "tracker-marker-gaps.log"):
        # Each SCHEDULE is published once the agent applied it and a TICK came after it.
        wait_for(lambda: len(ids_on_the_broker(settings, queue)) == SCHEDULED, 90,
                 what=f"all {SCHEDULED} delayed sends published")
    assert ids_on_the_broker(settings, queue) == {f"gap-{i}" for i in range(SCHEDULED)}


def _produce(settings, partition: int, markers: list) -> int:
    """Write each marker as a record of its own; the offset after the last."""
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    offsets = []
    for marker in markers:
        producer.produce(settings.markers_topic, marker_codec.encode([marker]), key=marker.queue,
                         partition=partition, on_delivery=lambda err, msg: offsets.append(msg.offset()))
    assert producer.flush(10) == 0
    return max(offsets) + 1


def test_a_tracker_resumed_above_its_tables_mark_applies_the_records_in_between(make_settings, queue,
                                                                                 artifacts):
    """Faust resumed a reassigned markers partition well above what its table held and never
    handed the records in between (a chaos run: a released message never came back). Here
    the tracker's group offset is moved past markers no tracker applied; the next tracker
    reads them from the log, from the table's mark on (kmq.protocol.gaps.Gaps.expect)."""
    settings = make_settings(markers_partitions=1, dispatch="partition")
    m = markers_partition(queue, settings.markers_partitions)
    now_ms = int(time.time() * 1000)
    with TrackerProcess(settings, artifacts / "tracker-resume-1.log"):
        _produce(settings, m, [M.Schedule(queue, "before-0", now_ms, b"due", ())])
        wait_for(lambda: ids_on_the_broker(settings, queue) == {"before-0"}, 60, what="the first delayed send")
    skipped = [M.Schedule(queue, f"skipped-{i}", now_ms, b"due", ()) for i in range(5)]
    end = _produce(settings, m, skipped)
    # As if a worker had applied them: the next one resumes after them. (Committed by a
    # member of the tracker's group: the embedded broker ignores an admin's offset change
    # for a group whose members committed.)
    c = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": settings.app_id,
                  "enable.auto.commit": False})
    try:
        c.subscribe([settings.markers_topic])
        wait_for(lambda: c.poll(0.2) is not None or c.assignment(), 60, what="the group's assignment")
        c.commit(offsets=[TopicPartition(settings.markers_topic, m, end)], asynchronous=False)
        assert c.committed([TopicPartition(settings.markers_topic, m)], timeout=10)[0].offset == end
    finally:
        c.close()
    with TrackerProcess(settings, artifacts / "tracker-resume-2.log"):
        wait_for(lambda: len(ids_on_the_broker(settings, queue)) == 6, 90, what="the skipped delayed sends")
    assert ids_on_the_broker(settings, queue) == {"before-0"} | {f"skipped-{i}" for i in range(5)}
