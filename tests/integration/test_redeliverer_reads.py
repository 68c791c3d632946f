"""The tracker's payload reader reads what a redelivery needs and then lets go of the partition."""

from __future__ import annotations

from agents.redeliver import Redeliverer
from kmq.protocol.placement import queue_partitions


def test_reading_payloads_back_returns_the_records_and_leaves_nothing_assigned(make_client, shared_settings,
                                                                              queue):
    s = shared_settings
    client = make_client(s)
    client.send_batch(queue, [b"p%d" % i for i in range(30)])
    client.flush()
    part = queue_partitions(queue, s.queue_partitions)[0]
    r = Redeliverer(s, configs=lambda: None)
    try:
        found = {off: rec for off, rec in r.payloads.scan(part, 0) if rec.key() == queue.encode()}
        assert len(found) == 30
        assert r.payloads.consumer().assignment() == [], "a finished scan must not keep fetching"
        wanted = sorted(found)[5:8]
        got = r.payloads.read(part, wanted)
        assert {off: rec.value for off, rec in got.records.items()} == \
            {off: found[off].value() for off in wanted}
        assert got.end is None  # it stopped at the last wanted offset, before the end
        # Left assigned, the (busy) queue partition would be prefetched for nothing.
        assert r.payloads.consumer().assignment() == []
        # Offsets past the partition's end are reported as such (a forged START's), not as gone.
        last = max(found)
        beyond = r.payloads.read(part, [last, last + 5, last + 10**6])
        assert set(beyond.records) == {last} and beyond.end is not None and last < beyond.end <= last + 5
    finally:
        r.payloads.consumer().close()
