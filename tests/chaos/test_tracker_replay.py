"""A tracker worker that takes over a markers partition is handed records it already
applied (Faust commits markers offsets about once a second; table changes reach the
changelog at once). Replaying them must not redeliver again what was redelivered and
then acked.

The tracker is SIGKILLed right after a redelivery (well within Faust's commit
interval) and restarted on its data dir or an empty one (from the changelog); its
health view counts the records it was handed again. Before the fix, 3 kills in 4
republished the released message a second time.
"""

from __future__ import annotations


import pytest

import kmq
from kmq.protocol import envelope
from kmq.dev.devstack import TrackerProcess
from kmq.protocol.placement import queue_partitions
from tests.chaos.conftest import get_json
from tests.topic_reads import records_to_end
from tests.conftest import wait_for


def copies(settings, queue: str) -> dict[tuple[str, int], int]:
    """(message id, deliveries before) -> how many records of it the queue partition holds."""
    out: dict = {}
    part = queue_partitions(queue, settings.queue_partitions)[0]
    for rec in records_to_end(settings, settings.queue_topic, [part]):
        if rec.key() == queue.encode():
            ours, _ = envelope.split(rec.headers())
            k = (ours.get(envelope.ID, b"").decode(), envelope.int_header(ours, envelope.DELIVERIES, 0))
            out[k] = out.get(k, 0) + 1
    return out


ATTEMPTS = 3


@pytest.mark.slow
def test_a_replayed_markers_log_redelivers_nothing_again(make_settings, artifacts, tmp_path, queue):
    settings = make_settings(visibility_timeout_s=30.0)
    tracker = TrackerProcess(settings, artifacts / "tracker-replay.log").start(timeout_s=120)
    client = kmq.Client(settings=settings)
    replays = []
    try:
        for attempt in range(ATTEMPTS):
            q = f"{queue}-{attempt}"
            ids = client.send_batch(q, [b"m%d" % i for i in range(20)])
            client.flush()
            with client.consumer(q, visibility_timeout_s=30) as c:
                got = []
                wait_for(lambda: got.extend(c.receive_batch(20, 0.2)) or len(got) >= 20, 30, what="20")
                released = got[0].id
                got[0].release(0)
                for m in got[1:]:
                    m.ack()
                c.flush()
                again = wait_for(lambda: c.receive(0.2), 30, what="the released message back")
                assert again.id == released and again.delivery_count == 2
                again.ack()
                c.flush()
                tracker.kill()  # within Faust's commit interval of all of that
            expected = {**{(i, 0): 1 for i in ids}, (released, 1): 1}
            data = settings.data_dir if attempt % 2 == 0 else str(tmp_path / f"empty-{attempt}")
            tracker = TrackerProcess(settings.replace(data_dir=data),
                                     artifacts / "tracker-replay.log").start(timeout_s=120)
            with client.consumer(q, visibility_timeout_s=30) as c:
                assert c.receive_batch(20, 4.0) == [], "something acked came back"
            assert copies(settings, q) == expected, "the released message was republished again"
            replays.append(get_json(tracker.url + "/kmq/health")["replayed_markers"])
            if replays[-1]:
                break
        assert any(replays), f"no attempt was handed records again ({replays}): nothing was tested"
    finally:
        client.close()
        tracker.stop()
