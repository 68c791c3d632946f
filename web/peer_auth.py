"""Credentials one tracker worker gives another for one forwarded request.

A view that needs another worker's part (the queue list gathers every
worker's queues; a queue's detail is answered by the worker owning its markers
partition) asks that worker at the URL it advertised in the consumer group.
Forwarding the caller's bearer token there handed it to whatever URL a group
member advertised. Instead the asking worker signs, with a key derived from
its own ``KMQ_ADMIN_TOKEN``, exactly what it asks:

    HMAC-SHA256(key, "v1" | target URL | path and sorted query | expiry ms | caller)

sent as ``X-Kmq-Peer: v1;<expiry ms>;<caller>;<hex>``. The receiving worker
checks it with its own admin token against its own canonical URL and the
request it got, so a credential is useless for another worker, another path
or query, and after :data:`LIFETIME_S` (worker clocks must agree to within
:data:`CLOCK_SKEW_S`; run NTP). Within its lifetime it can be replayed only
for that same read. A worker never accepts a forwarded bearer token on the
peer-only endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from kmq.errors import PermissionDeniedError
from kmq.ops.tenancy import Caller, validate_tenant_name

HEADER = "X-Kmq-Peer"
VERSION = "v1"
LIFETIME_S = 15.0  # long enough for a loaded worker to answer, short enough to be useless later
CLOCK_SKEW_S = 30.0  # an expiry further ahead than lifetime + skew is refused too
_KEY_LABEL = b"kmq peer credential v1"  # the admin token itself never signs


def _key(admin_token: str) -> bytes:
    return hmac.new(admin_token.encode(), _KEY_LABEL, hashlib.sha256).digest()


def target(path: str, query: Iterable[tuple[str, str]]) -> str:
    """The path and query as signed: query pairs sorted, so encodings cannot differ."""
    return path + "?" + "&".join(f"{k}={v}" for k, v in sorted(query))


def _who(caller: Caller) -> str:
    return "admin" if caller.admin else f"tenant:{caller.tenant}"


def _mac(admin_token: str, url: str, path_query: str, expires_ms: int, who: str) -> str:
    msg = "\n".join((VERSION, url.rstrip("/"), path_query, str(expires_ms), who)).encode()
    return hmac.new(_key(admin_token), msg, hashlib.sha256).hexdigest()


def sign(admin_token: str, *, url: str, path_query: str, caller: Caller, now_s: float) -> str:
    """The ``X-Kmq-Peer`` value for one request to ``url`` + ``path_query`` on behalf of ``caller``."""
    expires_ms = int((now_s + LIFETIME_S) * 1000)
    who = _who(caller)
    return f"{VERSION};{expires_ms};{who};{_mac(admin_token, url, path_query, expires_ms, who)}"


def verify(admin_token: str, credential: str, *, url: str, path_query: str, now_s: float) -> Caller:
    """The caller a credential speaks for, if it was made for exactly this request (else 403)."""
    try:
        version, expires, who, mac = credential.split(";")
        expires_ms = int(expires)
    except ValueError as exc:
        raise PermissionDeniedError(f"{HEADER}: not a peer credential") from exc
    if version != VERSION:
        raise PermissionDeniedError(f"{HEADER}: unknown version {version!r}")
    if not hmac.compare_digest(mac, _mac(admin_token, url, path_query, expires_ms, who)):
        raise PermissionDeniedError(f"{HEADER}: not made for this worker, path and query "
                                    "(or the workers' KMQ_ADMIN_TOKEN differ)")
    now_ms = now_s * 1000
    if not now_ms < expires_ms <= now_ms + (LIFETIME_S + CLOCK_SKEW_S) * 1000:
        raise PermissionDeniedError(f"{HEADER}: expired or not yet valid (worker clocks apart?)")
    if who == "admin":
        return Caller(admin=True)
    if who.startswith("tenant:"):
        return Caller(admin=False, tenant=validate_tenant_name(who[len("tenant:"):]))
    raise PermissionDeniedError(f"{HEADER}: unknown caller {who!r}")
