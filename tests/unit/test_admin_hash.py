"""The admin token's published hash: salted scrypt, versioned, old records refused with the fix."""

import hashlib
import json

import pytest

from kmq.errors import PermissionDeniedError
from kmq.ops import admin_hash
from kmq.ops.admin_hash import AdminHash, LegacyAuthRecordError
from kmq.ops.tenancy import Tenant, decode_auth, encode_auth, hash_token

TOKEN = "the-admin-token-0123"


def test_the_record_is_salted_scrypt_and_holds_neither_the_token_nor_its_sha256():
    """It was an unsalted SHA-256 of an operator-chosen token, readable by every SDK process."""
    one, two = encode_auth(TOKEN), encode_auth(TOKEN)
    d = json.loads(one)
    assert (d["v"], d["kdf"], d["n"], d["r"], d["p"]) == (2, "scrypt", 1 << 15, 8, 1)
    assert one != two and json.loads(two)["salt"] != d["salt"]  # a fresh salt per record
    for forbidden in (TOKEN.encode(), hashlib.sha256(TOKEN.encode()).hexdigest().encode()):
        assert forbidden not in one
    record = decode_auth(one)
    assert record.verify(TOKEN) and not record.verify(TOKEN + "x") and not record.verify(None)


def test_an_old_unsalted_record_is_refused_naming_the_fix():
    old = json.dumps({"v": 1, "admin_token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}).encode()
    with pytest.raises(LegacyAuthRecordError, match="restart a tracker with KMQ_AUTH=on"):
        decode_auth(old)


def test_a_view_with_an_old_record_keeps_auth_on_and_refuses_the_admin_token():
    """Reading an old record as 'auth off' would make every caller admin."""
    from kmq.ops.queues_topic import QueueConfigs

    from kmq.settings import Settings

    view = QueueConfigs.__new__(QueueConfigs)  # the record folding only, no Kafka
    view._init_state(Settings(), control_token=None)
    view._read_tenant("acme", Tenant("acme", hash_token("acme-token")).encode())
    view._read_auth(json.dumps({"v": 1, "admin_token_sha256": hash_token(TOKEN)}).encode())
    assert view.auth_on() and view.admin_hash() is None
    with pytest.raises(PermissionDeniedError, match="restart a tracker with KMQ_AUTH=on"):
        view.caller(TOKEN)
    assert view.caller("acme-token").tenant == "acme"
    view._read_auth(AdminHash.of(TOKEN, n=1 << 10).encode())  # a tracker republished it
    assert view.caller(TOKEN).admin


@pytest.mark.parametrize("change", [{"n": 1 << 30}, {"n": 1000}, {"p": 64}, {"r": 0}, {"hash": "ab"},
                                    {"v": 3}, {"kdf": "md5"}])
def test_hostile_parameters_are_refused_before_any_hashing(change):
    """A record on the queues topic must not make every reader allocate gigabytes."""
    d = json.loads(AdminHash.of(TOKEN, n=1 << 10).encode())
    d.update(change)
    with pytest.raises(ValueError):
        decode_auth(json.dumps(d).encode())


def test_a_successful_check_is_remembered_per_token_and_record_with_a_bound():
    admin_hash._cache.clear()
    record = AdminHash.of(TOKEN, n=1 << 10)
    before = admin_hash._cache.slow_hashes
    assert all(record.verify(TOKEN) for _ in range(5))
    assert admin_hash._cache.slow_hashes - before == 1
    assert not record.verify("wrong-token-0123456") and not record.verify("wrong-token-0123456")
    assert admin_hash._cache.slow_hashes - before == 3  # failures are never cached
    other = AdminHash.of(TOKEN, n=1 << 10)  # a republished record: a new salt, checked again
    assert other.verify(TOKEN) and admin_hash._cache.slow_hashes - before == 4
    for i in range(admin_hash.CACHE_ENTRIES + 10):
        AdminHash.of(f"token-{i}", n=1 << 4, r=1).verify(f"token-{i}")
    assert len(admin_hash._cache._seen) == admin_hash.CACHE_ENTRIES

