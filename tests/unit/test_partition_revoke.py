"""A partition-mode consumer never hands out records of a partition the group took away.

librdkafka runs the group's revocation inside ``poll``/``consume``, and the same call can
return records fetched before it. Handed out and acked, their offsets could not be
committed, and the partition's next owner (often the same consumer, given it back) fetched
and delivered them again after their ack: a chaos run saw one id delivered, acked, flushed,
and delivered again 2 s later with delivery count 1, no kill involved. The fake below is
the narrow seam: a librdkafka consumer whose poll revokes, then returns such records.
"""

from __future__ import annotations

import threading
from collections import deque

from confluent_kafka import Message as KafkaMessage
from confluent_kafka import TopicPartition

from kmq.consumer.commits import CommitLedger
from kmq.consumer.held import HeldRange
from kmq.consumer.settlement import SettlementLog
from kmq.consumer.partition_source import PartitionSource
from kmq.protocol import markers as M


def Rec(partition: int, offset: int) -> KafkaMessage:
    """A record of queue q, as librdkafka hands it over (the source calls its methods unbound)."""
    return KafkaMessage(topic="t", partition=partition, offset=offset, key=b"q")


class Writer:
    transactional = False

    def __init__(self) -> None:
        self.sent: list[M.Marker] = []

    def send(self, markers, confirm, on_confirmed) -> None:
        self.sent += markers

    def flush(self, timeout_s: float) -> int:
        return 0


class Facade:
    """What the source touches of kmq.consumer.facade.Consumer."""

    queue = "q"
    _qkey = b"q"
    _timeout_ms = 30_000

    def __init__(self) -> None:
        self._purged_before: dict[int, int] = {}
        self._lock = threading.RLock()
        self._ready: deque = deque()
        self._held: dict = {}
        self._in_flight = 0
        self._writer = Writer()
        self.stats = {"markers": 0}
        self.held: list[HeldRange] = []

    def _hold(self, ref, recs, rels):
        h = HeldRange(ref, self, SettlementLog())
        h.recs, h.rels, h.outstanding = recs, rels, len(recs)
        self._held[ref] = h
        self._ready.append(h)
        self._in_flight += len(recs)
        self.held.append(h)
        return h

    def _drain_settlements(self) -> list:
        return []

    def _flush_settlements(self) -> None:
        pass


class RevokingKafka:
    """poll() runs the revocation of ``revoke``, then returns ``recs`` (fetched before it)."""

    def __init__(self, source: PartitionSource, revoke: list[int], recs: list[KafkaMessage]) -> None:
        self.source, self.revoke, self.recs = source, revoke, recs

    def poll(self, timeout_s: float):
        self.source._on_revoke(self, [TopicPartition("t", p) for p in self.revoke])
        return self.recs[0]

    def consume(self, n: int, timeout_s: float) -> list:
        return self.recs[1:n + 1]

    def unassign(self) -> None:
        pass

    def commit(self, **kwargs) -> None:
        pass


class Fetched(RevokingKafka):
    """A plain fetch: no group change inside poll."""

    def poll(self, timeout_s: float):
        return self.recs[0]


def source_of(facade: Facade, assigned: set[int]) -> PartitionSource:
    src = PartitionSource.__new__(PartitionSource)  # no librdkafka client: the fake below
    src._c = facade
    src._topic = "t"
    src._commits = CommitLedger()
    src._commit_due = False
    src._assigned = set(assigned)
    src._group_partitions = sorted(assigned)
    src._subscribed = True
    src._rebalances = 0
    return src


def test_records_returned_by_the_poll_that_revoked_their_partition_are_not_held():
    f = Facade()
    src = source_of(f, {1, 2})
    src._kc = RevokingKafka(src, revoke=[1], recs=[Rec(1, 10), Rec(1, 11), Rec(2, 5)])
    assert src.fetch(room=10, timeout_s=0.1) == 1
    assert [(h.ref.partition, h.ref.start, h.ref.end) for h in f.held] == [(2, 5, 6)]
    assert not [m for m in f._writer.sent if isinstance(m, M.Start) and m.range.partition == 1]


def test_a_revocation_that_leaves_nothing_ours_returns_nothing():
    f = Facade()
    src = source_of(f, {1})  # spread 1: the fast path takes every record as the partition's
    src._kc = RevokingKafka(src, revoke=[1], recs=[Rec(1, 10), Rec(1, 11)])
    assert src.fetch(room=10, timeout_s=0.1) == 0
    assert f.held == [] and f._writer.sent == []


def test_messages_of_a_revoked_partition_not_yet_handed_out_are_forgotten_not_handed_out():
    f = Facade()
    src = source_of(f, {1, 2})
    ref = M.RangeRef("q", 1, 100, 110)
    f._hold(ref, [Rec(1, 100 + i) for i in range(10)], range(10))
    f.held[0].hand_out(3)  # user code has 3 of them
    src._on_revoke(RevokingKafka(src, [], []), [TopicPartition("t", 1)])
    assert not f._ready and f._in_flight == 3  # the 3 handed out are still user code's
    assert f._writer.sent == [M.Ack(ref, sum(1 << rel for rel in range(3, 10)))]
    src._on_lost(RevokingKafka(src, [], []), [TopicPartition("t", 2)])  # nothing held there
    assert len(f._writer.sent) == 1


def test_other_queues_and_keyless_records_between_ours_are_skipped_and_committed_past():
    # Keys are compared in C (map, compress): a record without a key is never taken for
    # ours, and the START's mask holds only our offsets.
    f = Facade()
    src = source_of(f, {1})
    other = KafkaMessage(topic="t", partition=1, offset=12, key=b"other")
    keyless = KafkaMessage(topic="t", partition=1, offset=14, key=None)
    src._kc = Fetched(src, revoke=[], recs=[Rec(1, 10), Rec(1, 11), other, Rec(1, 13), keyless,
                                            KafkaMessage(topic="t", partition=1, offset=15, key=b"q2")])
    assert src.fetch(room=10, timeout_s=0.1) == 3
    (held,) = f.held
    assert held.ref == M.RangeRef("q", 1, 10, 14) and list(held.rels) == [0, 1, 3]
    assert f._writer.sent == [M.Start(held.ref, f._timeout_ms, 0b1011)]
    assert src._commits.committable({1})[0] == {}  # until the START is durable ...
    src._commits._by_partition[1][0][1] = True
    assert src._commits.committable({1})[0] == {1: 16}  # ... then past the others' records too
