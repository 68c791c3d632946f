"""The queues topic, read: live :class:`QueueConfigs` views (its writers: :mod:`kmq.ops.queues_writes`).

:mod:`kmq.queue_config` says what a queue's settings are; this module is where they
live. The queues topic is compacted (key = queue id, value = versioned JSON; the
latest record per queue is the configuration, like a Kafka Streams KTable), and
also carries the tenant records and the ``!auth`` record (folded by
:mod:`kmq.ops.queues_control`). A :class:`QueueConfigs`
view reads it to its end at start and follows it in a background thread, so new
values apply to later deliveries without a restart; ``write_*`` add records and
wait until the broker has them. It stands alone because it is Kafka I/O and
threads, which the settings type itself needs none of.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmq.errors import BrokerUnavailableError, ConfigError
from kmq.kafka import profiles
from kmq.kafka.offsets import true_end_offsets
from kmq.queue_config import DEFAULT_CONFIG, QueueConfig
from kmq.settings import Settings
from kmq.ops.admin_hash import AdminHash
from kmq.ops.control_sig import sign_queue_tenant, verifies
from kmq.ops.queues_control import ControlRecords
from kmq.protocol.placement import validate_queue_name
from kmq.ops.tenancy import AUTH_KEY, TENANT_KEY_PREFIX, Tenant

log = logging.getLogger("kmq.queue_config")  # the name it always had: logging setups that name it keep working


class QueueConfigs(ControlRecords):
    """A live view of the queues topic: queue id -> :class:`QueueConfig`.

    Reads the topic to its end at start (so the view is current), then, with
    ``follow=True``, keeps reading in a background thread.

    With ``control_token`` (a tracker with auth on: its ``KMQ_ADMIN_TOKEN``), tenant
    records and queues' tenants count only when signed with that token's key
    (:mod:`kmq.ops.control_sig`); others are ignored and counted in :attr:`unverified`.
    """

    def __init__(self, settings: Settings, follow: bool = True, timeout_s: float = 15.0,
                 control_token: str | None = None) -> None:
        self._init_state(settings, control_token)
        # Settings change seldom: a long wait keeps idle processes quiet (the embedded
        # broker answers a fetch only when its wait is over).
        self._consumer = Consumer(profiles.reader_config(
            settings, f"{settings.app_id}-queue-configs", fetch_wait_ms=300, eof=True))
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
        self._topic, self._parts = topic, parts
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

    def _init_state(self, settings: Settings, control_token: str | None) -> None:
        """The folded records, empty (also for tests that fold records without Kafka)."""
        self.settings = settings
        self._control_token = control_token or None
        self.unverified = 0  # control records ignored for want of the admin's signature
        self.unreadable = 0  # records no decoder could read (hostile or from another client)
        self._configs: dict[str, QueueConfig] = {}
        self._tenant_of: dict[str, str] = {}  # queue -> its tenant, when verified
        self._tenants: dict[str, Tenant] = {}
        self._admin_hash: AdminHash | None = None  # set while the deployment has auth on
        self._auth_refused: str | None = None  # why the admin token cannot be checked (old record)
        self.version = 0  # grows with every change seen: cheap staleness check for caches
        self._positions: dict[int, int] = {}  # partition -> offset below which records are applied
        self._record_at: dict[str, tuple[int, int]] = {}  # queue -> its config's (partition, offset)
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def _consume(self, timeout_s: float, eof: set[int] | None = None) -> None:
        for rec in self._consumer.consume(500, timeout_s):
            err = rec.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if eof is not None:
                        eof.add(rec.partition())
                    self._read_to(rec.partition(), rec.offset())
                continue
            self._read(rec)
            self._read_to(rec.partition(), rec.offset() + 1)  # after applying it: see catch_up

    def _read_to(self, partition: int, offset: int) -> None:
        with self._lock:
            if offset > self._positions.get(partition, 0):
                self._positions[partition] = offset

    @property
    def partitions(self) -> list[int]:
        """The queues topic's partitions this view reads."""
        return list(getattr(self, "_parts", []))

    def applied(self) -> dict[int, int]:
        """Partition -> the offset below which this view has applied the queues topic."""
        with self._lock:
            return dict(self._positions)

    def catch_up(self, timeout_s: float = 5.0) -> bool:
        """Wait until this view has applied every record the topic holds now; False if it
        has not within ``timeout_s`` (the view is then as current as it got).

        Call it before changing a queue's settings from this view (read, change, write):
        the record replaces the queue's whole configuration, so a view that had not read
        another process's change yet wrote it away (a tracker's purge point or handover
        written a moment after ``configure_queue``, dropping the setting changed there).
        """
        if getattr(self, "_consumer", None) is None:  # records folded by hand (tests)
            return True
        deadline = time.monotonic() + timeout_s
        try:  # a reader of its own: the view's consumer is its follower thread's alone
            ends = true_end_offsets(self.settings, self._topic, self._parts, timeout_s)
        except (BrokerUnavailableError, KafkaException) as exc:
            log.warning("queue configs: end offsets of %s not read: %s", self._topic, exc)
            return False
        while True:
            with self._lock:
                behind = [p for p, end in ends.items() if self._positions.get(p, 0) < end]
            if not behind:
                return True
            if time.monotonic() > deadline:
                log.warning("queue configs: not caught up with %s %s within %g s",
                            self._topic, behind, timeout_s)
                return False
            if self._thread is None:
                self._consume(0.05)  # a view that does not follow reads here
            else:
                self._stop.wait(0.01)

    def _read(self, rec: Any) -> None:
        """Apply one record of the queues topic."""
        try:
            queue = rec.key().decode()
        except (AttributeError, UnicodeDecodeError):
            return
        if rec.key() == AUTH_KEY:
            self._read_auth(rec.value())
            return
        if queue.startswith(TENANT_KEY_PREFIX):
            self._read_tenant(queue[len(TENANT_KEY_PREFIX):], rec.value())
            return
        at = (rec.partition(), rec.offset())
        if rec.value() is None:
            self._drop_config(queue, at)
            return
        try:
            # A key that is no queue id names no queue: kept, its config made the dispatcher's
            # every round fail (writing its handover raised), no shared queue got anything.
            validate_queue_name(queue)
            config = QueueConfig.decode(rec.value())
        except Exception as exc:  # anyone may write here: b"1" raised AttributeError, and every new client failed
            self._unreadable(f"queue {queue}: config at {rec.topic()}[{rec.partition()}]@{rec.offset()}", exc)
            return
        self.put_local(queue, config, at)

    def _drop_config(self, queue: str, at: tuple[int, int]) -> None:
        with self._lock:
            if not self._newest(queue, at):
                return
            self._configs.pop(queue, None)
            self._tenant_of.pop(queue, None)
            self.version += 1

    def get(self, queue: str) -> QueueConfig:
        """The queue's configuration (defaults if it was never configured)."""
        with self._lock:
            return self._configs.get(queue) or DEFAULT_CONFIG

    def _newest(self, queue: str, at: tuple[int, int] | None) -> bool:
        """Whether the record at ``at`` is the queue's newest yet (kept as such if so): the
        follower thread applied older records over this process's own write for 0.25-0.5 s
        (an audit). A queue's records share one partition; None: where is not known."""
        if at is None:
            return True
        held = self._record_at.get(queue)
        if held is not None and held[0] == at[0] and at[1] < held[1]:
            return False
        self._record_at[queue] = at
        return True

    def put_local(self, queue: str, config: QueueConfig, at: tuple[int, int] | None = None) -> None:
        """Record a configuration this process just wrote (before it is read back) or read at
        ``at`` (partition, offset): one older than the view's is not applied."""
        tenant = config.tenant
        if tenant is not None and self._control_token is not None and not verifies(
                config.tenant_sig, sign_queue_tenant(self._control_token, queue, tenant)):
            self.unverified += 1
            if self.unverified <= 10 or self.unverified % 1000 == 0:  # a flood must not flood the log
                log.warning("queue %s: its tenant %r is not signed with this tracker's admin token "
                            "(KMQ_ADMIN_TOKEN): only the admin sees the queue until the admin assigns "
                            "it again (configure_queue(tenant=...))", queue, tenant)
            tenant = None
        with self._lock:
            if not self._newest(queue, at):
                return
            self._configs[queue] = config
            if tenant is None:
                self._tenant_of.pop(queue, None)
            else:
                self._tenant_of[queue] = tenant
            self.version += 1

    def tenant_of(self, queue: str) -> str | None:
        """The queue's tenant, as far as this view trusts it (see ``control_token``)."""
        with self._lock:
            return self._tenant_of.get(queue)

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
