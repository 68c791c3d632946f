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
        found = {off: rec for off, rec in r._scan(part, 0) if rec.key() == queue.encode()}
        assert len(found) == 30
        assert r._get_reader().assignment() == [], "a finished scan must not keep fetching"
        wanted = sorted(found)[5:8]
        got = r._read(part, wanted)
        assert {off: value for off, (value, _h, _ts) in got.items()} == \
            {off: found[off].value() for off in wanted}
        # Left assigned, the (busy) queue partition would be prefetched for nothing.
        assert r._get_reader().assignment() == []
    finally:
        r._get_reader().close()
