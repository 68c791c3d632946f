"""Tenants and their tokens: who may administer and view which queues.

A queue may belong to a tenant (``QueueConfig.tenant``). A tenant record
(its name and the SHA-256 of its token, never the token) lives on the queues
topic under the key ``!tenant/<name>``, next to the queue configurations, so
every :class:`~kmq.ops.queues_topic.QueueConfigs` view knows it.

With auth on (``KMQ_AUTH=on``), a caller presents a token:

- the admin token (``KMQ_ADMIN_TOKEN``) may do anything;
- a tenant's token may administer and view that tenant's queues only; for
  any other queue it is refused the same way as for a queue that does not
  exist, so no other tenant's queue names or counts leak.

The tracker publishes whether auth is on, with the admin token's salted
scrypt hash (:mod:`kmq.ops.admin_hash`), as the record ``!auth`` on the queues
topic, so SDK processes follow the deployment without their own switch.
Tenant tokens are minted with 256 random bits and stored as SHA-256: a slow
hash adds nothing against guessing a random 256-bit value. Tenant records and
queues' tenants are signed by the admin (:mod:`kmq.ops.control_sig`): a
tracker counts only those. This guards kmq's own paths (SDK admin calls,
web/API views). Who may read and write the topics themselves is Kafka's
business: use its ACLs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from kmq.errors import ConfigError, PermissionDeniedError, TokenRefusedError
from kmq.ops.admin_hash import AdminHash

TENANT_KEY_PREFIX = "!tenant/"
AUTH_KEY = b"!auth"  # present (with the admin token's scrypt hash) while the deployment has auth on
TENANT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")  # \Z: $ let "t\n" through


def hash_token(token: str) -> str:
    """A tenant token's stored form (tenant tokens are random 256-bit: SHA-256 suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (shown once; only its hash is stored)."""
    return "kmq_" + secrets.token_urlsafe(32)


def validate_tenant_name(name: object) -> str:
    if not isinstance(name, str) or not TENANT_NAME_RE.match(name):
        raise ConfigError(f"tenant={name!r} is not a valid tenant name: use 1-64 characters "
                          "from A-Z a-z 0-9 . _ - starting with a letter or digit")
    return name


@dataclass(frozen=True)
class Tenant:
    """A tenant record as stored on the queues topic."""

    name: str
    token_sha256: str
    sig: str = ""  # the admin's signature (kmq.ops.control_sig); "" when written with auth off

    def key(self) -> bytes:
        return (TENANT_KEY_PREFIX + self.name).encode()

    def encode(self) -> bytes:
        return json.dumps({"v": 1, "name": self.name, "token_sha256": self.token_sha256,
                           "sig": self.sig}).encode()

    @classmethod
    def decode(cls, data: bytes) -> "Tenant":
        d = json.loads(data)
        if d.get("v") != 1:
            raise ValueError("unsupported tenant record version")
        return cls(validate_tenant_name(d["name"]), str(d["token_sha256"]), str(d.get("sig") or ""))


def encode_auth(admin_token: str) -> bytes:
    """The ``!auth`` record's value: the admin token as salted scrypt (a new salt each time)."""
    return AdminHash.of(admin_token).encode()


def decode_auth(data: bytes) -> AdminHash:
    """The admin hash of an ``!auth`` record (LegacyAuthRecordError for the old unsalted one)."""
    return AdminHash.decode(data)


def token_matches(token: str | None, token_sha256: str | None) -> bool:
    if not token or not token_sha256:
        return False
    return hmac.compare_digest(hash_token(token), token_sha256)


def admin_token_is(expected: str) -> Callable[[str], bool]:
    """An admin check against a token this process holds itself (the tracker's own setting)."""
    return lambda token: hmac.compare_digest(token.encode(), expected.encode())


@dataclass(frozen=True)
class Caller:
    """Who is asking: the admin, a tenant, or nobody (auth off: everybody is admin)."""

    admin: bool
    tenant: str | None = None

    def may_access(self, queue_tenant: str | None) -> bool:
        return self.admin or (self.tenant is not None and self.tenant == queue_tenant)


def identify(token: str | None, *, auth_on: bool, is_admin: Callable[[str], bool] | None,
             tenants: dict[str, Tenant], admin_refused: str | None = None) -> Caller:
    """Who presents ``token``; raises PermissionDeniedError for a bad or missing one.

    Tenants are checked first (one SHA-256): only a token that is no tenant's pays
    the admin check, which may be a slow hash. ``admin_refused`` replaces the
    refusal's message when the admin check cannot succeed (an old ``!auth`` record).
    """
    if not auth_on:
        return Caller(admin=True)
    if not token:
        raise TokenRefusedError("this kmq deployment requires a token", "KMQ_TOKEN or token=...")
    digest = hash_token(token)
    for t in tenants.values():
        if hmac.compare_digest(digest, t.token_sha256):
            return Caller(admin=False, tenant=t.name)
    if is_admin is not None and is_admin(token):
        return Caller(admin=True)
    if admin_refused:
        raise PermissionDeniedError(admin_refused)
    raise TokenRefusedError("the token is not valid here")


def require_queue_access(caller: Caller, queue: str, queue_tenant: str | None) -> None:
    """Refuse a caller that may not touch ``queue`` (without saying whether it exists)."""
    if not caller.may_access(queue_tenant):
        raise PermissionDeniedError(f"queue {queue!r}: not found or not yours")


def require_admin(caller: Caller, what: str) -> None:
    if not caller.admin:
        raise PermissionDeniedError(f"{what} needs the admin token (KMQ_ADMIN_TOKEN)")
