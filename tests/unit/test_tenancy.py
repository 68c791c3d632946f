"""Who may act on which queue: tokens, tenants and the admin."""

import pytest

from kmq.errors import ConfigError, PermissionDeniedError
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
    from kmq.ops.tenancy import Tenant, hash_token

    view = folding_view()
    view._read_tenant("x", Tenant("acme", hash_token("t" * 32)).encode())
    assert view.tenants() == {}
    view._read_tenant("acme", Tenant("acme", hash_token("t" * 32)).encode())
    assert set(view.tenants()) == {"acme"}
    view._read_tenant("acme", None)  # a tombstone: revoked
    assert view.tenants() == {}


def test_a_tracker_with_auth_off_leaves_the_auth_record_alone(monkeypatch):
    import kmq.ops.queues_writes as qc
    from kmq.settings import Settings

    written = []
    monkeypatch.setattr(qc, "_write", lambda s, records, what, timeout_s: written.extend(records))
    qc.publish_auth(Settings(auth="off"))
    assert written == []  # it wrote a tombstone: every SDK process then treated callers as admin
    qc.publish_auth(Settings(auth="on", admin_token="x" * 24))
    assert [k for k, _ in written] == [qc.AUTH_KEY] and written[0][1] is not None


def folding_view(control_token: str | None = None):
    """A QueueConfigs that folds records handed to it (no Kafka)."""
    from kmq.ops.queues_topic import QueueConfigs
    from kmq.settings import Settings

    view = QueueConfigs.__new__(QueueConfigs)
    view._init_state(Settings(), control_token)
    return view


ADMIN_TOKEN = "admin-token-0123456789abcdef"


def signed_tenant(name: str, token: str, admin: str = ADMIN_TOKEN):
    from kmq.ops.control_sig import sign_tenant
    digest = hash_token(token)
    return Tenant(name, digest, sign_tenant(admin, name, digest))


def test_a_tracker_counts_only_tenant_records_the_admin_signed():
    """Any writer of the queues topic (a tenant configuring its queues) could add a tenant
    with a token of its own: the tracker's views then granted that token."""
    view = folding_view(control_token=ADMIN_TOKEN)
    view._read_tenant("acme", signed_tenant("acme", "acme-token").encode())
    view._read_tenant("mallory", Tenant("mallory", hash_token("m-token")).encode())  # unsigned
    view._read_tenant("eve", signed_tenant("eve", "e-token", admin="a guessed admin token").encode())
    assert set(view.tenants()) == {"acme"} and view.unverified == 2
    forged = Tenant("acme", hash_token("stolen"), signed_tenant("acme", "acme-token").sig)
    view._read_tenant("acme", forged.encode())  # a signature moved to another token
    assert view.tenants() == {} and view.unverified == 3  # it replaced acme's record on the topic too
    sdk = folding_view()  # an SDK process holds no key: its own checks take the records as they are
    sdk._read_tenant("mallory", Tenant("mallory", hash_token("m-token")).encode())
    assert set(sdk.tenants()) == {"mallory"}


def test_a_tracker_grants_a_queue_only_to_the_tenant_the_admin_assigned_it_to():
    """A tenant could write another tenant's queue setting naming itself the queue's tenant."""
    from kmq.ops.control_sig import sign_queue_tenant
    from kmq.queue_config import QueueConfig

    view = folding_view(control_token=ADMIN_TOKEN)
    view.put_local("q-acme", QueueConfig(tenant="acme", tenant_sig=sign_queue_tenant(ADMIN_TOKEN, "q-acme", "acme")))
    view.put_local("q-globex", QueueConfig(tenant="acme"))  # forged: unsigned
    view.put_local("q-other", QueueConfig(tenant="acme", tenant_sig=sign_queue_tenant(ADMIN_TOKEN, "q-acme", "acme")))
    assert view.tenant_of("q-acme") == "acme"
    assert view.tenant_of("q-globex") is None and view.tenant_of("q-other") is None  # admin only
    assert view.get("q-globex").tenant == "acme"  # kept as read: the tracker's own writes keep it
    changed = view.get("q-acme").changed(visibility_timeout_s=5)  # a tenant's later change keeps the signature
    view.put_local("q-acme", changed)
    assert view.tenant_of("q-acme") == "acme"
    assert view.unverified == 2
    sdk = folding_view()
    sdk.put_local("q-globex", QueueConfig(tenant="acme"))
    assert sdk.tenant_of("q-globex") == "acme"  # no key: taken as it is
    with pytest.raises(ConfigError, match="tenant_sig"):
        QueueConfig().changed(tenant_sig="x")  # set by the admin's configure_queue only
