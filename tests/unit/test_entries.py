"""The table record codec: versions, keys that sort by deadline."""

from kmq.protocol import entries as E
from kmq.protocol.markers import RangeRef


def test_version_1_in_flight_entries_are_still_read():
    e = E.InFlight(started_ms=5, timeout_ms=1000, groups=[E.Group(1005, E.Cause.TIMEOUT, "", 0b101)],
                   indexed_ms=1005)
    v2 = E.encode_inflight(e)
    v1 = b"\x01" + v2[1:-16]  # version 1: no attempt offsets at the end
    assert E.decode_inflight(v1) == e
    assert E.decode_inflight(v2) == e


def test_attempt_offsets_round_trip():
    e = E.InFlight(1, 2, [], 3, attempt_offset=40, attempt_dlq_offset=7)
    assert E.decode_inflight(E.encode_inflight(e)) == e


def test_index_keys_sort_by_deadline_then_entry():
    k = E.range_key(RangeRef("q", 0, 0, 1))
    keys = [E.index_key(d, k) for d in (10, 2, 3_000_000_000_000, 0)]
    assert [E.decode_index_key(x)[0] for x in sorted(keys)] == [0, 2, 10, 3_000_000_000_000]
    assert all(E.is_index_key(x) for x in keys) and not E.is_index_key(k)
