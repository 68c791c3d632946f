"""docs/web.md read as a black box, against one real tracker worker with auth on: the list's
parameters, the token's refusals, and the fields the doc names in /kmq/health, /kmq/stats
and a queue's detail (tests/integration/test_web_numbers.py has the numbers of a workload).
"""

from __future__ import annotations

import uuid

import pytest

import kmq
from kmq.dev.devstack import TrackerProcess
from tests.conftest import wait_for
from tests.integration.web_deployment import get as web_get

ADMIN = "admin-token-for-claims-0123456789"


def get(url: str, token: str | None = ADMIN) -> tuple[int, dict | str]:
    """(status, JSON or text) of a view, as the admin unless told otherwise."""
    return web_get(url, token)


@pytest.fixture(scope="module")
def deployment(make_settings, artifacts):
    s = make_settings(queues_topic=f"claims-{uuid.uuid4().hex[:8]}.queues", auth="on", admin_token=ADMIN,
                      stats_refresh_ms=300)
    t = TrackerProcess(s, artifacts / "tracker-web-claims.log").start(timeout_s=120)
    yield s, t
    t.stop()


@pytest.mark.parametrize("query, named", [("sort_by=depth", "sort_by"), ("Limit=5", "Limit"), ("page=2", "page")])
def test_an_unknown_list_parameter_is_a_400_naming_it(deployment, query, named):
    _, t = deployment
    status, body = get(f"{t.url}/kmq/api/queues?{query}")
    assert status == 400 and named in body["error"] and "limit, offset, sort, order, prefix" in body["error"], body


def test_a_view_without_a_token_is_a_403_naming_the_header_to_send(deployment):
    _, t = deployment
    for path in ("/kmq/api/queues", "/kmq/api/queues/anything", "/metrics", "/kmq/stats"):
        status, body = get(t.url + path, token=None)
        assert status == 403 and "Authorization: Bearer <token>" in body["error"], (path, body)


def test_health_stats_and_detail_have_the_fields_the_doc_names(deployment):
    s, t = deployment
    status, health = get(t.url + "/kmq/health", token=None)  # open
    assert status == 200
    assert {"partitions", "ready", "waiting_for", "malformed_markers", "set_aside", "unreadable_batches",
            "unreadable_configs",
            "marker_gaps", "fetch_waits_raised", "scanner", "gc"} <= set(health)
    assert set(health["set_aside"]) == {"malformed-marker", "unknown-range", "unknown-partition", "beyond-end",
                                        "payload-expired", "too-large", "start-on-shared", "foreign-record"}
    assert set(health["marker_gaps"]) == {"read", "found", "unread", "reread"}
    assert {"active", "passes", "error", "unreadable_batches", "dlq_records_read"} <= set(health["scanner"])
    assert {"threshold", "collections", "seconds", "longest_pause_ms"} <= set(health["gc"])
    status, stats = get(t.url + "/kmq/stats")
    assert status == 200
    assert {"consumers", "credits", "bad-credits", "credits-refused", "lane-moves", "dispatched", "deliveries", "by-reference", "copied",
            "acquire-errors", "begin-errors", "lane-errors", "lanes-withheld", "unreadable-batches",
            "unreadable-offsets", "too-large-to-copy", "writers-replaced", "lease-lapses", "deduplicated",
            "bad-group", "bad-dedup-id", "held-bytes"} <= set(stats["dispatcher"])
    shared, partition = f"claims-shared-{uuid.uuid4().hex[:6]}", f"claims-part-{uuid.uuid4().hex[:6]}"
    with kmq.Client(settings=s.replace(token=ADMIN)) as client:
        client.configure_queue(partition, dispatch="partition")
        client.send(shared, b"x")
        client.send(partition, b"y")
        client.flush()
    detail = wait_for(lambda: (lambda r: r[1] if r[0] == 200 and r[1].get("consumers") is not None else None)(
        get(f"{t.url}/kmq/api/queues/{shared}")), 60, interval_s=0.3, what="the shared queue's detail")
    assert set(detail["config"]) == {"visibility_timeout_s", "max_deliveries", "spread", "dead_letter", "backoff",
                                     "dispatch", "ordering", "dead_letter_head", "dedup_window_s"}
    assert detail["groups"] is None and detail["consumers"] == 0  # unordered; shared, nobody asking
    part = wait_for(lambda: (lambda r: r[1] if r[0] == 200 and r[1]["config"]["dispatch"] == "partition" else None)(
        get(f"{t.url}/kmq/api/queues/{partition}")), 60, interval_s=0.3, what="the partition queue's detail")
    assert part["consumers"] is None  # "null for a queue in partition mode"
