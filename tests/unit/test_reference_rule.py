"""By reference or as copies (agents.dispatch.lanes.delivery_of): the consumer's reader
fetches the range and the read-ahead after it; what is its own of that decides.

The queue's records after the range go to all its consumers in turn, so one consumer's
part of them is one in N: a short range of a queue with many consumers is copied, even
with the queue alone on its partition (32 consumers each read the queue's next MiB for
every small range they were referred to)."""

from __future__ import annotations

from agents.dispatch.lanes import delivery_of
from kmq.protocol import deliveries as D
from kmq.protocol.dispatch import ConsumerSlot
from kmq.protocol.lookahead import Lookahead
from tests.fake_records import Rec

SIZE = 100


def _kind(run_len: int, consumers: int, backlog: int = 20_000) -> int:
    recs = [Rec(o, b"q", SIZE) for o in range(backlog)]
    ahead = Lookahead()
    ahead.plan([0])
    ahead.add(recs, {b"q"})
    slot = ConsumerSlot("c1", 0, 30_000)
    return delivery_of(recs[:run_len], "q", 0, 1, slot, 1, ahead, consumers=consumers).delivery.kind


def test_one_consumer_of_a_queue_alone_gets_even_a_short_range_by_reference():
    assert _kind(25, consumers=1) == D.REFERENCE  # what its reader reads ahead is its next delivery


def test_a_short_range_of_a_queue_with_many_consumers_is_copied():
    assert _kind(25, consumers=32) == D.COPY
    assert _kind(25, consumers=2) == D.COPY  # half of what its reader would read is not its own


def test_a_range_that_fills_most_of_the_readers_fetch_goes_by_reference_whatever_the_consumers():
    window_records = D.REFERENCE_READ_AHEAD_BYTES // SIZE
    assert _kind(window_records, consumers=32) == D.REFERENCE
