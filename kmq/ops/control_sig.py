"""Signatures of the queues topic's control records: who is a tenant, which tenant owns a queue.

Every tenant that may ``configure_queue`` its own queues may write the queues
topic, so a record there proves nothing about its writer: a tenant could write
``!tenant/mallory`` with a token of its own, or another tenant's queue setting
naming itself as the queue's tenant, and a tracker would grant its views. So
the records that grant access are signed by their writer, the admin, with a
key derived from the admin token; only the admin (``KMQ_TOKEN``) and the
trackers (``KMQ_ADMIN_TOKEN``) hold it::

    HMAC-SHA256(HMAC-SHA256(admin token, "kmq control records v1"), kind | name | value)

A tracker with auth on counts only what verifies under its own admin token
(:class:`kmq.ops.queues_topic.QueueConfigs` with ``control_token``). SDK processes
hold no key to check with; their checks guard their own calls, which anyone who
may write the topic can skip anyway.

What a signature does not stop: a writer of the topic can still *remove* a
grant (a tombstone, or an unsigned record replacing a signed one under
compaction), and can write back a record the admin signed earlier for the
same key (a tenant's rotated-out token; a queue's former tenant). Revoke a
tenant's Kafka ACLs with its token.
"""

from __future__ import annotations

import hashlib
import hmac

_KEY_LABEL = b"kmq control records v1"  # the admin token itself never signs


def _mac(admin_token: str, *parts: str) -> str:
    key = hmac.new(admin_token.encode(), _KEY_LABEL, hashlib.sha256).digest()
    return hmac.new(key, "\n".join(parts).encode(), hashlib.sha256).hexdigest()


def sign_tenant(admin_token: str, name: str, token_sha256: str) -> str:
    """The signature of tenant record ``name`` holding ``token_sha256``."""
    return _mac(admin_token, "tenant", name, token_sha256)


def sign_queue_tenant(admin_token: str, queue: str, tenant: str) -> str:
    """The signature of "queue ``queue`` belongs to tenant ``tenant``"."""
    return _mac(admin_token, "queue-tenant", queue, tenant)


def verifies(signature: str, expected: str) -> bool:
    """Whether ``signature`` is ``expected`` (constant time; an empty one never is)."""
    return bool(signature) and hmac.compare_digest(signature.encode(), expected.encode())
