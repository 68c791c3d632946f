"""The dispatcher's reader splits a read per partition and notes each partition's end, with
ends of partitions (librdkafka's EOF events) among the records anywhere."""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import KafkaError

from agents.dispatch.reader import QueueReader


class Rec:
    def __init__(self, partition, offset, eof=False):
        self._p, self._o = partition, offset
        self._e = SimpleNamespace(code=lambda: KafkaError._PARTITION_EOF) if eof else None

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def error(self):
        return self._e


def split(records, ends=None):
    reader = SimpleNamespace(_ends=dict(ends or {}), _eofs={}, _unreadable={}, _last_error={})
    by_part = QueueReader._by_partition(reader, records)
    return {p: [r.offset() for r in rs] for p, rs in by_part.items()}, reader._ends


def test_a_read_of_one_partition_is_kept_whole_and_its_end_noted():
    recs = [Rec(3, o) for o in range(5, 9)]
    assert split(recs) == ({3: [5, 6, 7, 8]}, {3: 9})


def test_records_of_several_partitions_are_split_in_offset_order():
    recs = [Rec(1, 0), Rec(2, 10), Rec(1, 1), Rec(2, 11), Rec(2, 12)]
    assert split(recs, {1: 5}) == ({1: [0, 1], 2: [10, 11, 12]}, {1: 5, 2: 13})


def test_an_end_of_partition_before_or_after_records_keeps_the_highest_end():
    recs = [Rec(1, 4), Rec(1, 5, eof=True), Rec(2, 7, eof=True), Rec(2, 7), Rec(2, 8)]
    assert split(recs) == ({1: [4], 2: [7, 8]}, {1: 5, 2: 9})
    assert split([Rec(4, 20, eof=True)], {4: 3}) == ({}, {4: 20})
