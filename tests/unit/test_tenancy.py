"""Who may act on which queue: tokens, tenants and the admin."""

import pytest

from kmq.errors import PermissionDeniedError
from kmq.ops.admin_hash import AdminHash
from kmq.ops.tenancy import (Caller, Tenant, decode_auth, hash_token, identify,
                             require_admin, require_queue_access)

TENANTS = {"acme": Tenant("acme", hash_token("acme-token")),
           "beta": Tenant("beta", hash_token("beta-token"))}
ADMIN = AdminHash.of("the-admin-token-0123", n=1 << 10)  # cheap parameters: the logic, not the cost


def who(token):
    return identify(token, auth_on=True, is_admin=ADMIN.verify, tenants=TENANTS)


def test_auth_off_everybody_is_admin():
    assert identify(None, auth_on=False, is_admin=None, tenants={}).admin


def test_tokens_identify_the_admin_and_tenants():
    assert who("the-admin-token-0123") == Caller(admin=True)
    assert who("acme-token") == Caller(admin=False, tenant="acme")


@pytest.mark.parametrize("token", [None, "", "nope"])
def test_missing_or_unknown_tokens_are_refused(token):
    with pytest.raises(PermissionDeniedError):
        who(token)


def test_a_tenant_reaches_only_its_queues_and_others_look_absent():
    acme = who("acme-token")
    require_queue_access(acme, "orders", "acme")
    with pytest.raises(PermissionDeniedError, match="not found or not yours") as info:
        require_queue_access(acme, "invoices", "beta")
    assert "beta" not in str(info.value)
    with pytest.raises(PermissionDeniedError):
        require_queue_access(acme, "untenanted", None)
    with pytest.raises(PermissionDeniedError, match="admin token"):
        require_admin(acme, "creating a tenant")


def test_records_round_trip_and_never_hold_the_token():
    t = TENANTS["acme"]
    assert Tenant.decode(t.encode()) == t and b"acme-token" not in t.encode()
    assert decode_auth(ADMIN.encode()) == ADMIN


def test_a_tenant_record_counts_only_under_its_own_name():
    """A `!tenant/x` record naming tenant "acme" granted acme's queues to x's token holder."""
    import threading

    from kmq.ops.tenancy import Tenant, hash_token
    from kmq.ops.queues_topic import QueueConfigs

    view = QueueConfigs.__new__(QueueConfigs)  # the record folding only, no Kafka
    view._lock, view._tenants = threading.Lock(), {}
    view._read_tenant("x", Tenant("acme", hash_token("t" * 32)).encode())
    assert view.tenants() == {}
    view._read_tenant("acme", Tenant("acme", hash_token("t" * 32)).encode())
    assert set(view.tenants()) == {"acme"}
    view._read_tenant("acme", None)  # a tombstone: revoked
    assert view.tenants() == {}


def test_a_tracker_with_auth_off_leaves_the_auth_record_alone(monkeypatch):
    import kmq.ops.queues_topic as qc
    from kmq.settings import Settings

    written = []
    monkeypatch.setattr(qc, "_write", lambda s, key, value, what, timeout_s: written.append((key, value)))
    qc.publish_auth(Settings(auth="off"))
    assert written == []  # it wrote a tombstone: every SDK process then treated callers as admin
    qc.publish_auth(Settings(auth="on", admin_token="x" * 24))
    assert [k for k, _ in written] == [qc.AUTH_KEY] and written[0][1] is not None
