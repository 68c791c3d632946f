"""When a Spark task's read loop stops (kmq.spark.fetch.range_records), without a broker.

The fake stands in for one assigned confluent-kafka consumer: a partition log in memory,
``consume(n)`` hands out up to ``n`` real ``Message`` objects and counts its calls, and the
end of the log is one end-of-partition event, as with ``enable.partition.eof``.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Message

from kmq.spark.fetch import range_records
from kmq.spark.offsets import DataLossError, OffsetRange

TOPIC = "t"


class AssignedConsumer:
    """The consumer seam of range_records, assigned at ``start`` of a log holding ``offsets``."""

    def __init__(self, offsets: list[int], start: int, end: int | None = None) -> None:
        self.log = [Message(topic=TOPIC, partition=0, offset=o, value=b"%d" % o)
                    for o in offsets if o >= start]
        self.end = offsets[-1] + 1 if end is None else end  # the high watermark
        self.consume_calls = 0
        self.eof_sent = False

    def consume(self, n: int, timeout: float) -> list[Message]:
        self.consume_calls += 1
        out, self.log = self.log[:n], self.log[n:]
        if len(out) < n and not self.log and not self.eof_sent:
            self.eof_sent = True
            out.append(Message(topic=TOPIC, partition=0, offset=self.end,
                               error=KafkaError(KafkaError._PARTITION_EOF)))
        return out


def read(consumer: AssignedConsumer, start: int, end: int, fail_on_data_loss: bool = True) -> list[int]:
    chunks = range_records(consumer, OffsetRange(TOPIC, 0, start, end),
                           fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=1000)
    return [m.offset() for chunk in chunks for m in chunk]


def test_a_range_whose_last_offset_holds_no_record_ends_at_the_first_record_past_it():
    # A transaction of 10 records (offset 10 is its commit marker), then 3,000 plain ones.
    offsets = list(range(10)) + list(range(11, 3011))
    consumer = AssignedConsumer(offsets, start=0)
    assert read(consumer, 0, 11) == list(range(10))
    # Not one call per record up to the end of the partition (it took 3,001).
    assert consumer.consume_calls == 1


def test_a_split_range_ending_on_a_gap_stops_there_too():
    offsets = list(range(10)) + list(range(11, 3011))
    consumer = AssignedConsumer(offsets, start=7)
    assert read(consumer, 7, 11) == [7, 8, 9]
    assert consumer.consume_calls == 1


def test_a_range_ending_on_a_record_stops_without_reading_on():
    consumer = AssignedConsumer(list(range(100)), start=20)
    assert read(consumer, 20, 30) == list(range(20, 30))
    assert consumer.consume_calls == 1


def test_a_gap_at_the_end_of_the_partition_ends_the_range_at_the_end_of_partition_event():
    # The planned end is the high watermark (11): the commit marker at 10 is the last offset.
    consumer = AssignedConsumer(list(range(10)), start=0, end=11)
    assert read(consumer, 0, 11) == list(range(10))
    assert consumer.consume_calls == 1  # the 10 records and the end-of-partition event


def test_a_partition_that_ends_before_the_planned_end_is_data_loss_unless_allowed():
    with pytest.raises(DataLossError, match="the partition ends at 5, before the planned end 8"):
        read(AssignedConsumer(list(range(5)), start=0), 0, 8)
    assert read(AssignedConsumer(list(range(5)), start=0), 0, 8, fail_on_data_loss=False) == \
        list(range(5))
