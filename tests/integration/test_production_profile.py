"""A tracker in the production profile works end to end on a real broker.

The embedded broker is one node, so the replication factor is 1 (min ISR
follows), and Tansu answers a group join after about half the session
timeout (docs/embedded-broker.md), so the session timeout is short. Everything else is
the production profile: acks=all and idempotent librdkafka producers, Faust
with producer_acks=-1, standby replicas and batched changelog writes.
"""

from __future__ import annotations

import kmq
from kmq.kafka import profiles
from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for


def test_a_production_profile_tracker_redelivers_what_was_not_acked(make_settings, artifacts, queue):
    s = make_settings(profile="production", replication_factor=1, session_timeout_ms=6000)
    assert profiles.faust_options(s)["producer_acks"] == -1
    assert "producer_max_batch_size" not in profiles.faust_options(s)
    with TrackerProcess(s, artifacts / "tracker-production.log"):
        with kmq.Client(settings=s) as client:
            ids = client.send_batch(queue, [b"a", b"b", b"c"])
            client.flush()
            # 30 s: none may time out while the three are gathered and the first acked on a
            # loaded machine; the two not processed are released, to come back after 1.5 s.
            with client.consumer(queue, visibility_timeout_s=30) as c:
                first: list = []
                wait_for(lambda: first.extend(c.receive_batch(3, 0.2)) or len(first) >= 3, 30,
                         what="3 messages")
                first[0].ack()
                for m in first[1:]:
                    m.release(delay_s=1.5)
                c.flush()
                again: list = []
                wait_for(lambda: again.extend(c.receive_batch(3, 0.2)) or len(again) >= 2, 30,
                         what="2 redeliveries")
                assert sorted(m.id for m in again) == sorted(set(ids) - {first[0].id})
                assert all(m.delivery_count == 2 for m in again)
                for m in again:
                    m.ack()
                c.flush()
