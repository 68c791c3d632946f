"""Writing a consumer's marker records, plainly or in Kafka transactions.

Plain (the default): records are produced at once by an idempotent producer;
the consumer commits its source offsets once the STARTs covering them are
acknowledged. A consumer that dies between the two leaves a START whose
offsets were not committed: the group fetches those messages again *and* the
tracker redelivers them (seed 003's "consumer dies between START and
commit").

Transactional (``KMQ_TRANSACTIONAL_STARTS=on``): markers gather for up to a
flush interval and go out in one transaction together with the source
offsets their STARTs cover (``send_offsets_to_transaction``). Either both
happen or neither, so that window is closed; the tracker reads markers
read_committed. The cost is a transaction per flush interval and
acknowledgements that become durable at the transaction's commit.

A consumer killed inside a transaction leaves it open, and an open transaction
holds back every read_committed reader of its markers partition, the tracker
included, until the broker ends it: after it times out (kept to
``OPEN_TRANSACTION_LIMIT_MS``) at the broker's next abort check
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s by default:
about 20 s in all), or at once when a producer with the same transactional id
starts. Give each consumer instance a stable ``transactional_id`` (e.g. its host
or pod name and the queue) and its successor ends the dead one's transaction as
it starts.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Callable

from confluent_kafka import KafkaException, Producer, TopicPartition

from kmq.protocol import marker_codec
from kmq.protocol import markers as M
from kmq.kafka import profiles
from kmq.kafka.backpressure import produce_when_room
from kmq.kafka.producer_start import started_producer
from kmq.errors import DeliveryError
from kmq.settings import Settings

log = logging.getLogger("kmq.consumer")

TRANSACTION_TIMEOUT_S = 30.0  # how long one transactional call may take
# How long a dead consumer's open transaction may hold back the tracker (Kafka
# Streams' default too); markers that miss it are retried in the next transaction.
OPEN_TRANSACTION_LIMIT_MS = 10_000


class MarkerWriter:
    """One queue's marker producer; ``confirm`` entries are ``[end_offset, durable]`` lists."""

    def __init__(self, settings: Settings, queue: str, markers_partition: int,
                 transactional: bool, on_error: Callable[[BaseException], None],
                 transactional_id: str | None = None) -> None:
        self.transactional = transactional
        self._topic = settings.markers_topic
        self._partition = markers_partition
        self._key = queue.encode()
        self._queue = queue
        self._on_error = on_error
        conf: dict[str, Any] = {**profiles.producer_config(settings), "linger.ms": 2}
        if transactional:
            conf["transactional.id"] = transactional_id or f"{settings.group_id(queue)}.{uuid.uuid4().hex[:12]}"
            conf["transaction.timeout.ms"] = OPEN_TRANSACTION_LIMIT_MS
            conf["message.timeout.ms"] = OPEN_TRANSACTION_LIMIT_MS  # librdkafka: <= the above
        # (A transactional producer gets its id in init_transactions, below.)
        self.producer = Producer(conf) if transactional else started_producer(conf, self._topic)
        if transactional:
            self.producer.init_transactions(TRANSACTION_TIMEOUT_S)
        self._pending: list[M.Marker] = []
        self._pending_confirm: list[list] = []
        self._pending_written: list[Callable[[], None]] = []
        self.records = 0
        self._settings = settings
        self._soft: Producer | None = None  # CREDITs (shared queues), made at the first one

    # -- soft state: CREDITs -----------------------------------------------------------

    def send_soft(self, markers: list[M.Marker]) -> None:
        """Write CREDITs at once, outside any transaction, on a producer of their own.

        A CREDIT states a consumer's whole demand as of a delivery sequence number, so a
        retried copy landing twice changes nothing (kmq.protocol.dispatch.Roster.credit);
        order is kept by one request in flight. Without idempotence the first record goes
        out at once: an idempotent producer's first record waited ~0.5 s for its producer
        id (librdkafka, measured on the embedded broker: 505-521 ms against 2-3 ms), and a
        new shared consumer's first message waits for its first CREDIT. A CREDIT that is
        lost is sent again within the heartbeat (``kmq.protocol.liveness.heartbeat_s``).
        """
        if not markers:
            return
        if self._soft is None:
            self._soft = Producer(profiles.soft_marker_producer_config(self._settings))
        for value in marker_codec.encode_records(markers):
            produce_when_room(self._soft, self._topic, value, self._key, partition=self._partition)
        self._soft.poll(0)

    # -- plain ---------------------------------------------------------------------

    def send(self, markers: list[M.Marker], confirm: list[list],
             on_confirmed: Callable[[], None],
             on_written: Callable[[], None] | None = None) -> None:
        """Write ``markers``; mark ``confirm`` durable once they are (now, or at the next
        commit), and call ``on_written`` then (the keepalive's EXTENDs: kmq.consumer.flusher)."""
        if self.transactional:
            self._pending += markers
            self._pending_confirm += confirm
            if on_written is not None:
                self._pending_written.append(on_written)
            return
        # Usually one record; more when the markers exceed a record's limits (kmq.protocol.limits).
        *earlier, last = marker_codec.encode_records(markers)

        def failed(err: Any, _msg: Any) -> None:
            if err is not None:
                self._on_error(DeliveryError(
                    f"marker record for queue {self._queue!r} was not written: {err}"))

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed(err, msg)
                return
            # One partition, an idempotent producer: the last record acknowledged means all were.
            for entry in confirm:
                entry[1] = True
            if confirm:
                on_confirmed()
            if on_written is not None:
                on_written()

        for value in earlier:
            self._produce(value, failed)
        self._produce(last, delivered)

    def _produce(self, value: bytes, on_delivery: Callable | None = None) -> None:
        produce_when_room(self.producer, self._topic, value, self._key, partition=self._partition,
                          on_delivery=on_delivery)
        self.records += 1

    # -- transactional ----------------------------------------------------------------

    @property
    def has_pending(self) -> bool:
        return bool(self._pending or self._pending_confirm)

    def wait_committed(self, commit: Callable[[], None], deadline: float) -> bool:
        """Run ``commit`` (the source's: what the durable markers cover) until no verbs wait
        in a transaction; False if some still do at ``deadline`` (``time.monotonic()``).
        Transactional verbs are durable once their transaction commits: a failed one is
        retried (``commit`` swallowed the error), and ``Consumer.flush`` returned before it."""
        commit()
        while self.transactional and self.has_pending:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
            commit()
        return True

    def commit(self, offsets_for: Callable[[], tuple[list[TopicPartition], Callable[[], None]]],
               group_metadata: Any) -> list[TopicPartition]:
        """One transaction: the pending markers and the source offsets they make committable.

        ``offsets_for`` is called once the pending STARTs count as durable (they
        are in this transaction) and returns the offsets to commit with them
        and a function that forgets those offsets once committed. On an
        abortable error the transaction is aborted and everything stays
        pending for the next one. Returns the offsets committed.
        """
        markers, confirm, written = self._pending, self._pending_confirm, self._pending_written
        self._pending, self._pending_confirm, self._pending_written = [], [], []
        for entry in confirm:
            entry[1] = True
        offsets, forget = offsets_for()
        if not markers and not offsets:
            return []
        try:
            self.producer.begin_transaction()
            for value in marker_codec.encode_records(markers, max_markers=1000):
                self._produce(value)
            if offsets and group_metadata is not None:
                self.producer.send_offsets_to_transaction(offsets, group_metadata,
                                                          TRANSACTION_TIMEOUT_S)
            self.producer.commit_transaction(TRANSACTION_TIMEOUT_S)
            forget()
            for call in written:
                call()
            return offsets
        except KafkaException as exc:
            err = exc.args[0]
            for entry in confirm:
                entry[1] = False
            self._pending = markers + self._pending
            self._pending_confirm = confirm + self._pending_confirm
            self._pending_written = written + self._pending_written
            if err.txn_requires_abort():
                log.warning("queue %s: marker transaction aborted, will retry: %s", self._queue, err)
                self.producer.abort_transaction(TRANSACTION_TIMEOUT_S)
                raise RetryTransaction() from exc
            if err.retriable():
                raise RetryTransaction() from exc
            raise DeliveryError(f"marker transaction of queue {self._queue!r} failed: {err}") from exc

    def flush(self, timeout_s: float) -> int:
        """Wait until every marker record is acknowledged; returns how many are not."""
        soft = self._soft.flush(timeout_s) if self._soft is not None else 0
        return soft + self.producer.flush(timeout_s)

    def close(self) -> None:
        """Drop the producers (their connections end now, not at a garbage collection)."""
        self.producer = None
        self._soft = None


class RetryTransaction(Exception):
    """The transaction did not commit; its markers and offsets wait for the next one."""
