"""A forwarded request's credential works for exactly one worker, path, query and moment."""

import pytest

from kmq.errors import PermissionDeniedError
from kmq.ops.tenancy import Caller
from web import peer_auth

ADMIN_TOKEN = "the-admin-token-0123456"
URL = "http://tracker-2:6066"
PATH = peer_auth.target("/kmq/api/local/queues", [("limit", "100"), ("prefix", "")])
NOW_S = 1_800_000_000.0
ACME = Caller(admin=False, tenant="acme")


def signed(caller=ACME, *, url=URL, path=PATH, now_s=NOW_S, token=ADMIN_TOKEN):
    return peer_auth.sign(token, url=url, path_query=path, caller=caller, now_s=now_s)


def check(credential, *, url=URL, path=PATH, now_s=NOW_S, token=ADMIN_TOKEN):
    return peer_auth.verify(token, credential, url=url, path_query=path, now_s=now_s)


def test_the_credential_speaks_for_its_caller_at_its_target():
    assert check(signed()) == ACME
    assert check(signed(Caller(admin=True))) == Caller(admin=True)
    assert check(signed(url=URL + "/"), url=URL) == ACME  # a trailing slash is the same worker
    # The query is signed sorted: the receiver's order need not be the sender's.
    assert peer_auth.target("/p", [("b", "1"), ("a", "2")]) == peer_auth.target("/p", [("a", "2"), ("b", "1")])


@pytest.mark.parametrize("where", [
    {"url": "http://evil:6066"},                                    # another worker (or not a worker)
    {"path": peer_auth.target("/kmq/api/queues/orders", [])},       # another path
    {"path": peer_auth.target("/kmq/api/local/queues", [("limit", "1000"), ("prefix", "")])},  # another query
    {"token": "another-admin-token-000"},                           # another deployment
    {"now_s": NOW_S + peer_auth.LIFETIME_S},                        # expired
    {"now_s": NOW_S - peer_auth.CLOCK_SKEW_S - 1},                  # from too far in the future
])
def test_a_credential_is_refused_anywhere_else(where):
    with pytest.raises(PermissionDeniedError, match=peer_auth.HEADER):
        check(signed(), **where)


def test_the_caller_inside_cannot_be_changed():
    version, expires, who, mac = signed().split(";")
    for forged in (f"{version};{expires};admin;{mac}",
                   f"{version};{int(expires) + 60_000};{who};{mac}", "Bearer x", f"v2;{expires};{who};{mac}"):
        with pytest.raises(PermissionDeniedError):
            check(forged)


def test_the_credential_holds_neither_token():
    assert ADMIN_TOKEN not in signed() and "Bearer" not in signed()
