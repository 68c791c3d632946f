"""Two tracker workers: a queue's request to the worker that does not own it is answered
by the owner (topic_route), and the queue list gathers both workers' queues."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import kmq
from kmq.dev.devstack import TrackerProcess
from kmq.dev.embedded import free_port
from kmq.protocol.placement import markers_partition
from tests.conftest import wait_for


def get(url: str) -> dict | None:
    """The JSON answer, or None for a 404 (the queue is not known yet)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def test_a_non_owning_worker_answers_with_the_owners_numbers(make_settings, artifacts, tmp_path):
    s = make_settings(stats_refresh_ms=300, dispatch="partition")  # numbers without a shared read-ahead
    w1 = TrackerProcess(s, artifacts / "tracker-route-1.log")
    w2 = TrackerProcess(s.replace(web_port=free_port(), data_dir=str(tmp_path / "w2")),
                        artifacts / "tracker-route-2.log")
    w1.start(timeout_s=120)
    try:
        w2.start(wait=False)

        def split():
            h1, h2 = w1.health(), w2.health()
            if h1 and h2 and h1["partitions"] and h2["partitions"] and h1["ready"] and h2["ready"] and \
                    sorted(h1["partitions"] + h2["partitions"]) == list(range(s.markers_partitions)):
                return set(h1["partitions"]), set(h2["partitions"])
            return None
        _, owned2 = wait_for(split, 120, interval_s=0.2, what="the partitions split over two workers")
        # One queue owned by each worker; ask worker 1 about worker 2's queue.
        names = (f"route-{i}" for i in range(1000))
        theirs = next(q for q in names if markers_partition(q, s.markers_partitions) in owned2)
        mine = next(q for q in names if markers_partition(q, s.markers_partitions) not in owned2)
        with kmq.Client(settings=s) as client:
            client.send_batch(theirs, [b"x"] * 7)
            client.send_batch(mine, [b"y"] * 4)
            client.flush()
            with client.consumer(theirs, visibility_timeout_s=60, max_in_flight=3, batch_size=3) as c:
                got = []
                wait_for(lambda: got.extend(c.receive_batch(3 - len(got), timeout_s=0.2)) or len(got) >= 3, 30)
                got[0].ack()
                c.flush()

                def answered():
                    d = get(f"{w1.url}/kmq/api/queues/{theirs}")
                    return d if d and (d["depth"], d["in_flight"], d["acked_per_min"]) == (4, 2, 1) else None
                routed = wait_for(answered, 60, interval_s=0.3, what="the routed answer")
                assert routed["owner"] == w2.url and routed["markers_partition"] in owned2
                direct = get(f"{w2.url}/kmq/api/queues/{theirs}")
                assert (direct["depth"], direct["in_flight"], direct["owner"]) == (4, 2, w2.url)
                # The list, asked of either worker, has both workers' queues.
                for w in (w1, w2):
                    body = wait_for(lambda: (lambda b: b if {r["queue"]: r["depth"] for r in b["queues"]}
                                             == {theirs: 4, mine: 4} else None)(
                        get(f"{w.url}/kmq/api/queues?prefix=route-")), 60, interval_s=0.3,
                        what="both queues in the list")
                    assert body["workers"] == 2 and not body["partial"]
    finally:
        w2.stop()
        w1.stop()
