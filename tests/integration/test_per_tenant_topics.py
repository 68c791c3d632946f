"""Two kmq deployments side by side on one broker, every topic name and the app id their own:
the isolation docs/security.md recommends for tenants (shared topics separate views, not data).

Each runs its own tracker; the same queue name in both never sees the other's messages,
redeliveries or dead letters."""

from __future__ import annotations


import kmq
from kmq.dev.devstack import TrackerProcess, settings_env
from kmq.settings import Settings
from tests.conftest import wait_for
from tests.integration.views import queue_detail

QUEUE = "orders"  # the same name in both deployments
TOPIC_VARIABLES = ("KMQ_QUEUE_TOPIC", "KMQ_MARKERS_TOPIC", "KMQ_DLQ_TOPIC", "KMQ_QUEUES_TOPIC",
                   "KMQ_DELIVERIES_TOPIC", "KMQ_APP_ID")


def detail(t: TrackerProcess) -> dict | None:
    return queue_detail(t, QUEUE)


def run_the_flow(s: Settings, tenant: str, n: int) -> None:
    """Send n, ack all but two: one rejected (dead letter), one released to come back and acked then."""
    with kmq.Client(settings=s) as client:
        client.send_batch(QUEUE, [f"{tenant}-{i}".encode() for i in range(n)])
        client.flush()
        # 30 s: none may time out while the n are gathered and settled on a loaded machine;
        # the one not processed is released, to come back from the tracker after 1.5 s.
        with client.consumer(QUEUE, visibility_timeout_s=30) as c:
            got: list = []
            wait_for(lambda: got.extend(c.receive_batch(n - len(got), timeout_s=0.2)) or len(got) >= n, 60,
                     what=f"{tenant}'s {n} messages")
            assert sorted(m.value for m in got) == sorted(f"{tenant}-{i}".encode() for i in range(n))
            slow, poison, rest = got[0], got[1], got[2:]
            for m in rest:
                m.ack()
            poison.reject("poison")
            slow.release(delay_s=1.5)  # not processed: the tracker sends it again
            c.flush()
            again = wait_for(lambda: c.receive(0.2), 60, what=f"{tenant}'s redelivery")
            assert (again.id, again.value, again.delivery_count) == (slow.id, slow.value, 2)
            again.ack()
            c.flush()
        letters = wait_for(lambda: client.dead_letters(QUEUE) or None, 60, what=f"{tenant}'s dead letter")
        assert [(d.id, d.value, d.reason) for d in letters] == [(poison.id, poison.value, "rejected")]


def test_two_deployments_with_their_own_topics_share_a_broker_without_seeing_each_other(
        make_settings, artifacts):
    acme, beta = make_settings(), make_settings()
    defaults = settings_env(Settings())
    for s in (acme, beta):  # every name overridden through its KMQ_* variable
        env = settings_env(s)
        assert all(env[v] != defaults[v] for v in TOPIC_VARIABLES)
        assert Settings.from_env(env) == s
    assert not {settings_env(acme)[v] for v in TOPIC_VARIABLES} & {settings_env(beta)[v] for v in TOPIC_VARIABLES}

    trackers = [TrackerProcess(s, artifacts / f"tracker-{name}.log") for s, name in ((acme, "acme"), (beta, "beta"))]
    try:
        for t in trackers:
            t.start(timeout_s=120)
        run_the_flow(acme, "acme", 5)
        run_the_flow(beta, "beta", 3)
        # Each tracker counts its own deployment only.
        for t, tenant, n in ((trackers[0], "acme", 5), (trackers[1], "beta", 3)):
            d = wait_for(lambda: (lambda d: d if d and d["since_start"]["acked"] == n - 1
                                  and d["dead_letters_detail"]["count"] == 1 else None)(detail(t)),
                         60, interval_s=0.3, what=f"{tenant}'s tracker numbers")
            assert d["dead_letters_detail"]["recent"][0]["value_preview"].startswith(f"{tenant}-")
            assert d["since_start"]["sent"] >= n and d["since_start"]["rejected"] == 1
    finally:
        for t in trackers:
            t.stop()
