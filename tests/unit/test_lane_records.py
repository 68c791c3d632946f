"""A lane's records assembled into one consumer's deliveries (kmq.consumer.lane_reader),
with the bytes it fetched for itself and for others counted."""

from __future__ import annotations

from kmq.consumer.lane_reader import Got, LaneRecords
from kmq.protocol import deliveries as D
from kmq.protocol import markers as M

ME, OTHER = "a" * 32, "b" * 32


class LaneRec:
    """A lane record as confluent-kafka's Message answers the lane reader."""

    def __init__(self, key: bytes, value: bytes | None, offset: int = 0) -> None:
        self._k, self._v, self._o = key, value, offset

    def key(self):
        return self._k

    def value(self):
        return self._v

    def offset(self):
        return self._o

    def error(self):
        return None


def header(consumer: str, seq: int, n: int, kind: int = D.COPY, queue: str = "jobs") -> LaneRec:
    d = D.Delivery(kind, 1, seq, 30_000, M.RangeRef(queue, 0, 10 * seq, 10 * seq + n), (1 << n) - 1)
    return LaneRec(D.header_key(consumer), D.encode(d))


def copy(consumer: str, value: bytes = b"x" * 100) -> LaneRec:
    return LaneRec(consumer.encode(), value)


def test_copies_complete_their_delivery_across_reads_and_others_are_counted_not_kept():
    lane = LaneRecords(ME, "jobs", lane=3)
    first = lane.take([header(ME, 1, 3), copy(ME), header(OTHER, 7, 2), copy(OTHER), copy(ME)])
    assert first == [] and lane.assembling()
    (got,) = lane.take([copy(OTHER), copy(ME)])
    assert isinstance(got, Got) and got.delivery.seq == 1 and len(got.copies) == 3
    assert not lane.assembling()
    assert lane.other_bytes == 2 * (32 + 100) + len(header(OTHER, 7, 2)._k) + len(header(OTHER, 7, 2)._v)
    assert lane.own_bytes == 3 * (32 + 100) + len(header(ME, 1, 3)._k) + len(header(ME, 1, 3)._v)


def test_references_and_farewells_come_at_once_in_lane_order():
    lane = LaneRecords(ME, "jobs", lane=0)
    bye = LaneRec(D.header_key(ME), D.encode_farewell(D.Farewell(1, 2)))
    out = lane.take([header(ME, 1, 4, kind=D.REFERENCE), header(ME, 2, 1), copy(ME), bye])
    assert [type(x).__name__ for x in out] == ["Got", "Got", "Farewell"]
    assert out[0].copies is None and out[1].copies is not None and out[2] == D.Farewell(1, 2)


def test_a_header_before_all_copies_came_completes_the_one_before_with_what_came():
    lane = LaneRecords(ME, "jobs", lane=0)
    out = lane.take([header(ME, 1, 3), copy(ME), header(ME, 2, 1), copy(ME)])
    assert [(g.delivery.seq, len(g.copies)) for g in out] == [(1, 1), (2, 1)]


def test_what_is_not_a_delivery_of_this_queue_is_skipped():
    lane = LaneRecords(ME, "jobs", lane=0)
    bad = LaneRec(D.header_key(ME), b"\x01not a header")
    out = lane.take([bad, header(ME, 1, 2, queue="other"), copy(ME), copy(ME), header(ME, 2, 1), copy(ME)])
    assert [(g.delivery.seq, len(g.copies)) for g in out] == [(2, 1)]
    assert lane.other_bytes == 0
