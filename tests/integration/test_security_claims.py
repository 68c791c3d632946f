"""docs/security.md's route table with auth on: what answers without a token, and what Faust
endpoints stay off (the others are in test_web_access.py and test_web_routing.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from kmq.dev.devstack import TrackerProcess

ADMIN = "security-claims-admin-token-0123456789"


def get(url: str, token: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture(scope="module")
def tracker_url(make_settings, artifacts):
    s = make_settings(auth="on", admin_token=ADMIN)
    t = TrackerProcess(s, artifacts / "tracker-security-claims.log").start(timeout_s=120)
    yield t.url
    t.stop()


def test_open_routes_answer_without_a_token_and_fausts_statistics_stay_off(tracker_url):
    status, body = get(tracker_url + "/")
    assert (status, json.loads(body)) == (200, {"status": "OK"})
    for path in ("/kmq/health", "/kmq/ui", "/kmq/ui/queue/some-queue"):
        assert get(tracker_url + path)[0] == 200, path
    for path in ("/assignment/", "/performance/"):
        assert get(tracker_url + path, ADMIN)[0] == 404, path


def test_admin_routes_refuse_no_token_and_take_the_admin_token(tracker_url):
    for path in ("/kmq/stats", "/kmq/debug/state", "/kmq/debug/ticks", "/metrics",
                 "/kmq/api/queues"):
        assert get(tracker_url + path)[0] in (401, 403), path
        assert get(tracker_url + path, ADMIN)[0] == 200, path
    # The peer endpoint: a bearer token, even the admin's, is refused.
    assert get(tracker_url + "/kmq/api/local/queues", ADMIN)[0] == 403
