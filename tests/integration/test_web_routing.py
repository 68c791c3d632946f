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



def partitions_split(w1, w2, partitions: int):
    """(w1's, w2's) markers partitions once both are ready and together own all, else None."""
    h1, h2 = w1.health(), w2.health()
    if h1 and h2 and h1["partitions"] and h2["partitions"] and h1["ready"] and h2["ready"] and \
            sorted(h1["partitions"] + h2["partitions"]) == list(range(partitions)):
        return set(h1["partitions"]), set(h2["partitions"])
    return None

def test_a_non_owning_worker_answers_with_the_owners_numbers(make_settings, artifacts, tmp_path):
    s = make_settings(stats_refresh_ms=300, dispatch="partition")  # numbers without a shared read-ahead
    w1 = TrackerProcess(s, artifacts / "tracker-route-1.log")
    w2 = TrackerProcess(s.replace(web_port=free_port(), data_dir=str(tmp_path / "w2")),
                        artifacts / "tracker-route-2.log")
    w1.start(timeout_s=120)
    try:
        w2.start(wait=False)

        def split():
            return partitions_split(w1, w2, s.markers_partitions)
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


ADMIN = "admin-token-for-routing-0123456"


def call(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict | None]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_with_auth_on_workers_forward_a_credential_for_one_request_never_the_token(
        make_settings, artifacts, tmp_path):
    """The list view sent the caller's bearer token to whatever URL a group member advertised."""
    import time

    from kmq.ops.tenancy import Caller
    from web import peer_auth

    s = make_settings(stats_refresh_ms=300, dispatch="partition", auth="on", admin_token=ADMIN)
    w1 = TrackerProcess(s, artifacts / "tracker-auth-route-1.log")
    w2 = TrackerProcess(s.replace(web_port=free_port(), data_dir=str(tmp_path / "w2")),
                        artifacts / "tracker-auth-route-2.log")
    w1.start(timeout_s=120)
    try:
        w2.start(wait=False)

        def split():
            both = partitions_split(w1, w2, s.markers_partitions)
            return both and both[1]
        owned2 = wait_for(split, 120, interval_s=0.2, what="the partitions split over two workers")
        names = (f"aroute-{i}" for i in range(1000))
        theirs = next(q for q in names if markers_partition(q, s.markers_partitions) in owned2)
        mine = next(q for q in names if markers_partition(q, s.markers_partitions) not in owned2)
        with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
            wait_for(lambda: admin.queue_configs().admin_hash(), 30, what="the auth record")
            acme = admin.create_tenant("acme")
            admin.configure_queue(theirs, tenant="acme")
            admin.send_batch(theirs, [b"x"] * 3)
            admin.send_batch(mine, [b"y"] * 2)
            admin.flush()

            # The detail, asked of the worker that does not own the queue, by admin and tenant.
            for token in (ADMIN, acme):
                body = wait_for(lambda: (lambda r: r[1] if r[0] == 200 and r[1]["depth"] == 3 else None)(
                    call(f"{w1.url}/kmq/api/queues/{theirs}", bearer(token))), 60, interval_s=0.3,
                    what="the routed detail")
                assert body["owner"] == w2.url
            assert call(f"{w1.url}/kmq/api/queues/{mine}", bearer(acme))[0] == 403
            # The list gathers both workers' queues; the tenant sees only its own.
            listed = wait_for(lambda: (lambda r: r[1] if r[0] == 200 and {q["queue"]: q["depth"] for q in
                                                                         r[1]["queues"]} == {theirs: 3, mine: 2}
                                       else None)(call(f"{w1.url}/kmq/api/queues?prefix=aroute-", bearer(ADMIN))),
                              60, interval_s=0.3, what="both queues in the admin's list")
            assert listed["workers"] == 2 and not listed["partial"]
            status, tenants_list = call(f"{w1.url}/kmq/api/queues?prefix=aroute-", bearer(acme))
            assert status == 200 and [q["queue"] for q in tenants_list["queues"]] == [theirs]
            assert not tenants_list["partial"]

            # The peer endpoint takes no bearer token, and a credential only for what it was made.
            local = "/kmq/api/local/queues"
            query = [("prefix", "aroute-")]
            assert call(f"{w2.url}{local}?prefix=aroute-", bearer(ADMIN))[0] == 403

            def credential(url, path=local, q=query, now_s=None):
                return {peer_auth.HEADER: peer_auth.sign(
                    ADMIN, url=url, path_query=peer_auth.target(path, q), caller=Caller(admin=True),
                    now_s=time.time() if now_s is None else now_s)}
            status, page = call(f"{w2.url}{local}?prefix=aroute-", credential(w2.url))
            assert status == 200 and [q["queue"] for q in page["queues"]] == [theirs]
            for wrong in (credential(w1.url), credential(w2.url, q=[("prefix", "")]),
                          credential(w2.url, path="/kmq/api/queues"),
                          credential(w2.url, now_s=time.time() - 3600)):
                assert call(f"{w2.url}{local}?prefix=aroute-", wrong)[0] == 403
    finally:
        w2.stop()
        w1.stop()
