"""The queues topic's control records, as a :class:`~kmq.ops.queues_topic.QueueConfigs`
view folds them: tenants (``!tenant/<name>``, a token's hash each) and the ``!auth`` record
(the admin token's hash while auth is on), and who presents a token. Apart from the queues'
configurations because it is who may change them, not what they are (:mod:`kmq.ops.tenancy`).
"""

from __future__ import annotations

import logging
import threading

from kmq.ops.admin_hash import AdminHash, LegacyAuthRecordError
from kmq.ops.control_sig import sign_tenant, verifies
from kmq.ops.tenancy import Caller, Tenant, decode_auth, identify

log = logging.getLogger("kmq.queue_config")


class ControlRecords:
    """Tenants and the auth record of a queues-topic view; mixed into ``QueueConfigs``,
    whose ``_init_state`` sets the state read here."""

    _lock: threading.Lock
    _control_token: str | None
    _tenants: dict[str, Tenant]
    _admin_hash: AdminHash | None
    _auth_refused: str | None
    unverified: int
    unreadable: int

    def _unreadable(self, what: str, exc: BaseException) -> None:
        """Count and log (a flood does not flood the log) a record no decoder could read."""
        self.unreadable += 1
        if self.unreadable <= 10 or self.unreadable % 1000 == 0:
            log.warning("ignoring unreadable %s: %s: %s", what, type(exc).__name__, str(exc)[:200])

    def _read_tenant(self, name: str, value: bytes | None) -> None:
        with self._lock:
            if value is None:
                self._tenants.pop(name, None)
                return
            try:
                tenant = Tenant.decode(value)
            except Exception as exc:  # a hostile record: see QueueConfigs._read
                self._unreadable(f"tenant record {name!r}", exc)
                return
            if tenant.name != name:  # a record under one key must not grant another tenant's queues
                log.warning("ignoring tenant record %r naming tenant %r", name, tenant.name)
                return
            if self._control_token is not None and not verifies(
                    tenant.sig, sign_tenant(self._control_token, name, tenant.token_sha256)):
                # It replaced the tenant's record on the topic too (compaction keeps the newest).
                self._tenants.pop(name, None)
                self.unverified += 1
                log.warning("ignoring tenant record %r: not signed with this tracker's admin token "
                            "(KMQ_ADMIN_TOKEN); the admin can re-issue it with rotate_tenant_token", name)
                return
            self._tenants[name] = tenant

    def _read_auth(self, value: bytes | None) -> None:
        with self._lock:
            if value is None:  # trackers no longer write tombstones; an old one still reads as off
                self._admin_hash, self._auth_refused = None, None
                return
            try:
                self._admin_hash, self._auth_refused = decode_auth(value), None
            except LegacyAuthRecordError as exc:
                # Auth stays on, the admin token is refused with the fix named: treating an
                # old record as "auth off" would make every caller admin.
                log.warning("%s", exc)
                self._admin_hash, self._auth_refused = None, str(exc)
            except Exception as exc:  # a hostile record: see QueueConfigs._read
                self._unreadable("auth record", exc)

    def auth_on(self) -> bool:
        """Whether the deployment's tracker published that auth is on."""
        with self._lock:
            return self._admin_hash is not None or self._auth_refused is not None

    def admin_hash(self) -> AdminHash | None:
        """The admin token's published hash while auth is on (None if off or unusable)."""
        with self._lock:
            return self._admin_hash

    def caller(self, token: str | None) -> "Caller":
        """Who presents ``token`` in this deployment (raises PermissionDeniedError)."""
        with self._lock:
            admin, refused = self._admin_hash, self._auth_refused
        return identify(token, auth_on=admin is not None or refused is not None,
                        is_admin=None if admin is None else admin.verify,
                        tenants=self.tenants(), admin_refused=refused)

    def tenants(self) -> dict[str, Tenant]:
        with self._lock:
            return dict(self._tenants)

    def put_tenant(self, tenant: Tenant) -> None:
        with self._lock:
            self._tenants[tenant.name] = tenant

    def drop_tenant(self, name: str) -> None:
        with self._lock:
            self._tenants.pop(name, None)
