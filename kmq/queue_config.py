"""Per-queue settings, changeable at run time, kept in a compacted topic read as a table.

``client.configure_queue("orders", max_deliveries=3)`` writes one record
(key = queue id, value = versioned JSON) to the queues topic (compacted:
the latest record per queue is the configuration, like a Kafka Streams
KTable). The tracker and every consumer keep a :class:`QueueConfigs` view
that follows the topic, so new values apply to later deliveries without a
restart. A queue that was never configured uses the global ``KMQ_*``
defaults.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kmq.backoff import Backoff
from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.protocol.limits import MAX_TIMEOUT_MS
from kmq.protocol.ordering import DEAD_LETTER_HEAD_POLICIES, DEFAULT_DEDUP_WINDOW_S, ORDERINGS
from kmq.protocol.placement import validate_queue_name
from kmq.settings import MAX_PROCESSING_S, Settings
from kmq.ops.admin_hash import AdminHash, LegacyAuthRecordError
from kmq.ops.tenancy import (AUTH_KEY, TENANT_KEY_PREFIX, Caller, Tenant, decode_auth, identify,
                             validate_tenant_name)

log = logging.getLogger("kmq.queue_config")

CONFIG_VERSION = 1
MAX_VISIBILITY_S = MAX_TIMEOUT_MS / 1000  # 12 h: the marker codec's timeout limit
MAX_DEDUP_WINDOW_S = 12 * 3600.0
DISPATCH_MODES = ("shared", "partition")


@dataclass(frozen=True)
class QueueConfig:
    """Settings of one logical queue; ``None`` means the global ``KMQ_*`` default."""

    visibility_timeout_s: float | None = None
    max_deliveries: int | None = None
    max_processing_s: float | None = None
    backoff: Backoff = field(default_factory=Backoff)
    dead_letter: bool = True
    spread: int = 1
    tenant: str | None = None
    # Queue purges: records of this queue below these offsets are not delivered.
    purged_before: dict[int, int] = field(default_factory=dict)
    # Partitions added by growing the spread: where this queue's records begin on
    # each (a new consumer starts there, not at the partition's beginning).
    partition_starts: dict[int, int] = field(default_factory=dict)
    # "shared": the tracker dispatches to any number of consumers; "partition": the
    # consumers form a group over the queue's partitions; None: KMQ_DISPATCH.
    dispatch: str | None = None
    # Shared -> partition: the tracker records where its dispatcher stopped (handover,
    # partition -> offset) and clears handover_pending; group consumers wait for that.
    handover_pending: bool = False
    handover: dict[int, int] = field(default_factory=dict)
    dispatch_since_ms: int = 0  # when the queue's mode last changed (0: never)
    # "group": one message per kmq.group header in flight at a time, in send order
    # (docs/ordering.md); "none": no order.
    ordering: str = "none"
    # What a dead-lettered group head does: "continue" with the group's next (SQS), or
    # "hold" the group until the message is redriven.
    dead_letter_head: str = "continue"
    dedup_window_s: float = DEFAULT_DEDUP_WINDOW_S  # kmq.dedup-id: later sends within it are dropped
    updated_at_ms: int = 0

    def __post_init__(self) -> None:
        _check_number("visibility_timeout_s", self.visibility_timeout_s, 0.001, MAX_VISIBILITY_S)
        _check_number("max_processing_s", self.max_processing_s, 0.001, MAX_PROCESSING_S)
        if self.max_deliveries is not None and (
                isinstance(self.max_deliveries, bool) or not isinstance(self.max_deliveries, int)
                or not 1 <= self.max_deliveries <= 1_000_000):
            raise ConfigError(f"max_deliveries={self.max_deliveries!r} must be a whole number "
                              "from 1 to 1000000")
        if not isinstance(self.backoff, Backoff):
            raise ConfigError("backoff must be a kmq.Backoff (Backoff.fixed(...), "
                              "Backoff.exponential(...) or Backoff.none())")
        if not isinstance(self.dead_letter, bool):
            raise ConfigError(f"dead_letter={self.dead_letter!r} must be True or False")
        if isinstance(self.spread, bool) or not isinstance(self.spread, int) or not 1 <= self.spread <= 1024:
            raise ConfigError(f"spread={self.spread!r} must be a whole number from 1 to 1024")
        if self.tenant is not None:
            validate_tenant_name(self.tenant)
        if self.dispatch not in (None, *DISPATCH_MODES):
            raise ConfigError(f"dispatch={self.dispatch!r}: use one of {', '.join(map(repr, DISPATCH_MODES))} "
                              "(or None for the KMQ_DISPATCH default)")
        if self.ordering not in ORDERINGS:
            raise ConfigError(f"ordering={self.ordering!r}: use one of {', '.join(map(repr, ORDERINGS))}")
        if self.ordering == "group" and self.spread != 1:
            raise ConfigError(f"ordering='group' needs spread=1 (spread={self.spread}): a group's "
                              "messages and their redeliveries must share one partition")
        if self.ordering == "group" and self.dispatch == "partition":
            raise ConfigError("ordering='group' needs dispatch='shared': the dispatcher keeps the order")
        if self.dead_letter_head not in DEAD_LETTER_HEAD_POLICIES:
            raise ConfigError(f"dead_letter_head={self.dead_letter_head!r}: use one of "
                              f"{', '.join(map(repr, DEAD_LETTER_HEAD_POLICIES))}")
        if self.dedup_window_s is None:
            raise ConfigError(f"dedup_window_s=None: give seconds from 1 to {MAX_DEDUP_WINDOW_S:g} "
                              f"(default {DEFAULT_DEDUP_WINDOW_S:g})")
        _check_number("dedup_window_s", self.dedup_window_s, 1.0, MAX_DEDUP_WINDOW_S)

    # -- resolved values ------------------------------------------------------

    def visibility_s(self, settings: Settings) -> float:
        return settings.visibility_timeout_s if self.visibility_timeout_s is None else self.visibility_timeout_s

    def processing_s(self, settings: Settings) -> float:
        """Longest time a consumer keeps a message alive in user code (>= visibility).

        Unset: ``KMQ_MAX_PROCESSING_S`` (5 min by default), so a slow handler is not
        redelivered while it runs; the visibility timeout only detects a dead consumer.
        """
        vis = self.visibility_s(settings)
        wanted = settings.max_processing_s if self.max_processing_s is None else self.max_processing_s
        return max(vis, wanted)

    def deliveries(self, settings: Settings) -> int:
        return settings.max_deliveries if self.max_deliveries is None else self.max_deliveries

    def dispatch_mode(self, settings: Settings) -> str:
        """"shared" or "partition": this queue's setting, else the deployment's default."""
        return self.dispatch or settings.dispatch

    def group_id(self, settings: Settings, queue: str) -> str:
        """The consumer group of the queue's partition mode.

        ``<prefix><queue>``; after a switch of mode, a group of its own per switch
        (``<prefix><queue>@<switch time ms>``): it starts where the dispatcher stopped
        (``handover``), and no member of a group from before the switch (one that hung,
        or left mid-join) can hold its partitions or its rebalances up.
        """
        base = settings.group_id(queue)
        return f"{base}@{self.dispatch_since_ms}" if self.dispatch_since_ms else base

    # -- codec ----------------------------------------------------------------

    def encode(self) -> bytes:
        d = asdict(self)
        d["backoff"] = self.backoff.to_dict()
        d["purged_before"] = {str(p): o for p, o in self.purged_before.items()}
        d["partition_starts"] = {str(p): o for p, o in self.partition_starts.items()}
        d["handover"] = {str(p): o for p, o in self.handover.items()}
        return json.dumps({"v": CONFIG_VERSION, **d}, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> "QueueConfig":
        d = json.loads(data)
        if d.pop("v", None) != CONFIG_VERSION:
            raise ValueError("unsupported queue config version")
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["backoff"] = Backoff.from_dict(d.get("backoff") or {})
        d["purged_before"] = {int(p): int(o) for p, o in (d.get("purged_before") or {}).items()}
        d["partition_starts"] = {int(p): int(o) for p, o in (d.get("partition_starts") or {}).items()}
        d["handover"] = {int(p): int(o) for p, o in (d.get("handover") or {}).items()}
        return cls(**d)

    def spread_to(self, spread: int, starts: dict[int, int]) -> "QueueConfig":
        """A copy spread over ``spread`` partitions; ``starts``: where the added ones begin."""
        if spread < self.spread:
            raise ConfigError(
                f"spread={spread} is below the current {self.spread}: a spread only grows "
                "(messages already on a partition must stay reachable)")
        return replace(self, spread=spread, partition_starts={**self.partition_starts, **starts},
                       updated_at_ms=int(time.time() * 1000))

    def purged(self, before: dict[int, int]) -> "QueueConfig":
        """A copy whose records below ``before`` (partition -> offset) are purged."""
        merged = {**self.purged_before}
        for p, off in before.items():
            merged[p] = max(off, merged.get(p, 0))
        return replace(self, purged_before=merged, updated_at_ms=int(time.time() * 1000))

    def switched(self, settings: Settings, before: "QueueConfig") -> "QueueConfig":
        """This config, marked as a mode change from ``before`` if its effective mode differs.

        To partition mode, group consumers wait for the tracker's handover (where its
        dispatcher stopped); to shared mode, the dispatcher waits a grace period for the
        group's members to see the change (kmq.protocol.dispatch.SWITCH_GRACE_MS).
        """
        old, new = before.dispatch_mode(settings), self.dispatch_mode(settings)
        if old == new:
            return self
        return replace(self, dispatch_since_ms=self.updated_at_ms or int(time.time() * 1000),
                       handover_pending=new == "partition")

    def changed(self, **changes: Any) -> "QueueConfig":
        """A copy with ``changes`` applied and validated; unknown names are an error."""
        known = {f.name for f in fields(self)} - {"updated_at_ms", "purged_before", "partition_starts",
                                                   "handover_pending", "handover",
                                                   "dispatch_since_ms"}
        unknown = set(changes) - known
        if unknown:
            raise ConfigError(f"unknown queue setting(s) {', '.join(sorted(unknown))}: "
                              f"use {', '.join(sorted(known))}")
        defaults = {f.name: f.default for f in fields(self)}
        for name in ("ordering", "dead_letter_head", "dedup_window_s"):  # None: the default
            if name in changes and changes[name] is None:
                changes[name] = defaults[name]
        return replace(self, **changes, updated_at_ms=int(time.time() * 1000))


def _check_number(name: str, value: Any, low: float, high: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"{name}={value!r} must be a number of seconds from {low:g} to {high:g}")


DEFAULT_CONFIG = QueueConfig()  # shared: frozen, and never modified in place


class QueueConfigs:
    """A live view of the queues topic: queue id -> :class:`QueueConfig`.

    Reads the topic to its end at start (so the view is current), then, with
    ``follow=True``, keeps reading in a background thread.
    """

    def __init__(self, settings: Settings, follow: bool = True, timeout_s: float = 15.0) -> None:
        self.settings = settings
        self._configs: dict[str, QueueConfig] = {}
        self._tenants: dict[str, Tenant] = {}
        self._admin_hash: AdminHash | None = None  # set while the deployment has auth on
        self._auth_refused: str | None = None  # why the admin token cannot be checked (old record)
        self.version = 0  # grows with every change seen: cheap staleness check for caches
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = Consumer({
            **settings.client_config(),
            "group.id": f"{settings.app_id}-queue-configs",  # never joins or commits
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            # Settings change seldom: a long wait keeps idle processes quiet (the embedded
            # broker answers a fetch only when its wait is over).
            "fetch.wait.max.ms": 300,
            "fetch.queue.backoff.ms": 10,
        })
        topic = settings.queues_topic
        try:
            md = self._consumer.list_topics(topic, timeout=timeout_s)
        except Exception as exc:
            raise BrokerUnavailableError(
                f"no Kafka broker answered at {settings.bootstrap_servers} within "
                f"{timeout_s:g}s (KMQ_BOOTSTRAP_SERVERS): {exc}") from exc
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            # A principal without DESCRIBE/READ on the topic gets the same answer as for a
            # missing one (or TOPIC_AUTHORIZATION_FAILED): say both.
            why = f" ({meta.error.name()})" if meta is not None and meta.error is not None else ""
            raise ConfigError(f"topic {topic!r} does not exist or may not be read{why}: create "
                              "kmq's topics first (`faust -A app create-topics` or `kmq dev`), or "
                              "grant this principal READ and DESCRIBE on it (`kmq acls`, "
                              "docs/security.md)")
        parts = sorted(meta.partitions)
        self._consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        eof: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(eof) < len(parts):
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(f"could not read {topic} within {timeout_s:g}s")
            self._consume(0.1, eof)
        self._thread = None
        if follow:
            # The thread holds only a weak reference: a view dropped without
            # close() ends its thread and lets its consumer go.
            self._thread = threading.Thread(target=_follow, args=(weakref.ref(self),),
                                            name="kmq-queue-configs", daemon=True)
            self._thread.start()

    def _consume(self, timeout_s: float, eof: set[int] | None = None) -> None:
        for rec in self._consumer.consume(500, timeout_s):
            err = rec.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and eof is not None:
                    eof.add(rec.partition())
                continue
            try:
                queue = rec.key().decode()
            except (AttributeError, UnicodeDecodeError):
                continue
            if rec.key() == AUTH_KEY:
                self._read_auth(rec.value())
                continue
            if queue.startswith(TENANT_KEY_PREFIX):
                self._read_tenant(queue[len(TENANT_KEY_PREFIX):], rec.value())
                continue
            with self._lock:
                if rec.value() is None:
                    self._configs.pop(queue, None)
                    continue
                try:
                    self._configs[queue] = QueueConfig.decode(rec.value())
                    self.version += 1
                except (ValueError, TypeError, ConfigError) as exc:
                    log.warning("queue %s: ignoring unreadable config at %s[%d]@%d: %s", queue,
                                rec.topic(), rec.partition(), rec.offset(), exc)

    def _read_tenant(self, name: str, value: bytes | None) -> None:
        with self._lock:
            if value is None:
                self._tenants.pop(name, None)
                return
            try:
                tenant = Tenant.decode(value)
            except (ValueError, KeyError, TypeError, ConfigError) as exc:
                log.warning("ignoring unreadable tenant record %r: %s", name, exc)
                return
            if tenant.name != name:  # a record under one key must not grant another tenant's queues
                log.warning("ignoring tenant record %r naming tenant %r", name, tenant.name)
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
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable auth record: %s", exc)

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

    def get(self, queue: str) -> QueueConfig:
        """The queue's configuration (defaults if it was never configured)."""
        with self._lock:
            return self._configs.get(queue) or DEFAULT_CONFIG

    def put_local(self, queue: str, config: QueueConfig) -> None:
        """Record a configuration this process just wrote (before it is read back)."""
        with self._lock:
            self._configs[queue] = config
            self.version += 1

    def queues(self) -> list[str]:
        with self._lock:
            return sorted(self._configs)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._consumer.close()


def _follow(view_ref: "weakref.ref[QueueConfigs]") -> None:
    """Keep a view current while it is alive and open."""
    while True:
        view = view_ref()
        if view is None or view._stop.is_set():
            return
        try:
            view._consume(0.5)
        except Exception:  # keep following; a broker blip is retried by librdkafka
            log.exception("reading queue configs failed")
            view._stop.wait(1.0)
        del view


def write_config(settings: Settings, queue: str, config: QueueConfig, timeout_s: float = 15.0) -> None:
    """Write ``config`` as the queue's configuration and wait until the broker has it."""
    validate_queue_name(queue)
    _write(settings, queue.encode(), config.encode(), f"queue {queue!r} configuration", timeout_s)


def write_tenant(settings: Settings, tenant: Tenant, timeout_s: float = 15.0) -> None:
    """Write a tenant record and wait until the broker has it."""
    _write(settings, tenant.key(), tenant.encode(), f"tenant {tenant.name!r}", timeout_s)


def delete_tenant(settings: Settings, name: str, timeout_s: float = 15.0) -> None:
    """Write a tenant's tombstone (its token stops working) and wait until the broker has it."""
    _write(settings, (TENANT_KEY_PREFIX + name).encode(), None, f"tenant {name!r}", timeout_s)


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
    _write(settings, AUTH_KEY, encode_auth(settings.admin_token), "the auth record", timeout_s)


def _write(settings: Settings, key: bytes, value: bytes | None, what: str, timeout_s: float) -> None:
    from kmq.kafka.profiles import producer_config
    p = Producer(producer_config(settings))
    errors: list[str] = []
    p.produce(settings.queues_topic, value, key,
              on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    left = p.flush(timeout_s)
    if left or errors:
        raise BrokerUnavailableError(
            f"{what} not acknowledged by {settings.bootstrap_servers} "
            f"within {timeout_s:g}s: {errors[:1] or 'timed out'}")
