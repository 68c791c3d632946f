"""A partition-mode consumer's part in its queue's consumer group: which of the group's
partitions it fetches (those holding the queue, from where the queue began on them or
where the dispatcher stopped), and what a revocation settles before another member
takes them over.

Mixed into :class:`kmq.consumer.partition_source.PartitionSource`; these run inside
librdkafka's poll/consume, on the receiving thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition

from kmq.consumer.commits import CommitLedger
from kmq.protocol import markers as M
from kmq.protocol.masks import mask_of as rels_mask

if TYPE_CHECKING:  # pragma: no cover
    from kmq.consumer.facade import Consumer


class GroupMembership:
    """Assignment and revocation callbacks of a queue's consumer group member."""

    _c: "Consumer"
    _topic: str
    _partitions: frozenset[int]
    _assigned: set[int]
    _group_partitions: list[int]
    _group_metadata: Any
    _commits: CommitLedger
    _rebalances: int

    def _advance_commits(self, asynchronous: bool = True) -> None:  # PartitionSource's
        raise NotImplementedError

    def _on_assign(self, kc: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        self._rebalances += 1
        self._group_partitions = [tp.partition for tp in partitions]
        self._assign(kc)

    def _assign(self, kc: KafkaConsumer) -> None:
        """Fetch only those of the group's partitions that hold this queue.

        The group (round-robin) spreads every partition of the topic over the
        queue's consumers; the queue's consecutive partitions land on different
        members, and each fetches just its share (no reading other queues'
        partitions). A partition the queue grew onto starts where the queue
        began on it, and after a period of shared dispatch where the dispatcher
        stopped, unless the group already committed a position beyond.
        """
        c = self._c
        mine = [TopicPartition(self._topic, p) for p in self._group_partitions if p in self._partitions]
        cfg = c._queue_config
        floors = {**cfg.partition_starts}
        for p, off in cfg.handover.items():
            floors[p] = max(off, floors.get(p, 0))
        fresh = [tp for tp in mine if tp.partition in floors]
        if fresh:
            for tp in kc.committed(fresh, timeout=10):
                floor = floors[tp.partition]
                if tp.offset < floor:  # nothing committed yet, or only before the floor
                    next(m for m in mine if m.partition == tp.partition).offset = floor
        with c._lock:
            self._assigned = {tp.partition for tp in mine}
            if c._writer.transactional:
                # Transactional commits carry the group's generation (KIP-447 fencing).
                self._group_metadata = kc.consumer_group_metadata()
        kc.assign(mine)

    def _on_revoke(self, kc: KafkaConsumer, partitions: list[TopicPartition], lost: bool = False) -> None:
        # Commit what is durable before another member takes the partitions over.
        self._rebalances += 1
        c = self._c
        revoked = {tp.partition for tp in partitions}
        with c._lock:
            forget = self._drop_unhanded(revoked)
            if forget and not lost:
                # The group's next owner fetches them again from the committed offset; our
                # entries must not stay to be redelivered as well. Safe: every member revokes
                # before the group assigns anew (eager protocol), so these ACKs reach the log
                # before the next owner's STARTs (flushed below). A lost session's partitions
                # may be fetched already: nothing is written then (duplicates, never a loss).
                c._writer.send(forget, [], on_confirmed=_nothing)
            c._flush_settlements()
        c._writer.flush(5.0)
        with c._lock:
            self._advance_commits(asynchronous=False)
            self._commits.drop(revoked)
            self._assigned -= revoked
            self._group_partitions = [p for p in self._group_partitions if p not in revoked]
        try:
            kc.unassign()
        except Exception:  # already unassigned by a lost session
            pass

    def _on_lost(self, kc: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        self._on_revoke(kc, partitions, lost=True)

    def _drop_unhanded(self, revoked: set[int]) -> list[M.Marker]:
        """Take the revoked partitions' messages not yet handed to user code out of the
        ready queue (lock held); returns ACKs that make the tracker forget them."""
        c = self._c
        forget: list[M.Marker] = []
        for held in c._ready:
            if held.ref.partition not in revoked or held.handed == len(held.recs):
                continue
            dropped = [rel for rel in held.rels[held.handed:] if not held.state[rel]]
            held.lapsed.update(dropped)  # no longer ours to settle or extend
            held.outstanding -= len(held.recs) - held.handed
            c._in_flight -= len(held.recs) - held.handed
            held.handed = len(held.recs)
            if held.outstanding <= 0:
                c._held.pop(held.ref, None)
            if dropped:
                forget.append(M.Ack(held.ref, rels_mask(dropped, held.ref.length)))
        keep = [h for h in c._ready if h.handed < len(h.recs)]
        c._ready.clear()  # in place: the receiving call that ran this callback holds it
        c._ready.extend(keep)
        return forget

    @property
    def assignment(self) -> frozenset[int]:
        with self._c._lock:
            return frozenset(self._assigned)

    @property
    def group_share(self) -> frozenset[int]:
        with self._c._lock:
            return frozenset(self._group_partitions)


def _nothing() -> None:
    pass
