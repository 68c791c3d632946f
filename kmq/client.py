"""The entry point of the SDK: send messages and open consumers.

::

    client = kmq.Client(bootstrap_servers="127.0.0.1:9092")   # or KMQ_* env
    msg_id = client.send("orders", b"payload", headers={"h": b"v"})
    with client.consumer("orders", visibility_timeout_s=30) as c:
        msg = c.receive(timeout_s=5)
        msg.ack()

1. ``send`` writes to the queue topic with key = queue id (idempotent
   producer, murmur2 placement, so plain Kafka producers land alike). It is
   asynchronous: :meth:`Client.flush` waits for the broker and raises if any
   record was lost. Everything is validated before anything is written. Which
   partition a send goes to is :mod:`kmq.send_placement`'s; when a delayed one
   is due, :mod:`kmq.send_delay`'s.

Queue administration (settings, tenants, dead letters, purges) is
:mod:`kmq.queue_admin`, mixed into :class:`Client`.
"""

from __future__ import annotations

import itertools
import threading
import uuid
import weakref
from typing import Any, Callable, Iterable, Mapping

from confluent_kafka import KafkaException, Producer

from kmq.protocol import envelope
from kmq.kafka import profiles
from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.kafka.admin import existing_lanes, topic_partition_counts
from kmq.kafka.backpressure import produce_when_room
from kmq.kafka.producer_start import started_producer
from kmq.consumer import Consumer
from kmq.consumer.arguments import wait_s
from kmq.consumer.options import check_options
from kmq.errors import BrokerUnavailableError, ConfigError, DeliveryError
from kmq.protocol.lane_layout import LaneLayout
from kmq.protocol.ordering import dedup_message_id
from kmq.protocol.placement import markers_partition, validate_queue_name
from kmq.queue_admin import QueueAdmin
from kmq.send_placement import SendPlacement
from kmq import send_args, send_delay
from kmq.queue_config import QueueConfig
from kmq.ops.queues_topic import QueueConfigs
from kmq.settings import Settings
from kmq.tracing import trace_headers



class Client(QueueAdmin):
    """Sends messages and opens consumers; one per process is plenty.

    Queue administration (settings, tenants, dead letters, purges) is :class:`QueueAdmin`'s.
    """

    # Only failures come back: a callback per record would cost more than the send
    # (kmq.aio's client turns it off: its per-send futures need every report).
    DELIVERY_REPORT_ONLY_ERROR = True

    def __init__(self, bootstrap_servers: str | None = None, *, settings: Settings | None = None,
                 **setting_overrides: Any) -> None:
        if settings is None:
            settings = Settings.from_env(bootstrap_servers=bootstrap_servers, **setting_overrides)
        elif not isinstance(settings, Settings):
            raise ConfigError(f"settings={settings!r} must be a kmq.Settings: build one with "
                              "kmq.Settings.from_env(bootstrap_servers=...), or pass the settings as "
                              "keywords, Client(bootstrap_servers=..., visibility_timeout_s=...)")
        elif bootstrap_servers or setting_overrides:
            settings = settings.replace(
                **({"bootstrap_servers": bootstrap_servers} if bootstrap_servers else {}),
                **setting_overrides)
        self.settings = settings
        self._producer: Producer | None = None
        self._partition_counts: dict[str, int] = {}
        self._id_prefix = uuid.uuid4().hex[:12] + "-"
        self._ids = itertools.count(1)
        self._errors: list[str] = []
        self._sent_since_poll = 0
        self._configs: QueueConfigs | None = None
        # One producer and one view of the queues topic, however many threads (kmq.aio's
        # consumers open on threads of their own) ask first at once: racing opens started a
        # view each, and all but one were never closed (an audit: 9 threads left of 10).
        self._start_lock = threading.Lock()
        # This client's consumers: a purge reaches them before purge() returns (QueueAdmin.purge)
        self._consumers: weakref.WeakSet[Consumer] = weakref.WeakSet()
        # which partition each send goes to (the queue topic's partitions asked when needed)
        self._placement = SendPlacement(self.queue_configs,
                                        lambda: self.partition_count(self.settings.queue_topic))

    # -- metadata ----------------------------------------------------------------

    def lane_layout(self, timeout_s: float = 10.0) -> LaneLayout:
        """The deliveries topics as they exist (kmq.protocol.lane_layout); a missing first
        one is a clear error."""
        self.partition_count(self.settings.deliveries_topic, timeout_s)  # fills the cache; raises if missing
        return existing_lanes(self.settings, self._partition_counts)

    def partition_count(self, topic: str, timeout_s: float = 10.0) -> int:
        """Partitions of ``topic`` (cached); a missing topic is a clear error."""
        n = self._partition_counts.get(topic)
        if n is None:
            counts = topic_partition_counts(self.settings, timeout_s)
            self._partition_counts.update(counts)
            n = counts.get(topic)
            if n is None:
                raise ConfigError(
                    f"topic {topic!r} does not exist on {self.settings.bootstrap_servers}: "
                    "create kmq's topics first (`faust -A app create-topics` or `kmq dev`)")
        return n

    # -- queue settings ------------------------------------------------------------

    def queue_configs(self) -> QueueConfigs:
        """The live view of every queue's settings (started on first use)."""
        if self._configs is None:
            with self._start_lock:
                if self._configs is None:
                    self._configs = QueueConfigs(self.settings, follow=True)
        return self._configs

    def queue_config(self, queue: str) -> QueueConfig:
        """The current settings of ``queue`` (global defaults where unset). With auth on, another
        tenant's queue is refused like a missing one (``PermissionDeniedError``), as every
        other admin call does; it was shown, its tenant with it."""
        return self._authorize(validate_queue_name(queue))

    # -- sending -----------------------------------------------------------------

    def _get_producer(self) -> Producer:
        if self._producer is None:
            with self._start_lock:
                return self._new_producer() if self._producer is None else self._producer
        return self._producer

    def _new_producer(self) -> Producer:
        s = self.settings
        self._producer = started_producer({
            **profiles.producer_config(s),  # acks=all, idempotence, murmur2 placement
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.max.bytes": s.max_message_bytes + 4096,
            "delivery.report.only.error": self.DELIVERY_REPORT_ONLY_ERROR,
            "on_delivery": self._on_delivery,
        }, s.queue_topic)
        return self._producer

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}[{msg.partition()}] key={msg.key()!r}: {err}")

    def send(self, queue: str, value: bytes, *, headers: Mapping[str, bytes | str] | None = None,
             delay_s: float | None = None, deliver_at: float | None = None,
             group: str | bytes | None = None, dedup_id: str | bytes | None = None) -> str:
        """Enqueue ``value`` on ``queue``; returns the message id.

        ``delay_s`` (seconds from now) or ``deliver_at`` (epoch seconds) make
        it receivable only at or after that time (held by the tracker).
        ``group`` (header ``kmq.group``): on a queue with ``ordering="group"``, messages
        of one group are handed out one at a time, in send order. ``dedup_id`` (header
        ``kmq.dedup-id``): a later send of the same id within the queue's
        ``dedup_window_s`` is dropped by the tracker; every such send returns the same id,
        the first's (docs/ordering.md). Raises before writing anything if an argument is invalid.
        """
        return self._send(queue, value, headers, delay_s, deliver_at, group, dedup_id, None)

    def _send(self, queue: str, value: bytes, headers: Mapping[str, bytes | str] | None,
              delay_s: float | None, deliver_at: float | None, group: str | bytes | None,
              dedup_id: str | bytes | None, on_delivery: Callable[[Any, Any], None] | None,
              wait_for_room: bool = True) -> str:
        """:meth:`send`; ``on_delivery(err, record)`` gets this record's delivery report
        (kmq.aio's per-send futures; every report needs DELIVERY_REPORT_ONLY_ERROR off).
        Without ``wait_for_room`` a full local queue raises BufferError, nothing written
        (kmq.aio then waits off its event loop)."""
        # send_args.check_send's checks, called one by one: this is every send's path
        queue = validate_queue_name(queue)
        payload = send_args.check_value(value)
        user_headers = send_args.check_headers(headers)
        user_headers += trace_headers(user_headers)  # W3C trace context, if OpenTelemetry is there
        due_ms = send_delay.due_ms(delay_s, deliver_at, self.settings.max_delay_s)
        order_headers = send_args.order_headers(group, dedup_id)
        send_args.check_size(queue, payload, user_headers + order_headers, self.settings.max_message_bytes)
        if dedup_id is not None:  # the first send's id, whoever sends it (no round trip)
            msg_id = dedup_message_id(queue, dict(order_headers)[envelope.DEDUP_ID])
        else:
            msg_id = f"{self._id_prefix}{next(self._ids):x}"
        producer = self._get_producer()
        if due_ms is not None:
            marker = M.Schedule(queue, msg_id, due_ms, payload, tuple(order_headers + user_headers))
            mp = markers_partition(queue, self.partition_count(self.settings.markers_topic))
            self._produce(producer, self.settings.markers_topic, marker_codec.encode([marker]), queue, mp, None,
                          on_delivery, wait_for_room)
        else:
            part = (self._placement.keyed_partition(queue, order_headers) if order_headers
                    else self._placement.next_partition(queue))
            self._produce(producer, self.settings.queue_topic, payload, queue, part,
                          [(envelope.ID, msg_id.encode())] + order_headers + user_headers, on_delivery,
                          wait_for_room)
        return msg_id

    def _slot(self, queue: str) -> list:
        """[the queue's partitions, next turn] (kmq.send_placement; kmq.aio fills it ahead)."""
        return self._placement.slot(queue)

    def _produce(self, producer: Producer, topic: str, value: bytes, key: str, partition: int,
                 headers: list | None, on_delivery: Callable[[Any, Any], None] | None = None,
                 wait_for_room: bool = True) -> None:
        try:
            if not wait_for_room:
                producer.produce(topic, value, key, partition=partition, headers=headers,
                                 **({} if on_delivery is None else {"on_delivery": on_delivery}))
            elif on_delivery is None:
                produce_when_room(producer, topic, value, key, partition=partition, headers=headers)
            else:
                produce_when_room(producer, topic, value, key, partition=partition, headers=headers,
                                  on_delivery=on_delivery)
        except KafkaException as exc:
            raise DeliveryError(f"could not enqueue on {topic}: {exc}") from exc
        self._sent_since_poll += 1
        if self._sent_since_poll >= 1000:
            self._sent_since_poll = 0
            producer.poll(0)

    def send_batch(self, queue: str, values: Iterable[bytes],
                   headers: Mapping[str, bytes | str] | None = None, **unsupported: Any) -> list[str]:
        """Enqueue many values on one queue; all are validated before any is written."""
        send_args.refuse_batch_options(unsupported)
        queue = validate_queue_name(queue)
        payloads = send_args.check_values(values)
        user_headers = send_args.check_headers(headers)
        user_headers += trace_headers(user_headers)
        send_args.check_sizes(queue, payloads, user_headers, self.settings.max_message_bytes, "values[{}]".format)
        producer = self._get_producer()
        topic = self.settings.queue_topic
        # Spread the batch in chunks: a fetched range stays one partition's run.
        chunk = max(1, -(-len(payloads) // len(self._slot(queue)[0])))
        ids = []
        prefix = self._id_prefix
        for i, p in enumerate(payloads):
            if i % chunk == 0:
                part = self._placement.next_partition(queue)
            msg_id = f"{prefix}{next(self._ids):x}"
            self._produce(producer, topic, p, queue, part, [(envelope.ID, msg_id.encode())] + user_headers)
            ids.append(msg_id)
        return ids



    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every sent message is acknowledged; raise if any was lost."""
        wait_s(timeout_s, "flush()")  # a negative one is librdkafka's "for ever"
        if self._producer is not None:
            left = self._producer.flush(timeout_s)
            if left:
                raise BrokerUnavailableError(
                    f"{left} messages not acknowledged by {self.settings.bootstrap_servers} "
                    f"within {timeout_s:g} s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise DeliveryError(f"{len(errors)} messages were not written; first: {errors[0]}")

    # -- consuming ---------------------------------------------------------------

    def consumer(self, queue: str, **options: Any) -> Consumer:
        """A consumer of ``queue``; see :class:`kmq.Consumer` for the options."""
        queue = validate_queue_name(queue)
        check_options(options, f"client.consumer({queue!r})")
        configs = self.queue_configs()
        shared = configs.get(queue).dispatch_mode(self.settings) == "shared"
        consumer = Consumer(
            self.settings, queue,
            queue_topic_partitions=self.partition_count(self.settings.queue_topic),
            markers_topic_partitions=self.partition_count(self.settings.markers_topic),
            lane_layout=self.lane_layout() if shared else None,
            configs=configs, **options)
        self._consumers.add(consumer)
        return consumer

    def close(self, timeout_s: float = 30.0) -> None:
        """Flush what was sent and let go of the connections."""
        wait_s(timeout_s, "close()")  # before anything: a bad one dropped what was queued
        try:
            self.flush(timeout_s)
        finally:
            self._producer = None
            if self._configs is not None:
                self._configs.close()
                self._configs = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
