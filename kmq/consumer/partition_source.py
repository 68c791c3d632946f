"""Where a ``dispatch="partition"`` queue's messages come from: its consumer group (step 2).

The queue's consumers form the Kafka group ``kmq.<queue>`` (round-robin; after a switch of
mode one of its own, see :meth:`QueueConfig.group_id`); each member
fetches only those of its partitions that hold the queue, writes one START marker per
fetched partition run (a bit mask marks the queue's offsets) and commits the source
offsets once the broker has acknowledged the START covering them (:class:`CommitLedger`),
so a fetch never waits on a flush. With transactional STARTs both go in one transaction.

A partition the queue grew onto (``spread``) starts where the queue began on it; after a
period of shared dispatch it starts where the dispatcher stopped (``handover``), unless the
group committed a position beyond.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, TopicPartition

from kmq.consumer import fetched
from kmq.consumer.commits import CommitLedger
from kmq.consumer.fetched import within_range_len
from kmq.consumer.group_membership import GroupMembership
from kmq.consumer.marker_writer import RetryTransaction
from kmq.protocol.masks import mask_of as rels_mask
from kmq.errors import DeliveryError
from kmq.kafka import profiles
from kmq.protocol import markers as M
from kmq.protocol.placement import queue_partitions

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer

log = logging.getLogger("kmq.consumer")


class PartitionSource(GroupMembership):
    """Fetches a queue's partitions as a member of its consumer group."""

    mode = "partition"

    def __init__(self, consumer: "Consumer", config: dict[str, Any] | None = None) -> None:
        c = self._c = consumer
        s = c._settings
        self._topic = s.queue_topic
        self._spread = c._queue_config.spread
        self._partitions = frozenset(queue_partitions(c.queue, c._queue_topic_partitions, self._spread))
        self._commits = CommitLedger()
        self._commit_due = False  # a START was confirmed: its offsets can be committed
        self._assigned: set[int] = set()
        self._group_partitions: list[int] = []  # what the group gave us (all topics' partitions)
        self._group_metadata: Any = None  # for transactional offset commits
        self._subscribed = False
        self._rebalances = 0  # assignments and revocations so far (they run inside poll/consume)
        c._log.wake_at = 1 << 62  # no refills to ask for: acks wait for the flush interval
        self._kc = KafkaConsumer({
            # Group timeouts and security of the profile (kmq.kafka.profiles).
            **profiles.group_consumer_config(s, c._queue_config.group_id(s, c.queue)),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin",
            # Low fetch wait and queue backoff: the librdkafka defaults stall
            # a queue consumer for up to a second (DESIGN.md).
            "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 10,
            "enable.partition.eof": False,
            **(config or {}),
        })
        self._subscribe()

    def _subscribe(self) -> None:
        # After shared dispatch, wait until the tracker says where the dispatcher stopped.
        if self._subscribed or self._c._queue_config.handover_pending:
            return
        self._kc.subscribe([self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)
        self._subscribed = True

    # -- fetching (the receiving thread) --------------------------------------------

    def fetch(self, room: int, timeout_s: float) -> int:
        """Fetch up to ``room`` records; hold the queue's, START them. Returns how many."""
        c = self._c
        if self._commit_due:
            self._commit_confirmed()
        if not self._subscribed:
            self._subscribe()
            if not self._subscribed:
                c._stop.wait(min(timeout_s, 0.1))
                return 0
        rebalances = self._rebalances
        first = self._kc.poll(timeout_s)
        if first is None:
            return 0
        recs = [first]
        if room > 1:
            recs += self._kc.consume(room - 1, 0)
        if self._rebalances != rebalances:
            # A revocation ran inside this poll: records of partitions no longer ours go to
            # their next owner, never to user code (acked here, they could not be committed,
            # and the next owner would fetch and deliver them again).
            assigned = self._assigned
            recs = [r for r in recs if r.error() is not None or r.partition() in assigned]
            if not recs:
                return 0
        # Ours by partition, in offset order; everything else (other queues on a
        # shared partition, purged records, error events) is committed past.
        ours_by_part, others = fetched.split(recs, c._qkey, self._assigned, c._purged_before)
        ends: dict[int, int] = {}
        for rec in others:
            if rec.error() is not None:
                self._on_record_error(rec)
            else:
                ends[rec.partition()] = rec.offset() + 1
        starts: list[M.Marker] = []
        confirm: list[list] = []
        fresh = 0
        timeout_ms = c._timeout_ms
        with c._lock:
            for p, all_ours in ours_by_part.items():
                chunks = within_range_len(all_ours)
                for j, ours in enumerate(chunks):
                    first_off = ours[0].offset()
                    last_off = ours[-1].offset()
                    length = last_off + 1 - first_off
                    ref = M.RangeRef(c.queue, p, first_off, last_off + 1)
                    n = len(ours)
                    if n == length:
                        rels = range(n)
                        mask = ref.full_mask
                    else:
                        rels = fetched.rels_of(ours, first_off)
                        mask = rels_mask(rels, length)
                    c._hold(ref, ours, rels)
                    fresh += n
                    starts.append(M.Start(ref, timeout_ms, mask))
                    end = last_off + 1 if j < len(chunks) - 1 else max(last_off + 1, ends.pop(p, 0))
                    confirm.append(self._commits.add(p, end, False))
            for p, end in ends.items():  # only other queues' records: commit when order allows
                self._commits.add(p, end, True)
            markers = c._drain_settlements() + starts
            if markers:
                c._writer.send(markers, confirm, on_confirmed=self._flag_commit_due)
                c.stats["markers"] += 1
        return fresh

    def _on_record_error(self, rec: Any) -> None:
        err = rec.error()
        if err.code() == KafkaError._PARTITION_EOF:
            return
        c = self._c
        if err.fatal():
            c._set_error(DeliveryError(f"consumer of queue {c.queue!r} failed: {err}"))
        else:
            log.warning("queue %s: consumer error: %s", c.queue, err)

    def _flag_commit_due(self) -> None:
        self._commit_due = True  # picked up by the receiving thread
        self._c._attention = True

    # -- committing -------------------------------------------------------------------

    def read_in_background(self) -> None:
        """Nothing: records wait in librdkafka's queue, not STARTed (not in flight) until fetched."""

    def on_receiving_thread(self) -> None:
        """Commit what the confirmed STARTs cover (only the polling thread may)."""
        if self._commit_due:
            self._commit_confirmed()

    def _commit_confirmed(self, asynchronous: bool = True) -> None:
        self._commit_due = False
        with self._c._lock:
            self._advance_commits(asynchronous)

    def _committable(self) -> tuple[list[TopicPartition], Any]:
        offsets, forget = self._commits.committable(self._assigned)
        return [TopicPartition(self._topic, p, o) for p, o in offsets.items()], forget

    def flusher_work(self) -> None:
        """On the flusher thread, lock held: transactional mode commits there."""
        writer = self._c._writer
        if writer.transactional and writer.has_pending:
            self._run_transaction()

    def _run_transaction(self) -> None:
        """Transactional mode (lock held): pending markers + the offsets they cover, atomically."""
        try:
            self._c._writer.commit(self._committable, self._group_metadata)
        except RetryTransaction:
            pass

    def _advance_commits(self, asynchronous: bool = True) -> None:
        """Commit every partition up to its last offset whose STARTs are all durable."""
        if self._c._writer.transactional:
            self._run_transaction()
            return
        offsets, forget = self._committable()
        forget()
        if offsets:
            try:
                self._kc.commit(offsets=offsets, asynchronous=asynchronous)
            except Exception as exc:  # a commit lost to a rebalance is refetched, not lost
                log.info("queue %s: commit failed: %s", self._c.queue, exc)

    def flush(self) -> None:
        """After the markers are durable: commit what they cover, synchronously."""
        self._commit_confirmed(asynchronous=False)

    # -- queue settings ---------------------------------------------------------------

    def config_changed(self) -> None:
        """The queue grew onto more partitions: fetch those of ours among them."""
        c = self._c
        self._subscribe()
        if c._queue_config.spread == self._spread:
            return
        self._spread = c._queue_config.spread
        self._partitions = frozenset(queue_partitions(c.queue, c._queue_topic_partitions, self._spread))
        if self._group_partitions:
            self._assign(self._kc)

    # -- closing ------------------------------------------------------------------------

    def leave(self, timeout_s: float) -> None:
        """Nothing to announce: the group notices at close."""

    def on_empty(self) -> None:
        """Nothing to tune: the group fetches whole batches."""

    def starving(self) -> bool:
        """The group fetches whenever there is room: nothing to hurry."""
        return False

    def on_settled(self, n: int) -> None:
        """Nothing to announce: the group fetches when there is room."""

    def close(self) -> None:
        """Commit what is durable and leave the group (markers already flushed)."""
        with self._c._lock:
            self._advance_commits(asynchronous=False)
        self._kc.close()
