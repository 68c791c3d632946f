"""The marker codec: round trips, and malformed input rejected with its bytes kept."""

import pytest

from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.errors import MarkerDecodeError

R = M.RangeRef("orders", 3, 100, 110)


def every_kind():
    return [
        M.Start(R, 30000, R.full_mask), M.Start(R, 5, 0b101), M.Ack(R, 0b11),
        M.Extend(R, 1, 100), M.Release(R, 2, -1), M.Release(R, 2, 500, counted=False),
        M.Reject(R, 4, "bad input ü"), M.Schedule("q", "id-1", 123, b"v", (("a", b"b"),)),
        M.Tick(55),
    ]


def test_every_marker_kind_round_trips_in_one_record():
    assert marker_codec.decode(marker_codec.encode(every_kind())) == every_kind()


def test_a_full_start_mask_is_encoded_in_no_bytes():
    full = marker_codec.encode([M.Start(R, 1000, R.full_mask)])
    partial = marker_codec.encode([M.Start(R, 1000, 0b1)])
    assert len(full) < len(partial)


@pytest.mark.parametrize("data, reason", [
    (b"", "empty record"),
    (b"\x02\x00\x01", "unsupported marker version 2"),
    (b"\x00\x00\x01", "unsupported marker version 0"),
    (b"\x01\x00\x00", "no markers"),
    (b"\x01\x00\x01\x63", "unknown marker type 99"),
    (b"\x01\x00\x01\x07\x00", "truncated"),
])
def test_malformed_records_raise_and_keep_their_bytes(data, reason):
    with pytest.raises(MarkerDecodeError) as info:
        marker_codec.decode(data)
    assert reason in str(info.value)
    assert info.value.data == data


def test_truncating_a_valid_record_anywhere_is_detected():
    good = marker_codec.encode(every_kind())
    for cut in range(len(good)):
        with pytest.raises(MarkerDecodeError):
            marker_codec.decode(good[:cut])


def test_trailing_bytes_are_rejected():
    with pytest.raises(MarkerDecodeError, match="trailing"):
        marker_codec.decode(marker_codec.encode([M.Tick(1)]) + b"x")


def test_a_mask_selecting_offsets_outside_its_range_is_rejected():
    rec = bytearray(marker_codec.encode([M.Ack(M.RangeRef("q", 0, 0, 3), 0b111)]))
    rec[-1] = 0b1111  # bit 3 is offset 3, outside [0, 3)
    with pytest.raises(MarkerDecodeError, match="outside"):
        marker_codec.decode(bytes(rec))


def test_encoding_refuses_a_mask_outside_the_range():
    with pytest.raises(ValueError):
        marker_codec.encode([M.Ack(R, 1 << 10)])
    with pytest.raises(ValueError):
        marker_codec.encode([M.Ack(R, 0)])


def test_mask_offsets_lists_selected_offsets_in_order():
    assert M.mask_offsets(100, 0b1010000001) == [100, 107, 109]
    assert M.mask_offsets(0, 0) == []
    big = (1 << 5000) | 1
    assert M.mask_offsets(7, big) == [7, 5007]
    assert M.offsets_mask(100, [100, 107, 109]) == 0b1010000001


def test_an_ordered_acquire_has_its_own_type_and_an_older_acquire_decodes_unordered():
    r = M.RangeRef("q", 3, 10, 20)
    ordered = M.Acquire(r, 1000, 0b101, 7, True)
    assert marker_codec.decode(marker_codec.encode([ordered])) == [ordered]
    old = marker_codec.encode([M.Acquire(r, 1000, 0b101, 7)])   # what was written before
    assert old[3] == marker_codec.MarkerType.ACQUIRE
    assert marker_codec.decode(old) == [M.Acquire(r, 1000, 0b101, 7, False)]
    assert M.violation(M.Acquire(r, 1000, 0b101, 7, 2)) is not None
