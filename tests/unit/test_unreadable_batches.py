"""A markers batch the tracker's client cannot read is counted and skipped, never a crash loop.

aiokafka's own batch reader over real record-batch bytes (as a fetch returns them): an
UnsupportedCodecError raised out of the worker's fetch, and a restarted worker fetched
the same batch and died again (issue 12: lz4 before cramjam was a dependency).
"""

from __future__ import annotations

import struct

import pytest
from aiokafka.consumer.fetcher import READ_UNCOMMITTED, PartitionRecords
from aiokafka.errors import UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition

from app import consumer_tuning
from app.unreadable import CRC_ATTEMPTS, unreadable_batches

MARKERS = "unreadable-test.markers"  # a topic of this test's own: the patch is per topic
consumer_tuning.skip_unreadable_batches(MARKERS)


def batch(base_offset: int, n: int, codec: int = 0, break_crc: bool = False) -> bytes:
    """A v2 record batch of ``n`` records at ``base_offset``; ``codec`` written into its
    attributes (the records stay uncompressed) with a valid CRC unless ``break_crc``."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=None, key=b"q", value=b"v%d" % (base_offset + i), headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)
    raw[22] = (raw[22] & ~0x07) | codec  # attributes (bytes 21-22): the codec's 3 bits
    struct.pack_into(">I", raw, 17, 0 if break_crc else calc_crc32c(bytes(raw[21:])))
    return bytes(raw)


def read(topic: str, data: bytes, fetch_offset: int = 0) -> tuple[list[int], int]:
    """(offsets read, next fetch offset) of one fetch response's records."""
    recs = PartitionRecords(TopicPartition(topic, 0), MemoryRecords(data), None, fetch_offset,
                            None, None, True, READ_UNCOMMITTED)
    return [r.offset for r in recs], recs.next_fetch_offset


UNKNOWN_CODEC = 5  # Kafka has 0-4


def test_a_batch_in_a_codec_the_client_cannot_read_raised_out_of_the_fetch():
    with pytest.raises(UnsupportedCodecError):
        read("another-topic", batch(0, 2) + batch(2, 2, codec=UNKNOWN_CODEC))  # what any topic still does


def test_on_the_markers_topic_it_is_skipped_and_counted_and_the_batches_after_it_are_read():
    tally = unreadable_batches()
    before = tally.skipped, tally.skipped_offsets
    offsets, next_offset = read(MARKERS, batch(0, 2) + batch(2, 3, codec=UNKNOWN_CODEC) + batch(5, 2))
    assert offsets == [0, 1, 5, 6] and next_offset == 7
    assert (tally.skipped, tally.skipped_offsets) == (before[0] + 1, before[1] + 3)
    assert "offsets 2..4" in tally.last_error and "UnsupportedCodecError" in tally.last_error
    assert tally.as_json()["skipped"] == tally.skipped


def test_a_crc_mismatch_is_fetched_again_before_the_batch_is_skipped():
    tally = unreadable_batches()
    data = batch(10, 2) + batch(12, 2, break_crc=True) + batch(14, 1)
    skipped, refetched = tally.skipped, tally.refetched
    for _ in range(CRC_ATTEMPTS - 1):  # a network blip: read up to the batch, then fetch from there
        assert read(MARKERS, data, fetch_offset=10) == ([10, 11], 12)
    assert tally.refetched == refetched + CRC_ATTEMPTS - 1 and tally.skipped == skipped
    assert read(MARKERS, data, fetch_offset=10) == ([10, 11, 14], 15)  # then it is skipped
    assert tally.skipped == skipped + 1
