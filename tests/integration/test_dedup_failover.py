"""A dedup id sent again after the tracker restarted is still a duplicate (docs/ordering.md,
"Across a failover"): the new dispatcher reads back the dedup ids of what its predecessor
handed out (agents/dispatch/dedup_replay.py) before it hands out anything more; also on a
queue purged since (a purge keeps the ids seen)."""

from __future__ import annotations


from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for
from tests.integration.views import dispatcher_stats, tracker_sees



def _first_then_ack(client, queue: str) -> str:
    with client.consumer(queue, max_in_flight=5, visibility_timeout_s=30) as c:
        m = wait_for(lambda: c.receive(0.2), 60, what=f"the first send of {queue}")
        assert m.value == b"first"
        m.ack()
        return m.id


def test_a_dedup_id_sent_again_after_a_tracker_restart_is_still_a_duplicate(make_client, make_settings,
                                                                              artifacts, queue):
    settings = make_settings(dispatch="shared")
    queues = {"none": f"{queue}-plain", "group": f"{queue}-ordered", "purged": f"{queue}-purged"}
    client = make_client(settings)
    first = TrackerProcess(settings, artifacts / "tracker-dedup-restart-1.log").start(timeout_s=120)
    try:
        ids = {}
        for ordering, q in queues.items():
            ordering = "none" if ordering == "purged" else ordering
            client.configure_queue(q, ordering=ordering, dispatch="shared")
            tracker_sees(first, q, ordering=ordering, dispatch="shared")
            ids[q] = client.send(q, b"first", group="g", dedup_id="txn-1")
            client.flush()
            assert _first_then_ack(client, q) == ids[q]
        # A purge keeps the dedup ids seen (docs/ordering.md): read back from below its point too
        client.purge(queues["purged"])
    finally:
        first.stop()
    second = TrackerProcess(settings, artifacts / "tracker-dedup-restart-2.log").start(timeout_s=120)
    try:
        for q in queues.values():
            assert client.send(q, b"again", group="g", dedup_id="txn-1") == ids[q]
            after = client.send(q, b"after", group="g")
            client.flush()
            with client.consumer(q, max_in_flight=5, visibility_timeout_s=30) as c:
                m = wait_for(lambda: c.receive(0.2), 60, what=f"the message after, on {q}")
                # "again" lies before "after" in the log: had it gone out, it would come first
                assert (m.id, m.value) == (after, b"after")
                m.ack()
        stats = dispatcher_stats(second)
        assert stats["deduplicated"] >= 3 and stats["dedup-ids-read-back"] >= 2
    finally:
        second.stop()
