"""The queues topic, written: a queue's configuration, tenants and the auth record, each
write waited for until the broker has it (:mod:`kmq.ops.queues_topic` reads them back)."""

from __future__ import annotations

from typing import Any

from kmq.kafka.producer_start import started_producer

from kmq.errors import BrokerUnavailableError
from kmq.kafka import profiles
from kmq.kafka.backpressure import produce_when_room
from kmq.ops.tenancy import AUTH_KEY, TENANT_KEY_PREFIX, Tenant
from kmq.protocol.placement import validate_queue_name
from kmq.queue_config import QueueConfig
from kmq.settings import Settings


def write_config(settings: Settings, queue: str, config: QueueConfig,
                 timeout_s: float = 15.0) -> tuple[int, int]:
    """Write ``config`` as the queue's configuration and wait until the broker has it;
    returns where it is (partition, offset)."""
    return write_configs(settings, {queue: config}, timeout_s)[queue]


def write_configs(settings: Settings, configs: dict[str, QueueConfig],
                  timeout_s: float = 15.0) -> dict[str, tuple[int, int]]:
    """Write each queue's configuration, with one producer and one wait for the broker (a
    producer each cost ~1 s: a markers record of 100 PURGEs took 100 s to apply); returns
    where each is (queue -> (partition, offset))."""
    for queue in configs:
        validate_queue_name(queue)
    what = (f"queue {next(iter(configs))!r} configuration" if len(configs) == 1
            else f"{len(configs)} queue configurations")
    at = _write(settings, [(q.encode(), c.encode()) for q, c in configs.items()], what, timeout_s)
    return {key.decode(): where for key, where in at.items()}


def write_tenant(settings: Settings, tenant: Tenant, timeout_s: float = 15.0) -> None:
    """Write a tenant record and wait until the broker has it."""
    _write(settings, [(tenant.key(), tenant.encode())], f"tenant {tenant.name!r}", timeout_s)


def delete_tenant(settings: Settings, name: str, timeout_s: float = 15.0) -> None:
    """Write a tenant's tombstone (its token stops working) and wait until the broker has it."""
    _write(settings, [((TENANT_KEY_PREFIX + name).encode(), None)], f"tenant {name!r}", timeout_s)


def publish_auth(settings: Settings, timeout_s: float = 15.0) -> None:
    """Tracker start with auth on: publish the admin hash for SDK processes' own checks.

    A tracker with auth off writes nothing: it must never turn off auth for the
    processes of a deployment that has it on (it wrote a tombstone, after which every
    SDK process treated every caller as admin). Trackers themselves trust only their
    own ``KMQ_AUTH`` and ``KMQ_ADMIN_TOKEN`` (web/api.py ``caller_of``).
    """
    if not settings.auth_on:
        return
    from kmq.ops.tenancy import encode_auth
    _write(settings, [(AUTH_KEY, encode_auth(settings.admin_token))], "the auth record", timeout_s)


def _write(settings: Settings, records: list[tuple[bytes, bytes | None]], what: str,
           timeout_s: float) -> dict[bytes, tuple[int, int]]:
    """Write ``(key, value)`` records with one producer and wait until the broker has them all;
    returns key -> (partition, offset) of its last record."""
    p = started_producer(profiles.producer_config(settings), settings.queues_topic)
    errors: list[str] = []
    at: dict[bytes, tuple[int, int]] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err:
            errors.append(str(err))
        else:
            at[msg.key()] = (msg.partition(), msg.offset())

    for key, value in records:
        produce_when_room(p, settings.queues_topic, value, key, on_delivery=delivered)
    left = p.flush(timeout_s)
    if left or errors:
        raise BrokerUnavailableError(
            f"{what} not acknowledged by {settings.bootstrap_servers} "
            f"within {timeout_s:g}s: {errors[:1] or 'timed out'}")
    return at
