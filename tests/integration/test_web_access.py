"""Who may see what on the tracker's web views, auth on (an admin token, two tenants): tenants
see only their queues and foreign ones look missing; a tenant is created once, then rotated
or revoked; forged ``!auth`` and tenant records and forged queue tenants grant nothing;
Faust's own table and router endpoints are not served; the debug views are admin only.

One deployment for the module, with a known workload (tests/integration/web_deployment.py).
"""

from __future__ import annotations

import json
import uuid

import pytest

import kmq
from tests.conftest import wait_for
from tests.integration.web_deployment import ADMIN, A, B, C, alpha_settled, get, rows_of
from tests.integration.web_deployment import deployment, tokens, workload  # noqa: F401 - the module's fixtures


def test_auth_tenants_see_only_their_queues_and_foreign_ones_look_missing(deployment, tokens, workload):
    _, t = deployment
    wait_for(lambda: alpha_settled(t), 60, what="q-alpha's numbers")
    acme = rows_of(t, token=tokens["acme"])
    assert [r["queue"] for r in acme["queues"]] == [A] and acme["total"] == 1
    assert acme["totals"]["depth"] == 20  # no other tenant's counts in the totals
    assert set(json.dumps(acme)) and B not in json.dumps(acme) and C not in json.dumps(acme)
    assert [r["queue"] for r in rows_of(t, token=tokens["globex"])["queues"]] == [B]
    assert get(f"{t.url}/kmq/api/queues/{A}", tokens["acme"])[0] == 200
    foreign = get(f"{t.url}/kmq/api/queues/{B}", tokens["acme"])
    missing = get(f"{t.url}/kmq/api/queues/q-nothing", tokens["acme"])
    assert foreign[0] == missing[0] == 403
    assert foreign[1] == json.loads(json.dumps(missing[1]).replace("q-nothing", B))
    for token in (None, "not-a-token"):
        assert get(t.url + "/kmq/api/queues", token)[0] == 403
        assert get(f"{t.url}/kmq/api/queues/{A}", token)[0] == 403
        assert get(t.url + "/metrics", token)[0] == 403
    assert get(t.url + "/metrics", tokens["acme"])[0] == 403  # metrics name every queue: admin only
    assert get(t.url + "/kmq/stats", tokens["acme"])[0] == 403
    status, health = get(t.url + "/kmq/health")
    assert status == 200 and health["partitions"] == [0, 1, 2, 3] and health["ready"] and health["waiting_for"] == []
    assert health["gc"]["threshold"][0] == 20_000 and len(health["gc"]["collections"]) == 3
    assert get(t.url + "/kmq/ready")[0] == 200


def test_fausts_own_table_and_router_endpoints_are_not_served(deployment, workload):
    """They answered without any token: /table/tracker/<key>/ gave raw entries (delayed sends'
    payloads), /router/ the partition map."""
    _, t = deployment
    for path in ("/table/tracker/", "/router/", "/graph/"):
        status, _body = get(t.url + path)
        assert status == 404, f"{path} answered {status}"
    assert get(t.url + "/kmq/api/queues", ADMIN)[0] == 200  # kmq's own views still are


def test_a_tenant_is_created_once_then_rotated_or_revoked(deployment):
    s, t = deployment
    name = f"initech-{uuid.uuid4().hex[:6]}"
    queue = f"q-{name}"
    with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
        first = admin.create_tenant(name)
        admin.configure_queue(queue, tenant=name)
        with pytest.raises(kmq.ConfigError, match="rotate_tenant_token"):
            admin.create_tenant(name)  # it silently replaced the token before
        # The tracker follows the queues topic: the token works once it has the record.
        wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", first)[0] == 200, 30, what="the first token")
        second = admin.rotate_tenant_token(name)
        assert second != first
        wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", first)[0] in (401, 403), 30,
                 what="the old token refused")
        assert get(f"{t.url}/kmq/api/queues/{queue}", second)[0] == 200
        admin.revoke_tenant(name)
        wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", second)[0] in (401, 403), 30,
                 what="the revoked token refused")
        assert get(f"{t.url}/kmq/api/queues/{queue}", ADMIN)[0] == 200
        with pytest.raises(kmq.ConfigError, match="no tenant"):
            admin.rotate_tenant_token(name)


def test_a_forged_auth_record_makes_nobody_admin_on_the_tracker(deployment):
    """The tracker trusted the queues topic's `!auth` record before its own KMQ_ADMIN_TOKEN:
    anyone allowed to write that topic could make their own token admin."""
    from confluent_kafka import Producer

    from kmq.ops.tenancy import AUTH_KEY, encode_auth
    from kmq.ops.queues_writes import publish_auth

    s, t = deployment
    forged = "f" * 32
    raw = Producer(s.client_config())
    raw.produce(s.queues_topic, encode_auth(forged), AUTH_KEY)
    assert raw.flush(30) == 0
    try:
        # A tenant created after the forged record: once the tracker knows it, it read past it.
        probe = Tenant_token(s, f"probe-{uuid.uuid4().hex[:6]}")
        wait_for(lambda: get(f"{t.url}/kmq/api/queues?prefix=zzz", probe)[0] == 200, 30,
                 what="the tracker past the forged record")
        assert get(f"{t.url}/kmq/api/queues", forged)[0] in (401, 403)
        assert get(f"{t.url}/kmq/api/queues", ADMIN)[0] == 200
    finally:
        publish_auth(s)  # the deployment's own record again, for the SDK processes' checks


def Tenant_token(s, name: str) -> str:
    """A tenant written straight to the queues topic (the SDK now trusts the forged admin hash),
    signed with the admin token as the tracker requires."""
    from kmq.ops.control_sig import sign_tenant
    from kmq.ops.tenancy import Tenant, hash_token, new_token
    from kmq.ops.queues_writes import write_tenant
    token = new_token()
    digest = hash_token(token)
    write_tenant(s, Tenant(name, digest, sign_tenant(ADMIN, name, digest)))
    return token


def test_forged_tenant_records_and_queue_tenants_grant_nothing_on_the_tracker(deployment, tokens):
    """Whoever may write the queues topic (a tenant that configures its own queues) could add a
    tenant with a token of its own, or name itself the tenant of another tenant's queue: the
    tracker's views granted both. Only what the admin signed counts now."""
    from confluent_kafka import Producer

    from kmq.ops.tenancy import Tenant, hash_token, new_token
    from kmq.queue_config import QueueConfig

    s, t = deployment
    queue = f"z-forged-{uuid.uuid4().hex[:6]}"
    with kmq.Client(settings=s.replace(token=ADMIN)) as admin:
        admin.configure_queue(queue, tenant="globex")
    wait_for(lambda: get(f"{t.url}/kmq/api/queues/{queue}", tokens["globex"])[0] == 200, 30,
             what="globex's queue")
    mallory = new_token()
    raw = Producer(s.client_config())
    raw.produce(s.queues_topic, Tenant("mallory", hash_token(mallory)).encode(), b"!tenant/mallory")
    raw.produce(s.queues_topic, QueueConfig(tenant="acme").encode(), queue.encode())
    assert raw.flush(30) == 0
    probe = Tenant_token(s, f"probe-{uuid.uuid4().hex[:6]}")  # signed, after the forged records
    wait_for(lambda: get(f"{t.url}/kmq/api/queues?prefix=zzz", probe)[0] == 200, 30,
             what="the tracker past the forged records")
    assert get(f"{t.url}/kmq/api/queues", mallory)[0] == 403
    assert get(f"{t.url}/kmq/api/queues/{queue}", tokens["acme"])[0] == 403
    assert queue not in json.dumps(rows_of(t, token=tokens["acme"], prefix="z-"))
    # The forged setting replaced globex's (the topic keeps the newest): admin only until reassigned.
    assert get(f"{t.url}/kmq/api/queues/{queue}", tokens["globex"])[0] == 403
    assert get(f"{t.url}/kmq/api/queues/{queue}", ADMIN)[0] == 200


def test_debug_views_are_admin_only(deployment):
    """/kmq/debug/state decoded every entry for anyone who asked, on the event loop."""
    _, t = deployment
    for path in ("/kmq/debug/state", "/kmq/debug/ticks"):
        assert get(t.url + path)[0] == 403
        status, body = get(t.url + path, ADMIN)
        assert status == 200 and isinstance(body, dict)
