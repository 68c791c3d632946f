"""Hostile marker records: the codec's limits, what is set apart, and what the SDK stays within."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kmq.errors import MarkerDecodeError
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.protocol.limits import MAX_GROUPS_PER_RANGE

R = M.RangeRef("orders", 3, 100, 110)


def raw_record(*bodies: bytes) -> bytes:
    """A record of raw marker bodies (type byte included), bypassing the encoder's checks."""
    return struct.pack(">BH", marker_codec.VERSION, len(bodies)) + b"".join(bodies)


def raw_range(kind: marker_codec.MarkerType, queue: str, partition: int, start: int, end: int) -> bytes:
    q = queue.encode()
    return struct.pack(">BH", kind, len(q)) + q + struct.pack(">Iqq", partition, start, end)


def raw_start(start: int, end: int, timeout_ms: int = 1000, mask: bytes = b"", queue: str = "orders") -> bytes:
    return raw_range(marker_codec.MarkerType.START, queue, 0, start, end) + struct.pack(">II", timeout_ms, len(mask)) + mask


def raw_release(delay_ms: int, r: M.RangeRef = R, mask: int = 1) -> bytes:
    m = mask.to_bytes((r.length + 7) // 8, "little")
    return (raw_range(marker_codec.MarkerType.RELEASE, r.queue, r.partition, r.start, r.end)
            + struct.pack(">I", len(m)) + m + struct.pack(">qB", delay_ms, 1))


def good(*markers: M.Marker) -> bytes:
    return marker_codec.encode(list(markers))[3:]  # the bodies, without the record header


def test_a_start_wider_than_a_fetch_is_set_apart_without_building_its_mask():
    # Full-mask shorthand over 4M offsets: 512 KiB of int before the limit.
    data = raw_record(raw_start(0, 1 << 22), good(M.Ack(R, 1)))
    tracemalloc.start()
    try:
        got = marker_codec.decode_lenient(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.markers == [M.Ack(R, 1)]
    assert len(got.set_aside) == 1 and "MAX_RANGE_LEN" in got.set_aside[0]
    assert peak < 64 * 1024
    with pytest.raises(MarkerDecodeError, match="MAX_RANGE_LEN"):
        marker_codec.decode(data)


def test_the_largest_release_delay_is_set_apart_and_the_rest_of_the_record_kept():
    data = raw_record(good(M.Ack(R, 1)), raw_release(2**63 - 1), raw_release(-2), good(M.Ack(R, 2)))
    got = marker_codec.decode_lenient(data)
    assert got.markers == [M.Ack(R, 1), M.Ack(R, 2)]
    assert [s.split(":")[0] for s in got.set_aside] == ["marker 2 of 4", "marker 3 of 4"]
    assert all("MAX_DELAY_MS" in s for s in got.set_aside)


@pytest.mark.parametrize("marker, limit", [
    (M.Start(R, M.MAX_TIMEOUT_MS + 1, 1), "MAX_TIMEOUT_MS"),
    (M.Extend(R, 1, M.MAX_TIMEOUT_MS + 1), "MAX_TIMEOUT_MS"),
    (M.Release(R, 1, M.MAX_DELAY_MS + 1), "MAX_DELAY_MS"),
    (M.Reject(R, 1, "x" * (M.MAX_REASON_BYTES + 1)), "MAX_REASON_BYTES"),
    (M.Schedule("orders", "i" * (M.MAX_MESSAGE_ID_BYTES + 1), 1, b"", ()), "MAX_MESSAGE_ID_BYTES"),
    (M.Schedule("orders", "", 1, b"", ()), "MAX_MESSAGE_ID_BYTES"),
    (M.Schedule("orders", "id", M.MAX_TIME_MS + 1, b"", ()), "MAX_TIME_MS"),
    (M.Tick(-1), "MAX_TIME_MS"),
    (M.Purge("no spaces allowed"), "QUEUE_NAME_RE"),
    (M.Ack(M.RangeRef("../etc", 0, 0, 1), 1), "QUEUE_NAME_RE"),
    (M.Ack(M.RangeRef("orders", 0, 0, M.MAX_RANGE_LEN + 1), 1), "MAX_RANGE_LEN"),
])
def test_each_limit_is_named_by_encode_decode_and_the_check(marker, limit):
    assert limit in M.violation(marker)
    with pytest.raises(ValueError, match=limit):
        marker_codec.encode([marker])


def test_markers_at_the_limits_round_trip():
    wide = M.RangeRef("orders", 0, 0, M.MAX_RANGE_LEN)
    batch = [M.Start(wide, M.MAX_TIMEOUT_MS, wide.full_mask), M.Release(wide, 1 << (M.MAX_RANGE_LEN - 1),
                                                                         M.MAX_DELAY_MS),
             M.Reject(R, 1, "x" * M.MAX_REASON_BYTES), M.Tick(M.MAX_TIME_MS),
             M.Schedule("o" * 128, "i" * M.MAX_MESSAGE_ID_BYTES, M.MAX_TIME_MS, b"v", ())]
    assert marker_codec.decode(marker_codec.encode(batch)) == batch


def test_a_record_spanning_more_offsets_than_the_limit_is_refused_whole():
    wide = M.RangeRef("orders", 0, 0, M.MAX_RANGE_LEN)
    n = M.MAX_RECORD_OFFSETS // M.MAX_RANGE_LEN + 1
    data = raw_record(*[raw_start(i * M.MAX_RANGE_LEN, (i + 1) * M.MAX_RANGE_LEN) for i in range(n)])
    with pytest.raises(MarkerDecodeError, match="MAX_RECORD_OFFSETS"):
        marker_codec.decode_lenient(data)
    with pytest.raises(ValueError, match="MAX_RECORD_OFFSETS"):
        marker_codec.encode([M.Start(wide, 1, wide.full_mask)] * n)


def test_encode_records_splits_at_the_record_limits_and_keeps_the_order():
    wide = M.RangeRef("orders", 0, 0, M.MAX_RANGE_LEN)
    markers = [M.Ack(wide, i + 1) for i in range(9)] + [M.Tick(i) for i in range(5)]
    records = marker_codec.encode_records(markers)
    assert len(records) == 3  # 4 + 4 + (1 + 5 ticks) ranges of MAX_RANGE_LEN
    assert [m for r in records for m in marker_codec.decode(r)] == markers
    assert len(marker_codec.encode_records([M.Tick(i) for i in range(2500)], max_markers=1000)) == 3


def test_invalid_utf8_in_a_reason_sets_that_marker_apart():
    body = bytearray(good(M.Reject(R, 1, "ab")))
    body[-1] = 0xFF
    got = marker_codec.decode_lenient(raw_record(bytes(body), good(M.Tick(5))))
    assert got.markers == [M.Tick(5)] and "UTF-8" in got.set_aside[0]


def test_an_explicit_mask_of_the_wrong_size_is_set_apart():
    body = raw_range(marker_codec.MarkerType.ACK, "orders", 0, 0, 16) + struct.pack(">I", 5) + b"\xff" * 5
    got = marker_codec.decode_lenient(raw_record(body))
    assert got.markers == [] and "mask of 5 bytes" in got.set_aside[0]


def test_the_codec_and_the_consumer_agree_on_the_visibility_ceiling():
    from kmq.consumer.arguments import MAX_EXTEND_S
    from kmq.queue_config import MAX_VISIBILITY_S
    assert MAX_EXTEND_S * 1000 == MAX_VISIBILITY_S * 1000 == M.MAX_TIMEOUT_MS
    assert 2 * M.MAX_BATCH_SIZE <= M.MAX_RANGE_LEN <= M.MAX_RECORD_OFFSETS
    assert MAX_GROUPS_PER_RANGE >= 64


def test_settings_refuse_a_max_delay_beyond_the_codec():
    from kmq.errors import ConfigError
    from kmq.settings import Settings
    with pytest.raises(ConfigError, match="KMQ_MAX_DELAY_S"):
        Settings(max_delay_s=400 * 86400, queue_retention_ms=500 * 86400 * 1000)
    with pytest.raises(ConfigError, match="KMQ_VISIBILITY_TIMEOUT_S"):
        Settings(visibility_timeout_s=13 * 3600)


class _Rec:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def test_a_fetch_whose_offsets_span_more_than_a_range_is_cut_into_ranges_that_fit():
    from kmq.consumer.partition_source import within_range_len as _within_range_len
    offsets = [0, 1, 2, M.MAX_RANGE_LEN - 1, M.MAX_RANGE_LEN, 5 * M.MAX_RANGE_LEN, 5 * M.MAX_RANGE_LEN + 3]
    chunks = _within_range_len([_Rec(o) for o in offsets])
    assert [[r.offset() for r in c] for c in chunks] == [offsets[:4], offsets[4:5], offsets[5:]]
    assert all(c[-1].offset() - c[0].offset() < M.MAX_RANGE_LEN for c in chunks)
    assert _within_range_len([]) == []


def test_a_consumer_refuses_a_batch_size_above_one_start_marker():
    from kmq.consumer.facade import Consumer
    from kmq.errors import ConfigError
    from kmq.settings import Settings
    with pytest.raises(ConfigError, match="batch_size"):
        Consumer(Settings(), "orders", queue_topic_partitions=1, markers_topic_partitions=1,
                 batch_size=M.MAX_BATCH_SIZE + 1)
