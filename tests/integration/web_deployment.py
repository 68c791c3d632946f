"""One running worker with auth on (an admin token, two tenants) and a known workload, for the
web tests (test_web_numbers.py, test_web_access.py), and reading its views.

The fixtures are module-scoped: each module that imports them gets a deployment of its own
(own topics and queues topic, so its ``!auth`` record touches no other test's deployment).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest

import kmq
from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for

ADMIN = "admin-token-for-tests-0123456789"
A, B, C, D = "q-alpha", "q-beta", "q-gamma", "q-delta"


def get(url: str, token: str | None = None) -> tuple[int, dict | str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        body, status = e.read().decode(), e.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


@pytest.fixture(scope="module")
def deployment(make_settings, artifacts, request):
    # Partition mode: the numbers below count no shared consumer's read-ahead.
    s = make_settings(queues_topic=f"web-{uuid.uuid4().hex[:8]}.queues", auth="on", admin_token=ADMIN,
                      metrics_top_queues=2, stats_refresh_ms=300, dispatch="partition",
                      tracker_gc_threshold=20_000)  # not the default: the health view shows it applied
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    t = TrackerProcess(s, artifacts / f"tracker-{module}.log").start(timeout_s=120)
    yield s, t
    t.stop()


@pytest.fixture(scope="module")
def tokens(deployment):
    s, _ = deployment
    with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
        acme, globex = admin.create_tenant("acme"), admin.create_tenant("globex")
        admin.configure_queue(A, tenant="acme")
        admin.configure_queue(B, tenant="globex")
    return {"acme": acme, "globex": globex}


@pytest.fixture(scope="module")
def workload(deployment, tokens):
    """q-alpha: 30 sent, 10 received (6 acked, 1 rejected, 1 released for later, 2 open), 2 delayed;
    q-beta: 5 waiting; q-gamma: 1 redelivered once, then acked; q-delta: 1 waiting."""
    s, t = deployment
    # Nobody looks before the sends (the scan starts with the first view, after them): sends
    # are counted at their timestamps all the same. They were counted only as "appended since
    # the previous pass", so the dashboard opened after ./scripts/dev's demo showed sent/min 0.
    WORKLOAD_STARTED_AT.append(time.time())
    client = kmq.Client(settings=s.replace(token=ADMIN))
    client.send_batch(A, [b"a%d" % i for i in range(30)])
    client.send(A, b"later-1", delay_s=600)
    client.send(A, b"later-2", delay_s=600)
    client.send_batch(B, [b"b"] * 5)
    client.send(C, b"slow")
    client.send(D, b"d")
    client.flush()
    # The two open messages must stay in flight for the whole module: with 60 s, a loaded
    # machine reached the dashboard test after they had come back (depth 22, in flight 1).
    alpha = client.consumer(A, visibility_timeout_s=3600, max_in_flight=10, batch_size=10)
    got = []
    wait_for(lambda: got.extend(alpha.receive_batch(10 - len(got), timeout_s=0.2)) or len(got) >= 10, 30,
             what="10 messages of q-alpha")
    for m in got[:6]:
        m.ack()
    got[6].reject(reason="poison")
    got[7].release(delay_s=600)
    alpha.flush()
    with client.consumer(C, visibility_timeout_s=1) as gamma:
        first = wait_for(lambda: gamma.receive(0.2), 30, what="q-gamma")
        again = wait_for(lambda: gamma.receive(0.2), 30, what="q-gamma redelivered")
        assert again.delivery_count == 2 and first.id == again.id
        again.ack()
        gamma.flush()
    yield client
    alpha.close()
    client.close()


# Per-minute figures count an event for 50 to 60 s (10 s buckets, epoch-aligned): they are
# asserted only while the workload's first event is surely in the window, measured from before
# it began (measured from its end, a slow workload let its sends leave the window while the
# figures were still asserted). The 10-minute history and the totals are asserted always.
WORKLOAD_STARTED_AT: list[float] = []
RATES_CERTAIN_S = 45
SENT_IN_WORKLOAD = 30 + 5 + 2 + 1  # q-alpha, q-beta, q-gamma (its send, its redelivered copy), q-delta


def rates_fresh() -> bool:
    return bool(WORKLOAD_STARTED_AT) and time.time() - WORKLOAD_STARTED_AT[-1] < RATES_CERTAIN_S


def rows_of(t, token=ADMIN, **params) -> dict:
    from urllib.parse import urlencode
    status, body = get(t.url + "/kmq/api/queues?" + urlencode({"prefix": "q-", **params}), token)
    assert status == 200, body
    return body


EXPECTED_ALPHA = {"depth": 20, "depth_exact": True, "in_flight": 3, "scheduled": 2, "dead_letters": 1}
EXPECTED_ALPHA_RATES = {"sent_per_min": 30, "received_per_min": 10, "acked_per_min": 6, "rejected_per_min": 1,
                        "released_per_min": 1, "dead_lettered_per_min": 1, "redelivered_per_min": 0}
EXPECTED_GAMMA_RATES = {"redelivered_per_min": 1, "acked_per_min": 1, "sent_per_min": 2, "received_per_min": 2}


def alpha_settled(t) -> dict | None:
    body = rows_of(t)
    row = next((r for r in body["queues"] if r["queue"] == A), None)
    gamma = next((r for r in body["queues"] if r["queue"] == C), None)
    if not (row and gamma and all(row[k] == v for k, v in EXPECTED_ALPHA.items())
            and (gamma["in_flight"], gamma["depth"]) == (0, 0)):
        return None
    if rates_fresh() and not (all(row[k] == v for k, v in EXPECTED_ALPHA_RATES.items())
                              and all(gamma[k] == v for k, v in EXPECTED_GAMMA_RATES.items())):
        return None  # ("sent" comes from the periodic queue-topic scan: it may trail the rest)
    return body


def sends_counted(body: dict | None) -> dict | None:
    """``body`` once the history (10 minutes: certain here) counts every send of the workload."""
    return body if body and sum(body["history"]["series"]["sent"]) == SENT_IN_WORKLOAD else None
